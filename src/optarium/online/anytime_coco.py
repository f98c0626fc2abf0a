r"""Anytime online convex optimization with adversarial constraints (anytime COCO), and its baselines.

Paper: Dhruv Sarkar, Abhishek Sinha, "Optimal Anytime Algorithms for Online Convex Optimization with
Adversarial Constraints", ICML 2026, arXiv:2510.22579. Known-horizon predecessor: Sinha & Vaze, "Optimal
Algorithms for Online Convex Optimization with Adversarial Constraints", NeurIPS 2024, arXiv:2310.18955.

**Setting.** Round :math:`t`: play :math:`x_t \in X` (convex, compact, diameter :math:`D`); the adversary
reveals convex :math:`G`-Lipschitz :math:`f_t` (cost) and :math:`g_t` (constraint, :math:`g_t(x) \le 0`
feasible). Regret against the best fixed point feasible for every round, and the cumulative constraint
violation :math:`\mathrm{CCV}_t = \sum_{s\le t} (g_s(x_s))_+`; the paper's bounds, :math:`O(\sqrt t)` regret
and :math:`\tilde O(\sqrt t)` CCV, hold for every :math:`t` without knowing a horizon.

**Algorithm** (:class:`AnytimeCOCO`). With :math:`\beta = 1/(2GD)`, :math:`\tilde f_t = \beta f_t` and
:math:`\tilde g_t = \beta\,(g_t)_+` (non-negative, :math:`1/(2D)`-Lipschitz), a time-varying Lyapunov
function :math:`\Phi_t(Q) = e^{\lambda_t Q} - 1` with a non-increasing, horizon-free :math:`\lambda_t`,
and :math:`\lambda_0 := \lambda_1`, :math:`Q(0) = 0`:

.. math::

    Q(t) &= \tfrac{\lambda_{t-1}}{\lambda_t}\, Q(t-1) + \tilde g_t(x_t)
        \qquad(\text{so } \lambda_t Q(t) = \textstyle\sum_{s\le t} \lambda_s \tilde g_s(x_s)),\\
    \nabla_t &= \nabla \tilde f_t(x_t) + \Phi_t'(Q(t))\, \nabla \tilde g_t(x_t),
        \qquad \Phi_t'(Q) = \lambda_t e^{\lambda_t Q},\\
    x_{t+1} &= \Pi_X\bigl(x_t - \eta_t \nabla_t\bigr), \qquad
        \eta_t = D / \sqrt{2 \textstyle\sum_{s\le t} \|\nabla_s\|^2}

(adaptive AdaGrad-norm OGD on the surrogate :math:`\hat f_t = \tilde f_t + \Phi_t'(Q(t))\,\tilde g_t`,
the same step as :class:`optarium.online.OnlineGradientDescent`). Since :math:`\lambda_s \ge \lambda_t`,
:math:`Q(t) \ge \sum_{s\le t}\tilde g_s(x_s)` (the queue bounds the normalised CCV) and
:math:`\Phi_t(Q(t))` is non-decreasing in :math:`t`.

**What is found and what is reconstructed.** Found (paper abstract/introduction and its summaries): the
time-varying Lyapunov function :math:`e^{\lambda_t x} - 1` with :math:`\lambda_t` decreasing, the queue
with the multiplicative correction :math:`\lambda_{t-1}/\lambda_t`, an adaptive OCO learner on surrogate
costs; the known-horizon algorithm (Sinha & Vaze) with a fixed :math:`\lambda = 1/(2\sqrt T)`.
Reconstructed (the paper's algorithm box was not readable here): the default schedule
:math:`\lambda_t = 1/(2\sqrt t)` (the anytime analogue of :math:`1/(2\sqrt T)`; ``lam_schedule`` exposes
it), the surrogate's penalty weight :math:`\Phi_t'(Q(t))` (mirroring the known-horizon algorithm), and the
normalisation constants. Not implemented: the dynamic-regret and optimistic extensions.

**Numerics.** :math:`e^{\lambda_t Q}` is evaluated with its exponent capped at ``exp_cap`` (default 300,
at most 350): the penalty weight may grow very large on purpose, never to ``inf``. The spec suggested a cap
of 700 (below :math:`e^{709.78}`, float64's overflow), but AdaGrad squares the surrogate gradient, so
:math:`e^{700}` overflows :math:`\|\nabla_t\|^2` to ``inf`` (our overflow test found it); the cap must keep
:math:`e^{2\,\mathrm{cap}}` finite. A non-finite surrogate gradient raises ``ValueError``.
The state is numpy float64 and the per-round work runs in numpy: the problems of this method have
4-81 coordinates and :math:`10^5`-:math:`10^6` strictly sequential rounds, where torch's per-operation
overhead (microseconds per op, about ten ops per round) would dominate the arithmetic several times over.
Tensors are accepted and returned at the API edge (``predict`` returns the first point's dtype and device).

**Three ways to feed rounds.** The online contract's ``update(loss_fn, constraint_fn)`` (differentiable
closures; the gradients are taken with autograd), ``update_gradients(f_grad, g_value, g_grad)`` (numpy
arrays or tensors: the cost gradient, the constraint value and gradient at the played point), and
``play_linear(f_grads, g_grads, g_offsets)`` (``n`` rounds of linear costs and constraints in one call, the
constraint evaluated at each played point; the experiment's path, about 20x faster per round than the
autograd path, see ``benchmarks/anytime_coco.py``). All three run the same update rule.

**Baselines in this module.** :class:`SinhaVazeCOCO` (fixed :math:`\lambda = 1/(2\sqrt T)`, known
horizon; it is :class:`AnytimeCOCO` with a constant schedule, for which the queue correction is 1),
:class:`DoublingTrick` (restart a known-horizon learner at :math:`t = 2^k` with horizon :math:`2^k`),
:class:`VirtualQueueOGD` (drift-plus-penalty primal-dual OGD in the style of Yu & Neely 2017, with the
horizon-free choices :math:`V_t = \sqrt t`, :math:`\alpha_t = t`, ours) and :class:`ConstraintAgnosticOGD`
(AdaGrad-norm OGD on the costs only; the control).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from optarium._core.result import Trace
from optarium._core.validation import check_int, check_positive, check_type
from optarium.online.learner import LossFn

__all__ = [
    "AnytimeCOCO",
    "ConstraintAgnosticOGD",
    "DoublingTrick",
    "Simplex",
    "SinhaVazeCOCO",
    "VirtualQueueOGD",
    "default_lam_schedule",
    "project_simplex",
]

ArrayLike = Any  # numpy array or torch tensor


# ------------------------------------------------------------------------------------------- the simplex
def project_simplex(v: ArrayLike) -> ArrayLike:
    r"""Euclidean projection onto the probability simplex along the last axis (sort-based).

    :math:`\Pi(v)_i = \max(v_i - \theta, 0)` with :math:`\theta = (\sum_{j\le\rho} u_j - 1)/\rho`, ``u``
    the entries sorted in decreasing order and :math:`\rho` the largest :math:`j` with
    :math:`u_j - (\sum_{i\le j} u_i - 1)/j > 0` (Held, Wolfe & Crowder 1974; Duchi et al. 2008). Accepts a
    numpy array or a torch tensor of shape ``(..., d)`` and returns the same kind, dtype and device.

    >>> project_simplex(np.array([0.2, 0.2, 1.6])).tolist()
    [0.0, 0.0, 1.0]
    >>> project_simplex(np.array([0.5, 0.5, 1.0])).round(4).tolist()
    [0.1667, 0.1667, 0.6667]
    """
    if isinstance(v, torch.Tensor):
        u = torch.sort(v, dim=-1, descending=True).values
        css = u.cumsum(-1) - 1.0
        k = torch.arange(1, v.shape[-1] + 1, dtype=v.dtype, device=v.device)
        rho = (u - css / k > 0).sum(-1, keepdim=True).clamp_min(1)
        theta = css.gather(-1, rho - 1) / rho.to(v.dtype)
        return (v - theta).clamp_min(0.0)
    v = np.asarray(v, dtype=np.float64)
    if v.ndim == 1 and v.shape[0] <= 32:  # the per-round case: a short loop beats numpy's call overhead
        s, theta = 0.0, 0.0
        for j, uj in enumerate(sorted(v.tolist(), reverse=True), 1):
            s += uj
            if uj * j > s - 1.0:
                theta = (s - 1.0) / j
        return np.maximum(v - theta, 0.0)
    if v.ndim == 1:
        u = np.sort(v)[::-1]
        css = np.cumsum(u)
        rho = max(int(np.count_nonzero(u * np.arange(1.0, v.shape[0] + 1.0) > css - 1.0)), 1)
        return np.maximum(v - (css[rho - 1] - 1.0) / rho, 0.0)
    u = -np.sort(-v, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    k = np.arange(1, v.shape[-1] + 1, dtype=np.float64)
    rho = np.maximum((u - css / k > 0).sum(-1, keepdims=True), 1)
    theta = np.take_along_axis(css, rho - 1, -1) / rho
    return np.maximum(v - theta, 0.0)


class Simplex:
    r"""The probability simplex :math:`\Delta_d = \{x \ge 0, \sum_i x_i = 1\}` as an online domain.

    ``project`` (:func:`project_simplex`, tensors or arrays), ``contains``, ``diameter`` (:math:`\sqrt 2`)
    and ``argmin_linear`` (the vertex of the smallest coordinate), as the domains of
    :mod:`optarium.online.domains`.
    """

    def diameter(self, dim: int) -> float:
        r""":math:`\sqrt 2` (the distance between two vertices), for ``dim >= 2``."""
        return math.sqrt(2.0)

    def project(self, x: ArrayLike) -> ArrayLike:
        """:func:`project_simplex`."""
        return project_simplex(x)

    project_numpy = staticmethod(project_simplex)

    def contains(self, x: torch.Tensor, atol: float = 1e-6) -> bool:
        """Whether every point is non-negative and sums to one (up to ``atol``)."""
        return bool((x >= -atol).all() and ((x.sum(-1) - 1.0).abs() <= atol).all())

    def argmin_linear(self, c: torch.Tensor) -> torch.Tensor:
        r""":math:`e_{\arg\min_i c_i}`."""
        out = torch.zeros_like(c)
        out[int(torch.argmin(c))] = 1.0
        return out


def default_lam_schedule(t: int) -> float:
    r""":math:`\lambda_t = 1/(2\sqrt t)`, the horizon-free analogue of Sinha & Vaze's :math:`1/(2\sqrt T)`."""
    return 0.5 / math.sqrt(t)


