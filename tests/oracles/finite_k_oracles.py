"""References for pipeline.search.crn: a loop from Eq. (1)-(2) and an exact CE − R_k on a finite π.

The loop uses plain Python floats and the math module; the exact gap enumerates every multiset of
k negatives of a distribution with finite support. Neither shares code with the package.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tests.oracles.search_oracles import _dot, _unit


def crn_loop(z_anchor, z_pos, z_pool, neg_index, ks, tau: float) -> dict[str, np.ndarray]:
    """Per anchor i (rows) and k (columns): the control-variate gap term
    D = log μ̂ − mean_p log(e^{s_p/τ}/k + S_k) + S_k/μ̂ − 1, the risk term mean_p ℓ − log k, and
    (per anchor) CE = log μ̂ − mean_p s_p/τ, with μ̂ the pool mean of e^{s/τ} and S_k the mean of
    e^{s/τ} over the first k negatives."""
    pool = [_unit(r) for r in z_pool]
    gap, risk, ce = [], [], []
    for a_raw, p_rows, idx in zip(z_anchor, z_pos, neg_index, strict=True):
        a = _unit(a_raw)
        mu = math.fsum(math.exp(_dot(a, x) / tau) for x in pool) / len(pool)
        s_pos = [_dot(a, _unit(p)) / tau for p in p_rows]
        ce.append(math.log(mu) - math.fsum(s_pos) / len(s_pos))
        g_row, r_row = [], []
        for k in ks:
            s_neg = [_dot(a, pool[j]) / tau for j in idx[:k]]
            s_k = math.fsum(math.exp(s) for s in s_neg) / k
            logs = [math.log(math.exp(sp) / k + s_k) for sp in s_pos]
            g_row.append(math.log(mu) - math.fsum(logs) / len(logs) + s_k / mu - 1.0)
            ells = [math.log(1.0 + math.fsum(math.exp(s - sp) for s in s_neg)) for sp in s_pos]
            r_row.append(math.fsum(ells) / len(ells) - math.log(k))
        gap.append(g_row)
        risk.append(r_row)
    return {"gap": np.array(gap), "risk": np.array(risk), "ce": np.array(ce)}


def compositions(k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every count vector (c_1..c_m), Σ c = k, and its multinomial probability under uniform
    draws: ``(C, m)`` counts and ``(C,)`` probabilities."""
    counts = np.array([np.bincount(c, minlength=m)
                       for c in itertools.combinations_with_replacement(range(m), k)])
    log_p = (math.lgamma(k + 1) - np.sum([[math.lgamma(c + 1) for c in row] for row in counts], 1)
             - k * math.log(m))
    return counts, np.exp(log_p)


def exact_gap_finite(sim, q, k: int, tau: float) -> float:
    """CE − R(φ; k, τ) exactly for π uniform on m points with pairwise similarities ``sim``
    ``(m, m)``, anchors z ~ π and positives p ~ q[z] (``(m, m)`` row-stochastic):

        CE − R_k = E_z E_p [ log mean_l e^{s(z,l)/τ}
                             − E_counts log(e^{s(z,p)/τ}/k + Σ_l c_l e^{s(z,l)/τ}/k) ],

    the expectation over the k i.i.d. negatives taken over all multisets (exact, not sampled)."""
    sim, q = np.asarray(sim, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = sim.shape[0]
    counts, prob = compositions(k, m)
    e = np.exp(sim / tau)
    total = 0.0
    for z in range(m):
        log_mu = math.log(e[z].mean())
        s_k = counts @ e[z] / k  # (C,)
        for p in range(m):
            if q[z, p] > 0:
                total += q[z, p] * (log_mu - float(prob @ np.log(e[z, p] / k + s_k))) / m
    return total


def exact_ce_risk_finite(sim, q, k: int, tau: float) -> tuple[float, float]:
    """(CE, R_k) for the same finite setting: CE = E_z[−(1/τ) E_p s + log mean_l e^{s/τ}] and
    R_k = E ℓ − log k, ℓ = log(1 + Σ_j e^{(s_j − s_p)/τ}), by enumeration."""
    sim, q = np.asarray(sim, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = sim.shape[0]
    counts, prob = compositions(k, m)
    ce = risk = 0.0
    for z in range(m):
        ce += (-(q[z] @ sim[z]) / tau + math.log(np.exp(sim[z] / tau).mean())) / m
        for p in range(m):
            ell = np.log1p(counts @ np.exp((sim[z] - sim[z, p]) / tau))
            risk += q[z, p] * float(prob @ ell) / m
    return ce, risk - math.log(k)
