r"""Batched entropic optimal transport by log-domain Sinkhorn, with implicit or unrolled gradients.

Problem, for costs C (..., n, m), positive masses a (..., n), b (..., m) of equal total and reg = eps > 0:

.. math:: \Gamma = \arg\min_{\Gamma\ge0,\ \Gamma 1 = a,\ \Gamma^\top 1 = b}
   \langle C, \Gamma\rangle + \varepsilon \sum_{ij} \Gamma_{ij}\log\Gamma_{ij}

(POT's ``ot.sinkhorn`` regulariser). Log-domain Sinkhorn on the potentials (f, g) with
:math:`\Gamma_{ij} = \exp((f_i + g_j - C_{ij})/\varepsilon)`: alternately
:math:`g = \varepsilon\log b - \varepsilon\,\mathrm{LSE}_i((f_i - C_{ij})/\varepsilon)` and
:math:`f = \varepsilon\log a - \varepsilon\,\mathrm{LSE}_j((g_j - C_{ij})/\varepsilon)`. Every run ends on
the g half-step, so the column marginal :math:`\Gamma^\top 1 = b` holds to rounding and only the row marginal
carries the solver error; the loop stops when the relative row error
:math:`\max_i |(\Gamma 1)_i - a_i| / \max_i a_i` (``n max|Gamma 1 - a|`` for uniform a) is at most ``tol``,
floored at the rounding level :math:`4\,\epsilon_{mach}(1 + \max|C|/\varepsilon)` of the potentials. The batch
is solved in lock step (no Python loop over it); dtype and device follow the cost. Under ``grad="implicit"``
the same half-steps run as stabilised scaling (the plan at a reference pair is formed once and each
half-step is one batched matrix-vector product with it, absorbed back into the potentials when the scalings
leave exp(+-20)), which reads one (B, n, m) array per half-step instead of writing and reading several
temporaries: at n = m = 1,024, batch 64, float32, one CPU thread, the soft sort's forward pass is 6.5x and
the soft rank's 9.2x faster than the log-domain loop (forward + backward 6.0x and 5.7x), with outputs equal
to float32 rounding (3.5e-7 relative); ``grad="unrolled"`` keeps the log-domain loop.

Gradients. ``grad="implicit"`` (default): implicit differentiation of the marginal conditions, with
:math:`K = \Gamma/\varepsilon` and upstream gradient G the cost cotangent is
:math:`K\odot(\lambda 1^\top + 1\kappa^\top - G)` where :math:`(\lambda, \kappa)` solve the coupled
marginal system (:mod:`optarium.ot._linalg`) to convergence; gradients flow to the cost only (the masses
and the potentials are constants of the backward pass). ``grad="unrolled"``: autograd through the
iterations (to the cost, the masses and the potentials alike; memory grows with the iteration count).

Reference: M. Cuturi, "Sinkhorn Distances", NeurIPS 2013; G. Peyre & M. Cuturi, "Computational Optimal
Transport", 2019, section 4.4 (log-domain). POT (``ot.bregman.sinkhorn_log``) is the reference in the tests.

>>> import torch
>>> from optarium.ot import sinkhorn
>>> x = torch.linspace(0, 1, 4, dtype=torch.float64)
>>> res = sinkhorn((x[:, None] - x[None]) ** 2, reg=0.05, tol=1e-10)
>>> res.status, bool(torch.allclose(res.plan.sum(-1), torch.full((4,), 0.25, dtype=torch.float64)))
('converged', True)
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from optarium._core.validation import check_choice
from optarium.ot._linalg import implicit_cost_grad
from optarium.ot._problem import (
    case_marginal_error,
    case_problem,
    check_reg,
    deadline_after,
    package,
    prepare,
)
from optarium.ot.result import OTResult

__all__ = ["GRADS", "sinkhorn"]

#: Gradient rules of :func:`sinkhorn`.
GRADS: tuple[str, ...] = ("implicit", "unrolled")


def _sinkhorn_log(
    C: torch.Tensor,
    log_a: torch.Tensor,
    log_b: torch.Tensor,
    eps: float,
    tol: float,
    max_iter: int,
    f_init: torch.Tensor | None,
    errors: list[float],
    deadline: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int, float, str]:
    """Log-domain Sinkhorn on (B, n, m) costs: (f, g, iterations, error, status), column marginal exact.

    ``errors`` receives the relative row error of every iteration. Differentiable through the iterations if
    the inputs require grad. Stops early with status ``"diverged"`` on non-finite potentials and with
    ``"timeout"`` once ``time.perf_counter()`` passes ``deadline``.
    """
    mu_max = log_a.exp().amax(-1, keepdim=True)
    mu = log_a.exp()
    f = eps * log_a - eps * torch.logsumexp(-C / eps, dim=-1) if f_init is None else f_init
    err = float("inf")
    it = 0
    g = None
    status = "max_iter"
    for it in range(1, max_iter + 1):  # noqa: B007 (it is returned)
        g = eps * log_b - eps * torch.logsumexp((f.unsqueeze(-1) - C) / eps, dim=-2)
        f_new = eps * log_a - eps * torch.logsumexp((g.unsqueeze(-2) - C) / eps, dim=-1)
        # Row sums of the plan (f, g) are a * exp((f - f_new) / eps): the check costs no extra pass.
        row_err = (mu * torch.expm1((f - f_new) / eps)).abs() / mu_max
        err = float(row_err.detach().amax()) if row_err.numel() else 0.0
        errors.append(err)
        if not math.isfinite(err):
            status = "diverged"
            break
        if err <= tol:
            status = "converged"
            break
        if deadline is not None and time.perf_counter() >= deadline:
            status = "timeout"  # (f, g) is still the pair of the plan
            break
        f = f_new
    else:
        # The last f was not followed by a g half-step: take it, so (f, g) is the pair of the returned plan.
        g = eps * log_b - eps * torch.logsumexp((f.unsqueeze(-1) - C) / eps, dim=-2)
    return f, g, it, err, status


#: Absorption threshold of :func:`_sinkhorn_scaling`: the scalings u = exp((f - f0) / eps) and v stay within
#: exp(+-_ABSORB), so that entries of the stored kernel that underflowed stay negligible after scaling.
_ABSORB = 20.0


def _sinkhorn_scaling(
    C: torch.Tensor,
    log_a: torch.Tensor,
    log_b: torch.Tensor,
    eps: float,
    tol: float,
    max_iter: int,
    f_init: torch.Tensor | None,
    errors: list[float],
    deadline: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int, float, str, torch.Tensor | None]:
    """The iterates of :func:`_sinkhorn_log` (same half-steps, stopping rule) by stabilised scaling; the plan.

    Log-domain half-steps write and read several (B, n, m) temporaries each (the shifted exponent, its max,
    its exponential). Here the plan at a reference pair (f0, g0), E = exp((f0 + g0 - C) / eps), is formed
    once; the iterates are f = f0 + eps log u, g = g0 + eps log v and each half-step is one batched
    matrix-vector product with E (u = a / (E v), v = b / (E^T u)): one read of E, no temporaries. When u or v
    leave exp(+-20) they are absorbed into (f0, g0) and E is formed again (Schmitzer, "Stabilized sparse
    scaling algorithms for entropy regularized transport problems", SIAM J. Sci. Comput. 2019, section 3.1).
    An iteration whose products are not finite (a row or column of E that underflowed to zero far from the
    solution) is redone as a log-domain iteration, and only a non-finite log-domain iteration is
    ``"diverged"``. Not differentiable (used under the implicit gradient, which needs only the plan). Returns
    :func:`_sinkhorn_log`'s five values and the plan of (f, g) (``None`` when a log-domain iteration ended the
    run: then :func:`_plan` forms it). Memory: C and one (B, n, m) buffer (the kernel, re-formed in place at
    an absorption, then the plan).
    """
    a = log_a.exp()
    b = log_b.exp()
    mu_max = a.amax(-1, keepdim=True)
    # One (B, n, m) buffer T serves the start f0, the first g half-step and the kernel (in place throughout).
    if f_init is None:
        T = torch.div(C, -eps)
        M = T.amax(-1, keepdim=True)
        s_f = T.sub_(M).exp_().sum(-1)
        f0 = eps * log_a - eps * (M.squeeze(-1) + s_f.log())
        torch.sub(f0.unsqueeze(-1), C, out=T)
    else:
        f0 = f_init
        T = f0.unsqueeze(-1) - C
    T.div_(eps)
    M = T.amax(-2, keepdim=True)
    s_g = T.sub_(M).exp_().sum(-2)
    g0 = eps * log_b - eps * (M.squeeze(-2) + s_g.log())

    def kernel(f0: torch.Tensor, g0: torch.Tensor) -> torch.Tensor:
        """exp((f0 + g0 - C) / eps), written over the current kernel's buffer (no temporary)."""
        return torch.add(f0.unsqueeze(-1), g0.unsqueeze(-2), out=E).sub_(C).div_(eps).exp_()

    # The plan at (f0, g0): exp((f0 + g0 - C) / eps) = b * exp(T - M) / s_g, columns summing to b.
    E = T.mul_((b / s_g).unsqueeze(-2))
    u = torch.ones_like(f0)
    v = torch.ones_like(g0)
    err = float("inf")
    it = 0
    status = "max_iter"
    pair: tuple[torch.Tensor, torch.Tensor] | None = None  # set when a log-domain iteration ends the loop
    for it in range(1, max_iter + 1):
        if it > 1:
            v = b / torch.bmm(u.unsqueeze(-2), E).squeeze(-2)  # g half-step
        Ev = torch.bmm(E, v.unsqueeze(-1)).squeeze(-1)
        u_new = a / Ev
        # Row sums of the plan (f, g) are u * (E v): the check costs no extra pass.
        err = float(((u * Ev - a).abs() / mu_max).amax()) if a.numel() else 0.0
        finite = math.isfinite(err) and bool(torch.isfinite(u_new).all()) and bool(torch.isfinite(v).all())
        if not finite:
            # Redo this iteration in the log domain from the last finite pair.
            f = f0 + eps * u.log()
            g = eps * log_b - eps * torch.logsumexp((f.unsqueeze(-1) - C) / eps, dim=-2)
            f_new = eps * log_a - eps * torch.logsumexp((g.unsqueeze(-2) - C) / eps, dim=-1)
            row_err = (a * torch.expm1((f - f_new) / eps)).abs() / mu_max
            err = float(row_err.amax()) if row_err.numel() else 0.0
        errors.append(err)
        if not finite:
            pair = (f, g)
        if not math.isfinite(err):
            status = "diverged"
            break
        if err <= tol:
            status = "converged"
            break
        if deadline is not None and time.perf_counter() >= deadline:
            status = "timeout"  # (f, g) is still the pair of the plan
            break
        pair = None
        if not finite:
            f0, g0, u, v = f_new, g, torch.ones_like(u), torch.ones_like(v)
            E = kernel(f0, g0)
            continue
        u = u_new
        if float(u.log().abs().amax()) > _ABSORB or float(v.log().abs().amax()) > _ABSORB:
            f0, g0 = f0 + eps * u.log(), g0 + eps * v.log()
            u, v = torch.ones_like(u), torch.ones_like(v)
            E = kernel(f0, g0)
    else:
        # The last f was not followed by a g half-step: take it, so (f, g) is the pair of the returned plan.
        v = b / torch.bmm(u.unsqueeze(-2), E).squeeze(-2)
    if pair is not None:
        return (*pair, it, err, status, None)
    # The plan of (f, g) is diag(u) E diag(v), v = b / (E^T u) being the last g half-step: its columns sum to
    # b (to rounding) and it equals the column softmax of (f - C) / eps; formed in place in E.
    plan = E.mul_(u.unsqueeze(-1)).mul_(v.unsqueeze(-2))
    return f0 + eps * u.log(), g0 + eps * v.log(), it, err, status, plan