# ------------------------------------------------------------------------------------------- shared base
class _NumpyLearner:
    """State in numpy float64; ``predict`` in the first point's dtype/device; autograd ``update``."""

    def __init__(self, x0: torch.Tensor, domain: Any, diameter: float | None) -> None:
        check_type("x0", x0, torch.Tensor)
        if x0.ndim != 1 or not x0.is_floating_point():
            raise ValueError(f"x0: must be a 1-d floating tensor, got shape {tuple(x0.shape)} {x0.dtype}")
        if not (hasattr(domain, "project") and hasattr(domain, "diameter")):
            raise TypeError(f"domain: must have project() and diameter(), got {type(domain).__name__}")
        self.domain = domain
        self.dim = int(x0.shape[0])
        self.diameter = (
            float(domain.diameter(self.dim)) if diameter is None else check_positive("diameter", diameter)
        )
        check_positive("diameter", self.diameter)
        self._dtype, self._device = x0.dtype, x0.device
        proj = getattr(domain, "project_numpy", None)
        self._project: Callable[[np.ndarray], np.ndarray] = proj if callable(proj) else self._torch_project
        self._x0 = self._project(x0.detach().cpu().double().numpy().copy())
        self.x = self._x0.copy()
        self.t = 0

    def _torch_project(self, v: np.ndarray) -> np.ndarray:
        return self.domain.project(torch.from_numpy(v)).numpy()

    def predict(self) -> torch.Tensor:
        """The current point :math:`x_t` in the first point's dtype and device (no state change)."""
        return torch.from_numpy(self.x.copy()).to(dtype=self._dtype, device=self._device)

    def predict_array(self) -> np.ndarray:
        """The current point as a numpy float64 copy (the fast path)."""
        return self.x.copy()

    def update(self, loss_fn: LossFn, constraint_fn: LossFn | None = None) -> None:
        """Observe the round's cost and constraint (closures, gradients by autograd) and advance a round."""
        x = torch.tensor(self.x, dtype=torch.float64, device=self._device, requires_grad=True)
        with torch.enable_grad():
            (fg,) = torch.autograd.grad(loss_fn(x), x)
            if constraint_fn is None:
                gv, gg = None, None
            else:
                g = constraint_fn(x)
                (gg,) = torch.autograd.grad(g, x)
                gv = float(g.detach())
        self.update_gradients(fg, gv, gg)

    def update_gradients(
        self, f_grad: ArrayLike, g_value: float | None = None, g_grad: ArrayLike = None
    ) -> None:
        raise NotImplementedError


