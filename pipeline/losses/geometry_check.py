"""Free-embedding optimisation of SupCon / Soft SupCon: the simplex geometry check of
Vock et al. 2026 (arXiv 2605.13943; SPEC.md §1, Weighted InfoNCE).

With balanced classes both losses collapse each class to a prototype and the C prototypes form a
regular simplex (pairwise cosine −1/(C−1)); with imbalanced classes Soft SupCon keeps the simplex
and SupCon does not, provided ε matches τ (see :func:`simplex_eps`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.losses.soft_supcon import soft_supcon
from pipeline.losses.supcon import supcon

GEOMETRY_LOSSES = ("supcon", "soft_supcon")


def simplex_eps(num_classes: int, tau: float) -> float:
    """The Soft SupCon ε whose optimum is exactly the regular simplex: exp(−C/((C − 1)·τ)).

    With classes collapsed to unit prototypes μ_c, the softmax mass anchor-class c puts on class
    c' is ∝ n_c'·exp(μ_c·μ_c'/τ) and the target's is ∝ ε·n_c' (same class: n_c − 1 and
    exp(1/τ) resp. 1). The class counts cancel, so the cross-entropy is minimised (softmax =
    target) when μ_c·μ_c' = 1 + τ·log ε for every pair: the simplex cosine −1/(C − 1) for this ε,
    whatever the class sizes. A smaller ε asks for an unreachable angle and the class sizes come
    back; a larger one gives an equiangular but tighter configuration.
    """
    return math.exp(-num_classes / ((num_classes - 1) * tau))


def class_mean_cosines(z: Tensor, labels: Tensor, num_classes: int) -> Tensor:
    """Cosine matrix ``(C, C)`` of the class means of the L2-normalised rows of ``z``."""
    zn = F.normalize(z, dim=-1)
    means = torch.stack([zn[labels == c].mean(0) for c in range(num_classes)])
    means = F.normalize(means, dim=-1)
    return means @ means.T


def optimise_free_embeddings(
    loss_name: str,
    class_counts: Sequence[int],
    d: int,
    tau: float,
    steps: int,
    seed: int,
    eps: float | None = None,
    lr: float = 0.1,
) -> Tensor:
    """Optimise one free vector per sample (normalised in the loss) with Adam, full batch.

    class_counts: samples per class, e.g. ``(40, 10, 5, 5)``; d: embedding dimension (≥ C − 1
    for a simplex); eps: Soft SupCon's other-class weight, by default :func:`simplex_eps`.
    Initial vectors are N(0, I) from a generator seeded with ``seed``. Returns the ``(C, C)``
    class-mean cosine matrix (float64).
    """
    if loss_name not in GEOMETRY_LOSSES:
        raise ValueError(f"loss_name = {loss_name!r}: allowed {' | '.join(GEOMETRY_LOSSES)}")
    if eps is None:
        eps = simplex_eps(len(class_counts), tau)
    gen = torch.Generator().manual_seed(seed)
    labels = torch.repeat_interleave(
        torch.arange(len(class_counts)), torch.tensor(list(class_counts))
    )
    z = torch.nn.Parameter(torch.randn(len(labels), d, generator=gen, dtype=torch.float64))
    opt = torch.optim.Adam([z], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        if loss_name == "supcon":
            loss = supcon(z, labels, tau)
        else:
            loss = soft_supcon(z, labels, tau, eps)
        loss.backward()  # type: ignore[no-untyped-call]  # torch: Tensor.backward is unannotated
        opt.step()
    with torch.no_grad():
        return class_mean_cosines(z, labels, len(class_counts))


def simplex_check(losses: Sequence[str], class_counts: Sequence[Sequence[int]], d: int,
                  tau: float, steps: int, seed: int) -> list[tuple[str, Sequence[int], Tensor]]:
    """:func:`optimise_free_embeddings` for every loss and class balance, each at its
    :func:`simplex_eps`: ``(loss, counts, class-mean cosines)`` in that order."""
    return [(loss, counts, optimise_free_embeddings(loss, counts, d, tau, steps, seed,
                                                    eps=simplex_eps(len(counts), tau)))
            for loss in losses for counts in class_counts]
