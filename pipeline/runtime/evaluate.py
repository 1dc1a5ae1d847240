"""Per-cell evaluation with the cell's encoder: similarity search, the k-sweep, Theorem 1.

These reload the cell's weights (``model.safetensors``) and, for the fixed-encoder comparison,
rebuild its initial weights exactly (they are seeded). The tuple form is Whiteley's: a clean
anchor x ~ π, a positive through the dataset's view function, negatives i.i.d. from π — here
the held-out inputs that are not anchors (the pool of m unseen points).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.bounds import (
    b_tau,
    gaussian_channel_e_r2,
    lipschitz_linear,
    lipschitz_mlp,
    parameter_count,
    parameter_distance,
    theorem1,
)
from pipeline.config import BoundsConfig, Cell, SearchConfig
from pipeline.datasets import Dataset, gaussian_channel_log_ratio_matrix, make_augmenter
from pipeline.runtime import storage, weights
from pipeline.search import (
    RESOLVED_Z,
    CRNRow,
    CRNSweep,
    SlopeFit,
    crn_gap_sweep,
    crn_table,
    fit_loglog_slope,
    nested_negatives,
    population_risk,
    similarity_search_cross_entropy,
)
from pipeline.seeding import numpy_generator, torch_generator
from pipeline.train import initial_encoder, subsample

ENCODE_BATCH = 4096


def load_encoders(cell: Cell, dataset: Dataset, folder: storage.Dir) -> dict[str, nn.Module]:
    """{'trained': the saved encoder, 'initial': the same architecture at its seeded init}."""
    trained = initial_encoder(cell, dataset.input_shape)
    weights.load_into(trained, storage.read_bytes(folder / "model.safetensors"), cell)
    return {"trained": trained.eval(), "initial": initial_encoder(cell, dataset.input_shape).eval()}


@torch.no_grad()
def _encode(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Unit-norm float64 embeddings, in batches."""
    parts = [model(x[i:i + ENCODE_BATCH]).double() for i in range(0, x.shape[0], ENCODE_BATCH)]
    z = torch.cat(parts)
    return z / z.norm(dim=1, keepdim=True)


def _pool_inputs(cell: Cell, x_rest: torch.Tensor, size: int) -> tuple[torch.Tensor, str]:
    """The pool ζ_1..ζ_M ~ π of the CE − R_k sweep, and where it came from: fresh draws where the
    dataset's π is known (the Gaussian channel's N(0, I_p): the population itself, so M is not
    bounded by the held-out set), else the first ``size`` held-out points that are not anchors."""
    if cell.data.name == "gaussian_channel":
        gen = torch_generator(cell.seed, cell.cell_id, "search-pool")
        return torch.randn((size, *x_rest.shape[1:]), generator=gen, dtype=x_rest.dtype), "fresh"
    return x_rest[:size], "heldout"


def _positive_views(cell: Cell, x_anchor: torch.Tensor, positives: int) -> torch.Tensor:
    """``(N·positives, ...)`` fresh views z' ~ M(z, ·) of each anchor, anchor-major."""
    aug = make_augmenter(cell.data.name, cell.data.augment)
    gen = torch_generator(cell.seed, cell.cell_id, "search-positives")
    return aug(x_anchor.repeat_interleave(positives, dim=0), gen)


def _ce_m(model: nn.Module, cell: Cell, x_anchor: torch.Tensor, x_pool: torch.Tensor,
          block: int) -> tuple[float, float]:
    """Eq. 9's CE_m where the density ratio is known (the Gaussian channel), else NaN."""
    if cell.data.name != "gaussian_channel":
        return math.nan, math.nan
    a = float(cell.data.augment["a"])
    xa, xp = x_anchor.double(), x_pool.double()

    def tile(rows: slice, cols: slice) -> torch.Tensor:
        return gaussian_channel_log_ratio_matrix(xa[rows], xp[cols], a)

    res = similarity_search_cross_entropy(_encode(model, x_anchor), _encode(model, x_pool), tile,
                                          cell.tau, block)
    return res.ce, res.se


