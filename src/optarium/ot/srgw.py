r"""Structurally robust Gromov-Wasserstein (SRGW): GW with dual edge masks, solved by mask-guided GW.

Paper: "Structurally Robust Gromov-Wasserstein distance and the Mask-Guided GW algorithm", ICML 2026. Only
the abstract was found (no preprint, no code; searched again in this session): masks on the pairwise
structure filter edge-induced distortions (spurious connections between valid nodes) while the plan keeps
strict balanced marginals; the "Mask-Guided GW algorithm" jointly optimises the plan and the masks and
converges to a critical point under the Kurdyka-Lojasiewicz property. **Everything below the abstract is our
reconstruction** (spec ``srgw.md``, design A); it is not the paper's exact formulation.

Objective, for symmetric structures C1 (n, n), C2 (m, m), masses p, q and hard masks M1, M2 in {0, 1}
(1 on every entry that is not a candidate; candidates are the off-diagonal entries, with ``edge_only`` only
those with C != 0):

.. math:: E(T, M^1, M^2) = \sum_{ijkl} M^1_{ik} M^2_{jl} (C^1_{ik} - C^2_{jl})^2 T_{ij} T_{kl}
   \;[+\ \lambda_1 \textstyle\sum (1 - M^1) + \lambda_2 \sum (1 - M^2)],
   \qquad T \in \Pi(p, q).

Two ways to price a mask: thresholds ``lam = (l1, l2)`` (the penalty in brackets) or a budget (default):
at most a fraction ``1 - keep_ratio`` of the candidate entries of each active side is masked, no penalty.
The GW part is evaluated in O(n^2 m + n m^2) by the tensor-product factorisation (Peyre, Cuturi, Solomon,
ICML 2016) with masks:
:math:`L(T) = (M^1 \odot C^1 \odot C^1) T M^2 - 2 (M^1 \odot C^1) T (M^2 \odot C^2) + M^1 T (M^2 \odot C^2
\odot C^2)`, :math:`E_{GW} = \langle L(T), T\rangle`, :math:`\nabla_T E = 2 L(T)`; the mask residuals
:math:`r^1_{ik} = \sum_{jl} M^2_{jl}(C^1_{ik} - C^2_{jl})^2 T_{ij}T_{kl} = (C^1)^2 \odot T M^2 T^\top
- 2 C^1 \odot T (M^2\odot C^2) T^\top + T (M^2 \odot (C^2)^2) T^\top` and :math:`r^2` likewise with
:math:`T^\top`; :math:`E_{GW} = \langle M^1, r^1\rangle = \langle M^2, r^2\rangle`.

Mask-guided GW (block-coordinate descent; every block step is an exact or a descent step, so E is
non-increasing for ``frank_wolfe`` and for ``mirror`` with the safe step):

1. T-step with the masks fixed, one of
   ``"frank_wolfe"`` (default): a conditional-gradient step: linear minimisation of :math:`\langle 2L(T),
   S\rangle` over :math:`\Pi(p, q)` (exact: an assignment problem, ``scipy.optimize.linear_sum_assignment``,
   when n = m and p, q are uniform, else the transport LP by ``scipy.optimize.linprog`` (HiGHS)) and the
   exact line search of the quadratic :math:`E(T + \alpha(S - T))` on [0, 1]; with all masks 1 this is
   POT's ``ot.gromov.gromov_wasserstein`` (same start p q^T, same stopping rule);
   ``"mirror"``: the Bregman proximal linearised step
   :math:`T^+ = \arg\min_{\Pi(p,q)} \langle 2L(T), T'\rangle + \tau^{-1}\mathrm{KL}(T'\|T)`, i.e. entropic OT
   with cost :math:`2L(T) - \log(T)/\tau` at regularisation :math:`1/\tau` (:func:`optarium.ot.sinkhorn`,
   warm started); ``tau=None`` is the safe step :math:`1/(2\max K)`, :math:`\max K = \max M^1_{ik} M^2_{jl}
   (C^1_{ik} - C^2_{jl})^2` (descent by Pinsker); with all masks 1 and tau = 1/epsilon this is POT's
   ``entropic_gromov_wasserstein(solver="PPA")``;
   ``"entropic"``: :math:`T^+ = \arg\min_{\Pi(p,q)} \langle 2L(T), T'\rangle + \epsilon \sum T'\log T'`
   (POT's ``entropic_gromov_wasserstein(solver="PGD")`` with all masks 1; not a descent method on E).
2. M-steps with T fixed: E is linear in each mask, so the exact minimiser masks the candidate entries with
   the largest residuals (budget) or those with residual > lambda (thresholds); computed on the upper
   triangle and mirrored, so masks are exactly symmetric.

The loop stops when an outer iteration leaves the masks unchanged and changes E by at most ``tol``
relatively or ``tol_abs`` absolutely (POT's rule; for ``mirror``/``entropic`` the plan change
:math:`\|T^+ - T\|_F \le` ``tol`` is used, as POT's entropic GW does).

Deviations / not done (the paper's text was not available): the mask parametrisation (hard masks with a
budget or thresholds), the candidate set and the solvers are our design; the soft-mask variant and design B
(masks editing the structure, ``C -> M * C``) of the spec are not implemented; C1 and C2 must be symmetric.
The LMO of ``frank_wolfe`` runs on the CPU through scipy (one (n, m) transfer per iteration); everything
else is torch and follows the inputs' dtype and device.

>>> import torch
>>> from optarium.ot.srgw import structurally_robust_gw
>>> x = torch.rand(8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> C = torch.cdist(x, x)
>>> res = structurally_robust_gw(C, C[[3, 1, 4, 0, 2, 7, 5, 6]][:, [3, 1, 4, 0, 2, 7, 5, 6]], masks="none")
>>> res.status, res.x.argmax(1).tolist()
('converged', [3, 1, 4, 0, 2, 6, 7, 5])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverLoop
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
    check_type,
)

__all__ = [
    "MASK_SIDES",
    "SRGW_SOLVERS",
    "gw_tensor_product",
    "mask_residuals",
    "masked_gw_value",
    "structurally_robust_gw",
]

#: T-step solvers of :func:`structurally_robust_gw`.
SRGW_SOLVERS: tuple[str, ...] = ("frank_wolfe", "mirror", "entropic")
#: Which structure(s) carry a mask.
MASK_SIDES: tuple[str, ...] = ("both", "source", "target", "none")


# ------------------------------------------------------------------------------------------ the algebra
def gw_tensor_product(
    C1: torch.Tensor, C2: torch.Tensor, T: torch.Tensor, M1: torch.Tensor, M2: torch.Tensor
) -> torch.Tensor:
    r"""The masked GW tensor product :math:`L(T)_{ij} = \sum_{kl} M^1_{ik} M^2_{jl} (C^1_{ik} - C^2_{jl})^2
    T_{kl}` in O(n^2 m + n m^2) (symmetric C and M); the gradient of E's GW part is 2 L(T)."""
    A = M1 * C1
    B = M2 * C2
    # A side whose mask is all ones turns its product into a row or column sum (no O(n^2 m) product):
    # (X T 1)_ij = (X T 1)_i and (1 T Y)_ij = (1^T T Y)_j; with masks off only the cross term is cubic.
    if bool(M2.all()):
        first = ((A * C1) @ T.sum(1, keepdim=True)).expand(-1, T.shape[1])
    else:
        first = (A * C1) @ T @ M2
    if bool(M1.all()):
        third = (T.sum(0, keepdim=True) @ (B * C2)).expand(T.shape[0], -1)
    else:
        third = M1 @ T @ (B * C2)
    return first - 2.0 * (A @ T @ B) + third


