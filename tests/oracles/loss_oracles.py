"""Loss references written straight from SPEC.md §1: Python loops over anchors and candidates,
float64 numpy. Slow on purpose; used only by the tests."""

from __future__ import annotations

import math

import numpy as np


def _unit(v: np.ndarray) -> np.ndarray:
    return v / math.sqrt(float(np.dot(v, v)))


def _cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(_unit(u), _unit(v)))


def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(x - m) for x in xs))


def infonce(a: np.ndarray, p: np.ndarray, n: np.ndarray, tau: float) -> float:
    """mean_i log(1 + Σ_j exp((s(a,n_j) − s(a,p))/τ))."""
    total = 0.0
    for i in range(len(a)):
        sp = _cos(a[i], p[i])
        total += math.log(1 + sum(math.exp((_cos(a[i], nj) - sp) / tau) for nj in n[i]))
    return total / len(a)


def dcl(a: np.ndarray, p: np.ndarray, n: np.ndarray, tau: float) -> float:
    """mean_i log Σ_j exp((s(a,n_j) − s(a,p))/τ)."""
    total = 0.0
    for i in range(len(a)):
        sp = _cos(a[i], p[i])
        total += _logsumexp([(_cos(a[i], nj) - sp) / tau for nj in n[i]])
    return total / len(a)


def _two_view_terms(z1: np.ndarray, z2: np.ndarray, tau: float, with_positive: bool) -> float:
    views = list(z1) + list(z2)
    b = len(z1)
    total = 0.0
    for i in range(2 * b):
        partner = (i + b) % (2 * b)
        pos = _cos(views[i], views[partner]) / tau
        negs = [_cos(views[i], views[j]) / tau for j in range(2 * b) if j not in (i, partner)]
        total += _logsumexp(negs + ([pos] if with_positive else [])) - pos
    return total / (2 * b)


def nt_xent(z1: np.ndarray, z2: np.ndarray, tau: float) -> float:
    """2B views, partner positive, other 2B − 2 negatives, mean over 2B anchors."""
    return _two_view_terms(z1, z2, tau, with_positive=True)


def dcl_in_batch(z1: np.ndarray, z2: np.ndarray, tau: float) -> float:
    return _two_view_terms(z1, z2, tau, with_positive=False)


