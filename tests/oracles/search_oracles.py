"""Loop-from-the-formula and dense references for pipeline.search and pipeline.bounds (SPEC §3, §4).

The loops use plain Python floats and the math module; the dense versions use numpy on the whole
N × m matrix. Neither shares code with the package. Small inputs only.
"""

from __future__ import annotations

import math

import numpy as np


def _unit(v) -> list[float]:
    v = [float(t) for t in v]
    norm = math.sqrt(math.fsum(t * t for t in v))
    return [t / norm for t in v]


def _dot(u, v) -> float:
    return math.fsum(a * b for a, b in zip(u, v, strict=True))


def _log_mean_exp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(math.fsum(math.exp(v - top) for v in values) / len(values))


def ce_m_loop(z, pool, log_ratio, tau: float) -> list[float]:
    """Per-anchor CE_m(z) = −(1/τ) Σ_i w_i s_i / Σ_i w_i + log((1/m) Σ_i exp(s_i/τ)),
    w_i = r(z, ξ_i)."""
    anchors, points = [_unit(r) for r in z], [_unit(r) for r in pool]
    out = []
    for a, lr in zip(anchors, log_ratio, strict=True):
        s = [_dot(a, x) for x in points]
        top = max(float(v) for v in lr)
        w = [math.exp(float(v) - top) for v in lr]
        weighted = math.fsum(wi * si for wi, si in zip(w, s, strict=True)) / math.fsum(w)
        out.append(-weighted / tau + _log_mean_exp([si / tau for si in s]))
    return out


def ce_m_dense(z, pool, log_ratio, tau: float) -> np.ndarray:
    """The same CE_m on the whole (N, m) matrix with numpy (the unblocked computation)."""
    a = np.asarray(z, dtype=np.float64)
    p = np.asarray(pool, dtype=np.float64)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    p = p / np.linalg.norm(p, axis=1, keepdims=True)
    s = a @ p.T
    lr = np.asarray(log_ratio, dtype=np.float64)
    lr_max = lr.max(axis=1, keepdims=True)
    w = np.exp(lr - lr_max)
    weighted = (w * s).sum(axis=1) / w.sum(axis=1)
    st = s / tau
    st_max = st.max(axis=1, keepdims=True)
    lme = st_max[:, 0] + np.log(np.exp(st - st_max).mean(axis=1))
    return -weighted / tau + lme


def population_ce_loop(s_pos, s_neg, tau: float) -> list[float]:
    """CE(z) = −(1/τ) mean_j s_pos[j] + log mean_l exp(s_neg[l]/τ), one value per row."""
    out = []
    for sp, sn in zip(s_pos, s_neg, strict=True):
        sp = [float(v) for v in np.atleast_1d(sp)]
        out.append(-math.fsum(sp) / len(sp) / tau + _log_mean_exp([float(v) / tau for v in sn]))
    return out


def risk_loop(s_pos, s_neg, tau: float) -> list[float]:
    """ℓ − log k with ℓ = log(1 + Σ_j exp((s_nj − s_p)/τ)), one value per row."""
    out = []
    for sp, sn in zip(s_pos, s_neg, strict=True):
        terms = [(float(v) - float(sp)) / tau for v in sn]
        top = max(0.0, max(terms))
        ell = top + math.log(math.exp(-top) + math.fsum(math.exp(t - top) for t in terms))
        out.append(ell - math.log(len(terms)))
    return out


def b_tau_loop(anchors, positives, negatives, tau: float) -> float:
    """rms‖a‖ + rms‖p‖ + (mean ‖n‖^{2/q})^{q/2}, q = min(1, τ), by loops."""

    def norm(v) -> float:
        return math.sqrt(math.fsum(float(t) ** 2 for t in v))

    q = min(1.0, tau)
    rms_a = math.sqrt(math.fsum(norm(v) ** 2 for v in anchors) / len(anchors))
    rms_p = math.sqrt(math.fsum(norm(v) ** 2 for v in positives) / len(positives))
    flat = [v for row in negatives for v in row]
    power = math.fsum(norm(v) ** (2.0 / q) for v in flat) / len(flat)
    return rms_a + rms_p + power ** (q / 2.0)