def _sweep_summary(prefix: str, sweep: CRNSweep, fits: dict[str, SlopeFit],
                   own: CRNRow | None) -> dict[str, Any]:
    c_se = np.sqrt(np.diag(sweep.coef_cov))
    fit, expansion, leading = fits["gap"], fits["expansion"], fits["leading"]
    return {f"{prefix}ce": sweep.ce, f"{prefix}ce_se": sweep.ce_se,
            f"{prefix}r_k": own.risk if own else math.nan,
            f"{prefix}finite_k_gap": own.gap if own else math.nan,
            f"{prefix}finite_k_gap_se": own.gap_se if own else math.nan,
            f"{prefix}slope": fit.slope, f"{prefix}slope_lo": fit.ci_low,
            f"{prefix}slope_hi": fit.ci_high, f"{prefix}slope_lack_of_fit_p": fit.lack_of_fit_p,
            f"{prefix}slope_expansion": expansion.slope,
            f"{prefix}slope_leading": leading.slope, f"{prefix}slope_leading_lo": leading.ci_low,
            f"{prefix}slope_leading_hi": leading.ci_high,
            f"{prefix}gap_c1": float(sweep.coef[0]), f"{prefix}gap_c1_se": float(c_se[0]),
            f"{prefix}gap_c2": float(sweep.coef[1]), f"{prefix}gap_c3": float(sweep.coef[2]),
            f"{prefix}gaps_resolved": bool(np.all(np.abs(sweep.gap) >= RESOLVED_Z * sweep.gap_se))}


def search_cell(cell: Cell, dataset: Dataset, folder: storage.Dir,
                cfg: SearchConfig) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary row, k-sweep rows) for one cell: CE, CE_m, R_k, CE − R_k and its log-log slope.

    CE − R_k by common random numbers (`pipeline.search.crn`): the same anchors, positives, pool
    and nested negatives for every k and for both encoders, so the trained and the fixed encoder
    are compared on the same draws too. The slope is fitted over fit_k_min ≤ k ≤ fit_k_max with
    the gaps' covariance across k (anchors + pool); slope_expansion is the same fit to the 1/k
    expansion c₁/k + c₂/k² + c₃/k³, the slope the theory predicts over that range, and
    slope_leading the fit to gap − c₂/k² − c₃/k³, whose slope is −1 up to O(k⁻³).
    """
    x = torch.from_numpy(np.ascontiguousarray(dataset.x_heldout))
    n_anchor = min(cfg.anchors, x.shape[0] // 2)
    x_anchor, x_rest = x[:n_anchor], x[n_anchor:]
    ks = sorted(set(cfg.k_sweep) | {cell.k} - {0})
    x_pool, source = _pool_inputs(cell, x_rest, cfg.pool)
    views = _positive_views(cell, x_anchor, cfg.positives)
    neg_index = nested_negatives(numpy_generator(cell.seed, cell.cell_id, "search-negatives"),
                                 n_anchor, x_pool.shape[0], ks[-1])
    summary: dict[str, Any] = {"cell_id": cell.cell_id, "search_pool": int(x_pool.shape[0]),
                               "search_pool_source": source}
    sweep_rows: list[dict[str, Any]] = []
    for name, model in load_encoders(cell, dataset, folder).items():
        if name not in cfg.encoders:
            continue
        za = _encode(model, x_anchor)
        zp = _encode(model, views).reshape(n_anchor, cfg.positives, -1)
        sweep = crn_gap_sweep(za, zp, _encode(model, x_pool), neg_index, ks, cell.tau)
        rows = crn_table(sweep, cell.tau)
        leading, leading_cov = sweep.leading()
        fits = {name: fit_loglog_slope(sweep.ks, gaps, gap_cov=cov, k_min=cfg.fit_k_min,
                                       k_max=cfg.fit_k_max)
                for name, gaps, cov in (("gap", sweep.gap, sweep.gap_cov),
                                        ("expansion", sweep.expansion(sweep.ks), sweep.gap_cov),
                                        ("leading", leading, leading_cov))}
        coefs = dict(zip(("c1", "c2", "c3"), map(float, sweep.coef), strict=True))
        sweep_rows += [{"cell_id": cell.cell_id, "encoder": name,
                        **{**asdict(r), "gap_cov": list(r.gap_cov),
                           "gap_leading_cov": list(r.gap_leading_cov)}, **coefs,
                        "c1_se": float(math.sqrt(sweep.coef_cov[0, 0])),
                        "fit_k_min": cfg.fit_k_min, "fit_k_max": cfg.fit_k_max,
                        "n_anchors": sweep.n, "n_positives": sweep.positives,
                        "pool": sweep.pool} for r in rows]
        own = next(r for r in rows if r.k == cell.k) if cell.k in ks else None
        ce_m, ce_m_se = _ce_m(model, cell, x_anchor, x_rest, cfg.block)
        prefix = "" if name == "trained" else f"{name}_"
        summary.update(_sweep_summary(prefix, sweep, fits, own))
        summary.update({f"{prefix}ce_m": ce_m, f"{prefix}ce_m_se": ce_m_se})
    return summary, sweep_rows


def _training_tuples(cell: Cell, dataset: Dataset, n: int, stream: str,
                     source: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n tuples (anchor, positive view, k negatives) drawn from the rows ``source`` (inputs)."""
    rng = numpy_generator(cell.seed, cell.cell_id, stream)
    x = torch.from_numpy(np.ascontiguousarray(source))
    anchors = x[rng.integers(0, x.shape[0], n)] if n < x.shape[0] else x
    negatives = x[rng.integers(0, x.shape[0], (anchors.shape[0], max(cell.k, 1)))]
    aug = make_augmenter(cell.data.name, cell.data.augment)
    return anchors, aug(anchors, torch_generator(cell.seed, cell.cell_id, stream)), negatives