def weince_row_fit(neg: list[float], tail_frac: float = 0.10) -> dict[str, float]:
    """Steps 1, 3, 4 of WEINCE for one anchor, with numpy.polyfit."""
    k = len(neg)
    t = int(np.clip(max(32, round(tail_frac * k)), 10, k))
    top = sorted(neg, reverse=True)[:t]
    delta = [max(1.0 - s, 1e-6) for s in top]  # ascending
    drop = max(1, t // 20)
    x = np.log(np.array(delta[drop:]))
    f = np.array([r / (t + 1) for r in range(drop + 1, t + 1)])
    out: dict[str, float] = {"n_eff": float(len(x))}
    for name, y, bad in (
        ("weibull", np.log(f), lambda b: b <= 0),
        ("gumbel", np.log(-np.log(f)), lambda b: b >= 0),
    ):
        if np.ptp(x) == 0:
            slope, intercept = 0.0, float(np.mean(y))
        else:
            slope, intercept = (float(c) for c in np.polyfit(x, y, 1))
        sse = float(np.sum((y - (intercept + slope * x)) ** 2)) + (1e6 if bad(slope) else 0.0)
        n = len(x)
        out[name + "_slope"] = slope
        out[name + "_aic"] = n * math.log(max(sse, 1e-12) / n) + 4
    return out


# SPEC.md §1 (WEINCE): β fixed as in the official code; κ_ρ = 10, κ_AIC = 1, m_AIC = 2, ρ0 the
# 0.2-quantile, tail 10% of the negatives
WEINCE_SPEC = {"beta": "fixed", "kappa_rho": 10.0, "kappa_aic": 1.0, "margin_aic": 2.0,
               "rho_quantile": 0.2, "tail_frac": 0.10}


def weince(a: np.ndarray, p: np.ndarray, n: np.ndarray, tau: float,
           **options: float | str) -> tuple[float, list[float]]:
    """WEINCE loss and the λ_i, by a per-row loop (SPEC.md §1 steps 1–5); ``options`` override
    :data:`WEINCE_SPEC`."""
    o = {**WEINCE_SPEC, **options}
    beta, tail_frac, rho_quantile = str(o["beta"]), float(o["tail_frac"]), float(o["rho_quantile"])
    kappa_rho, kappa_aic, margin_aic = (float(o[k])
                                        for k in ("kappa_rho", "kappa_aic", "margin_aic"))

    def sig(x: float) -> float:
        return 1 / (1 + math.exp(-x))

    rows = []
    for i in range(len(a)):
        sims = [_cos(a[i], p[i])] + [_cos(a[i], nj) for nj in n[i]]
        fit = weince_row_fit(sims[1:], tail_frac)
        rho = max(1.0 - max(sims[1:]), 1e-6)
        rows.append((sims, fit, rho))
    rho0 = float(np.quantile([r[2] for r in rows], rho_quantile))
    total, lams = 0.0, []
    for sims, fit, rho in rows:
        d_aic = fit["gumbel_aic"] - fit["weibull_aic"]
        lam = sig(kappa_rho * (math.log(rho0) - math.log(rho))) * sig(
            kappa_aic * (d_aic - margin_aic)
        )
        b = max(fit["weibull_slope"], 0.0) if beta == "fitted" else 1.0
        g = [(1 - lam) * s / tau + lam * (-b * math.log(1 - min(s, 1 - 1e-6))) for s in sims]
        total += _logsumexp(g) - g[0]
        lams.append(lam)
    return total / len(a), lams


def synco(
    q: np.ndarray, k: np.ndarray, queue: np.ndarray, synthetic: np.ndarray, tau: float
) -> float:
    """−log softmax of q·k⁺ among [q·k⁺, q·queue_j, q·synthetic_i,m] / τ."""
    total = 0.0
    for i in range(len(q)):
        logits = [_cos(q[i], k[i]) / tau]
        logits += [_cos(q[i], nj) / tau for nj in queue]
        logits += [_cos(q[i], sm) / tau for sm in synthetic[i]]
        total += _logsumexp(logits) - logits[0]
    return total / len(q)


def weighted(z: np.ndarray, w: np.ndarray, tau: float) -> float:
    """mean over anchors with target mass of −Σ_{j≠i} w_ij log softmax_{j≠i}(s_ij/τ)."""
    n = len(z)
    total, count = 0.0, 0
    for i in range(n):
        if sum(w[i][j] for j in range(n) if j != i) == 0:
            continue
        logits = {j: _cos(z[i], z[j]) / tau for j in range(n) if j != i}
        lse = _logsumexp(list(logits.values()))
        total += -sum(w[i][j] * (logits[j] - lse) for j in logits)
        count += 1
    return total / count


def supcon_targets(labels: list) -> np.ndarray:
    n = len(labels)
    w = np.zeros((n, n))
    for i in range(n):
        same = [j for j in range(n) if j != i and labels[j] == labels[i]]
        for j in same:
            w[i][j] = 1 / len(same)
    return w


def soft_supcon_targets(labels: list, eps: float) -> np.ndarray:
    n = len(labels)
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if j != i:
                w[i][j] = 1.0 if labels[j] == labels[i] else eps
        w[i] /= w[i].sum()
    return w


def y_aware_targets(y: np.ndarray, sigma: float) -> np.ndarray:
    n = len(y)
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if j != i:
                d2 = float(np.sum((np.atleast_1d(y[i]) - np.atleast_1d(y[j])) ** 2))
                w[i][j] = math.exp(-d2 / (2 * sigma**2))
        w[i] /= w[i].sum()
    return w


def xclr_targets(s: np.ndarray, tau_s: float) -> np.ndarray:
    n = len(s)
    w = np.zeros((n, n))
    for i in range(n):
        others = [j for j in range(n) if j != i]
        lse = _logsumexp([s[i][j] / tau_s for j in others])
        for j in others:
            w[i][j] = math.exp(s[i][j] / tau_s - lse)
    return w


def random_orthogonal(d: int, seed: int) -> np.ndarray:
    """A Haar-random orthogonal (d, d) matrix (QR of a Gaussian with the sign fix)."""
    g = np.random.default_rng(seed).standard_normal((d, d))
    qm, r = np.linalg.qr(g)
    return qm * np.sign(np.diag(r))