def mask_residuals(
    C1: torch.Tensor, C2: torch.Tensor, T: torch.Tensor, M1: torch.Tensor, M2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The residuals :math:`r^1_{ik} = \sum_{jl} M^2_{jl}(C^1_{ik} - C^2_{jl})^2 T_{ij} T_{kl}` (n, n) and
    :math:`r^2_{jl} = \sum_{ik} M^1_{ik}(C^1_{ik} - C^2_{jl})^2 T_{ij} T_{kl}` (m, m) (symmetric inputs)."""
    B = M2 * C2
    r1 = C1 * C1 * (T @ M2 @ T.T) - 2.0 * C1 * (T @ B @ T.T) + T @ (B * C2) @ T.T
    A = M1 * C1
    r2 = C2 * C2 * (T.T @ M1 @ T) - 2.0 * C2 * (T.T @ A @ T) + T.T @ (A * C1) @ T
    return r1, r2


def masked_gw_value(
    C1: torch.Tensor,
    C2: torch.Tensor,
    T: torch.Tensor,
    M1: torch.Tensor | None = None,
    M2: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""The masked GW value :math:`\sum_{ijkl} M^1_{ik}M^2_{jl}(C^1_{ik}-C^2_{jl})^2 T_{ij}T_{kl}` (masks
    default to all ones: the square-loss GW objective at T, POT's ``gwloss``)."""
    M1 = torch.ones_like(C1) if M1 is None else M1
    M2 = torch.ones_like(C2) if M2 is None else M2
    return (gw_tensor_product(C1, C2, T, M1, M2) * T).sum()


def _max_k(C1: torch.Tensor, C2: torch.Tensor, M1: torch.Tensor, M2: torch.Tensor) -> float:
    """max over kept entries of (C1_ik - C2_jl)^2 from the ranges of the kept values (O(n^2 + m^2))."""
    k1, k2 = C1[M1 > 0], C2[M2 > 0]
    if k1.numel() == 0 or k2.numel() == 0:
        return 0.0
    return float(max((k1.max() - k2.min()) ** 2, (k2.max() - k1.min()) ** 2))


# ------------------------------------------------------------------------------------------ validation
def _structure(name: str, C: Any, like: torch.Tensor | None) -> torch.Tensor:
    if not isinstance(C, torch.Tensor):
        try:
            C = torch.as_tensor(C, dtype=torch.float64 if like is None else like.dtype)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name}: must be a tensor or an array of numbers ({err})") from None
    if like is not None:
        if C.device != like.device:
            raise ValueError(f"{name}: must be on the device of C1 ({like.device}), got {C.device}")
        C = C.to(like.dtype)
    if not C.is_floating_point():
        C = C.to(torch.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 1:
        raise ValueError(f"{name}: must be a square matrix (n, n), got shape {tuple(C.shape)}")
    if not bool(torch.isfinite(C).all()):
        raise ValueError(f"{name}: must be finite")
    scale = float(C.abs().max()) if C.numel() else 0.0
    if not bool(torch.allclose(C, C.T, rtol=0.0, atol=1e-10 * max(scale, 1.0))):
        raise ValueError(f"{name}: must be symmetric (structurally robust GW assumes symmetric structures)")
    return C


def _mass(name: str, w: Any, size: int, like: torch.Tensor) -> torch.Tensor:
    if w is None:
        return torch.full((size,), 1.0 / size, dtype=like.dtype, device=like.device)
    w = torch.as_tensor(w, dtype=like.dtype, device=like.device)
    if w.shape != (size,):
        raise ValueError(f"{name}: must have shape ({size},), got {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()) or not bool((w > 0).all()):
        raise ValueError(f"{name}: every mass must be finite and > 0")
    return w


def _lams(lam: Any) -> tuple[float, float] | None:
    if lam is None:
        return None
    if isinstance(lam, Sequence) and not isinstance(lam, str):
        if len(lam) != 2:
            raise ValueError(f"lam: must be a number or a pair (lam1, lam2), got {lam!r}")
        return check_positive("lam", lam[0], allow_inf=True), check_positive("lam", lam[1], allow_inf=True)
    v = check_positive("lam", lam, allow_inf=True)
    return v, v


# ------------------------------------------------------------------------------------------ the steps
def _lmo(G: torch.Tensor, p: torch.Tensor, q: torch.Tensor, uniform_square: bool) -> torch.Tensor:
    """argmin_{S in Pi(p, q)} <G, S>, exactly (assignment for uniform square problems, else the LP)."""
    import numpy as np

    g = G.detach().cpu().double().numpy()
    n, m = g.shape
    if uniform_square:
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(g)
        S = torch.zeros_like(G)
        S[torch.as_tensor(rows, device=G.device), torch.as_tensor(cols, device=G.device)] = 1.0 / n
        return S
    from scipy.optimize import linprog
    from scipy.sparse import csr_array, vstack

    # x = vec(S) row-major: row sums A_r x = p, column sums A_c x = q.
    A_r = csr_array((np.ones(n * m), (np.repeat(np.arange(n), m), np.arange(n * m))), shape=(n, n * m))
    A_c = csr_array((np.ones(n * m), (np.tile(np.arange(m), n), np.arange(n * m))), shape=(m, n * m))
    pn, qn = p.detach().cpu().double().numpy(), q.detach().cpu().double().numpy()
    qn = qn * (pn.sum() / qn.sum())
    out = linprog(
        g.reshape(-1),
        A_eq=vstack([A_r, A_c]),
        b_eq=np.concatenate([pn, qn]),
        bounds=(0, None),
        method="highs",
    )
    if out.status != 0:
        raise RuntimeError(f"the transport LP of the Frank-Wolfe step failed: {out.message}")
    return torch.as_tensor(out.x.reshape(n, m), dtype=G.dtype, device=G.device).clamp_min_(0.0)


def _line_search(a: float, b: float) -> float:
    """argmin over [0, 1] of a x^2 + b x (POT's ``solve_1d_linesearch_quad`` rule)."""
    if a > 0:
        return min(1.0, max(0.0, -b / (2.0 * a)))
    return 1.0 if a + b < 0 else 0.0


def _update_mask(
    r: torch.Tensor, cand_iu: tuple[torch.Tensor, torch.Tensor], n_mask: int, lam: float | None
) -> torch.Tensor:
    """The exact minimiser over the mask of <M, r> [+ lam sum(1 - M)]: largest residuals (budget) or
    r > lam (threshold), chosen on the candidate upper-triangle entries and mirrored."""
    M = torch.ones_like(r)
    iu, ju = cand_iu
    if iu.numel() == 0:
        return M
    vals = 0.5 * (r[iu, ju] + r[ju, iu])  # symmetric in exact arithmetic; average the rounding
    if lam is None:
        if n_mask == 0:
            return M
        off = torch.topk(vals, n_mask).indices
    else:
        # pair (i, k) and (k, i): masking saves 2 r and costs 2 lam
        off = torch.nonzero(vals > lam).flatten()
    M[iu[off], ju[off]] = 0.0
    M[ju[off], iu[off]] = 0.0
    return M


def _candidates(C: torch.Tensor, edge_only: bool) -> tuple[torch.Tensor, torch.Tensor]:
    n = C.shape[0]
    iu, ju = torch.triu_indices(n, n, offset=1, device=C.device)
    if edge_only:
        keep = C[iu, ju] != 0
        iu, ju = iu[keep], ju[keep]
    return iu, ju


def _plan_start(G0: Any, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    if G0 is None:
        return p[:, None] * q[None, :]
    T = torch.as_tensor(G0, dtype=p.dtype, device=p.device).clone()
    if T.shape != (p.numel(), q.numel()):
        raise ValueError(f"G0: must have shape ({p.numel()}, {q.numel()}), got {tuple(T.shape)}")
    if not bool(torch.isfinite(T).all()) or bool((T < 0).any()):
        raise ValueError("G0: must be finite and >= 0")
    err = float((T.sum(1) - p).abs().sum() + (T.sum(0) - q).abs().sum())
    if err > 1e-6 * float(p.sum()):
        raise ValueError(f"G0: must have marginals (p, q); the L1 marginal error is {err:.3g}")
    return T


def structurally_robust_gw(
    C1: Any,
    C2: Any,
    p: Any = None,
    q: Any = None,
    *,
    masks: str = "both",
    edge_only: bool = False,
    lam: float | Sequence[float] | None = None,
    keep_ratio: float = 0.9,
    solver: str = "frank_wolfe",
    tau: float | None = None,
    epsilon: float = 0.01,
    max_iter: int = 1000,
    tol: float = 1e-9,
    tol_abs: float = 1e-9,
    G0: Any = None,
    sinkhorn_tol: float = 1e-11,
    sinkhorn_max_iter: int = 500,
    time_limit_s: float | None = None,
) -> Result:
    r"""Structurally robust GW between (C1, p) and (C2, q) by mask-guided GW (module docstring).

    Args:
        C1, C2: symmetric structure matrices (n, n), (m, m) (adjacency, shortest-path or distance
            matrices); tensors keep their dtype and device (C2 is cast to C1's), arrays become float64.
        p, q: positive masses of equal total (``None``: uniform).
        masks: which structure carries a mask: ``"both"`` (the dual mask), ``"source"``, ``"target"`` or
            ``"none"`` (plain GW by the chosen solver).
        edge_only: candidates for masking are the off-diagonal entries with C != 0 (the edges of an
            adjacency matrix) instead of every off-diagonal entry.
        lam: mask thresholds (a number or a pair (lam1, lam2)): an entry is masked when its residual
            exceeds lam, at the price lam in E. ``None`` (default): the budget rule below.
        keep_ratio: with ``lam=None``, the fraction in (0, 1] of candidate pairs of each masked side that
            stays unmasked (the largest-residual ``floor((1 - keep_ratio) * #candidates)`` pairs are masked).
        solver: the T-step, ``"frank_wolfe"`` (default), ``"mirror"`` or ``"entropic"``.
        tau: step of ``"mirror"`` (``None``: the safe step 1 / (2 max K), recomputed as the masks change).
        epsilon: entropic regularisation of ``"entropic"``.
        max_iter: outer iterations (each a T-step and the mask steps).
        tol, tol_abs: stopping tolerances (module docstring).
        G0: starting plan with marginals (p, q) (``None``: p q^T).
        sinkhorn_tol, sinkhorn_max_iter: the inner Sinkhorn solves of ``mirror``/``entropic``.
        time_limit_s: optional solver-time budget (status ``"timeout"``).

    Returns:
        :class:`optarium._core.Result` with ``x`` = the plan (n, m), ``value`` = E (the masked GW value, plus
        the mask penalties under thresholds), status, and ``extras``: ``mask1``, ``mask2``, ``gw_value``
        (the unmasked GW value at the plan), ``gw_value_kept`` (the masked GW value), ``marginal_error``
        (L1 of both marginals), ``n_increase`` (outer iterations that increased E by more than 1e-12
        relative to max(|E before|, |E at the start|)), ``max_increase`` (the largest such increase), ``tau``
        (the last mirror step) and ``sinkhorn_not_converged`` (inner solves that stopped at
        ``sinkhorn_max_iter``: counted, not hidden).
        ``history`` holds per iteration ``objective``, ``gw_value_kept``, ``marginal_error``, ``masked1``,
        ``masked2`` (masked pairs) and ``alpha`` (the FW step; the mirror step tau).
    """
    C1 = _structure("C1", C1, None)
    C2 = _structure("C2", C2, C1)
    n, m = C1.shape[0], C2.shape[0]
    p = _mass("p", p, n, C1)
    q = _mass("q", q, m, C1)
    if abs(float(p.sum()) - float(q.sum())) > 1e-9 * max(float(p.sum()), float(q.sum())):
        raise ValueError(f"q: must have the same total mass as p, got {float(p.sum())} and {float(q.sum())}")
    check_choice("masks", masks, MASK_SIDES)
    check_type("edge_only", edge_only, bool)
    lams = _lams(lam)
    keep_ratio = check_in_range("keep_ratio", keep_ratio, 0.0, 1.0, low_inclusive=False)
    check_choice("solver", solver, SRGW_SOLVERS)
    if tau is not None:
        tau = check_positive("tau", tau)
    epsilon = check_positive("epsilon", epsilon)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    tol = check_nonnegative("tol", tol)
    tol_abs = check_nonnegative("tol_abs", tol_abs)
    sinkhorn_tol = check_nonnegative("sinkhorn_tol", sinkhorn_tol)
    sinkhorn_max_iter = check_int("sinkhorn_max_iter", sinkhorn_max_iter, minimum=1)
    T = _plan_start(G0, p, q)

    from optarium.ot.sinkhorn import sinkhorn

    side1 = masks in ("both", "source")
    side2 = masks in ("both", "target")
    cand1 = _candidates(C1, edge_only)
    cand2 = _candidates(C2, edge_only)
    k1 = math.floor((1.0 - keep_ratio) * cand1[0].numel() + 1e-9) if side1 else 0
    k2 = math.floor((1.0 - keep_ratio) * cand2[0].numel() + 1e-9) if side2 else 0
    lam1 = lams[0] if lams is not None else None
    lam2 = lams[1] if lams is not None else None
    M1 = torch.ones_like(C1)
    M2 = torch.ones_like(C2)
    uniform_square = (
        n == m and bool(torch.allclose(p, p[0].expand(n))) and bool(torch.allclose(q, q[0].expand(m)))
    )

    def penalty() -> float:
        if lams is None:
            return 0.0
        pen = 0.0
        if side1 and math.isfinite(lam1):
            pen += lam1 * float((1.0 - M1).sum())
        if side2 and math.isfinite(lam2):
            pen += lam2 * float((1.0 - M2).sum())
        return pen

    def marginal_error() -> float:
        return float((T.sum(1) - p).abs().sum() + (T.sum(0) - q).abs().sum())

    L = gw_tensor_product(C1, C2, T, M1, M2)
    gw_kept = float((L * T).sum())
    E = gw_kept + penalty()
    E_start = E
    state: dict[str, Any] = {"alpha": 0.0, "tau": math.nan, "f": None, "inner_short": 0}
    n_increase = 0
    max_increase = 0.0

    def evaluate(k: int) -> dict[str, float]:
        return {
            "objective": E,
            "gw_value_kept": gw_kept,
            "marginal_error": marginal_error(),
            "masked1": float((1.0 - M1).sum()) / 2.0,
            "masked2": float((1.0 - M2).sum()) / 2.0,
            "alpha": state["alpha"],
        }

    loop = SolverLoop(max_iter, tol=None, time_limit_s=time_limit_s, blowup=None)
    for _ in loop.iterate(evaluate):
        E_old, T_old = E, T
        G = 2.0 * L
        if solver == "frank_wolfe":
            S = _lmo(G, p, q, uniform_square)
            D = S - T
            LD = gw_tensor_product(C1, C2, D, M1, M2)
            a = float((LD * D).sum())
            b = float((G * D).sum())
            alpha = _line_search(a, b)
            T = T + alpha * D
            L = L + alpha * LD
            state["alpha"] = alpha
        else:
            if solver == "mirror":
                mk = _max_k(C1, C2, M1, M2)
                step = tau if tau is not None else (1.0 / (2.0 * mk) if mk > 0 else 1.0)
                cost = G - torch.log(T.clamp_min(torch.finfo(T.dtype).tiny)) / step
                reg = 1.0 / step
                state["tau"] = step
                state["alpha"] = step
            else:
                cost, reg = G, epsilon
            cost = cost - cost.amin()  # a constant shift leaves the plan unchanged
            f_init = state["f"]
            ot = sinkhorn(cost, p, q, reg=reg, tol=sinkhorn_tol, max_iter=sinkhorn_max_iter, f_init=f_init)
            if ot.status == "diverged":
                loop.stop("diverged")
                continue
            T = ot.plan
            state["f"] = ot.potentials[0]
            if ot.status != "converged":
                state["inner_short"] += 1
            L = gw_tensor_product(C1, C2, T, M1, M2)
        changed = False
        if side1 or side2:
            r1, r2 = mask_residuals(C1, C2, T, M1, M2)
            if side1:
                M1_new = _update_mask(r1, cand1, k1, lam1)
                changed |= not bool(torch.equal(M1_new, M1))
                M1 = M1_new
            if side2:
                # r2 depends on M1: recompute after the M1 step (exact block coordinate descent)
                if side1 and changed:
                    _, r2 = mask_residuals(C1, C2, T, M1, M2)
                M2_new = _update_mask(r2, cand2, k2, lam2)
                changed |= not bool(torch.equal(M2_new, M2))
                M2 = M2_new
            if changed:
                L = gw_tensor_product(C1, C2, T, M1, M2)
        gw_kept = float((L * T).sum())
        E = gw_kept + penalty()
        if not math.isfinite(E):
            loop.stop("diverged")
            continue
        # relative to the larger of |E_old| and |E_start| (an E that reached 0 only moves by rounding)
        rise = (E - E_old) / max(abs(E_old), abs(E_start), 1e-300)
        if rise > 1e-12:
            n_increase += 1
            max_increase = max(max_increase, rise)
        if changed:
            continue
        if solver == "frank_wolfe":
            dE = abs(E - E_old)
            if (E != 0.0 and dE / abs(E) < tol) or dE < tol_abs:
                loop.stop("converged")
        elif float(torch.linalg.norm(T - T_old)) <= tol:
            loop.stop("converged")

    with loop.evaluating():
        gw_full = float(masked_gw_value(C1, C2, T))
        extras = {
            "mask1": M1,
            "mask2": M2,
            "gw_value": gw_full,
            "gw_value_kept": gw_kept,
            "marginal_error": marginal_error(),
            "n_increase": n_increase,
            "max_increase": max_increase,
            "tau": state["tau"],
            "sinkhorn_not_converged": state["inner_short"],
        }
    return loop.result(T, value=E, extras=extras)


# ------------------------------------------------------------------------------------------------------
# Conformance cases (optarium.testing.solvers)
# ------------------------------------------------------------------------------------------------------
def _case_problem(dtype: torch.dtype, device: Any, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    x = torch.rand(7, 2, generator=g, dtype=torch.float64)
    y = torch.rand(6, 2, generator=g, dtype=torch.float64)
    C1, C2 = torch.cdist(x, x), torch.cdist(y, y)
    return C1.to(dtype=dtype, device=device), C2.to(dtype=dtype, device=device)


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    C1, C2 = _case_problem(dtype, device, seed)
    kwargs: dict[str, Any] = {"keep_ratio": 0.8, **overrides}
    return structurally_robust_gw(C1, C2, **kwargs)


def _case_optimality(res: Result) -> float:
    """Marginal error of the plan plus the mask optimality: every masked pair's residual is at least every
    kept candidate's (the exact M-steps), checked from the returned plan and masks."""
    T = res.x
    C1, C2 = _case_problem(T.dtype, T.device, 0)
    p = torch.full((7,), 1 / 7, dtype=T.dtype, device=T.device)
    q = torch.full((6,), 1 / 6, dtype=T.dtype, device=T.device)
    marg = float((T.sum(1) - p).abs().sum() + (T.sum(0) - q).abs().sum())
    M1, M2 = res.extras["mask1"], res.extras["mask2"]
    r1, r2 = mask_residuals(C1, C2, T, M1, M2)
    gap = 0.0
    for r, M in ((r1, M1), (r2, M2)):
        off = ~torch.eye(r.shape[0], dtype=torch.bool, device=r.device)
        masked, kept = r[(M == 0) & off], r[(M == 1) & off]
        if masked.numel() and kept.numel():
            gap = max(gap, float(kept.max() - masked.min()))
    return marg + max(gap, 0.0)


def solver_cases() -> list[Any]:
    """The case of :func:`structurally_robust_gw` (Frank-Wolfe T-step, dual budget masks, 7 x 6 point clouds;
    the mirror and entropic T-steps are checked in ``tests/ot/test_srgw.py``)."""
    from optarium._core.solver import SolverCase

    return [
        SolverCase(
            name="ot-srgw",
            solve=_case_solve,
            statuses={
                "converged": {"tol": 1e-9},
                "max_iter": {"tol": 0.0, "tol_abs": 0.0, "max_iter": 2},
                "timeout": {"tol": 0.0, "tol_abs": 0.0, "time_limit_s": 0.0},
            },
            max_iter=2,
            tolerance_holds=lambda res: float(res.extras["marginal_error"]) <= 1e-6,
            optimality=_case_optimality,
            optimality_tol=1e-5,
            invalid=[
                ({"keep_ratio": 0.0}, "keep_ratio"),
                ({"lam": -1.0}, "lam"),
                ({"solver": "newton"}, "solver"),
                ({"masks": "all"}, "masks"),
                ({"max_iter": 0}, "max_iter"),
                ({"tau": 0.0}, "tau"),
            ],
            exempt={
                "diverged": "finite symmetric structures give a finite E on the simplex; non-finite input is "
                "rejected (tests/ot/test_srgw.py::test_bad_input)"
            },
        )
    ]
