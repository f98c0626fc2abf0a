r"""Multi-task bilevel learning as equality-constrained multi-objective optimization (ECMO), solved by a
weighted-Chebyshev penalty method, with the linear-scalarisation and MGDA-type penalty baselines.

Paper: Zhiyao Zhang, Myeung Suk Oh, Zhen Qin, Jiaxiang Li, Xin Zhang, Jia (Kevin) Liu, "A Tale of Two
Problems: Multi-Task Bilevel Learning Meets Equality Constrained Multi-Objective Optimization", ICML 2026,
arXiv:2605.09094. What is the paper's (from its abstract and the OpenReview version): the multi-task bilevel
problem with a *generally* convex lower level is rewritten as a single-level ECMO problem that keeps its
solutions, it is solved by a weighted-Chebyshev (WC) penalty method, and sweeping the preference vector over
the simplex explores the Pareto front. What is **reconstructed** (the exact constraint, stationarity notion
and update rule were not found; spec ``shared/papers/mtbl-wc-penalty.md``):

- **ECMO.** Tasks :math:`s = 1..S` share :math:`z = (x, y)`; :math:`y \in \arg\min_{y'} g(x, y')` with
  :math:`g(x, \cdot)` convex is the equality :math:`h(z) = \nabla_y g(x, y) = 0` (``constraint=
  "lower_grad"``) or the value gap :math:`h(z) = g(x, y) - \min_{y'} g(x, y') = 0` (``"value_gap"``, with the
  user's differentiable ``lower_value(x)``).
- **WC penalty.** For a preference :math:`\omega \in \Delta_S`, a reference point :math:`r` and
  :math:`\rho > 0`, :math:`\Psi_{\omega,\rho}(z) = \max_s \omega_s (F_s(z) - r_s) + \tfrac{\rho}{2}
  \lVert h(z)\rVert^2`; the method is the subgradient iteration :math:`z_{t+1} = z_t - \eta\, d_t`,
  :math:`d_t = \omega_{s_t} \nabla F_{s_t}(z_t) + \rho J_h(z_t)^\top h(z_t)` with :math:`s_t` the active task
  (``scalarization="hard"``). ``"smooth"`` replaces the max by :math:`\mu \log\sum_s
  \exp(\omega_s(F_s - r_s)/\mu)` (smooth Tchebycheff, Lin et al. 2024, arXiv:2402.19078); ``"gda"`` is
  :math:`\min_z \max_{\lambda\in\Delta} \sum_s \lambda_s \omega_s (F_s - r_s) + \tfrac{\rho}{2}\lVert
  h\rVert^2` with projected gradient ascent on :math:`\lambda`.
- **Baselines.** ``scalarization="linear"``: the weighted sum :math:`\sum_s \omega_s (F_s - r_s)` with the
  same penalty (cannot reach non-convex parts of a front); :func:`mgda_penalty`: the MGDA direction (the
  min-norm point of the convex hull of the penalised task gradients :math:`\nabla F_s + \rho J_h^\top h`,
  :func:`optarium.convex.simplex_qp` for :math:`S > 2`, the closed form for :math:`S = 2`), which has no
  preference and reaches a front point that depends on its start.
- **Stochastic setting.** ``grad_noise`` adds independent :math:`N(0, \sigma^2 I)` noise to every task
  gradient (the lower level stays exact); ``average="tail"`` returns the average of the second half of the
  iterates.
- **KKT-based Pareto stationarity** (reported in ``extras["kkt_residual"]``): :math:`R(z) =
  \min_{\lambda\in\Delta_S,\mu} \lVert \sum_s \lambda_s \nabla F_s + J_h^\top \mu\rVert^2 + \lVert h\rVert^2`,
  by projecting the task gradients on the orthogonal complement of the range of :math:`J_h^\top` and solving
  the simplex QP. At a fixed :math:`\rho` it floors at :math:`\lVert h(z^*_\rho)\rVert^2 > 0` (penalty bias).

Everything is batched: ``preference`` may be ``(P, S)`` and the iterates ``(P, d)`` advance together (one run
traces a whole front). The problem's oracles (:class:`ECMOProblem`) default to autograd (the penalty
gradient is one double backward); problems with closed forms override them
(:mod:`optarium.problems.multiobjective_bilevel`). dtype and device follow ``x0``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "ECMOProblem",
    "kkt_residual",
    "mgda_penalty",
    "min_norm_weights",
    "project_simplex",
    "scalarized_value",
    "simplex_grid",
    "wc_penalty",
    "wc_penalty_front",
]

Objective = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

SCALARIZATIONS = ("hard", "smooth", "gda", "linear")
#: The metrics that must stay finite (``grad_norm`` is inf at the starting row: no step taken yet).
_WATCH = ("objective", "constraint_violation")


class ECMOProblem:
    """A multi-task bilevel problem written as an equality-constrained multi-objective problem (ECMO).

    Args:
        upper_objectives: the tasks' upper objectives ``F_s(x, y)``, callables of ``x (..., dx)``, ``y (...,
            dy)`` returning ``(...)`` (one value per batch element; the batch elements must not interact).
        lower_objective: ``g(x, y) -> (...)``, convex in ``y``.
        constraint: ``"lower_grad"`` (``h = grad_y g``, the default) or ``"value_gap"`` (``h = g(x, y) -
            lower_value(x)``, one row).
        lower_value: ``x (..., dx) -> min_y g(x, y) (...)``, differentiable in ``x``; needed by
            ``"value_gap"``.

    The oracles below use autograd; a subclass with closed forms overrides :meth:`objectives`,
    :meth:`objective_grads`, :meth:`constraint`, :meth:`penalty_grad` and :meth:`constraint_jacobian`.
    """

    def __init__(
        self,
        upper_objectives: Sequence[Objective],
        lower_objective: Objective | None,
        *,
        constraint: str = "lower_grad",
        lower_value: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        if isinstance(upper_objectives, (str, bytes)) or not isinstance(upper_objectives, Sequence):
            raise TypeError("upper_objectives: must be a sequence of callables (x, y) -> tensor")
        if len(upper_objectives) == 0:
            raise ValueError("upper_objectives: needs at least one objective")
        for f in upper_objectives:
            if not callable(f):
                raise TypeError(f"upper_objectives: entries must be callable, got {type(f).__name__}")
        if lower_objective is not None and not callable(lower_objective):
            raise TypeError(f"lower_objective: must be callable, got {type(lower_objective).__name__}")
        self.constraint_kind = check_choice("constraint", constraint, ("lower_grad", "value_gap"))
        if constraint == "value_gap" and not callable(lower_value):
            raise ValueError("lower_value: constraint='value_gap' needs a callable x -> min_y g(x, y)")
        self.upper_objectives = tuple(upper_objectives)
        self.lower_objective = lower_objective
        self.lower_value = lower_value

    @property
    def n_objectives(self) -> int:
        """The number of tasks S."""
        return len(self.upper_objectives)

    # ------------------------------------------------------------------------------------------ oracles
    def objectives(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(..., S)``: the upper objectives at ``(x, y)``."""
        return torch.stack([f(x, y) for f in self.upper_objectives], -1)

    def objective_grads(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gx (..., S, dx), gy (..., S, dy))``: the gradients of every upper objective."""
        with torch.enable_grad():
            xr, yr = x.detach().requires_grad_(True), y.detach().requires_grad_(True)
            gx, gy = [], []
            for f in self.upper_objectives:
                a, b = torch.autograd.grad(f(xr, yr).sum(), (xr, yr), allow_unused=True)
                gx.append(torch.zeros_like(x) if a is None else a)
                gy.append(torch.zeros_like(y) if b is None else b)
        return torch.stack(gx, -2), torch.stack(gy, -2)

    def first_order(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(F (..., S), gx (..., S, dx), gy (..., S, dy))`` in one call (the solvers' per-step oracle)."""
        gx, gy = self.objective_grads(x, y)
        return self.objectives(x, y), gx, gy

    def first_order_z(self, z: torch.Tensor, dx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(F (..., S), G (..., S, dx + dy))`` at the stacked ``z = (x, y)``: the solvers' per-step oracle.

        The default splits ``z`` and calls :meth:`first_order`; closed-form problems override it.
        """
        F, gx, gy = self.first_order(z[..., :dx], z[..., dx:])
        return F, torch.cat([gx, gy], -1)

    def penalty_grad_z(self, z: torch.Tensor, dx: int) -> torch.Tensor:
        """``J_h^T h`` at the stacked ``z`` ``(..., dx + dy)`` (default: :meth:`penalty_grad`)."""
        px, py = self.penalty_grad(z[..., :dx], z[..., dx:])
        return torch.cat([px, py], -1)

    def _h(self, x: torch.Tensor, y: torch.Tensor, create_graph: bool) -> torch.Tensor:
        if self.lower_objective is None:
            raise TypeError("lower_objective: this problem has no lower objective; override the oracles")
        if self.constraint_kind == "value_gap":
            assert self.lower_value is not None
            return (self.lower_objective(x, y) - self.lower_value(x)).unsqueeze(-1)
        (gy,) = torch.autograd.grad(self.lower_objective(x, y).sum(), (y,), create_graph=create_graph)
        return gy

    def constraint(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``h(x, y)`` ``(..., m)``: ``grad_y g`` (``m = dy``) or the value gap (``m = 1``)."""
        with torch.enable_grad():
            xr, yr = x.detach().requires_grad_(True), y.detach().requires_grad_(True)
            return self._h(xr, yr, create_graph=False).detach()

    def penalty_grad(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_h^T h`` as its ``x`` and ``y`` parts: the gradient of ``||h||^2 / 2`` (a double backward)."""
        with torch.enable_grad():
            xr, yr = x.detach().requires_grad_(True), y.detach().requires_grad_(True)
            h = self._h(xr, yr, create_graph=True)
            px, py = torch.autograd.grad(0.5 * (h**2).sum(), (xr, yr), allow_unused=True)
        return (torch.zeros_like(x) if px is None else px), (torch.zeros_like(y) if py is None else py)

    def constraint_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Jx (..., m, dx), Jy (..., m, dy))``: the Jacobian of ``h`` (one backward per row)."""
        with torch.enable_grad():
            xr, yr = x.detach().requires_grad_(True), y.detach().requires_grad_(True)
            h = self._h(xr, yr, create_graph=True)
            jx, jy = [], []
            for i in range(h.shape[-1]):
                a, b = torch.autograd.grad(h[..., i].sum(), (xr, yr), retain_graph=True, allow_unused=True)
                jx.append(torch.zeros_like(x) if a is None else a)
                jy.append(torch.zeros_like(y) if b is None else b)
        return torch.stack(jx, -2), torch.stack(jy, -2)


# ------------------------------------------------------------------------------------------ preferences
def simplex_grid(
    S: int, k: int = 11, *, dtype: torch.dtype = torch.float64, device: Any = "cpu"
) -> torch.Tensor:
    """Every preference on the simplex whose entries are multiples of ``1/(k-1)``: ``(C(k+S-2, S-1), S)``.

    ``S = 2, k = 11`` gives the 11 preferences (0, 1), (0.1, 0.9), ..., (1, 0) (ordered by the first entry).
    """
    S = check_int("S", S, minimum=1)
    k = check_int("k", k, minimum=2)
    n = k - 1
    rows = []
    # stars and bars: S - 1 bar positions among n + S - 1 slots
    for bars in combinations(range(n + S - 1), S - 1):
        edges = (-1, *bars, n + S - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(S)])
    out = torch.tensor(rows, dtype=dtype, device=device) / n
    return out


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """The Euclidean projection of each row of ``v`` ``(..., S)`` on the probability simplex (by sorting)."""
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise TypeError("v: must be a floating tensor")
    u = torch.sort(v, dim=-1, descending=True).values
    css = u.cumsum(-1) - 1.0
    idx = torch.arange(1, v.shape[-1] + 1, dtype=v.dtype, device=v.device)
    cond = u - css / idx > 0
    rho = (cond * idx).argmax(-1, keepdim=True)  # the last index where cond holds
    theta = css.gather(-1, rho) / (rho + 1).to(v.dtype)
    return (v - theta).clamp_min(0.0)


def _check_preference(preference: Any, S: int, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(preference, torch.Tensor):
        raise TypeError(f"preference: must be a tensor (S,) or (P, S), got {type(preference).__name__}")
    if preference.ndim not in (1, 2) or preference.shape[-1] != S:
        raise ValueError(f"preference: must have shape ({S},) or (P, {S}), got {tuple(preference.shape)}")
    w = preference.to(dtype=like.dtype, device=like.device)
    if not bool(torch.isfinite(w).all()):
        raise ValueError("preference: contains NaN or inf")
    if bool((w < 0).any()):
        raise ValueError("preference: entries must be >= 0")
    if bool(((w.sum(-1) - 1.0).abs() > 1e-6).any()):
        raise ValueError("preference: each row must sum to 1")
    if bool((w == 0).any()):
        warnings.warn(
            "preference: zero entries; the Chebyshev minimiser is then only weakly Pareto optimal",
            UserWarning,
            stacklevel=3,
        )
    return w


def _as_batch(name: str, t: Any, like: torch.Tensor | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"{name}: must be a floating tensor, got {type(t).__name__}")
    if t.ndim not in (1, 2):
        raise ValueError(f"{name}: must have shape (d,) or (P, d), got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or inf")
    if like is not None and (t.dtype != like.dtype or t.device != like.device):
        raise TypeError(f"{name}: must have x0's dtype {like.dtype} and device {like.device}")
    return t


def _ref(ref_point: Any, S: int, like: torch.Tensor) -> torch.Tensor:
    if ref_point is None:
        return torch.zeros(S, dtype=like.dtype, device=like.device)
    r = torch.as_tensor(ref_point, dtype=like.dtype, device=like.device)
    if r.shape != (S,):
        raise ValueError(f"ref_point: must have {S} entries (one per objective), got shape {tuple(r.shape)}")
    if not bool(torch.isfinite(r).all()):
        raise ValueError("ref_point: contains NaN or inf")
    return r


# ------------------------------------------------------------------------------------------ scalarisation
def scalarized_value(
    F: torch.Tensor, preference: torch.Tensor, ref_point: torch.Tensor, scalarization: str, mu: float = 0.01
) -> torch.Tensor:
    """The scalarised upper objective ``(...)`` of objective values ``F (..., S)``.

    ``hard`` / ``gda``: max_s w_s (F_s - r_s); ``smooth``: mu logsumexp(w (F - r) / mu); ``linear``:
    sum_s w_s (F_s - r_s).
    """
    check_choice("scalarization", scalarization, SCALARIZATIONS)
    v = preference * (F - ref_point)
    if scalarization in ("hard", "gda"):
        return v.amax(-1)
    if scalarization == "smooth":
        return mu * torch.logsumexp(v / mu, -1)
    return v.sum(-1)


def _weights(
    F: torch.Tensor, w: torch.Tensor, r: torch.Tensor, scalarization: str, mu: float, lam: torch.Tensor | None
) -> torch.Tensor:
    """The (sub)gradient weights c (..., S) of the scalarisation: d = sum_s c_s grad F_s."""
    v = w * (F - r)
    if scalarization == "hard":
        active = torch.arange(F.shape[-1], device=F.device) == v.argmax(-1, keepdim=True)
        return w * active
    if scalarization == "smooth":
        return w * torch.softmax(v / mu, -1)
    if scalarization == "gda":
        assert lam is not None
        return w * lam
    return w.expand_as(F)


def _combine(c: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cc = c.unsqueeze(-2)
    return (cc @ gx).squeeze(-2), (cc @ gy).squeeze(-2)


def min_norm_weights(G: torch.Tensor, *, method: str = "enumerate") -> torch.Tensor:
    """``argmin_{lambda in simplex} ||sum_s lambda_s G_s||^2`` for gradients ``G (..., S, d)``: ``(..., S)``.

    ``S = 2``: the closed form ``t = clip((g2 - g1).g2 / ||g1 - g2||^2, 0, 1)``. ``S > 2``:
    ``method="enumerate"`` (the per-step default) solves the equality-constrained QP of every face of the
    simplex (2^S - 1 small batched linear solves on the Gram matrix) and keeps the best feasible one, exact
    for a non-degenerate face; ``method="qp"`` calls :func:`optarium.convex.simplex_qp` (interior point with
    an active-set polish; about a thousand times slower per call here, so used for evaluation only).
    """
    check_choice("method", method, ("enumerate", "qp"))
    S = G.shape[-2]
    if S == 1:
        return torch.ones(G.shape[:-1], dtype=G.dtype, device=G.device)
    if S == 2:
        g1, g2 = G[..., 0, :], G[..., 1, :]
        diff = g1 - g2
        den = (diff * diff).sum(-1)
        t = torch.where(den > 0, ((g2 - g1) * g2).sum(-1) / den.clamp_min(torch.finfo(G.dtype).tiny), 0.5)
        t = t.clamp(0.0, 1.0)
        return torch.stack([t, 1.0 - t], -1)
    Q = G @ G.transpose(-1, -2)
    scale = Q.diagonal(dim1=-2, dim2=-1).amax(-1).clamp_min(torch.finfo(G.dtype).tiny)[..., None, None]
    Q = Q / scale
    eye = torch.eye(S, dtype=G.dtype, device=G.device)
    if method == "qp":
        from optarium.convex import simplex_qp

        return simplex_qp(0.5 * (Q + Q.transpose(-1, -2)) + 1e-12 * eye).x.clamp_min(0.0)
    best = torch.full(G.shape[:-2], math.inf, dtype=G.dtype, device=G.device)
    out = torch.zeros(*G.shape[:-2], S, dtype=G.dtype, device=G.device)
    for k in range(1, S + 1):
        for face in combinations(range(S), k):
            idx = torch.tensor(face, device=G.device)
            ridge = 1e-12 * torch.eye(k, dtype=G.dtype, device=G.device)
            Qf = Q.index_select(-2, idx).index_select(-1, idx) + ridge
            # stationarity on the face: Qf lam = nu 1, 1' lam = 1  ->  lam = Qf^-1 1 / (1' Qf^-1 1)
            u = torch.linalg.solve(Qf, torch.ones(*Qf.shape[:-1], dtype=G.dtype, device=G.device))
            lam_f = u / u.sum(-1, keepdim=True)
            ok = (lam_f >= -1e-12).all(-1) & torch.isfinite(lam_f).all(-1)
            val = (lam_f.unsqueeze(-2) @ Qf @ lam_f.unsqueeze(-1)).squeeze(-1).squeeze(-1)
            better = ok & (val < best)
            full = torch.zeros_like(out).index_copy(-1, idx, lam_f.clamp_min(0.0))
            out = torch.where(better.unsqueeze(-1), full, out)
            best = torch.where(better, val, best)
    return out / out.sum(-1, keepdim=True)


def kkt_residual(problem: ECMOProblem, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``R(z) = min_{lambda in simplex, mu} ||sum_s lambda_s grad F_s + J_h^T mu||^2 + ||h||^2`` ``(...)``.

    The minimum over ``mu`` projects the task gradients on the orthogonal complement of the range of
    ``J_h^T`` (a pseudo-inverse, so a rank-deficient ``J_h`` is fine); the minimum over ``lambda`` is the
    min-norm point of their convex hull (:func:`optarium.convex.simplex_qp` for ``S > 2``).
    """
    gx, gy = problem.objective_grads(x, y)
    G = torch.cat([gx, gy], -1)  # (..., S, d)
    jx, jy = problem.constraint_jacobian(x, y)
    J = torch.cat([jx, jy], -1)  # (..., m, d)
    h = problem.constraint(x, y)
    # the component of G orthogonal to the row space of J: G - G J^+ J
    proj = torch.linalg.pinv(J, rtol=1e-10) @ J  # (..., d, d) projector on the row space of J
    Gp = G - G @ proj.transpose(-1, -2)
    lam = min_norm_weights(Gp, method="qp")
    comb = (lam.unsqueeze(-1) * Gp).sum(-2)
    return (comb**2).sum(-1) + (h**2).sum(-1)


# ------------------------------------------------------------------------------------------ solvers
def _setup(
    problem: Any, x0: Any, y0: Any, lr: Any, steps: Any, grad_noise: Any, record_every: Any
) -> tuple[torch.Tensor, torch.Tensor, float, int, float, int]:
    if not isinstance(problem, ECMOProblem):
        raise TypeError(f"problem: must be an ECMOProblem, got {type(problem).__name__}")
    x0 = _as_batch("x0", x0)
    y0 = _as_batch("y0", y0, like=x0)
    if x0.ndim == 2 and y0.ndim == 2 and x0.shape[0] != y0.shape[0]:
        raise ValueError(f"y0: batch size {y0.shape[0]} differs from x0's {x0.shape[0]}")
    lr = check_positive("lr", lr)
    steps = check_int("steps", steps, minimum=0)
    grad_noise = check_nonnegative("grad_noise", grad_noise)
    record_every = check_int("record_every", record_every, minimum=1)
    return x0, y0, lr, steps, grad_noise, record_every


def _broadcast(
    x0: torch.Tensor, y0: torch.Tensor, w: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool]:
    batched = x0.ndim == 2 or y0.ndim == 2 or (w is not None and w.ndim == 2)
    sizes = {t.shape[0] for t in (x0, y0, w) if t is not None and t.ndim == 2}
    if len(sizes) > 1:
        raise ValueError(f"preference: batch sizes of x0, y0 and preference differ: {sorted(sizes)}")
    P = sizes.pop() if sizes else 1
    x = x0.expand(P, x0.shape[-1]).clone() if x0.ndim == 1 else x0.clone()
    y = y0.expand(P, y0.shape[-1]).clone() if y0.ndim == 1 else y0.clone()
    if w is not None:
        w = w.expand(P, w.shape[-1]).clone() if w.ndim == 1 else w.clone()
    return x, y, w, batched


def _finish(
    problem: ECMOProblem,
    loop: SolverLoop,
    x: torch.Tensor,
    y: torch.Tensor,
    batched: bool,
    psi: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    extras: dict[str, Any],
) -> Result:
    with loop.evaluating():
        F = problem.objectives(x, y)
        h = problem.constraint(x, y)
        values = psi(x, y)
        finite = bool(torch.isfinite(x).all()) and bool(torch.isfinite(y).all())
        kkt = kkt_residual(problem, x, y) if finite else torch.full_like(values, math.inf)
    unb = (lambda t: t[0]) if not batched else (lambda t: t)
    extras = {
        **extras,
        "objectives": unb(F),
        "constraint_violation": unb(h.norm(dim=-1)),
        "kkt_residual": unb(kkt),
        "values": unb(values),
    }
    return loop.result((unb(x), unb(y)), value=lambda: float(values.mean()), extras=extras)


def wc_penalty(
    problem: ECMOProblem,
    x0: torch.Tensor,
    y0: torch.Tensor,
    preference: torch.Tensor,
    penalty: float = 100.0,
    lr: float = 0.05,
    steps: int = 5000,
    *,
    scalarization: str = "hard",
    mu: float = 0.01,
    ref_point: Any = None,
    gda_lr: float | None = None,
    grad_noise: float = 0.0,
    average: str = "last",
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 100,
    time_limit_s: float | None = None,
) -> Result:
    r"""The weighted-Chebyshev penalty method (see the module docstring) for one preference or a batch.

    Args:
        problem: the :class:`ECMOProblem`.
        x0, y0: starting point ``(dx,)``, ``(dy,)`` or a batch ``(P, dx)``, ``(P, dy)``.
        preference: ``omega`` ``(S,)`` or ``(P, S)``: non-negative rows summing to 1 (a zero entry warns:
            weak Pareto optimality).
        penalty: ``rho > 0``; lr: the constant step ``eta > 0`` (stable for ``eta <= 1 / (rho ||J_h||^2 +
            L_F)``); steps: iterations ``T``.
        scalarization: ``"hard"`` (the WC subgradient), ``"smooth"`` (smooth Tchebycheff with temperature
            ``mu``), ``"gda"`` (projected ascent on the simplex multipliers, step ``gda_lr``, default ``lr``)
            or ``"linear"`` (the weighted-sum baseline).
        ref_point: ``r`` ``(S,)`` (default 0).
        grad_noise: standard deviation of Gaussian noise added to every task gradient (stochastic setting;
            drawn from ``seed``).
        average: ``"last"`` (the last iterate) or ``"tail"`` (the mean of iterates ``T/2 .. T``).
        tol: ``converged`` once the largest (over the batch) norm of the direction ``d_t`` is at most ``tol``
            (``None``: run all ``steps``); checked on recorded rows (every ``record_every`` iterations).
        time_limit_s: the time budget.

    Returns a :class:`~optarium._core.Result`: ``x = (x, y)`` (batched like the inputs), ``value`` the mean
    over the batch of ``Psi`` at ``x``; ``extras``: ``objectives`` ``(..., S)``, ``constraint_violation``
    ``||h||``, ``kkt_residual`` :func:`kkt_residual`, ``values`` (``Psi`` per batch element), ``preference``,
    ``penalty``, ``scalarization``, ``multipliers`` (``gda`` only). History: ``objective`` (mean ``Psi``),
    ``grad_norm`` (largest ``||d_t||``), ``constraint_violation`` (largest ``||h||``).
    """
    x0, y0, lr, steps, grad_noise, record_every = _setup(problem, x0, y0, lr, steps, grad_noise, record_every)
    S = problem.n_objectives
    w = _check_preference(preference, S, x0)
    penalty = check_positive("penalty", penalty)
    scalarization = check_choice("scalarization", scalarization, SCALARIZATIONS)
    mu = check_positive("mu", mu)
    r = _ref(ref_point, S, x0)
    gda_lr = lr if gda_lr is None else check_positive("gda_lr", gda_lr)
    average = check_choice("average", average, ("last", "tail"))
    seed = check_int("seed", seed, minimum=0)
    x, y, w, batched = _broadcast(x0, y0, w)
    assert w is not None
    dxn = x.shape[-1]
    lam = torch.full_like(w, 1.0 / S) if scalarization == "gda" else None
    gen = torch.Generator(device=x.device).manual_seed(seed) if grad_noise > 0 else None
    loop = SolverLoop(
        steps,
        tol=tol,
        criterion="grad_norm",
        record_every=record_every,
        time_limit_s=time_limit_s,
        watch=_WATCH,
    )
    z = torch.cat([x, y], -1)
    state: dict[str, Any] = {"d": None, "sum": None, "n_avg": 0}
    tail_start = steps // 2 + 1

    def psi(xx: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
        F = problem.objectives(xx, yy)
        h = problem.constraint(xx, yy)
        return scalarized_value(F, w, r, scalarization, mu) + 0.5 * penalty * (h**2).sum(-1)

    def evaluate(k: int) -> dict[str, Any]:
        xx, yy = z[..., :dxn], z[..., dxn:]
        h = problem.constraint(xx, yy)
        return {
            "objective": psi(xx, yy).mean(),
            "grad_norm": float(state["d"].norm(dim=-1).amax()) if k > 0 else math.inf,
            "constraint_violation": h.norm(dim=-1).amax(),
        }

    for k in loop.iterate(evaluate):
        F, G = problem.first_order_z(z, dxn)
        if gen is not None:
            G = G + grad_noise * torch.randn(G.shape, generator=gen, dtype=G.dtype, device=G.device)
        c = _weights(F, w, r, scalarization, mu, lam)
        d = (c.unsqueeze(-2) @ G).squeeze(-2) + penalty * problem.penalty_grad_z(z, dxn)
        if lam is not None:
            lam = project_simplex(lam + gda_lr * w * (F - r))
        z = z - lr * d
        state["d"] = d
        if average == "tail" and k >= tail_start:
            state["sum"] = z.clone() if state["sum"] is None else state["sum"] + z
            state["n_avg"] += 1
    if average == "tail" and state["n_avg"] > 0:
        z = state["sum"] / state["n_avg"]
    extras: dict[str, Any] = {
        "preference": w if batched else w[0],
        "penalty": penalty,
        "scalarization": scalarization,
    }
    if lam is not None:
        extras["multipliers"] = lam if batched else lam[0]
    return _finish(problem, loop, z[..., :dxn], z[..., dxn:], batched, psi, extras)


def wc_penalty_front(
    problem: ECMOProblem,
    x0: torch.Tensor,
    y0: torch.Tensor,
    preferences: torch.Tensor | None = None,
    **kwargs: Any,
) -> Result:
    """:func:`wc_penalty` for a batch of preferences (default :func:`simplex_grid` ``(S, 11)``) in one run.

    ``x0``, ``y0`` are shared by every preference (``(d,)``) or given per preference (``(P, d)``). The
    result is batched: row ``i`` of ``x``, ``extras["objectives"]`` etc. belongs to ``preferences[i]``;
    ``extras["non_dominated"]`` marks the obtained points no other obtained point dominates
    (:func:`optarium._core.pareto.non_dominated`).
    """
    from optarium._core.pareto import non_dominated

    if not isinstance(x0, torch.Tensor):
        raise TypeError(f"x0: must be a floating tensor, got {type(x0).__name__}")
    if preferences is None:
        preferences = simplex_grid(problem.n_objectives, 11, dtype=x0.dtype, device=x0.device)
    if not isinstance(preferences, torch.Tensor) or preferences.ndim != 2:
        raise ValueError("preferences: must be a tensor (P, S)")
    res = wc_penalty(problem, x0, y0, preferences, **kwargs)
    extras = dict(res.extras)
    extras["non_dominated"] = non_dominated(extras["objectives"])
    return Result(res.x, res.value, res.status, res.n_iter, res.history, res.wall_time_s, extras)


def mgda_penalty(
    problem: ECMOProblem,
    x0: torch.Tensor,
    y0: torch.Tensor,
    penalty: float = 100.0,
    lr: float = 0.05,
    steps: int = 5000,
    *,
    grad_noise: float = 0.0,
    average: str = "last",
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 100,
    time_limit_s: float | None = None,
) -> Result:
    r"""The MGDA-type penalty baseline: steps along the min-norm point of the penalised task gradients.

    ``d_t = sum_s lambda_s (grad F_s + rho J_h^T h)`` with ``lambda = argmin_{simplex} ||sum_s lambda_s
    (grad F_s + rho J_h^T h)||^2`` (MGDA, Désidéri 2012, on the penalised objectives ``F_s + rho/2
    ||h||^2``, as penalty-based multi-objective bilevel methods use it); no preference, so the point reached
    depends on the start. Batched over the rows of ``x0``/``y0``. Arguments, history and ``extras`` as in
    :func:`wc_penalty` (``values`` is ``max_s F_s + rho/2 ||h||^2``, ``extras["multipliers"]`` the last
    ``lambda``).
    """
    x0, y0, lr, steps, grad_noise, record_every = _setup(problem, x0, y0, lr, steps, grad_noise, record_every)
    penalty = check_positive("penalty", penalty)
    average = check_choice("average", average, ("last", "tail"))
    seed = check_int("seed", seed, minimum=0)
    S = problem.n_objectives
    x, y, _, batched = _broadcast(x0, y0, None)
    dxn = x.shape[-1]
    gen = torch.Generator(device=x.device).manual_seed(seed) if grad_noise > 0 else None
    loop = SolverLoop(
        steps,
        tol=tol,
        criterion="grad_norm",
        record_every=record_every,
        time_limit_s=time_limit_s,
        watch=_WATCH,
    )
    z = torch.cat([x, y], -1)
    state: dict[str, Any] = {"d": None, "sum": None, "n_avg": 0, "lam": None}
    ones = torch.full((S,), 1.0, dtype=x.dtype, device=x.device)
    zero = torch.zeros(S, dtype=x.dtype, device=x.device)
    tail_start = steps // 2 + 1

    def psi(xx: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
        F = problem.objectives(xx, yy)
        h = problem.constraint(xx, yy)
        return scalarized_value(F, ones, zero, "hard") + 0.5 * penalty * (h**2).sum(-1)

    def evaluate(k: int) -> dict[str, Any]:
        xx, yy = z[..., :dxn], z[..., dxn:]
        h = problem.constraint(xx, yy)
        return {
            "objective": psi(xx, yy).mean(),
            "grad_norm": float(state["d"].norm(dim=-1).amax()) if k > 0 else math.inf,
            "constraint_violation": h.norm(dim=-1).amax(),
        }

    for k in loop.iterate(evaluate):
        _, G = problem.first_order_z(z, dxn)
        if gen is not None:
            G = G + grad_noise * torch.randn(G.shape, generator=gen, dtype=G.dtype, device=G.device)
        G = G + penalty * problem.penalty_grad_z(z, dxn).unsqueeze(-2)
        lam = min_norm_weights(G)
        d = (lam.unsqueeze(-2) @ G).squeeze(-2)
        z = z - lr * d
        state["lam"] = lam
        state["d"] = d
        if average == "tail" and k >= tail_start:
            state["sum"] = z.clone() if state["sum"] is None else state["sum"] + z
            state["n_avg"] += 1
    if average == "tail" and state["n_avg"] > 0:
        z = state["sum"] / state["n_avg"]
    lam_out = state["lam"] if state["lam"] is not None else torch.full((z.shape[0], S), 1.0 / S).to(z)
    extras: dict[str, Any] = {"penalty": penalty, "multipliers": lam_out if batched else lam_out[0]}
    return _finish(problem, loop, z[..., :dxn], z[..., dxn:], batched, psi, extras)


# ------------------------------------------------------------------------------------------ solver cases
def _case_problem(dtype: torch.dtype, device: Any, seed: int) -> Any:
    from optarium.problems.multiobjective_bilevel import quadratic_mtbl

    return quadratic_mtbl(S=2, seed=100 + seed, m=12, dy=8, dx=3, rank=4, dtype=dtype, device=device)


def _case_start(prob: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return prob.A.new_zeros(prob.dx), prob.A.new_zeros(prob.dy)


_CASE_PREF = (0.4, 0.6)
_CASE_MU = 1.0  # a well-conditioned smooth Tchebycheff: the case converges to 1e-9 in a few hundred steps


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    prob = _case_problem(dtype, device, 0)
    x0, y0 = _case_start(prob)
    w = torch.tensor(_CASE_PREF, dtype=dtype, device=device)
    rho = 10.0
    kwargs: dict[str, Any] = {
        "penalty": rho,
        "lr": 1.0 / (rho * prob.jacobian_norm2 + 1.0),
        "steps": 300,
        "scalarization": "smooth",
        "mu": _CASE_MU,
        "record_every": 50,
        "seed": seed,
        **overrides,
    }
    return wc_penalty(prob, x0, y0, w, **kwargs)


def _case_grad_norm(res: Result) -> float:
    """The norm of the smooth-Psi gradient at x, recomputed from the problem's oracles."""
    x, y = res.x
    prob = _case_problem(x.dtype, x.device, 0)
    w = torch.tensor(_CASE_PREF, dtype=x.dtype, device=x.device)
    F = prob.objectives(x, y)
    gx, gy = prob.objective_grads(x, y)
    c = _weights(F, w, torch.zeros_like(w), "smooth", _CASE_MU, None)
    dx, dy = _combine(c, gx, gy)
    px, py = prob.penalty_grad(x, y)
    rho = float(res.extras["penalty"])
    return float(torch.sqrt(((dx + rho * px) ** 2).sum() + ((dy + rho * py) ** 2).sum()))


def _case_tolerance(res: Result) -> bool:
    return _case_grad_norm(res) <= (1e-8 if res.x[0].dtype == torch.float64 else 1e-4)


def _case_mgda_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    prob = _case_problem(dtype, device, 0)
    x0, y0 = _case_start(prob)
    rho = 10.0
    kwargs: dict[str, Any] = {
        "penalty": rho,
        "lr": 1.0 / (rho * prob.jacobian_norm2 + 1.0),
        "steps": 300,
        "record_every": 50,
        "seed": seed,
        **overrides,
    }
    return mgda_penalty(prob, x0, y0, **kwargs)


def _case_mgda_kkt(res: Result) -> float:
    """MGDA stops at a Pareto-stationary point of the penalised objectives: the min-norm residual there."""
    x, y = res.x
    prob = _case_problem(x.dtype, x.device, 0)
    gx, gy = prob.objective_grads(x, y)
    px, py = prob.penalty_grad(x, y)
    rho = float(res.extras["penalty"])
    G = torch.cat([gx + rho * px.unsqueeze(-2), gy + rho * py.unsqueeze(-2)], -1)
    lam = min_norm_weights(G)
    return float((lam.unsqueeze(-1) * G).sum(-2).norm())


def solver_cases() -> list[SolverCase]:
    """The cases of :func:`wc_penalty` (smooth) and :func:`mgda_penalty` on a small quadratic ECMO problem."""
    tol64 = 1e-9
    return [
        SolverCase(
            name="wc-penalty-smooth",
            solve=_case_solve,
            statuses={
                "converged": {"tol": tol64, "steps": 5000},
                "max_iter": {"steps": 7},
                "diverged": {"lr": 5.0, "steps": 200, "record_every": 1},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=7,
            tolerance_holds=_case_tolerance,
            optimality=_case_grad_norm,
            optimality_tol=1e-8,
            invalid=[
                ({"penalty": 0.0}, "penalty"),
                ({"lr": -1.0}, "lr"),
                ({"steps": -1}, "steps"),
                ({"scalarization": "max"}, "scalarization"),
                ({"ref_point": [0.0]}, "ref_point"),
            ],
            determinism={"grad_noise": 0.1, "steps": 50},
            stochastic=True,
            dtypes=("float32", "float64"),
        ),
        SolverCase(
            name="mgda-penalty",
            solve=_case_mgda_solve,
            statuses={
                "converged": {"tol": tol64, "steps": 5000},
                "max_iter": {"steps": 7},
                "diverged": {"lr": 5.0, "steps": 200, "record_every": 1},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=7,
            tolerance_holds=lambda res: _case_mgda_kkt(res) <= 1e-8,
            optimality=_case_mgda_kkt,
            optimality_tol=1e-8,
            invalid=[({"penalty": -1.0}, "penalty"), ({"lr": 0.0}, "lr"), ({"average": "mean"}, "average")],
            determinism={"grad_noise": 0.1, "steps": 50},
            stochastic=True,
            dtypes=("float32", "float64"),
        ),
    ]