def _array(name: str, v: ArrayLike, dim: int) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().double().numpy()
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (dim,):
        raise ValueError(f"{name}: must have shape ({dim},), got {a.shape}")
    return a


# ------------------------------------------------------------------------------------------- the method
class AnytimeCOCO(_NumpyLearner):
    r"""The anytime COCO learner (see the module docstring for the update rule and what is reconstructed).

    Args:
        x0: the first point (projected onto the domain); its dtype and device are those of ``predict``.
        domain: the feasible set (``project``, ``diameter``; a ``project_numpy`` is used when present,
            e.g. :class:`Simplex`).
        lipschitz: :math:`G`, a bound on the Lipschitz constants of :math:`f_t, g_t` on the domain (on the
            simplex: the norm of the gradient with its mean removed); :math:`\beta = 1/(2GD)`.
        diameter: :math:`D` (default ``domain.diameter(dim)``).
        lam_schedule: :math:`t \mapsto \lambda_t > 0`, non-increasing (default :func:`default_lam_schedule`).
        exp_cap: the cap on the exponent :math:`\lambda_t Q(t)` in :math:`\Phi_t'`.
        record: keep the per-round :attr:`history`.

    >>> lrn = AnytimeCOCO(torch.tensor([0.5, 0.5], dtype=torch.float64), Simplex(), lipschitz=1.0)
    >>> lrn.update_gradients(np.array([1.0, -1.0]), 0.5, np.array([0.0, 0.0]))
    >>> lrn.predict().tolist()
    [0.0, 1.0]
    """

    def __init__(
        self,
        x0: torch.Tensor,
        domain: Any,
        *,
        lipschitz: float,
        diameter: float | None = None,
        lam_schedule: Callable[[int], float] | None = None,
        exp_cap: float = 300.0,
        record: bool = True,
    ) -> None:
        super().__init__(x0, domain, diameter)
        self.lipschitz = check_positive("lipschitz", lipschitz)
        self.exp_cap = check_positive("exp_cap", exp_cap)
        if exp_cap > 350.0:
            raise ValueError(
                f"exp_cap: must be <= 350 (the squared surrogate gradient, ~e^(2 cap), must stay finite), "
                f"got {exp_cap}"
            )
        if lam_schedule is None:
            lam_schedule = default_lam_schedule
        if not callable(lam_schedule):
            raise TypeError(
                f"lam_schedule: must be callable t -> lambda_t, got {type(lam_schedule).__name__}"
            )
        self.lam_schedule = lam_schedule
        self.beta = 1.0 / (2.0 * self.lipschitz * self.diameter)
        self._lam_prev = self._lam(1)
        self.Q = 0.0
        self.grad_sq_sum = 0.0
        self.record = bool(record)
        self._hist: dict[str, list[float]] = {
            k: [] for k in ("violation", "Q", "lam", "lamQ", "penalty", "step_size")
        }

    def _lam(self, t: int) -> float:
        lam = self.lam_schedule(t)
        try:
            lam = float(lam)
        except (TypeError, ValueError):
            raise TypeError(f"lam_schedule: returned {type(lam).__name__} at t = {t}, not a number") from None
        if not (lam > 0 and math.isfinite(lam)):
            raise ValueError(f"lam_schedule: must return a finite value > 0, got {lam!r} at t = {t}")
        return lam

    def update_gradients(
        self, f_grad: ArrayLike, g_value: float | None = None, g_grad: ArrayLike = None
    ) -> None:
        """One round from gradients at the played point: ``f_grad`` = :math:`\\nabla f_t(x_t)`, ``g_value``
        = :math:`g_t(x_t)` and ``g_grad`` = :math:`\\nabla g_t(x_t)` (``None``: no constraint this round)."""
        fg = _array("f_grad", f_grad, self.dim)[None]
        if g_value is None:
            self._rounds(fg, None, None, None)
            return
        gv = float(g_value)
        if not math.isfinite(gv):
            raise ValueError(f"g_value: must be finite, got {gv!r} at t = {self.t + 1}")
        gg = _array("g_grad", g_grad, self.dim)[None] if gv > 0 else np.zeros((1, self.dim))
        self._rounds(fg, gg, None, gv)

    def play_linear(
        self, f_grads: ArrayLike, g_grads: ArrayLike | None = None, g_offsets: ArrayLike | None = None
    ) -> np.ndarray:
        r"""Play ``n`` rounds of linear costs and constraints; return the ``(n, d)`` points played.

        Round :math:`i`: :math:`f_i(x) = \langle a_i, x\rangle` (``f_grads[i]`` = :math:`a_i`) and
        :math:`g_i(x) = \langle b_i, x\rangle + c_i` (``g_grads[i]``, ``g_offsets[i]``; ``None``: no
        constraints). The same update as ``n`` calls of :meth:`update_gradients`, with the constraint's value
        at :math:`x_i` computed here: the fast path for online linear optimization.
        """
        F = np.asarray(f_grads, dtype=np.float64)
        if F.ndim != 2 or F.shape[1] != self.dim:
            raise ValueError(f"f_grads: must have shape (n, {self.dim}), got {F.shape}")
        if g_grads is None:
            return self._rounds(F, None, None, None)
        Gm = np.asarray(g_grads, dtype=np.float64)
        off = np.asarray(g_offsets, dtype=np.float64) if g_offsets is not None else np.zeros(len(F))
        if Gm.shape != F.shape:
            raise ValueError(f"g_grads: must have shape {F.shape}, got {Gm.shape}")
        if off.shape != (len(F),):
            raise ValueError(f"g_offsets: must have shape ({len(F)},), got {off.shape}")
        if not (np.isfinite(F).all() and np.isfinite(Gm).all() and np.isfinite(off).all()):
            raise ValueError("f_grads: the gradients and offsets must be finite")
        return self._rounds(F, Gm, off, None)

    def _uses_constraint(self) -> bool:
        return True

    def _rounds(
        self, F: np.ndarray, Gm: np.ndarray | None, off: np.ndarray | None, g_value: float | None
    ) -> np.ndarray:
        """The update rule over the rows of ``F`` (one round each); ``g_value`` given for a single round."""
        n = F.shape[0]
        X = np.empty((n, self.dim))
        x, Q, S, lam_prev = self.x, self.Q, self.grad_sq_sum, self._lam_prev
        beta, D, cap, proj, sched = self.beta, self.diameter, self.exp_cap, self._project, self._lam
        use_g = self._uses_constraint()
        bF = beta * F
        bG = beta * Gm if Gm is not None else None
        rec = self._hist if self.record else None
        t = self.t
        for i in range(n):
            X[i] = x
            t += 1
            lam = sched(t)
            if lam > lam_prev * (1.0 + 1e-12):
                raise ValueError(
                    f"lam_schedule: must be non-increasing, got {lam!r} > {lam_prev!r} at t = {t}"
                )
            if Gm is None:
                gv = 0.0
            elif g_value is not None:
                gv = g_value
            else:
                gv = float(Gm[i] @ x) + off[i]
            viol = gv if gv > 0.0 else 0.0
            if use_g:
                Q = (lam_prev / lam) * Q + beta * viol
                pen = lam * math.exp(min(lam * Q, cap))
                grad = bF[i] + pen * bG[i] if viol > 0.0 else bF[i]
            else:
                pen = 0.0
                grad = bF[i]
            sq = float(grad @ grad)
            if not math.isfinite(sq):
                raise ValueError(f"f_grad: the surrogate gradient is not finite at t = {t}")
            S += sq
            eta = D / math.sqrt(2.0 * S) if S > 0 else math.inf
            if S > 0:
                x = proj(x - eta * grad)
            lam_prev = lam
            if rec is not None:
                rec["violation"].append(viol)
                rec["Q"].append(Q)
                rec["lam"].append(lam)
                rec["lamQ"].append(lam * Q)
                rec["penalty"].append(pen)
                rec["step_size"].append(eta)
        self.x, self.Q, self.grad_sq_sum, self._lam_prev, self.t = x, Q, S, lam_prev, t
        return X

    def penalty_weight(self, lam: float, Q: float) -> float:
        r""":math:`\Phi_t'(Q) = \lambda_t e^{\min(\lambda_t Q,\ \mathrm{exp\_cap})}`."""
        return lam * math.exp(min(lam * Q, self.exp_cap))

    @property
    def history(self) -> Trace:
        """Per round: raw violation :math:`(g_t(x_t))_+`, ``ccv``, ``Q``, ``lam``, ``lamQ``, the penalty
        weight :math:`\\Phi_t'(Q(t))` and the step size (empty with ``record=False``)."""
        h = self._hist
        n = len(h["Q"])
        metrics = {k: tuple(v) for k, v in h.items()}
        metrics["ccv"] = tuple(np.cumsum(h["violation"]).tolist()) if n else ()
        return Trace(steps=tuple(range(1, n + 1)), metrics=metrics)

    def state_dict(self) -> dict[str, Any]:
        """The state after the rounds played (the history is not part of it)."""
        return {
            "t": self.t,
            "x": self.x.copy(),
            "Q": self.Q,
            "grad_sq_sum": self.grad_sq_sum,
            "lam_prev": self._lam_prev,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the next round is then identical to the saved learner's)."""
        x = np.asarray(state["x"], dtype=np.float64)
        if x.shape != (self.dim,):
            raise ValueError(f"state: x has shape {x.shape}, expected ({self.dim},)")
        self.t = check_int("state['t']", state["t"], minimum=0)
        self.x = x.copy()
        self.Q = float(state["Q"])
        self.grad_sq_sum = float(state["grad_sq_sum"])
        self._lam_prev = float(state["lam_prev"])


class SinhaVazeCOCO(AnytimeCOCO):
    r"""Sinha & Vaze's known-horizon algorithm: :class:`AnytimeCOCO` with :math:`\lambda_t = 1/(2\sqrt T)`.

    With a constant :math:`\lambda` the queue's correction :math:`\lambda_{t-1}/\lambda_t` is 1, so
    :math:`Q(t) = \sum_{s\le t} \tilde g_s(x_s)` and the surrogate is
    :math:`\tilde f_t + \lambda e^{\lambda Q(t)} \tilde g_t`: the algorithm of arXiv:2310.18955 tuned to
    ``horizon`` :math:`T`.
    """

    def __init__(
        self,
        x0: torch.Tensor,
        domain: Any,
        *,
        lipschitz: float,
        horizon: int,
        diameter: float | None = None,
        exp_cap: float = 300.0,
        record: bool = True,
    ) -> None:
        self.horizon = check_int("horizon", horizon, minimum=1)
        lam = 0.5 / math.sqrt(self.horizon)
        super().__init__(
            x0,
            domain,
            lipschitz=lipschitz,
            diameter=diameter,
            lam_schedule=lambda t: lam,
            exp_cap=exp_cap,
            record=record,
        )


class ConstraintAgnosticOGD(AnytimeCOCO):
    """AdaGrad-norm projected OGD on the costs only (the constraint is observed, never used): the control.

    The constraint enters neither the queue nor the step; its violation is still recorded in the history.
    """

    def _uses_constraint(self) -> bool:
        return False


class DoublingTrick:
    r"""Restart a known-horizon learner at :math:`t = 2^k` with horizon :math:`2^k` (epochs 1, 2, 4, ...).

    Args:
        factory: ``factory(x0, horizon) -> learner`` (e.g. a :class:`SinhaVazeCOCO`); each epoch starts
            afresh from ``x0`` (the standard doubling trick: nothing is carried across a restart).
        x0: the first point of every epoch.

    ``restarts`` lists the rounds at which an epoch began.
    """

    def __init__(self, factory: Callable[[torch.Tensor, int], Any], x0: torch.Tensor) -> None:
        if not callable(factory):
            raise TypeError(
                f"factory: must be callable (x0, horizon) -> learner, got {type(factory).__name__}"
            )
        check_type("x0", x0, torch.Tensor)
        self.factory = factory
        self.x0 = x0.detach().clone()
        self.t = 0
        self.epoch = 0
        self.inner = factory(self.x0, 1)
        self.restarts: list[int] = [1]

    def predict(self) -> torch.Tensor:
        """The current epoch's point."""
        return self.inner.predict()

    def predict_array(self) -> np.ndarray:
        """The current epoch's point as a numpy float64 copy."""
        return self.inner.predict_array()

    def _advance(self) -> None:
        self.t += 1
        if self.t + 1 == 2 ** (self.epoch + 1):  # round t + 1 = 2^(k+1) opens epoch k + 1
            self.epoch += 1
            self.inner = self.factory(self.x0, 2**self.epoch)
            self.restarts.append(self.t + 1)

    def update(self, loss_fn: LossFn, constraint_fn: LossFn | None = None) -> None:
        """The current epoch's learner observes the round; an epoch ends after :math:`2^k` rounds."""
        self.inner.update(loss_fn, constraint_fn)
        self._advance()

    def update_gradients(
        self, f_grad: ArrayLike, g_value: float | None = None, g_grad: ArrayLike = None
    ) -> None:
        """The fast path of the current epoch's learner."""
        self.inner.update_gradients(f_grad, g_value, g_grad)
        self._advance()

    def play_linear(
        self, f_grads: ArrayLike, g_grads: ArrayLike | None = None, g_offsets: ArrayLike | None = None
    ) -> np.ndarray:
        """The epochs' learners' ``play_linear`` over the rounds, split at the restarts."""
        F = np.asarray(f_grads, dtype=np.float64)
        out = []
        i = 0
        while i < len(F):
            seg = min(len(F) - i, 2 ** (self.epoch + 1) - 1 - self.t)
            sl = slice(i, i + seg)
            gg = None if g_grads is None else np.asarray(g_grads)[sl]
            go = None if g_offsets is None else np.asarray(g_offsets)[sl]
            out.append(self.inner.play_linear(F[sl], gg, go))
            for _ in range(seg):
                self._advance()
            i += seg
        return np.concatenate(out) if out else np.empty((0, F.shape[1] if F.ndim == 2 else 0))


class VirtualQueueOGD(_NumpyLearner):
    r"""Drift-plus-penalty primal-dual OGD with a virtual queue (Yu & Neely 2017 style), horizon-free.

    On :math:`\tilde f_t = \beta f_t`, :math:`\tilde g_t = \beta g_t` (signed, so the queue drains when
    the point is feasible), :math:`\beta = 1/(2GD)`, with :math:`V_t = \sqrt t` and :math:`\alpha_t = t`
    (the known-horizon choice is :math:`V = \sqrt T, \alpha = T`; the anytime choice is ours):

    .. math::

        x_{t+1} &= \Pi_X\bigl(x_t - (V_t \nabla\tilde f_t(x_t) + Z_t \nabla\tilde g_t(x_t))
            / (2\alpha_t)\bigr),\\
        Z_{t+1} &= \max\bigl(Z_t + \tilde g_t(x_t) + \nabla\tilde g_t(x_t)^\top (x_{t+1} - x_t),\ 0\bigr).
    """

    def __init__(
        self, x0: torch.Tensor, domain: Any, *, lipschitz: float, diameter: float | None = None
    ) -> None:
        super().__init__(x0, domain, diameter)
        self.lipschitz = check_positive("lipschitz", lipschitz)
        self.beta = 1.0 / (2.0 * self.lipschitz * self.diameter)
        self.Z = 0.0

    def update_gradients(
        self, f_grad: ArrayLike, g_value: float | None = None, g_grad: ArrayLike = None
    ) -> None:
        """One primal step and one virtual-queue step from the gradients at the played point."""
        fg = _array("f_grad", f_grad, self.dim)[None]
        if g_value is None:
            self._rounds(fg, None, None)
            return
        gv = float(g_value)
        if not math.isfinite(gv):
            raise ValueError(f"g_value: must be finite, got {gv!r} at t = {self.t + 1}")
        gg = _array("g_grad", g_grad, self.dim)
        self._rounds(fg, gg[None], np.array([gv - float(gg @ self.x)]))

    def play_linear(
        self, f_grads: ArrayLike, g_grads: ArrayLike | None = None, g_offsets: ArrayLike | None = None
    ) -> np.ndarray:
        """``n`` rounds of linear costs and constraints (as :meth:`AnytimeCOCO.play_linear`)."""
        F = np.asarray(f_grads, dtype=np.float64)
        if F.ndim != 2 or F.shape[1] != self.dim:
            raise ValueError(f"f_grads: must have shape (n, {self.dim}), got {F.shape}")
        if g_grads is None:
            return self._rounds(F, None, None)
        Gm = np.asarray(g_grads, dtype=np.float64)
        if Gm.shape != F.shape:
            raise ValueError(f"g_grads: must have shape {F.shape}, got {Gm.shape}")
        off = np.zeros(len(F)) if g_offsets is None else np.asarray(g_offsets, dtype=np.float64)
        return self._rounds(F, Gm, off)

    def _rounds(self, F: np.ndarray, Gm: np.ndarray | None, off: np.ndarray | None) -> np.ndarray:
        n = F.shape[0]
        X = np.empty((n, self.dim))
        x, Z, beta, proj, t = self.x, self.Z, self.beta, self._project, self.t
        for i in range(n):
            X[i] = x
            t += 1
            V, alpha = math.sqrt(t), float(t)
            d = (V * beta) * F[i]
            if Gm is not None:
                gg = beta * Gm[i]
                gv = beta * (float(Gm[i] @ x) + off[i])
                d = d + Z * gg
            x_new = proj(x - d / (2.0 * alpha))
            if Gm is not None:
                Z = max(Z + gv + float(gg @ (x_new - x)), 0.0)
            x = x_new
        self.x, self.Z, self.t = x, Z, t
        return X

    def state_dict(self) -> dict[str, Any]:
        """The state after the rounds played."""
        return {"t": self.t, "x": self.x.copy(), "Z": self.Z}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.t = check_int("state['t']", state["t"], minimum=0)
        self.x = np.asarray(state["x"], dtype=np.float64).copy()
        self.Z = float(state["Z"])


# ------------------------------------------------------------------------------------------- conformance
def online_cases() -> list[Any]:
    """This module's learners as :class:`optarium.testing.online.OnlineCase` s (joined by that module).

    Regret constants :math:`C` of :math:`C D G\\sqrt T` on unconstrained linear losses: the AdaGrad-norm
    learners reduce to adaptive OGD (:math:`\\sqrt 2`; the step is invariant to the scaling by
    :math:`\\beta`); the doubling trick sums that over epochs :math:`2^k` (:math:`2/(\\sqrt 2 - 1)`); the
    primal-dual step :math:`1/(2\\sqrt t)` on :math:`\\beta f` gives :math:`2D^2 + 1/(4D^2)`.
    """
    from optarium.online.domains import Ball
    from optarium.testing.online import OnlineCase

    def make(cls: Any, default_domain: Any, **fixed: Any) -> Any:
        def factory(x0: torch.Tensor, **kw: Any) -> Any:
            args = {"lipschitz": 1.0, **fixed, **kw}
            return cls(x0, args.pop("domain", default_domain), **args)

        return factory

    def doubling(domain: Any) -> Any:
        def factory(x0: torch.Tensor, **kw: Any) -> Any:
            dom = kw.pop("domain", domain)
            G = kw.pop("lipschitz", 1.0)
            SinhaVazeCOCO(x0, dom, lipschitz=G, horizon=1)  # validate the arguments once, up front
            return DoublingTrick(lambda x, h: SinhaVazeCOCO(x, dom, lipschitz=G, horizon=h), x0)

        return factory

    common = [({"lipschitz": -1.0}, "lipschitz"), ({"domain": object()}, "domain")]
    bad_lam = [({"lam_schedule": "fast"}, "lam_schedule"), ({"lam_schedule": lambda t: -1.0}, "lam_schedule")]
    sqrt2 = math.sqrt(2.0)
    ball, simplex = Ball(1.5), Simplex()
    return [
        OnlineCase(
            "anytime-coco-ball",
            make(AnytimeCOCO, ball),
            ball,
            sqrt2,
            invalid=[*common, *bad_lam, ({"diameter": 0.0}, "diameter")],
        ),
        OnlineCase(
            "anytime-coco-simplex", make(AnytimeCOCO, simplex), simplex, sqrt2, invalid=[*common, *bad_lam]
        ),
        OnlineCase(
            "sinha-vaze-coco",
            make(SinhaVazeCOCO, ball, horizon=400),
            ball,
            sqrt2,
            invalid=[*common, ({"horizon": 0}, "horizon")],
        ),
        OnlineCase("doubling-sinha-vaze", doubling(ball), ball, 2.0 / (sqrt2 - 1.0), invalid=common),
        OnlineCase(
            "virtual-queue-ogd",
            make(VirtualQueueOGD, ball),
            ball,
            2 * 3.0**2 + 1 / (4 * 3.0**2),
            invalid=common,
        ),
        OnlineCase(
            "constraint-agnostic-ogd", make(ConstraintAgnosticOGD, simplex), simplex, sqrt2, invalid=common
        ),
    ]