def _plan(f: torch.Tensor, C: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """The final g half-step written as a column softmax: columns sum to b to rounding at any softness."""
    return torch.softmax((f.unsqueeze(-1) - C) / eps, dim=-2) * b.unsqueeze(-2)


class _SinkhornPlan(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, C, log_a, log_b, eps, tol, max_iter, f_init, info, deadline):  # type: ignore[override]
        errors: list[float] = []
        f, g, it, err, status, plan = _sinkhorn_scaling(
            C, log_a, log_b, eps, tol, max_iter, f_init, errors, deadline
        )
        info.update(n_iter=it, error=err, status=status, history=errors)
        if plan is None:
            plan = _plan(f, C, log_b.exp(), eps)
        ctx.save_for_backward(plan)
        ctx.eps = eps
        ctx.mark_non_differentiable(f, g)
        return plan, f, g

    @staticmethod
    def backward(ctx: Any, grad_plan, _gf, _gg):  # type: ignore[override]
        (plan,) = ctx.saved_tensors
        if grad_plan is None:
            return (None,) * 9
        grad_C = implicit_cost_grad(plan / ctx.eps, grad_plan)
        return grad_C, None, None, None, None, None, None, None, None


def _tol_floor(C: torch.Tensor, reg: float, tol: float) -> float:
    """``tol`` floored at the rounding level of the row-error estimate: potentials of size ~max C carry
    machine-epsilon * max C / reg noise."""
    cmax = max(float(C.detach().amax()), -float(C.detach().amin())) if C.numel() else 0.0
    floor = 4.0 * torch.finfo(C.dtype).eps * (1.0 + cmax / reg)
    return max(float(tol), floor)


def sinkhorn(
    cost: torch.Tensor,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    *,
    reg: float,
    tol: float = 1e-9,
    max_iter: int = 10_000,
    f_init: torch.Tensor | None = None,
    grad: str = "implicit",
    time_limit_s: float | None = None,
) -> OTResult:
    r"""Entropic OT between masses ``a`` (..., n) and ``b`` (..., m) for the cost ``cost`` (..., n, m).

    Solves :math:`\min_{\Gamma 1 = a, \Gamma^\top 1 = b} \langle C,\Gamma\rangle + \mathrm{reg}
    \sum\Gamma\log\Gamma` by log-domain Sinkhorn (module docstring), batched over the leading dimensions
    (``a``, ``b`` and ``cost`` broadcast against each other).

    Args:
        cost: floating tensor (..., n, m); sets dtype and device.
        a, b: positive masses with equal totals (``None``: uniform 1/n, 1/m); cast to the cost's dtype.
        reg: the entropic regularisation eps > 0.
        tol: stop when the relative row-marginal error max_i |(Gamma 1)_i - a_i| / max(a) is at most ``tol``
            (floored at the rounding level of the potentials); the column marginal is exact to rounding.
        max_iter: iteration cap; reaching it gives status ``"max_iter"`` (no warning: read ``status``).
        f_init: warm start of the row potential f (..., n), e.g. ``previous.potentials[0]`` (the iteration
            starts with the g half-step, so f determines the start).
        grad: ``"implicit"`` (gradients to ``cost`` by implicit differentiation) or ``"unrolled"``
            (autograd through the iterations).
        time_limit_s: optional wall-clock budget; when it runs out the solve stops with status
            ``"timeout"`` (checked once per iteration, so at least one iteration runs).

    Returns:
        :class:`~optarium.ot.OTResult` with ``plan``, ``potentials``, ``value`` (the objective above),
        ``value_linear`` (<C, Gamma>), ``dual_value`` (<f, a> + <g, b> - reg (sum Gamma - sum a)), ``status``,
        ``n_iter``, ``marginal_error`` and the per-iteration ``history``.
    """
    start = time.perf_counter()
    reg = check_reg(reg)
    check_choice("grad", grad, GRADS)
    C, a_b, b_b, batch, tol, max_iter = prepare(cost, a, b, tol, max_iter)
    deadline = deadline_after(start, time_limit_s)
    n = C.shape[-2]
    f0 = None
    if f_init is not None:
        if not isinstance(f_init, torch.Tensor) or f_init.shape[-1] != n:
            raise ValueError(
                f"f_init: must be a tensor of shape (..., {n}), got {getattr(f_init, 'shape', f_init)}"
            )
        if not bool(torch.isfinite(f_init).all()):
            raise ValueError("f_init: must be finite")
        f0 = f_init.detach().to(C.dtype).expand(*batch, n).reshape(-1, n)
    tol = _tol_floor(C, reg, tol)
    log_a, log_b = a_b.log(), b_b.log()
    info: dict[str, Any] = {}
    if grad == "implicit":
        plan, f, g = _SinkhornPlan.apply(C, log_a, log_b, reg, tol, max_iter, f0, info, deadline)
    else:
        errors: list[float] = []
        f, g, it, err, status = _sinkhorn_log(C, log_a, log_b, reg, tol, max_iter, f0, errors, deadline)
        info.update(n_iter=it, error=err, status=status, history=errors)
        plan = _plan(f, C, b_b, reg)
    # <C, plan> per problem as a batched dot product (no (B, n, m) temporary).
    value_linear = torch.bmm(C.reshape(C.shape[0], 1, -1), plan.reshape(C.shape[0], -1, 1)).reshape(-1)
    value = value_linear + reg * torch.special.xlogy(plan, plan).sum((-1, -2))
    dual = (f * a_b).sum(-1) + (g * b_b).sum(-1) - reg * (plan.sum((-1, -2)) - a_b.sum(-1))
    return package(batch, plan, (f, g), (value, value_linear, dual), info, start)


# ------------------------------------------------------------------------------------------------------------
# Conformance cases (optarium.testing.solvers): one small problem, run through OTResult.to_result()
# ------------------------------------------------------------------------------------------------------------


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Any:
    cost, a, b = case_problem(dtype, device, seed)
    kwargs = {"reg": 0.1, "tol": 1e-10 if dtype == torch.float64 else 1e-5, **overrides}
    return sinkhorn(cost, a, b, **kwargs).to_result()


def _case_optimality(res: Any) -> float:
    """Marginal error plus the stationarity residual |Gamma - exp((f + g - C) / reg)| of the potentials."""
    cost, _, _ = case_problem(res.x.dtype, res.x.device, 0)
    f, g = res.extras["f"], res.extras["g"]
    stat = (res.x - torch.exp((f[:, None] + g[None] - cost) / 0.1)).abs().amax()
    return case_marginal_error(res) + float(stat)


def solver_cases() -> list[Any]:
    """The case of :func:`sinkhorn` for :mod:`optarium.testing.solvers` (a 6 x 5 problem, random masses)."""
    from optarium._core.solver import SolverCase

    return [
        SolverCase(
            name="ot-sinkhorn",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"tol": 1e-14, "max_iter": 2},
                # reg below the smallest normal number: C / reg overflows and the potentials turn non-finite
                "diverged": {"reg": 1e-310},
                "timeout": {"tol": 1e-14, "time_limit_s": 0.0},
            },
            max_iter=2,
            # the row error is the stopping rule (columns are exact to rounding)
            tolerance_holds=lambda res: (
                case_marginal_error(res) <= (1e-10 if res.x.dtype == torch.float64 else 2e-5)
            ),
            optimality=_case_optimality,
            optimality_tol=1e-9,
            invalid=[
                ({"reg": 0.0}, "reg"),
                ({"max_iter": 0}, "max_iter"),
                ({"tol": -1.0}, "tol"),
                ({"grad": "exact"}, "grad"),
                ({"time_limit_s": -1.0}, "time_limit_s"),
            ],
        )
    ]
