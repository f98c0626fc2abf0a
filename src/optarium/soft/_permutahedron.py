"""Projection onto the permutahedron by isotonic regression: the ``fast_soft_sort`` method.

Reference: M. Blondel, O. Teboul, Q. Berthet, J. Djolonga, "Fast Differentiable Sorting and Ranking", ICML
2020,
arXiv:2002.08871; as used by A. Paulus et al., "SoftJAX & SoftTorch", ICML 2026, arXiv:2603.08824, whose
``_proj_permutahedron(z, w, softness, mode)`` (softtorch 0.1.1) this reproduces to rounding.

For z, w in R^n and s = z / softness, with s sorted decreasingly (permutation sigma) and w sorted
decreasingly,
the projection is y_sigma = phi(s_sigma - v), where v solves the decreasing isotonic problem

    v = argmin_{v_1 >= ... >= v_n} sum_i Psi*(s_i - v_i) + <w, v>

block-wise: pool adjacent violators (PAV) merges adjacent blocks B until the block values gamma_B decrease,
each gamma_B solving sum_{i in B} phi(s_i - gamma_B) = sum_{i in B} w_i (or its KL analogue):

* ``"c0"`` (Euclidean, Psi = ||.||^2 / 2): phi(t) = t, gamma_B = mean_B(s - w); y is the Euclidean projection
  of s onto the permutahedron P(w) (Blondel et al., Prop. 3).
* ``"smooth"`` (entropic/KL): gamma_B = logsumexp_B(s) - logsumexp_B(w), y = s - v, i.e. y = log P_KL(e^s,
e^w),
  the log of the KL projection of e^s onto P(e^w) (the paper's "log-KL" variant, exactly as the wheel does:
  w enters without a log).
* ``"c1"``/``"c2"`` (p-norm regularisers with p = 3/2, 4/3, i.e. Psi*(t) = |t|^q / q with q = 3, 4):
  phi(t) = t |t| (q = 3) or t^3 (q = 4); the block equation is a piecewise quadratic (solved exactly on the
  bracketing piece) or a depressed cubic (Cardano, sinh form) -- the wheel's p-norm extension of the paper.

Backward (exact, the Jacobian is block diagonal in sorted coordinates): with g the cotangent and t = s - v,
c0: ds = g - mean_B(g), dw = mean_B(g); smooth: ds = g - softmax_B(s) sum_B g, dw = softmax_B(w) sum_B g;
q = 3, 4: g_t = g phi'(t), ds = g_t - (phi'(t) / sum_B phi'(t)) sum_B g_t, dw = sum_B g_t / sum_B phi'(t).

PAV implementation. Two interchangeable forward paths, selected automatically:

* pure torch (any device; always available): *parallel* PAV. Each round computes all block values with
  segment reductions and merges every maximal run of adjacent violators at once (pooling a run
  gamma_1 <= gamma_2 <= ... is safe because the pooled value stays between its parts, so the pooled block
  still violates with the next; PAV's result does not depend on the order of pooling). Vectorised over the
  batch and the sequence; the number of rounds is data dependent (at most n, a few to a few tens on sorting /
  ranking inputs), each round O(n) work.
* numba (CPU tensors, when numba imports): the classic sequential stack PAV, compiled, parallel over the
  batch. A Python loop over the sequence is thus never used; numba is an accelerator only, and the tests check
  that both paths agree.

The PAV runs in float64 (block equations use prefix moments), the output is cast back to the input dtype.
"""

from __future__ import annotations

import math

import torch

__all__ = ["permutahedron_projection"]

_PERM_MODES = ("smooth", "c0", "c1", "c2")
# Paths: "auto" (numba for CPU if importable, else torch), "torch", "numba".
_BACKEND = "auto"
# "auto" uses numba from this many elements (batch * n) on.
_NUMBA_MIN_SIZE = 4096


# ----------------------------------------------------------------------------------------------------
# Block values (vectorised over blocks)
# ----------------------------------------------------------------------------------------------------


def _segment_sum(x: torch.Tensor, bid: torch.Tensor, nb: int) -> torch.Tensor:
    out = torch.zeros(x.shape[0], nb, dtype=x.dtype, device=x.device)
    return out.scatter_add_(1, bid, x)