@torch.no_grad()
def _tuple_risk(model: nn.Module, tuples: tuple[torch.Tensor, ...], tau: float) -> float:
    a, p, neg = tuples
    za, zp = _encode(model, a), _encode(model, p)
    zn = _encode(model, neg.reshape(-1, *neg.shape[2:])).reshape(neg.shape[0], neg.shape[1], -1)
    s_neg = torch.einsum("nd,nkd->nk", za, zn)
    return population_risk((za * zp).sum(1).numpy(), s_neg.numpy(), tau).risk


def _lipschitz(cell: Cell, model: nn.Module, x: np.ndarray) -> float:
    """Data-restricted C_Φ for the linear and MLP encoders (SPEC §4 caveats)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    flat = x.reshape(x.shape[0], -1)
    if cell.arch == "linear" and len(linears) == 1:
        return lipschitz_linear(linears[0].weight.detach().double().numpy(), flat)
    if cell.arch == "mlp":
        weights = [m.weight.detach().double().numpy() for m in linears]
        biases = [m.bias.detach().double().numpy() if m.bias is not None else np.zeros(m.out_features)
                  for m in linears]
        return lipschitz_mlp(weights, flat, biases)
    raise ValueError(f"arch = {cell.arch!r}: no data-restricted C_Φ (linear and mlp only)")


def bounds_cell(cell: Cell, dataset: Dataset, folder: storage.Dir, cfg: BoundsConfig) -> dict[str, Any]:
    """Theorem 1's terms for the trained encoder, next to the measured generalisation gap."""
    if cell.objective != "contrastive":
        return {"cell_id": cell.cell_id, "bound_status": "skipped: supervised cell"}
    if cell.arch not in ("linear", "mlp"):  # C_Φ unknown: the bound would be +inf
        return {"cell_id": cell.cell_id,
                "bound_status": f"skipped: no data-restricted C_Φ for {cell.arch}"}
    models = load_encoders(cell, dataset, folder)
    rows = dataset.x_train[subsample(cell, dataset.x_train.shape[0])]
    train = _training_tuples(cell, dataset, cfg.tuples, "bounds-train", rows)
    fresh = _training_tuples(cell, dataset, cfg.tuples, "bounds-fresh", dataset.x_heldout)
    trained = models["trained"]
    params = {k: v.detach().numpy() for k, v in trained.state_dict().items()}
    init = {k: v.detach().numpy() for k, v in models["initial"].state_dict().items()}
    # E[r²] is known in closed form only for the Gaussian channel; elsewhere the smallest value
    # it can take (1) is used, so the reported total is a lower bound on the bound.
    known = cell.data.name == "gaussian_channel"
    e_r2 = gaussian_channel_e_r2(float(cell.data.augment["a"]), int(np.prod(dataset.input_shape))) \
        if known else 1.0
    anchors, positives = (t.reshape(t.shape[0], -1).numpy() for t in train[:2])
    negatives = train[2].reshape(train[2].shape[0], train[2].shape[1], -1).numpy()
    terms = theorem1(empirical_risk=_tuple_risk(trained, train, cell.tau), n=cell.n, tau=cell.tau,
                     k=max(cell.k, 1), d_theta=parameter_count(params),
                     R=parameter_distance(params, init),
                     B_tau=b_tau(anchors, positives, negatives, cell.tau),
                     C_phi=_lipschitz(cell, trained, rows), delta=cfg.delta, e_r2=e_r2,
                     measured_risk=_tuple_risk(trained, fresh, cell.tau))
    status = "ok" if known else "partial: E[r²] unknown for this dataset, 1 used (a lower bound)"
    return {"cell_id": cell.cell_id, "bound_status": status, **asdict(terms)}
