r"""Implicit bias laboratory: the learning rate as a dial between low parameter norm and low sharpness.

Paper: Vit Fojtik, Maria Matveev, Hung-Hsu Chou, Gitta Kutyniok, Johannes Maly, "Conflicting Biases at the
Edge of Stability: Norm versus Sharpness Regularization", ICML 2026, arXiv:2505.21423. The paper proposes no
optimizer; it measures what full-batch gradient descent (GD) with a constant step size η converges to: small
η (gradient flow) is biased towards low parameter norm, large η (Edge of Stability, EoS) can only stop at
minima of sharpness :math:`S = \lambda_{\max}(\nabla^2 L) \le 2/\eta`, and the learning rate interpolates
between the two. This module is the measurement laboratory (spec ../shared/papers/norm-sharpness.md).

**Diagonal linear network (DLN).** The standard depth-2 model (the parametrisation is our choice; the paper's
exact counter-example was not readable):

.. math::

    f_\theta(x) = \langle w, x\rangle,\quad w = u\odot u - v\odot v,\quad \theta = (u, v)\in\mathbb R^{2d},
    \quad L(\theta) = \tfrac{1}{2n}\lVert Xw - y\rVert^2,\quad u_0 = v_0 = \alpha\mathbf 1.

With the residual :math:`r = Xw - y` and :math:`g = X^\top r / n`, the analytic gradient is
:math:`\nabla_u L = 2u\odot g`, :math:`\nabla_v L = -2v\odot g`, and the exact Hessian is

.. math::

    \nabla^2 L = \tfrac1n J^\top J + \operatorname{diag}(2g, -2g),\qquad J = [\,2X\operatorname{diag}(u),\;
    -2X\operatorname{diag}(v)\,]\in\mathbb R^{n\times 2d}

(:func:`dln_hessian`; at an interpolator :math:`g = 0` and it is the PSD :math:`J^\top J/n`). GD multiplies
:math:`u_i v_i` by :math:`1 - 4\eta^2 g_i^2` per step (gradient flow conserves it), which is how a large η
lowers :math:`u^2 + v^2` for the same :math:`w` and with it the sharpness.

What is here:

- :class:`DiagonalLinearNet`: the DLN as an ``nn.Module`` (``effective_weight()``, analytic ``gradient``,
  exact ``hessian``, ``sharpness``).
- :func:`dln_gd`: GD on a DLN batched over step sizes (one row per η, analytic gradients, no autograd; rows
  freeze when they converge or diverge), returning a :class:`DLNRuns`.
- :func:`max_stable_lr`: the largest η that still converges (doubling from :math:`2/S_0`, then a batched
  bisection: rounds of 7 interior points give 3 bisection steps each), and :func:`lr_grid`, the spec's grid
  concentrated near it: :math:`\{0.01, 0.1\}\eta_{\max}` plus 10 points in :math:`[0.3, 1]\eta_{\max}`.
- :func:`lr_sweep`: the protocol (one record per (η, seed): converged, steps, norms, sharpness, val/test MSE)
  as an :class:`LRSweep`; :func:`min_l1_interpolator` (``scipy.optimize.linprog``) and
  :func:`min_l2_interpolator` (pseudo-inverse), the explicit norm-biased references.
- :func:`mlp_gd`: a one-hidden-layer tanh MLP trained by full-batch GD with MSE, batched over step sizes
  (stacked weights, ``torch.baddbmm``), for the digits part of the experiment; :func:`mlp_module` rebuilds one
  row as an ``nn.Sequential`` for :func:`optarium.optim.diagnostics.sharpness` (Lanczos on HVPs).

The paper's text beyond its abstract and introduction was not readable; the protocol (grid, tolerances,
norms, the "converged / not converged / diverged" split) is the spec's reconstruction.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor, nn

from optarium._core.result import Trace
from optarium._core.validation import check_choice, check_int, check_positive, check_type

__all__ = [
    "RUN_STATUSES",
    "DLNRuns",
    "DiagonalLinearNet",
    "LRSweep",
    "MLPRuns",
    "bracket_max_lr",
    "dln_gd",
    "dln_gradient",
    "dln_hessian",
    "dln_loss",
    "dln_sharpness",
    "lr_grid",
    "lr_sweep",
    "max_stable_lr",
    "min_l1_interpolator",
    "min_l2_interpolator",
    "mlp_gd",
    "mlp_module",
    "paired_mse_difference",
]

#: How one GD run ended: training loss below the tolerance (``converged``), loss above the blow-up level or
#: non-finite (``diverged``), or neither within the step cap (``not converged``).
RUN_STATUSES: tuple[str, ...] = ("converged", "not converged", "diverged")

#: A loss above this (or a non-finite one) counts as diverged.
BLOWUP = 1e6


# ----------------------------------------------------------------------------------------------- checks
def _check_matrix(name: str, x: Any) -> Tensor:
    check_type(name, x, Tensor)
    if x.dim() != 2 or x.numel() == 0:
        raise ValueError(f"{name}: must be a non-empty 2-D tensor, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: must be a floating-point tensor, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: must be finite (found NaN or inf)")
    return x


def _check_targets(name: str, y: Any, n: int) -> Tensor:
    check_type(name, y, Tensor)
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"{name}: must be a 1-D tensor of length {n}, got shape {tuple(y.shape)}")
    if not y.is_floating_point():
        raise TypeError(f"{name}: must be a floating-point tensor, got {y.dtype}")
    if not bool(torch.isfinite(y).all()):
        raise ValueError(f"{name}: must be finite (found NaN or inf)")
    return y


def _check_lrs(name: str, lrs: Any) -> list[float]:
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence | Tensor):
        raise TypeError(f"{name}: must be a sequence of step sizes, got {type(lrs).__name__}")
    vals = [float(v) for v in (lrs.tolist() if isinstance(lrs, Tensor) else lrs)]
    if not vals:
        raise ValueError(f"{name}: must hold at least one step size (empty grid)")
    for v in vals:
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: every step size must be finite and > 0, got {v!r}")
    return vals


def _check_uv(u: Tensor, v: Tensor, x: Tensor) -> None:
    check_type("u", u, Tensor)
    check_type("v", v, Tensor)
    if u.shape != v.shape or u.shape[-1] != x.shape[1]:
        raise ValueError(f"v: u and v must have the same shape [..., {x.shape[1]}], got {u.shape}, {v.shape}")


# ---------------------------------------------------------------------------------------- DLN analytics
def dln_loss(u: Tensor, v: Tensor, x: Tensor, y: Tensor) -> Tensor:
    r"""The DLN training loss :math:`\frac1{2n}\lVert X(u^2 - v^2) - y\rVert^2`, batched over rows of u."""
    _check_uv(u, v, x)
    r = (u * u - v * v) @ x.T - y
    return 0.5 * (r * r).sum(-1) / x.shape[0]


def dln_gradient(u: Tensor, v: Tensor, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    r"""The analytic gradient :math:`(2u\odot g, -2v\odot g)` with :math:`g = X^\top(Xw - y)/n`.

    Batched over the leading dimensions of ``u`` and ``v`` (rows of step sizes, say); no autograd.
    """
    _check_uv(u, v, x)
    r = (u * u - v * v) @ x.T - y
    g = r @ x / x.shape[0]
    return 2.0 * u * g, -2.0 * v * g


def dln_hessian(u: Tensor, v: Tensor, x: Tensor, y: Tensor) -> Tensor:
    r"""The exact dense Hessian :math:`J^\top J/n + \operatorname{diag}(2g, -2g)` in :math:`\theta = (u, v)`.

    ``u``, ``v``: [..., d]; returns [..., 2d, 2d] (symmetric; PSD at an interpolator, where g = 0).
    """
    _check_uv(u, v, x)
    n = x.shape[0]
    r = (u * u - v * v) @ x.T - y
    g = r @ x / n
    jac = torch.cat([2.0 * x * u.unsqueeze(-2), -2.0 * x * v.unsqueeze(-2)], dim=-1)  # [..., n, 2d]
    h = jac.transpose(-1, -2) @ jac / n
    return h + torch.diag_embed(torch.cat([2.0 * g, -2.0 * g], dim=-1))


def dln_sharpness(u: Tensor, v: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """The sharpness λ_max of :func:`dln_hessian` by a dense symmetric eigensolver (batched over rows).

    Rows whose (u, v) are not finite (diverged runs) get NaN.
    """
    h = dln_hessian(u, v, x, y)
    ok = torch.isfinite(h).flatten(-2).all(-1)
    out = torch.full(h.shape[:-2], math.nan, dtype=h.dtype, device=h.device)
    if bool(ok.any()):
        out[ok] = torch.linalg.eigvalsh(h[ok])[..., -1]
    return out


class DiagonalLinearNet(nn.Module):
    r"""A depth-2 diagonal linear network :math:`f(x) = \langle u\odot u - v\odot v, x\rangle`.

    Args:
        dim: input dimension d (2d parameters).
        alpha: initialisation scale, :math:`u_0 = v_0 = \alpha\mathbf 1` (so :math:`w_0 = 0`); small α is the
            rich (ℓ1-like) regime, large α the kernel (ℓ2-like) regime (Woodworth et al. 2020).
        parametrization: ``"u2-v2"`` (the only one implemented).
        dtype: parameter dtype (float64 by default: the tests compare Hessians to 1e-10).

    >>> net = DiagonalLinearNet(3, 0.5)
    >>> net.effective_weight().tolist()
    [0.0, 0.0, 0.0]
    """

    def __init__(
        self, dim: int, alpha: float, parametrization: str = "u2-v2", *, dtype: torch.dtype = torch.float64
    ) -> None:
        super().__init__()
        self.dim = check_int("dim", dim, minimum=1)
        self.alpha = check_positive("alpha", alpha)
        self.parametrization = check_choice("parametrization", parametrization, ("u2-v2",))
        self.u = nn.Parameter(torch.full((self.dim,), self.alpha, dtype=dtype))
        self.v = nn.Parameter(torch.full((self.dim,), self.alpha, dtype=dtype))

    def effective_weight(self) -> Tensor:
        """The regressor :math:`w = u\\odot u - v\\odot v`."""
        return self.u * self.u - self.v * self.v

    def forward(self, x: Tensor) -> Tensor:
        """Predictions :math:`Xw` for inputs ``x`` of shape [n, d]."""
        return x @ self.effective_weight()

    def flat(self) -> Tensor:
        """θ = (u, v) as one detached 1-D tensor of length 2d."""
        return torch.cat([self.u.detach(), self.v.detach()])

    def loss(self, x: Tensor, y: Tensor) -> Tensor:
        """The training loss :math:`\\frac1{2n}\\lVert Xw - y\\rVert^2` (differentiable)."""
        r = self(x) - y
        return 0.5 * (r * r).mean()

    def gradient(self, x: Tensor, y: Tensor) -> Tensor:
        """The analytic gradient at the current θ, flat (u part, then v part)."""
        gu, gv = dln_gradient(self.u.detach(), self.v.detach(), x, y)
        return torch.cat([gu, gv])

    def hessian(self, x: Tensor, y: Tensor) -> Tensor:
        """The exact dense Hessian at the current θ (:func:`dln_hessian`), [2d, 2d]."""
        return dln_hessian(self.u.detach(), self.v.detach(), x, y)

    def sharpness(self, x: Tensor, y: Tensor) -> float:
        """λ_max of the exact Hessian at the current θ."""
        return float(dln_sharpness(self.u.detach(), self.v.detach(), x, y))


# ------------------------------------------------------------------------------------------- batched GD
@dataclass(frozen=True, eq=False)
class DLNRuns:
    """GD runs on one DLN problem, one row per step size.

    Attributes:
        lrs: the step sizes (one per row).
        status: per row, one of :data:`RUN_STATUSES`.
        steps: per row, the GD steps taken (the step at which it converged or diverged, else the cap).
        loss: per row, the training loss at the final iterate.
        u, v: the final iterates [K, d] (rows that diverged hold their last finite iterate or NaN).
        traces: per row, a :class:`~optarium._core.Trace` of the training loss every ``record_every`` steps.
    """

    lrs: tuple[float, ...]
    status: tuple[str, ...]
    steps: tuple[int, ...]
    loss: tuple[float, ...]
    u: Tensor
    v: Tensor
    traces: tuple[Trace, ...] = ()

    @property
    def converged(self) -> tuple[bool, ...]:
        """Per row, whether the run converged."""
        return tuple(s == "converged" for s in self.status)

    def effective_weight(self) -> Tensor:
        """The final regressors :math:`u^2 - v^2`, [K, d]."""
        return self.u * self.u - self.v * self.v


def _alpha_tensor(alpha: float, k: int, d: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    u = torch.full((k, d), alpha, dtype=dtype)
    return u, u.clone()


@torch.no_grad()
def dln_gd(
    x: Tensor,
    y: Tensor,
    lrs: Sequence[float],
    alpha: float,
    *,
    max_steps: int = 20_000,
    tol: float = 1e-6,
    check_every: int = 10,
    record_every: int = 0,
    u0: Tensor | None = None,
    v0: Tensor | None = None,
    check: Callable[[], None] | None = None,
) -> DLNRuns:
    r"""Full-batch GD on the DLN, one row per step size, with the analytic gradient (no autograd).

    Every row starts at :math:`u_0 = v_0 = \alpha\mathbf 1` (or at the given ``u0``, ``v0`` of shape [d] or
    [K, d]) and steps :math:`u \leftarrow u - 2\eta\,u\odot g`, :math:`v \leftarrow v + 2\eta\,v\odot g`
    (:math:`g = X^\top(Xw - y)/n`). The loss is checked every ``check_every`` steps (and at step 0): a row
    whose loss is below ``tol`` stops there (``converged``), one whose loss exceeds :data:`BLOWUP` or is
    non-finite stops (``diverged``; its iterate is set to NaN); ``steps`` is the step of that check, and a
    stopped row takes no further step. Rows still running after ``max_steps`` are ``not converged``. The
    iterates are those of ``torch.optim.SGD`` on :class:`DiagonalLinearNet` (tested). The loop is a handful
    of torch ops per step (the per-op dispatch, not the arithmetic, dominates at d = 100; checking every step
    costs about 1.5x).

    Args:
        x: [n, d] design. y: [n] targets. lrs: the K step sizes. alpha: initialisation scale (> 0).
        max_steps: step cap. tol: loss tolerance. check_every: steps between stopping checks (1: exact
            stopping step). record_every: record the loss every this many steps in each row's trace (0: no
            traces). check: called every 1000 steps (a deadline check).
    """
    x = _check_matrix("x", x)
    y = _check_targets("y", y, x.shape[0])
    lr_list = _check_lrs("lrs", lrs)
    alpha = check_positive("alpha", alpha)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    tol = check_positive("tol", tol)
    check_every = check_int("check_every", check_every, minimum=1)
    record_every = check_int("record_every", record_every, minimum=0)
    k, (n, d) = len(lr_list), x.shape
    dtype = x.dtype
    u, v = _alpha_tensor(alpha, k, d, dtype)
    if u0 is not None:
        _check_uv(u0, u0, x)
        u = u0.to(dtype).expand(k, d).clone()
    if v0 is not None:
        _check_uv(v0, v0, x)
        v = v0.to(dtype).expand(k, d).clone()
    neg_y = (-y.to(dtype)).expand(k, n).contiguous()
    # 2 eta / n per row: the step multiplies u by (1 - 2 eta g), g = X^T r / n; 0 for a stopped row
    scale = torch.tensor(lr_list, dtype=dtype).unsqueeze(1) * (2.0 / n)
    xt = x.T.contiguous()
    active = [True] * k
    status = ["not converged"] * k
    steps = [max_steps] * k
    final_loss = [math.nan] * k
    rows: list[list[tuple[int, float]]] = [[] for _ in range(k)]
    thr, blow = 2.0 * n * tol, 2.0 * n * BLOWUP  # on the raw sum of squared residuals
    n_active = k
    for t in range(max_steps + 1):
        w = torch.addcmul(u * u, v, v, value=-1.0)
        r = torch.addmm(neg_y, w, xt)
        last = t == max_steps
        rec = record_every and t % record_every == 0
        if t % check_every == 0 or last or rec:
            ss = (r * r).sum(1)
            stop = (ss < thr) | ~(ss <= blow)
            if rec or last or bool(stop.any()):
                lv = (ss / (2.0 * n)).tolist()
                conv = stop.tolist() if t % check_every == 0 or last else [False] * k
                for i in range(k):
                    if not active[i]:
                        continue
                    if rec:
                        rows[i].append((t, lv[i]))
                    if conv[i] or last:
                        if conv[i]:
                            status[i] = "converged" if lv[i] < tol else "diverged"
                            steps[i] = t
                        final_loss[i] = lv[i]
                        if record_every and not rec:
                            rows[i].append((t, lv[i]))
                        if conv[i]:
                            active[i] = False
                            n_active -= 1
                            scale[i] = 0.0
                            if status[i] == "diverged":
                                u[i] = math.nan
                                v[i] = math.nan
                if n_active == 0 or last:
                    break
        if check is not None and t % 1000 == 0:
            check()
        g = r @ x
        g.mul_(scale)
        u.addcmul_(g, u, value=-1.0)
        v.addcmul_(g, v)
    traces = tuple(
        Trace(steps=tuple(s for s, _ in rs), metrics={"loss": tuple(val for _, val in rs)}) for rs in rows
    ) if record_every else ()  # fmt: skip
    return DLNRuns(tuple(lr_list), tuple(status), tuple(steps), tuple(final_loss), u, v, traces)


# ------------------------------------------------------------------------------------ the stability limit
def _first_run(flags: Sequence[bool]) -> int:
    """The number of leading True values (the candidates converged before the first failure)."""
    n = 0
    for f in flags:
        if not f:
            break
        n += 1
    return n


def bracket_max_lr(
    converges: Callable[[list[float]], Sequence[bool]],
    eta0: float,
    *,
    bisections: int = 6,
    max_doublings: int = 8,
    per_round: int = 3,
) -> tuple[float, dict[str, Any]]:
    r"""The largest step size that passes ``converges``: doubling from ``eta0``, then batched bisection.

    ``converges(candidates)`` runs one batch of step sizes and says, per candidate, whether it converged.
    The doublings :math:`\eta_0 2^j` (j < ``max_doublings``) run as one batch (halvings first if
    :math:`\eta_0` itself fails); the bracket :math:`[\eta_{lo}, \eta_{hi}]` around the first failure is
    then refined by ``bisections`` bisection steps, done as rounds of :math:`2^b - 1` equally spaced interior
    points (b ≤ ``per_round`` steps per round), keeping the last point before the first failure. The same
    bracket as sequential bisection when convergence is monotone in η; where it is not, the first failure
    wins (conservative). Returns ``(eta_lo, info)`` with ``info``: ``eta0``, ``gd_runs``, ``bracket``.
    """
    eta0 = check_positive("eta0", eta0)
    bisections = check_int("bisections", bisections, minimum=0)
    max_doublings = check_int("max_doublings", max_doublings, minimum=1)
    per_round = check_int("per_round", per_round, minimum=1)
    runs = 0

    def run(cands: list[float]) -> list[bool]:
        nonlocal runs
        runs += len(cands)
        return [bool(c) for c in converges(cands)]

    up = [eta0 * 2.0**j for j in range(max_doublings)]
    ok = run(up)
    m = _first_run(ok)
    if m == 0:  # eta0 fails: halve until one converges
        down = [eta0 * 2.0 ** (-j) for j in range(1, max_doublings + 1)]
        okd = run(down)
        if not any(okd):
            raise RuntimeError(f"bracket_max_lr: no step size down to {down[-1]:.3g} converged")
        j = okd.index(True)
        lo, hi = down[j], (down[j - 1] if j else eta0)
    elif m == len(up):
        raise RuntimeError(f"bracket_max_lr: every step size up to {up[-1]:.3g} converged (max_doublings)")
    else:
        lo, hi = up[m - 1], up[m]
    left = bisections
    while left > 0:
        b = min(per_round, left)
        parts = 2**b
        cands = [lo + (hi - lo) * i / parts for i in range(1, parts)]
        okc = run(cands)
        j = _first_run(okc)
        lo, hi = (cands[j - 1] if j else lo), (cands[j] if j < len(cands) else hi)
        left -= b
    return lo, {"eta0": eta0, "gd_runs": runs, "bracket": (lo, hi)}


def max_stable_lr(
    x: Tensor,
    y: Tensor,
    alpha: float,
    *,
    max_steps: int = 20_000,
    tol: float = 1e-6,
    bisections: int = 6,
    max_doublings: int = 8,
    check: Callable[[], None] | None = None,
) -> tuple[float, dict[str, Any]]:
    r"""η_max: the largest step size at which GD on the DLN converges (loss < ``tol`` in ``max_steps``).

    The spec's probe: start at :math:`\eta_0 = 2/S_0` (:math:`S_0` the exact sharpness at initialisation),
    double until a run fails, then ``bisections`` bisection steps, batched as in :func:`bracket_max_lr`
    (rows of :func:`dln_gd`). Returns ``(eta_max, info)`` with ``info``: ``s0``, ``eta0``, ``gd_runs`` (GD
    runs made) and the final ``bracket``.
    """
    x = _check_matrix("x", x)
    y = _check_targets("y", y, x.shape[0])
    alpha = check_positive("alpha", alpha)
    u0 = torch.full((x.shape[1],), alpha, dtype=x.dtype)
    s0 = float(dln_sharpness(u0, u0, x, y.to(x.dtype)))

    def converges(cands: list[float]) -> tuple[bool, ...]:
        return dln_gd(x, y, cands, alpha, max_steps=max_steps, tol=tol, check=check).converged

    eta, info = bracket_max_lr(converges, 2.0 / s0, bisections=bisections, max_doublings=max_doublings)
    return eta, {"s0": s0, **info}


def lr_grid(
    eta_max: float, low: Sequence[float] = (0.01, 0.1), top: tuple[float, float] = (0.3, 1.0), n_top: int = 10
) -> list[float]:
    """The spec's η grid: ``low``·η_max plus ``n_top`` points evenly spaced in ``top``·η_max (ascending).

    In the gradient-flow regime the norm and sharpness barely change, so most points go near η_max, where
    the EoS behaviour (S ≈ 2/η) appears.

    >>> [round(v, 3) for v in lr_grid(1.0, n_top=3)]
    [0.01, 0.1, 0.3, 0.65, 1.0]
    """
    eta_max = check_positive("eta_max", eta_max)
    n_top = check_int("n_top", n_top, minimum=1)
    lo_f, hi_f = (check_positive("top", t) for t in top)
    if hi_f < lo_f:
        raise ValueError(f"top: must be (low, high) with low <= high, got {top!r}")
    fr = [lo_f] if n_top == 1 else [lo_f + (hi_f - lo_f) * i / (n_top - 1) for i in range(n_top)]
    return sorted([check_positive("low", f) * eta_max for f in low] + [f * eta_max for f in fr])


# ------------------------------------------------------------------------------------ reference solutions
def min_l1_interpolator(x: Tensor, y: Tensor) -> Tensor:
    r"""The minimum-ℓ1 interpolator :math:`\arg\min\{\lVert w\rVert_1 : Xw = y\}` (basis pursuit).

    Solved as the linear program :math:`\min \mathbf 1^\top(p + q)` s.t. :math:`X(p - q) = y`, :math:`p, q
    \ge 0` with ``scipy.optimize.linprog`` (HiGHS). ``ValueError`` if the system has no solution.
    """
    import numpy as np
    from scipy.optimize import linprog

    x = _check_matrix("x", x)
    y = _check_targets("y", y, x.shape[0])
    a = x.detach().cpu().double().numpy()
    b = y.detach().cpu().double().numpy()
    d = a.shape[1]
    res = linprog(
        np.ones(2 * d), A_eq=np.hstack([a, -a]), b_eq=b, bounds=(0, None), method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )  # fmt: skip
    if res.status != 0:
        raise ValueError(f"y: no interpolator found by linprog ({res.message})")
    w = res.x[:d] - res.x[d:]
    return torch.as_tensor(w, dtype=x.dtype)


def min_l2_interpolator(x: Tensor, y: Tensor) -> Tensor:
    """The minimum-ℓ2 interpolator :math:`X^+ y` (pseudo-inverse; GD on the linear model from 0)."""
    x = _check_matrix("x", x)
    y = _check_targets("y", y, x.shape[0])
    return torch.linalg.pinv(x) @ y.to(x.dtype)


def paired_mse_difference(pred_a: Tensor, pred_b: Tensor, target: Tensor) -> tuple[float, float]:
    """Mean and SE of the per-point differences of squared errors, (a - target)² - (b - target)².

    Positive: ``a`` is worse. The SE is sd / sqrt(n) over the points (the same points for both: paired).
    """
    check_type("pred_a", pred_a, Tensor)
    check_type("pred_b", pred_b, Tensor)
    check_type("target", target, Tensor)
    if pred_a.shape != target.shape or pred_b.shape != target.shape or target.dim() != 1:
        raise ValueError(f"pred_b: predictions and target must share a 1-D shape, got {tuple(target.shape)}")
    if target.numel() < 2:
        raise ValueError("target: need at least two points for an SE")
    diff = (pred_a - target) ** 2 - (pred_b - target) ** 2
    return float(diff.mean()), float(diff.std(unbiased=True) / math.sqrt(diff.numel()))


# ------------------------------------------------------------------------------------------------ the sweep
@dataclass(frozen=True, eq=False)
class LRSweep:
    """The result of :func:`lr_sweep`: one record per (η, seed), plus each run's loss trace.

    Attributes:
        records: rows with ``lr``, ``lr_frac`` (η/η_max, NaN for a given grid), ``seed``, ``status`` (one of
            :data:`RUN_STATUSES`), ``converged``, ``steps``, ``loss``, ``norm_l1`` (‖w‖₁), ``norm_l2``
            (‖θ‖₂²), ``sharpness`` (exact λ_max), ``lr_x_sharpness`` (η·S), ``val_mse`` and ``test_mse``.
        traces: (lr, seed) -> the run's training-loss :class:`~optarium._core.Trace`.
        eta_max: seed -> η_max (NaN for a given grid).
    """

    records: tuple[Mapping[str, Any], ...]
    traces: Mapping[tuple[float, int], Trace] = field(default_factory=dict)
    eta_max: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(MappingProxyType(dict(r)) for r in self.records))
        object.__setattr__(self, "traces", MappingProxyType(dict(self.traces)))
        object.__setattr__(self, "eta_max", MappingProxyType(dict(self.eta_max)))

    def column(self, name: str, *, converged_only: bool = False) -> list[Any]:
        """The values of ``name`` over the records (of converged runs only if asked), in record order."""
        return [r[name] for r in self.records if (r["converged"] or not converged_only)]


def _resolve(obj: Any, seed: int, name: str) -> Any:
    if obj is None:
        return None
    return obj(seed) if callable(obj) else obj


def _mse(w: Tensor, data: tuple[Tensor, Tensor] | None) -> list[float]:
    if data is None:
        return [math.nan] * w.shape[0]
    xx, yy = data
    r = w @ xx.T.to(w.dtype) - yy.to(w.dtype)
    return (r * r).mean(-1).tolist()


def lr_sweep(
    model_factory: Callable[..., DiagonalLinearNet],
    data: tuple[Tensor, Tensor] | Callable[[int], tuple[Tensor, Tensor]],
    test: tuple[Tensor, Tensor] | Callable[[int], tuple[Tensor, Tensor]] | None = None,
    *,
    val: tuple[Tensor, Tensor] | Callable[[int], tuple[Tensor, Tensor]] | None = None,
    lrs: str | Sequence[float] = "auto",
    max_steps: int = 20_000,
    tol: float = 1e-6,
    seeds: Sequence[int] = (0,),
    record_every: int = 100,
    check: Callable[[], None] | None = None,
) -> LRSweep:
    """The norm–sharpness protocol on DLNs: GD for every (η, seed), then norms, sharpness and errors.

    Args:
        model_factory: returns the :class:`DiagonalLinearNet` to train (called with the seed if it takes
            one argument, else with none); its ``alpha`` and its current (u, v) are the starting point.
        data: the training set ``(X, y)``, or a function of the seed returning it.
        test, val: evaluation sets (same forms; optional), scored by the MSE of the final regressor.
        lrs: ``"auto"`` (the grid :func:`lr_grid` around :func:`max_stable_lr`, probed per seed) or the step
            sizes. max_steps, tol: GD's cap and loss tolerance. seeds: the seeds.
        record_every: loss-trace spacing in steps.

    Every run is recorded, whatever its status; converged, not-converged and diverged runs are told apart by
    ``status`` (non-converged runs are reported, never dropped). The sharpness is the exact λ_max at the
    final iterate (NaN for diverged runs).
    """
    if isinstance(lrs, str):
        check_choice("lrs", lrs, ("auto",))
        grid = None
    else:
        grid = _check_lrs("lrs", lrs)
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    for s in seeds:
        check_int("seeds", s, minimum=0)
    if not callable(model_factory):
        raise TypeError(f"model_factory: must be callable, got {type(model_factory).__name__}")
    records: list[dict[str, Any]] = []
    traces: dict[tuple[float, int], Trace] = {}
    eta_maxes: dict[int, float] = {}
    import inspect

    takes_seed = len(inspect.signature(model_factory).parameters) >= 1
    for seed in seeds:
        net = model_factory(seed) if takes_seed else model_factory()
        check_type("model_factory", net, DiagonalLinearNet)
        x, y = _resolve(data, seed, "data")
        x = _check_matrix("data", x)
        y = _check_targets("data", y, x.shape[0])
        if x.shape[0] >= x.shape[1]:
            warnings.warn(
                f"data: n = {x.shape[0]} >= d = {x.shape[1]}: not overparameterised, the interpolator is "
                "unique and the implicit biases cannot differ",
                stacklevel=2,
            )
        if grid is None:
            eta_max, _ = max_stable_lr(x, y, net.alpha, max_steps=max_steps, tol=tol, check=check)
            seed_grid = lr_grid(eta_max)
        else:
            eta_max, seed_grid = math.nan, grid
        eta_maxes[seed] = eta_max
        runs = dln_gd(
            x, y, seed_grid, net.alpha, max_steps=max_steps, tol=tol, record_every=record_every,
            u0=net.u.detach(), v0=net.v.detach(), check=check,
        )  # fmt: skip
        w = runs.effective_weight()
        sharp = dln_sharpness(runs.u, runs.v, x, y.to(x.dtype))
        val_mse = _mse(w, _resolve(val, seed, "val"))
        test_mse = _mse(w, _resolve(test, seed, "test"))
        for i, lr in enumerate(seed_grid):
            diverged = runs.status[i] == "diverged"
            s = math.nan if diverged else float(sharp[i])
            records.append(
                {
                    "lr": lr,
                    "lr_frac": lr / eta_max if math.isfinite(eta_max) else math.nan,
                    "seed": seed,
                    "status": runs.status[i],
                    "converged": runs.status[i] == "converged",
                    "steps": runs.steps[i],
                    "loss": runs.loss[i],
                    "norm_l1": math.nan if diverged else float(w[i].abs().sum()),
                    "norm_l2": math.nan if diverged else float((runs.u[i] ** 2 + runs.v[i] ** 2).sum()),
                    "sharpness": s,
                    "lr_x_sharpness": lr * s,
                    "val_mse": math.nan if diverged else val_mse[i],
                    "test_mse": math.nan if diverged else test_mse[i],
                }
            )
            if runs.traces:
                traces[(lr, seed)] = runs.traces[i]
    return LRSweep(tuple(records), traces, eta_maxes)


# ------------------------------------------------------------------------------------------------ the MLP
@dataclass(frozen=True, eq=False)
class MLPRuns:
    """Full-batch GD runs of a one-hidden-layer tanh MLP, one row per step size.

    Attributes:
        lrs, status, steps, loss: as in :class:`DLNRuns`; initial_loss: per row, the loss at step 0.
        params: the final stacked parameters ``(W1 [K, p, h], b1 [K, 1, h], W2 [K, h, c], b2 [K, 1, c])``.
        init: the initial parameters (one set, shared by every row).
        traces: per row, the training loss every ``record_every`` steps.
    """

    lrs: tuple[float, ...]
    status: tuple[str, ...]
    steps: tuple[int, ...]
    loss: tuple[float, ...]
    initial_loss: tuple[float, ...]
    params: tuple[Tensor, ...]
    init: tuple[Tensor, ...]
    traces: tuple[Trace, ...] = ()

    @property
    def converged(self) -> tuple[bool, ...]:
        """Per row, whether the run converged."""
        return tuple(s == "converged" for s in self.status)

    def row(self, i: int) -> tuple[Tensor, ...]:
        """The parameters of row ``i`` (``W1 [p, h]``, ``b1 [h]``, ``W2 [h, c]``, ``b2 [c]``)."""
        w1, b1, w2, b2 = self.params
        return w1[i], b1[i, 0], w2[i], b2[i, 0]


def _mlp_init(p: int, h: int, c: int, generator: torch.Generator, dtype: torch.dtype) -> tuple[Tensor, ...]:
    # torch.nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases
    def uni(shape: tuple[int, ...], fan_in: int) -> Tensor:
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1) * bound

    return uni((p, h), p), uni((h,), p), uni((h, c), h), uni((c,), h)


def _mlp_loss_rows(params: Sequence[Tensor], x: Tensor, y: Tensor) -> Tensor:
    w1, b1, w2, b2 = params
    k = w1.shape[0]
    hid = torch.tanh(torch.baddbmm(b1, x.expand(k, *x.shape), w1))
    out = torch.baddbmm(b2, hid, w2)
    return 0.5 * ((out - y) ** 2).sum(-1).mean(-1)


def mlp_gd(
    x: Tensor,
    y: Tensor,
    lrs: Sequence[float],
    *,
    hidden: int = 256,
    seed: int = 0,
    max_steps: int = 10_000,
    tol: float = 1e-3,
    record_every: int = 0,
    check: Callable[[], None] | None = None,
) -> MLPRuns:
    r"""Full-batch GD on :math:`f(x) = W_2^\top\tanh(W_1^\top x + b_1) + b_2` with the loss
    :math:`\frac1{2n}\sum_i\lVert f(x_i) - y_i\rVert^2`, one row per step size, all rows from one init.

    The K rows are one batched program (stacked weights, ``torch.baddbmm``; the gradient of the sum of the
    row losses is each row's own gradient); a row that stops is removed from the batch. Stopping and statuses
    as in :func:`dln_gd` with the loss checked every step (loss < ``tol``: converged; > :data:`BLOWUP` or
    non-finite: diverged, parameters set to NaN). The initialisation is ``nn.Linear``'s default, drawn from
    ``seed``. Iterates equal ``torch.optim.SGD`` on :func:`mlp_module` (tested). dtype follows ``x``.
    """
    x = _check_matrix("x", x)
    check_type("y", y, Tensor)
    if y.dim() != 2 or y.shape[0] != x.shape[0]:
        raise ValueError(f"y: must be [n, c] with n = {x.shape[0]}, got shape {tuple(y.shape)}")
    lr_list = _check_lrs("lrs", lrs)
    hidden = check_int("hidden", hidden, minimum=1)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    tol = check_positive("tol", tol)
    record_every = check_int("record_every", record_every, minimum=0)
    k, dtype = len(lr_list), x.dtype
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    init = _mlp_init(x.shape[1], hidden, y.shape[1], gen, dtype)
    w1, b1, w2, b2 = init
    params = [
        w1.expand(k, -1, -1).clone(),
        b1.view(1, 1, -1).expand(k, 1, -1).clone(),
        w2.expand(k, -1, -1).clone(),
        b2.view(1, 1, -1).expand(k, 1, -1).clone(),
    ]
    final: list[list[Tensor] | None] = [None] * k
    for p in params:
        p.requires_grad_(True)
    lr_all = torch.tensor(lr_list, dtype=dtype).view(k, 1, 1)
    y = y.to(dtype)
    rows_idx = list(range(k))  # original row of each batch row
    status = ["not converged"] * k
    steps = [max_steps] * k
    final_loss = [math.nan] * k
    loss0 = [math.nan] * k
    rows: list[list[tuple[int, float]]] = [[] for _ in range(k)]
    for t in range(max_steps + 1):
        loss = _mlp_loss_rows(params, x, y)
        lv = loss.detach().tolist()
        if t == 0:
            loss0 = list(lv)
        keep: list[int] = []
        for j, i in enumerate(rows_idx):
            val = lv[j]
            if record_every and t % record_every == 0:
                rows[i].append((t, val))
            conv, bad = val < tol, not (val <= BLOWUP)
            if conv or bad or t == max_steps:
                if conv or bad:
                    status[i] = "converged" if conv else "diverged"
                    steps[i] = t
                final_loss[i] = val
                if record_every and t % record_every != 0:
                    rows[i].append((t, val))
                final[i] = [p[j].detach().clone() for p in params]
                if bad:
                    final[i] = [torch.full_like(q, math.nan) for q in final[i]]
            else:
                keep.append(j)
        if not keep or t == max_steps:
            break
        if len(keep) < len(rows_idx):
            sel = torch.tensor(keep)
            rows_idx = [rows_idx[j] for j in keep]
            params = [p.detach()[sel].clone().requires_grad_(True) for p in params]
            loss = _mlp_loss_rows(params, x, y)
        if check is not None and t % 200 == 0:
            check()
        grads = torch.autograd.grad(loss.sum(), params)
        lr = lr_all[torch.tensor(rows_idx)]
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(lr * g)
    traces = tuple(
        Trace(steps=tuple(s for s, _ in rs), metrics={"loss": tuple(val for _, val in rs)}) for rs in rows
    ) if record_every else ()  # fmt: skip
    done = [f for f in final if f is not None]
    stacked = tuple(torch.stack([f[q] for f in done]) for q in range(4))
    return MLPRuns(
        tuple(lr_list), tuple(status), tuple(steps), tuple(final_loss), tuple(loss0), stacked, init, traces
    )


def mlp_module(w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> nn.Sequential:
    """One MLP row as ``nn.Sequential(Linear, Tanh, Linear)`` with copies of the given parameters.

    ``w1`` [p, h], ``b1`` [h], ``w2`` [h, c], ``b2`` [c] (the layout of :class:`MLPRuns`); dtype follows them.
    """
    for name, t in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        check_type(name, t, Tensor)
    if w1.dim() != 2:
        raise ValueError(f"w1: must be [p, h], got shape {tuple(w1.shape)}")
    if w2.dim() != 2 or w2.shape[0] != w1.shape[1]:
        raise ValueError(f"w2: must be [h, c] with h = {w1.shape[1]}, got shape {tuple(w2.shape)}")
    if b1.shape != (w1.shape[1],):
        raise ValueError(f"b1: must have shape ({w1.shape[1]},), got {tuple(b1.shape)}")
    if b2.shape != (w2.shape[1],):
        raise ValueError(f"b2: must have shape ({w2.shape[1]},), got {tuple(b2.shape)}")
    p, h = w1.shape
    c = w2.shape[1]
    lin1 = nn.Linear(p, h, dtype=w1.dtype)
    lin2 = nn.Linear(h, c, dtype=w2.dtype)
    with torch.no_grad():
        lin1.weight.copy_(w1.T)
        lin1.bias.copy_(b1)
        lin2.weight.copy_(w2.T)
        lin2.bias.copy_(b2)
    return nn.Sequential(lin1, nn.Tanh(), lin2)