def _segment_lse(x: torch.Tensor, bid: torch.Tensor, nb: int) -> torch.Tensor:
    mx = torch.full((x.shape[0], nb), -math.inf, dtype=x.dtype, device=x.device)
    mx = mx.scatter_reduce(1, bid, x, reduce="amax", include_self=True)
    mx_e = mx.gather(1, bid)
    se = _segment_sum(torch.exp(x - mx_e), bid, nb)
    return torch.log(se) + mx


def _block_values(
    mode: str, s: torch.Tensor, w: torch.Tensor, start: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Per-block solutions gamma (B, nb) and block ids (B, n) for contiguous blocks marked by ``start``."""
    n = s.shape[1]
    bid = torch.cumsum(start.to(torch.int64), 1) - 1
    nb = n
    if mode == "c0":
        cnt = _segment_sum(torch.ones_like(s), bid, nb)
        gam = _segment_sum(s - w, bid, nb) / cnt.clamp_min(1.0)
    elif mode == "smooth":
        gam = _segment_lse(s, bid, nb) - _segment_lse(w, bid, nb)
    elif mode == "c2":
        cnt = _segment_sum(torch.ones_like(s), bid, nb).clamp_min(1.0)
        m1 = _segment_sum(s, bid, nb)
        c = m1 / cnt
        d = s - c.gather(1, bid)
        mu2 = _segment_sum(d * d, bid, nb)
        mu3 = _segment_sum(d * d * d, bid, nb)
        W = _segment_sum(w, bid, nb)
        gam = c + _depressed_cubic_root(3.0 * mu2 / cnt, (W - mu3) / cnt)
    else:  # c1, q = 3
        gam = _block_values_q3(s, w, start, bid, nb)
    return gam, bid


def _depressed_cubic_root(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The real root of u^3 + p u + q = 0 for p >= 0 (sinh form of Cardano; cube root when p = 0)."""
    pos = p > 1e-300
    p_safe = torch.where(pos, p, torch.ones_like(p))
    sp3 = torch.sqrt(p_safe / 3.0)
    arg = 1.5 * q / (p_safe * sp3)
    u_p = -2.0 * sp3 * torch.sinh(torch.asinh(arg) / 3.0)
    u_0 = -torch.sign(q) * q.abs().pow(1.0 / 3.0)
    return torch.where(pos, u_p, u_0)


def _block_values_q3(s, w, start, bid, nb):
    """Solve sum_B (s_i - gamma) |s_i - gamma| = sum_B w_i per block (s decreasing within blocks)."""
    B, n = s.shape
    idx = torch.arange(n, device=s.device).expand(B, n)
    st = torch.cummax(torch.where(start, idx, torch.zeros_like(idx)), 1).values  # block start of each element
    cnt = _segment_sum(torch.ones_like(s), bid, nb)
    en = st + cnt.gather(1, bid).to(torch.int64)  # one past the block end
    zero = torch.zeros(B, 1, dtype=s.dtype, device=s.device)
    P1 = torch.cat([zero, torch.cumsum(s, 1)], 1)
    P2 = torch.cat([zero, torch.cumsum(s * s, 1)], 1)
    W = _segment_sum(w, bid, nb)
    Wb = W.gather(1, bid)

    def side_sums(k):
        """Sums over the block of element k: (count, S1, S2) for i < k and for i > k."""
        ks = st
        ke = en
        nb_ = (k - ks).to(s.dtype)
        na_ = (ke - k - 1).to(s.dtype)
        Sb = P1.gather(1, k) - P1.gather(1, ks)
        Qb = P2.gather(1, k) - P2.gather(1, ks)
        Sa = P1.gather(1, ke) - P1.gather(1, k + 1)
        Qa = P2.gather(1, ke) - P2.gather(1, k + 1)
        return nb_, Sb, Qb, na_, Sa, Qa

    k = idx
    nbf, Sb, Qb, naf, Sa, Qa = side_sums(k)
    sk = s
    F = (Qb - 2 * sk * Sb + nbf * sk * sk) - (Qa - 2 * sk * Sa + naf * sk * sk)  # F(gamma = s_k)
    le = (F <= Wb).to(s.dtype)
    n_le = _segment_sum(le, bid, nb)  # per block: elements with F(s_k) <= W (a prefix of the block)
    bst = torch.zeros(B, nb, dtype=torch.int64, device=s.device).scatter_reduce(
        1, bid, st, reduce="amax", include_self=False
    )
    bcnt = cnt
    has = n_le > 0
    kstar = (bst + n_le.to(torch.int64) - 1).clamp(min=0, max=n - 1)
    kref = torch.where(has, kstar, bst).clamp(max=n - 1)  # case B expands around the block's first element
    # Quantities at the reference element, per block.
    s_ref = s.gather(1, kref)
    st_ref = bst
    en_ref = bst + bcnt.to(torch.int64)
    Pk = P1.gather(1, kref)
    Pk1 = P1.gather(1, (kref + 1).clamp(max=n))
    Qk = P2.gather(1, kref)
    Qk1 = P2.gather(1, (kref + 1).clamp(max=n))
    Pst, Qst = P1.gather(1, st_ref.clamp(max=n)), P2.gather(1, st_ref.clamp(max=n))
    Pen, Qen = P1.gather(1, en_ref.clamp(max=n)), P2.gather(1, en_ref.clamp(max=n))
    n_hi = (kref + 1 - st_ref).to(s.dtype)  # i <= k_ref
    n_lo = (en_ref - kref - 1).to(s.dtype)
    S_hi = Pk1 - Pst
    S_lo = Pen - Pk1
    Q_hi = Qk1 - Qst
    Q_lo = Qen - Qk1
    F_ref = (Q_hi - 2 * s_ref * S_hi + n_hi * s_ref * s_ref) - (
        Q_lo - 2 * s_ref * S_lo + n_lo * s_ref * s_ref
    )
    e = 2.0 * ((S_hi - n_hi * s_ref) + (n_lo * s_ref - S_lo))  # 2 sum |s_i - s_ref| >= 0
    e = e.clamp_min(0.0)
    del Pk, Qk
    # Case A (some F(s_k) <= W): gamma = s_ref - delta, (n_hi - n_lo) delta^2 + e delta = W - F_ref, delta
    # >= 0.
    R_a = (W - F_ref).clamp_min(0.0)
    a_a = n_hi - n_lo
    disc_a = (e * e + 4 * a_a * R_a).clamp_min(0.0)
    den_a = e + torch.sqrt(disc_a)
    delta_a = torch.where(den_a > 0, 2 * R_a / torch.where(den_a > 0, den_a, 1.0), torch.zeros_like(den_a))
    # Case B (all F(s_k) > W): every t < 0; gamma = s_first + delta, n delta^2 + e delta = F(s_first) - W.
    R_b = (F_ref - W).clamp_min(0.0)
    e_b = 2.0 * (bcnt * s_ref - (Pen - Pst))
    e_b = e_b.clamp_min(0.0)
    den_b = e_b + torch.sqrt((e_b * e_b + 4 * bcnt * R_b).clamp_min(0.0))
    delta_b = torch.where(den_b > 0, 2 * R_b / torch.where(den_b > 0, den_b, 1.0), torch.zeros_like(den_b))
    return torch.where(has, s_ref - delta_a, s_ref + delta_b)


def _pav_torch(mode: str, s: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Parallel PAV (decreasing) on float64 (B, n) inputs; returns solution v (B, n) and block ids (B, n)."""
    B, n = s.shape
    start = torch.ones(B, n, dtype=torch.bool, device=s.device)
    for _ in range(n + 1):
        gam, bid = _block_values(mode, s, w, start)
        g_el = gam.gather(1, bid)
        # A block start k > 0 violates when gamma(previous block) <= gamma(its block).
        viol = start[:, 1:] & (g_el[:, :-1] <= g_el[:, 1:])
        if not bool(viol.any()):
            return g_el, bid
        start = start.clone()
        start[:, 1:] &= ~viol
    raise RuntimeError("permutahedron PAV did not terminate")  # pragma: no cover (at most n - 1 merges)


# ----------------------------------------------------------------------------------------------------
# numba path (optional accelerator on CPU)
# ----------------------------------------------------------------------------------------------------

_NUMBA_KERNEL = None


def _build_numba_kernel():
    """Compile the batched sequential PAV with numba (imported lazily); raises ImportError without numba."""
    import numba
    import numpy as np

    @numba.njit(cache=False, inline="always")
    def _q3_value(s, P1, P2, a, e, W):
        # F(k) = sum_{i in [a, e)} phi(s_i - s_k), increasing in k; find the last k with F(k) <= W.
        def F_at(k):
            sk = s[k]
            nb_ = k - a
            na_ = e - k - 1
            Sb = P1[k] - P1[a]
            Qb = P2[k] - P2[a]
            Sa = P1[e] - P1[k + 1]
            Qa = P2[e] - P2[k + 1]
            return (Qb - 2 * sk * Sb + nb_ * sk * sk) - (Qa - 2 * sk * Sa + na_ * sk * sk)

        lo = a
        hi = e - 1
        if F_at(a) > W:
            kref = a
            has = False
        else:
            has = True
            while lo < hi:  # invariant: F(lo) <= W
                mid = (lo + hi + 1) // 2
                if F_at(mid) <= W:
                    lo = mid
                else:
                    hi = mid - 1
            kref = lo
        sr = s[kref]
        n_hi = kref + 1 - a
        n_lo = e - kref - 1
        S_hi = P1[kref + 1] - P1[a]
        S_lo = P1[e] - P1[kref + 1]
        Q_hi = P2[kref + 1] - P2[a]
        Q_lo = P2[e] - P2[kref + 1]
        F_ref = (Q_hi - 2 * sr * S_hi + n_hi * sr * sr) - (Q_lo - 2 * sr * S_lo + n_lo * sr * sr)
        if has:
            e_ = max(2.0 * ((S_hi - n_hi * sr) + (n_lo * sr - S_lo)), 0.0)
            R = max(W - F_ref, 0.0)
            den = e_ + np.sqrt(max(e_ * e_ + 4.0 * (n_hi - n_lo) * R, 0.0))
            return sr - (2.0 * R / den if den > 0 else 0.0)
        L = e - a
        e_ = max(2.0 * (L * sr - (P1[e] - P1[a])), 0.0)
        R = max(F_ref - W, 0.0)
        den = e_ + np.sqrt(max(e_ * e_ + 4.0 * L * R, 0.0))
        return sr + (2.0 * R / den if den > 0 else 0.0)

    @numba.njit(cache=False, inline="always")
    def _q4_value(L, W, c, mu2, mu3):
        # Block of size L with mean c and central moments mu2, mu3: solve sum (s_i - gamma)^3 = W.
        p = 3.0 * mu2 / L
        q = (W - mu3) / L
        if p > 1e-300:
            sp3 = np.sqrt(p / 3.0)
            u = -2.0 * sp3 * np.sinh(np.arcsinh(1.5 * q / (p * sp3)) / 3.0)
        else:
            u = -np.sign(q) * abs(q) ** (1.0 / 3.0)
        return c + u

    @numba.njit(cache=False, inline="always")
    def _lae(x, y):
        hi = max(x, y)
        if hi == -np.inf:
            return hi
        return hi + np.log1p(np.exp(min(x, y) - hi))

    @numba.njit(parallel=True, cache=False)
    def pav_batch(mode, S, Wt, V, BID):
        B, n = S.shape
        for b in numba.prange(B):
            s = S[b]
            w = Wt[b]
            st = np.empty(n, np.int64)
            ln = np.empty(n, np.int64)
            gam = np.empty(n)
            a1 = np.empty(n)
            a2 = np.empty(n)
            a3 = np.empty(n)
            a4 = np.empty(n)
            P1 = np.zeros(n + 1)
            P2 = np.zeros(n + 1)
            if mode == 2:
                for i in range(n):
                    P1[i + 1] = P1[i] + s[i]
                    P2[i + 1] = P2[i] + s[i] * s[i]
            top = 0
            for i in range(n):
                st[top] = i
                ln[top] = 1
                si = s[i]
                if mode == 0:
                    a1[top] = si - w[i]
                    gam[top] = a1[top]
                elif mode == 1:
                    a1[top] = si
                    a2[top] = w[i]
                    gam[top] = si - w[i]
                elif mode == 2:
                    a1[top] = w[i]
                    gam[top] = _q3_value(s, P1, P2, i, i + 1, w[i])
                else:
                    a1[top] = w[i]
                    a2[top] = si
                    a3[top] = 0.0
                    a4[top] = 0.0
                    gam[top] = _q4_value(1.0, w[i], si, 0.0, 0.0)
                top += 1
                while top >= 2 and gam[top - 2] <= gam[top - 1]:
                    j = top - 2
                    ln[j] += ln[j + 1]
                    if mode == 0:
                        a1[j] += a1[j + 1]
                        gam[j] = a1[j] / ln[j]
                    elif mode == 1:
                        a1[j] = _lae(a1[j], a1[j + 1])
                        a2[j] = _lae(a2[j], a2[j + 1])
                        gam[j] = a1[j] - a2[j]
                    elif mode == 2:
                        a1[j] += a1[j + 1]
                        gam[j] = _q3_value(s, P1, P2, st[j], st[j] + ln[j], a1[j])
                    else:
                        # Merge (count, mean, central moments) pairwise (Chan et al.'s update).
                        na = float(ln[j] - ln[j + 1])
                        nb2 = float(ln[j + 1])
                        nt = na + nb2
                        d = a2[j + 1] - a2[j]
                        a4[j] = (
                            a4[j]
                            + a4[j + 1]
                            + d * d * d * na * nb2 * (na - nb2) / (nt * nt)
                            + 3.0 * d * (na * a3[j + 1] - nb2 * a3[j]) / nt
                        )
                        a3[j] = a3[j] + a3[j + 1] + d * d * na * nb2 / nt
                        a2[j] = a2[j] + d * nb2 / nt
                        a1[j] += a1[j + 1]
                        gam[j] = _q4_value(nt, a1[j], a2[j], a3[j], a4[j])
                    top -= 1
            for j in range(top):
                for k in range(st[j], st[j] + ln[j]):
                    V[b, k] = gam[j]
                    BID[b, k] = j

    return pav_batch


def _numba_kernel():
    """The compiled batched PAV (compiled on first use), or None if numba is unavailable."""
    global _NUMBA_KERNEL
    if _NUMBA_KERNEL is None:
        try:
            _NUMBA_KERNEL = _build_numba_kernel()
        except ImportError:
            _NUMBA_KERNEL = False
    return _NUMBA_KERNEL or None


def _pav(mode: str, s: torch.Tensor, w: torch.Tensor, backend: str | None = None) -> tuple[torch.Tensor, ...]:
    backend = backend or _BACKEND
    # "auto" keeps small problems on the torch path (no JIT compile); numba pays off on larger ones.
    big = s.numel() >= _NUMBA_MIN_SIZE
    if (backend == "numba" or (backend == "auto" and big)) and s.device.type == "cpu":
        kern = _numba_kernel()
        if kern is not None:
            code = {"c0": 0, "smooth": 1, "c1": 2, "c2": 3}[mode]
            v = torch.empty_like(s)
            bid = torch.empty(s.shape, dtype=torch.int64)
            import numba

            numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))
            kern(code, s.contiguous().numpy(), w.contiguous().numpy(), v.numpy(), bid.numpy())
            return v, bid
        if backend == "numba":
            raise RuntimeError("permutahedron: numba backend requested but numba is unavailable")
    return _pav_torch(mode, s, w)


# ----------------------------------------------------------------------------------------------------
# autograd
# ----------------------------------------------------------------------------------------------------


class _PermutahedronFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, w, mode, backend):
        dt = s.dtype
        s64 = s.detach().to(torch.float64)
        w64 = w.detach().to(torch.float64)
        perm_s = torch.argsort(s64, dim=-1, descending=True, stable=True)
        perm_w = torch.argsort(w64, dim=-1, descending=True, stable=True)
        ss = s64.gather(-1, perm_s)
        ws = w64.gather(-1, perm_w)
        v, bid = _pav(mode, ss, ws, backend)
        t = ss - v
        if mode == "c1":
            y = t * t.abs()
        elif mode == "c2":
            y = t * t * t
        else:
            y = t
        out = torch.empty_like(y).scatter_(-1, perm_s, y)
        ctx.save_for_backward(perm_s, perm_w, bid, ss, ws, t)
        ctx.mode = mode
        return out.to(dt)

    @staticmethod
    def backward(ctx, grad):
        perm_s, perm_w, bid, ss, ws, t = ctx.saved_tensors
        mode = ctx.mode
        dt = grad.dtype
        g = grad.to(torch.float64).gather(-1, perm_s)
        nb = g.shape[-1]
        if mode == "c0":
            cnt = _segment_sum(torch.ones_like(g), bid, nb)
            mean_g = (_segment_sum(g, bid, nb) / cnt.clamp_min(1.0)).gather(1, bid)
            gs, gw = g - mean_g, mean_g
        elif mode == "smooth":
            sum_g = _segment_sum(g, bid, nb).gather(1, bid)
            ps = torch.exp(ss - _segment_lse(ss, bid, nb).gather(1, bid))
            pw = torch.exp(ws - _segment_lse(ws, bid, nb).gather(1, bid))
            gs, gw = g - ps * sum_g, pw * sum_g
        else:
            dphi = 2.0 * t.abs() if mode == "c1" else 3.0 * t * t
            gt = g * dphi
            den = _segment_sum(dphi, bid, nb).gather(1, bid)
            sum_gt = _segment_sum(gt, bid, nb).gather(1, bid)
            cnt = _segment_sum(torch.ones_like(g), bid, nb).gather(1, bid)
            pos = den > 0
            den_safe = torch.where(pos, den, torch.ones_like(den))
            alpha = torch.where(pos, dphi / den_safe, 1.0 / cnt)
            gs = gt - alpha * sum_gt
            gw = torch.where(pos, sum_gt / den_safe, torch.zeros_like(den))
        grad_s = torch.empty_like(gs).scatter_(-1, perm_s, gs).to(dt)
        grad_w = torch.empty_like(gw).scatter_(-1, perm_w, gw).to(dt)
        return grad_s, grad_w, None, None


def permutahedron_projection(
    z: torch.Tensor, w: torch.Tensor, softness: float, mode: str, *, backend: str | None = None
) -> torch.Tensor:
    """Project ``z / softness`` onto the permutahedron of ``w`` (batched over leading dims, exact backward).

    ``z`` and ``w`` broadcast to a common shape (..., n); the last axis is projected. ``mode``: ``"c0"``
    (Euclidean), ``"smooth"`` (log-KL: log of the KL projection of exp(z / s) onto P(exp(w))), ``"c1"``/
    ``"c2"`` (p-norm, q = 3, 4; returns phi(z/s - v) with phi(t) = t|t| or t^3). Same maths and output as
    softtorch 0.1.1's ``_proj_permutahedron(z, w, softness, mode)``. Fast soft sort:
    ``permutahedron_projection(anchors, x, s, mode)`` with anchors = arange(n) / (n - 1) gives the ascending
    soft sort of standardized x; fast soft rank: ``permutahedron_projection(-x, (1..n) / (n - 1), s, mode)``
    times (n - 1) gives descending ranks. ``backend``: None/"auto" (numba on CPU if importable, else torch),
    "torch" or "numba".
    """
    if mode not in _PERM_MODES:
        raise ValueError(f"mode: must be one of {', '.join(map(repr, _PERM_MODES))}, got {mode!r}")
    if isinstance(softness, torch.Tensor):
        softness = float(softness)
    if not (isinstance(softness, (int, float)) and math.isfinite(softness) and softness > 0):
        raise ValueError(f"softness: must be finite and > 0, got {softness!r}")
    if backend not in (None, "auto", "torch", "numba"):
        raise ValueError(f"backend: must be None, 'auto', 'torch' or 'numba', got {backend!r}")
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"z: must be a torch.Tensor, got {type(z).__name__}")
    if not z.is_floating_point():
        z = z.to(torch.get_default_dtype())
    w = torch.as_tensor(w, dtype=z.dtype, device=z.device)
    if z.ndim == 0 or w.ndim == 0:
        raise ValueError("z: z and w need at least one dimension")
    shape = torch.broadcast_shapes(z.shape, w.shape)
    n = shape[-1]
    s = (z / softness).expand(shape).reshape(-1, n)
    wb = w.expand(shape).reshape(-1, n)
    if s.shape[0] == 0 or n == 0:
        return (s + wb).reshape(shape)
    out = _PermutahedronFn.apply(s, wb, mode, backend)
    return out.reshape(shape)
