r"""MWGraD and A-MWGraD: (accelerated) multiple Wasserstein gradient descent for multi-objective
distributional optimisation.

Paper: Dai Hai Nguyen, Duc Dung Nguyen, Atsuyoshi Nakamura, Hiroshi Mamitsuka, "A-MWGraD: Accelerated
Multiple Wasserstein Gradient Flows for Multi-objective Distributional Optimization", ICML 2026,
arXiv:2601.19220. Predecessor: Nguyen et al. 2025, MWGraD (public code github.com/haidnguyen0909/MWGraD,
read for the base update and its kernel estimators; no code copied).

**Problem.** Objectives :math:`F_1, \dots, F_K` on :math:`\mathcal P_2(\mathbb R^d)`; here the multi-target
sampling case :math:`F_k(\rho) = \mathrm{KL}(\rho\,\|\,\pi_k)`, :math:`\pi_k \propto e^{-V_k}`, whose
Wasserstein gradient is :math:`\xi_k(x) = \nabla\log\rho(x) + \nabla V_k(x)`. A measure is represented by
particles :math:`X = (x_1, \dots, x_n)`.

**MWGraD** (:class:`MWGraD`). Per iteration

1. estimate every :math:`\xi_k` at the particles (``score_estimator``):

   - ``"blob"``: the KDE score :math:`\nabla\log\hat\rho(x_i) = \sum_j \nabla_{x_i} k(x_i,x_j) / \sum_j
     k(x_i,x_j)`, :math:`\xi_k(x_i) = \nabla\log\hat\rho(x_i) + \nabla V_k(x_i)`;
   - ``"svgd"`` (RKHS-smoothed): :math:`\tilde\xi_k(x_i) = \frac1n\sum_j [k(x_j,x_i)\nabla V_k(x_j) -
     \nabla_{x_j}k(x_j,x_i)]` (minus the SVGD direction of target :math:`k`);
   - ``"gaussian"``: the exact score of the Gaussian fitted to the particles,
     :math:`\nabla\log\hat\rho(x) = -\hat\Sigma^{-1}(x - \hat\mu)` (no kernel bias; used by the tests and the
     acceleration check of the experiment);

   RBF kernel :math:`k(x,y) = \exp(-\|x-y\|^2 / (2h^2))`, median heuristic
   :math:`h^2 = \mathrm{median}_{i<j}\|x_i-x_j\|^2 / (2\ln(n+1))`;
2. common descent direction: :math:`\lambda^* = \arg\min_{\lambda\in\Delta_K}\lambda^\top Q\lambda`,
   :math:`Q_{kl} = \frac1n\sum_i\langle\xi_k(x_i),\xi_l(x_i)\rangle` (the MGDA min-norm problem), solved
   exactly by :func:`optarium.bilevel.min_norm_weights` (closed form for K = 2, enumeration of the faces of
   the simplex otherwise; ``weight_solver="frank_wolfe"`` is the iterative alternative);
   ``weights="uniform"`` fixes :math:`\lambda = 1/K` (the linear-scalarisation baseline: with the SVGD
   estimator it is exactly SVGD on the averaged potential);
3. :math:`x_i \leftarrow x_i - \eta\,\xi_{\lambda^*}(x_i)`, :math:`\xi_\lambda = \sum_k \lambda_k \xi_k`.

Pareto-stationarity measure: :math:`S = \lambda^{*\top} Q \lambda^*` (``stationarity``).

**A-MWGraD** (:class:`AcceleratedMWGraD`). The continuous model is the damped flow
:math:`\ddot x + \gamma(t)\dot x + \xi_{\lambda(t)}(x) = 0`, :math:`\gamma = 3/t` (geodesically convex) or
:math:`2\sqrt\beta` (:math:`\beta`-strongly convex), whose rates O(1/t^2) and O(e^{-\sqrt\beta t}) match the
abstract. *Reconstructed*: the paper's discrete momentum schedule was not found (only the abstract and a
digest describing an accelerated-information-gradient-type Hamiltonian flow with a min-norm projection), so
the particle discretisation follows the AIG flow of Wang & Li (2022, arXiv:1909.02102), with velocities
:math:`v_i` (:math:`v^0 = 0`):

.. math::

    v^{k+1} = \alpha_k v^k - \sqrt\eta\,\xi_{\lambda^k}(x^k), \qquad x^{k+1} = x^k + \sqrt\eta\,v^{k+1},

i.e. :math:`x^{k+1} = x^k + \alpha_k(x^k - x^{k-1}) - \eta\,\xi_{\lambda^k}(x^k)` (heavy ball; the spec's
ordering shifted by one step so that no iteration is spent without a move), with
:math:`\alpha_k = (k-1)/(k+2)` (``damping="convex"``) or
:math:`\alpha = (1-\sqrt{\beta\eta})/(1+\sqrt{\beta\eta})` (``damping=("strong", beta)``).
``momentum="nesterov"`` evaluates :math:`\xi` and :math:`\lambda` at the extrapolated particles
:math:`y = x^k + \alpha_k(x^k - x^{k-1})` instead. Adaptive restart (Wang & Li;
gradient restart of O'Donoghue & Candès): if the momentum points uphill, :math:`\sum_i\langle v_i^k,
\xi_\lambda(x_i^k)\rangle > 0` (heavy ball; for Nesterov the step :math:`x^{k+1} - x^k` is tested against
:math:`\xi_\lambda(y)`), the velocity is set to 0 and the schedule counter to 1. With ``damping`` giving
:math:`\alpha = 0` the scheme is MWGraD up to rounding (tested).

**Not done.** The multiplicative Fisher-Rao particle reweighting and the Adam update of the public MWGraD
script are not implemented (plain steps only). Everything is vectorised over particles; the only Python loop
is over the K targets (one autograd call per target log-density).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_positive, check_type

__all__ = [
    "SCORE_ESTIMATORS",
    "AcceleratedMWGraD",
    "MWGraD",
    "frank_wolfe_min_norm",
    "gaussian_kl",
    "gaussian_score",
    "kde_score",
    "median_bandwidth",
    "min_norm_gram",
    "rbf_kernel",
    "solver_cases",
    "svgd_field",
]

#: The estimators of the Wasserstein gradients ``xi_k`` at the particles.
SCORE_ESTIMATORS: tuple[str, ...] = ("blob", "svgd", "gaussian")

LogProb = Callable[[torch.Tensor], torch.Tensor]


# ------------------------------------------------------------------------------------------ kernel pieces
def _sq_dists(X: torch.Tensor) -> torch.Tensor:
    sq = (X * X).sum(-1)
    return (sq.unsqueeze(-1) + sq.unsqueeze(-2) - 2.0 * X @ X.transpose(-1, -2)).clamp_min(0.0)


def median_bandwidth(X: torch.Tensor, D2: torch.Tensor | None = None) -> torch.Tensor:
    r"""The median-heuristic bandwidth :math:`h = \sqrt{\mathrm{median}_{i<j}\|x_i-x_j\|^2 / (2\ln(n+1))}`.

    ``X (n, d)``; returns a 0-d tensor (positive; falls back to 1 when all particles coincide). Scales
    linearly with ``X``.
    """
    n = X.shape[0]
    if D2 is None:
        D2 = _sq_dists(X)
    iu = torch.triu_indices(n, n, 1, device=X.device)
    med = D2[iu[0], iu[1]].median() if n > 1 else X.new_tensor(0.0)
    h2 = med / (2.0 * math.log(n + 1))
    return torch.where(h2 > 0, h2, torch.ones_like(h2)).sqrt()


def rbf_kernel(X: torch.Tensor, h: torch.Tensor | float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(Kmat, D2)``: :math:`K_{ij} = \exp(-\|x_i-x_j\|^2/(2h^2))` and the squared distances, ``(n, n)``."""
    D2 = _sq_dists(X)
    return torch.exp(-D2 / (2.0 * h * h)), D2


def kde_score(X: torch.Tensor, Kmat: torch.Tensor, h: torch.Tensor | float) -> torch.Tensor:
    r"""The KDE ("blob") score :math:`\sum_j\nabla_{x_i}k(x_i,x_j)/\sum_j k(x_i,x_j)`, ``(n, d)``."""
    s = Kmat.sum(-1, keepdim=True)
    return (Kmat @ X - s * X) / (h * h * s)


def svgd_field(
    X: torch.Tensor, Kmat: torch.Tensor, h: torch.Tensor | float, grad_V: torch.Tensor
) -> torch.Tensor:
    r"""Minus the SVGD direction per target.

    :math:`\frac1n\sum_j[k_{ij}\nabla V_k(x_j) - \nabla_{x_j}k(x_j,x_i)]`.

    ``grad_V (K, n, d)`` -> ``(K, n, d)``. The repulsive sum is :math:`\sum_j k_{ij}(x_i-x_j)/h^2`.
    """
    n = X.shape[0]
    rep = (Kmat.sum(-1, keepdim=True) * X - Kmat @ X) / (h * h)  # sum_j grad_{x_j} k(x_j, x_i)
    return (Kmat @ grad_V - rep) / n


def gaussian_score(X: torch.Tensor) -> torch.Tensor:
    r"""The score of the Gaussian fitted to the particles, :math:`-\hat\Sigma^{-1}(x_i-\hat\mu)`, ``(n, d)``.

    :math:`\hat\Sigma` is the (1/n) sample covariance; it must be positive definite (``n > d``).
    """
    Xc = X - X.mean(0, keepdim=True)
    cov = Xc.T @ Xc / X.shape[0]
    L, info = torch.linalg.cholesky_ex(cov)
    if int(info) != 0:
        raise ValueError("X: the particles' covariance is singular; the gaussian estimator needs n > d")
    return -torch.cholesky_solve(Xc.T, L).T


# ------------------------------------------------------------------------------------------ min-norm weights
def min_norm_gram(xi: torch.Tensor) -> torch.Tensor:
    r"""The Gram matrix :math:`Q_{kl} = \frac1n\sum_i\langle\xi_k(x_i),\xi_l(x_i)\rangle` of ``xi``."""
    G = xi.reshape(xi.shape[0], -1)
    return G @ G.T / xi.shape[1]


def frank_wolfe_min_norm(Q: torch.Tensor, *, max_iter: int = 1000, rtol: float = 1e-4) -> torch.Tensor:
    r"""Frank-Wolfe with exact line search for :math:`\min_{\lambda\in\Delta}\lambda^\top Q\lambda`.

    Stops once the Frank-Wolfe gap :math:`2(\lambda^\top Q\lambda - \min_k (Q\lambda)_k)` is at most
    ``rtol * max_k Q_kk`` (O(1/t) convergence; the exact solver is the default).
    """
    K = Q.shape[0]
    lam = torch.full((K,), 1.0 / K, dtype=Q.dtype, device=Q.device)
    scale = float(Q.diagonal().max().clamp_min(torch.finfo(Q.dtype).tiny))
    for _ in range(max_iter):
        g = Q @ lam
        j = int(torch.argmin(g))
        gap = 2.0 * float(lam @ g - g[j])
        if gap <= rtol * scale:
            break
        d = -lam.clone()
        d[j] += 1.0
        curv = float(d @ Q @ d)
        if curv <= 0:
            break
        t = min(1.0, max(0.0, -float(g @ d) / curv))
        lam = lam + t * d
    return lam


def _min_norm(Q: torch.Tensor, xi: torch.Tensor, solver: str) -> torch.Tensor:
    if solver == "frank_wolfe":
        return frank_wolfe_min_norm(Q)
    from optarium.bilevel.chebyshev import min_norm_weights

    n = xi.shape[1]
    return min_norm_weights(xi.reshape(xi.shape[0], -1) / math.sqrt(n))


# ------------------------------------------------------------------------------------------ the samplers
class MWGraD:
    r"""Multiple Wasserstein gradient descent on particles: :math:`x \leftarrow x - \eta\,\xi_{\lambda^*}(x)`.

    Args:
        log_probs: callables ``x (n, d) -> log pi_k(x) (n,)`` (unnormalised); scores by autograd.
        scores: optional callables ``x (n, d) -> grad log pi_k(x) (n, d)`` used instead of autograd.
        score_estimator: ``"blob"``, ``"svgd"`` or ``"gaussian"`` (see the module docstring).
        bandwidth: ``"median"`` (the heuristic, recomputed every step) or a positive kernel width ``h``.
        step_size: :math:`\eta > 0`.
        weights: ``"min_norm"`` (MGDA weights, the method) or ``"uniform"`` (linear scalarisation).
        weight_solver: ``"exact"`` (:func:`optarium.bilevel.min_norm_weights`) or ``"frank_wolfe"``.

    ``step(X)`` updates the particles ``X (n, d)`` in place and returns them; ``run(X0, n_steps)`` returns a
    :class:`~optarium._core.Result` (``x``: final particles, ``value``: the stationarity
    :math:`S = \lambda^{*\top}Q\lambda^*` there, ``history``: stationarity, per-target NLL
    :math:`-\mathrm{mean}_i\log\pi_k(x_i)` and the weights) and keeps it in :attr:`history`.
    """

    accelerated = False

    def __init__(
        self,
        log_probs: Sequence[LogProb],
        *,
        scores: Sequence[Callable[[torch.Tensor], torch.Tensor]] | None = None,
        score_estimator: str = "blob",
        kernel: str = "rbf",
        bandwidth: str | float = "median",
        step_size: float = 0.05,
        weights: str = "min_norm",
        weight_solver: str = "exact",
    ) -> None:
        check_type("log_probs", log_probs, (list, tuple))
        if len(log_probs) == 0:
            raise ValueError("log_probs: need at least one target")
        for f in log_probs:
            if not callable(f):
                raise TypeError(f"log_probs: every target must be callable, got {type(f).__name__}")
        if scores is not None:
            check_type("scores", scores, (list, tuple))
            if len(scores) != len(log_probs) or not all(callable(s) for s in scores):
                raise ValueError(f"scores: need {len(log_probs)} callables, one per target")
        self.log_probs = list(log_probs)
        self.scores = None if scores is None else list(scores)
        self.score_estimator = check_choice("score_estimator", score_estimator, SCORE_ESTIMATORS)
        self.kernel = check_choice("kernel", kernel, ("rbf",))
        if isinstance(bandwidth, str):
            check_choice("bandwidth", bandwidth, ("median",))
            self.bandwidth: str | float = bandwidth
        else:
            self.bandwidth = check_positive("bandwidth", bandwidth)
        self.step_size = check_positive("step_size", step_size)
        self.weights = check_choice("weights", weights, ("min_norm", "uniform"))
        self.weight_solver = check_choice("weight_solver", weight_solver, ("exact", "frank_wolfe"))
        self.n_targets = len(self.log_probs)
        self.n_steps = 0
        self.lambdas: torch.Tensor | None = None
        self.stationarity = math.nan
        self.history: Result | None = None

    # ---------------------------------------------------------------------------------------- pieces
    def _check_particles(self, X: Any) -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"X: must be a torch.Tensor, got {type(X).__name__}")
        if X.ndim != 2 or X.shape[0] < 2:
            raise ValueError(f"X: must have shape (n >= 2, d), got {tuple(X.shape)}")
        if not X.is_floating_point():
            raise TypeError(f"X: must be floating point, got {X.dtype}")
        if not bool(torch.isfinite(X).all()):
            raise ValueError("X: the particles contain NaN or inf")
        return X

    def grad_potentials(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`\nabla V_k(x_i) = -\nabla\log\pi_k(x_i)` for every target, ``(K, n, d)``."""
        out = []
        for k in range(self.n_targets):
            try:
                if self.scores is not None:
                    g = self.scores[k](X)
                else:
                    with torch.enable_grad():
                        x = X.detach().requires_grad_(True)
                        lp = self.log_probs[k](x)
                        if lp.shape != (X.shape[0],):
                            shape = tuple(lp.shape)
                            raise ValueError(
                                f"log_probs: target {k} returned shape {shape}, expected ({len(X)},)"
                            )
                        (g,) = torch.autograd.grad(lp.sum(), x)
            except RuntimeError as err:  # typically particles of the wrong dimension
                raise ValueError(
                    f"X: target {k} failed on particles of shape {tuple(X.shape)}: {err}"
                ) from err
            if g.shape != X.shape:
                raise ValueError(
                    f"scores: target {k} returned shape {tuple(g.shape)}, expected {tuple(X.shape)}"
                )
            out.append(-g.detach())
        return torch.stack(out)

    def wasserstein_gradients(self, X: torch.Tensor) -> torch.Tensor:
        r"""The estimated :math:`\xi_k(x_i)` of every target, ``(K, n, d)``."""
        gV = self.grad_potentials(X)
        if self.score_estimator == "gaussian":
            return gaussian_score(X).unsqueeze(0) + gV
        h: torch.Tensor | float
        if self.bandwidth == "median":
            D2 = _sq_dists(X)
            h = median_bandwidth(X, D2)
            Kmat = torch.exp(-D2 / (2.0 * h * h))
        else:
            h = float(self.bandwidth)
            Kmat, _ = rbf_kernel(X, h)
        if self.score_estimator == "blob":
            return kde_score(X, Kmat, h).unsqueeze(0) + gV
        return svgd_field(X, Kmat, h, gV)

    def direction(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r"""``(xi_lambda (n, d), lambda (K,), S)``: direction, weights, :math:`\lambda^\top Q\lambda`."""
        xi = self.wasserstein_gradients(X)
        Q = min_norm_gram(xi)
        if self.weights == "uniform" or self.n_targets == 1:
            lam = torch.full((self.n_targets,), 1.0 / self.n_targets, dtype=X.dtype, device=X.device)
        else:
            lam = _min_norm(Q, xi, self.weight_solver)
        d = torch.einsum("k,knd->nd", lam, xi)
        return d, lam, lam @ Q @ lam

    def measure(self, X: torch.Tensor) -> dict[str, float]:
        """Evaluation metrics at ``X``: stationarity (min-norm weights), per-target NLL, weights."""
        with torch.no_grad():
            xi = self.wasserstein_gradients(X)
            Q = min_norm_gram(xi)
            lam = _min_norm(Q, xi, self.weight_solver) if self.n_targets > 1 else Q.new_ones(1)
            out = {"stationarity": float(lam @ Q @ lam)}
            for k in range(self.n_targets):
                out[f"nll_{k}"] = -float(self.log_probs[k](X).mean())
                out[f"lambda_{k}"] = float(lam[k])
        return out

    # ---------------------------------------------------------------------------------------- stepping
    def reset(self) -> None:
        """Forget the iteration count (and, for A-MWGraD, the velocity)."""
        self.n_steps = 0

    def step(self, X: torch.Tensor) -> torch.Tensor:
        """One iteration on the particles ``X (n, d)``, in place; returns ``X``."""
        self._check_particles(X)
        with torch.no_grad():
            d, lam, S = self.direction(X)
            X.sub_(self.step_size * d)
        self.lambdas, self.stationarity = lam, float(S)
        self.n_steps += 1
        return X

    def state_dict(self) -> dict[str, Any]:
        """The iteration count (and velocity/schedule counter for A-MWGraD)."""
        return {"n_steps": self.n_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.n_steps = int(state["n_steps"])

    def run(
        self,
        X0: torch.Tensor,
        n_steps: int,
        *,
        tol: float | None = None,
        record_every: int = 1,
        time_limit_s: float | None = None,
        callback: Callable[[int, torch.Tensor], None] | None = None,
        measure: bool = True,
    ) -> Result:
        """Run ``n_steps`` iterations from a copy of ``X0``; ``tol``: stop once the stationarity is <= tol.

        ``measure=False`` records only the stationarity computed by the iteration itself (no evaluation
        pass); then ``tol`` is tested on that value (at the particles the direction was computed at).
        """
        X = self._check_particles(X0).detach().clone()
        n_steps = check_int("n_steps", n_steps, minimum=0)
        if tol is not None:
            check_positive("tol", tol)
        self.reset()
        loop = SolverLoop(
            n_steps, tol=tol, criterion="stationarity", record_every=record_every, time_limit_s=time_limit_s,
            objective="stationarity",
        )  # fmt: skip

        def evaluate(k: int) -> Mapping[str, float]:
            if not bool(torch.isfinite(X).all()):
                return {"stationarity": math.inf}  # diverged: the loop stops with that status
            if measure:
                return self.measure(X)
            if k == 0:
                with torch.no_grad():
                    return {"stationarity": float(self.direction(X)[2])}
            return {"stationarity": self.stationarity}

        for k in loop.iterate(evaluate):
            self.step(X)
            if not bool(torch.isfinite(X).all()):
                loop.stop("diverged")
            if callback is not None:
                callback(k, X)
        value = loop.last.get("stationarity", math.nan)
        res = loop.result(X, value=value, extras={"lambdas": self.lambdas, "accelerated": self.accelerated})
        self.history = res
        return res


class AcceleratedMWGraD(MWGraD):
    r"""A-MWGraD: MWGraD with AIG-type (heavy-ball or Nesterov) momentum and adaptive restart.

    Extra args (see the module docstring for the update and what is reconstructed):
        momentum: ``"heavy_ball"`` (default) or ``"nesterov"``.
        damping: ``"convex"`` (:math:`\alpha_k = (k-1)/(k+2)`), ``("strong", beta)``
            (:math:`\alpha = (1-\sqrt{\beta\eta})/(1+\sqrt{\beta\eta})`) or ``("constant", alpha)`` with
            :math:`0 \le \alpha < 1` (``alpha = 0`` is exactly MWGraD).
        restart: the adaptive (gradient) restart; :attr:`n_restarts` counts how often it fired.
    """

    accelerated = True

    def __init__(
        self,
        log_probs: Sequence[LogProb],
        *,
        momentum: str = "heavy_ball",
        damping: str | tuple[str, float] = "convex",
        restart: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(log_probs, **kwargs)
        self.momentum = check_choice("momentum", momentum, ("heavy_ball", "nesterov"))
        if isinstance(damping, str):
            check_choice("damping", damping, ("convex",))
            self.damping: tuple[str, float] = ("convex", math.nan)
        else:
            if not (isinstance(damping, (tuple, list)) and len(damping) == 2):
                raise ValueError(
                    f"damping: 'convex', ('strong', beta) or ('constant', alpha), got {damping!r}"
                )
            kind = check_choice("damping", damping[0], ("strong", "constant"))
            if kind == "strong":
                beta = check_positive("damping", damping[1])
            else:
                beta = float(damping[1])
                if not (0.0 <= beta < 1.0):
                    raise ValueError(f"damping: a constant alpha must lie in [0, 1), got {beta}")
            self.damping = (kind, beta)
        self.restart = check_type("restart", restart, bool)
        self.velocity: torch.Tensor | None = None
        self.k = 1
        self.n_restarts = 0

    def alpha(self) -> float:
        """The momentum coefficient of the current schedule counter."""
        kind, b = self.damping
        if kind == "convex":
            return (self.k - 1.0) / (self.k + 2.0)
        if kind == "constant":
            return b
        r = math.sqrt(b * self.step_size)
        return max(0.0, (1.0 - r) / (1.0 + r))

    def reset(self) -> None:
        super().reset()
        self.velocity, self.k, self.n_restarts = None, 1, 0

    def step(self, X: torch.Tensor) -> torch.Tensor:
        self._check_particles(X)
        se = math.sqrt(self.step_size)
        with torch.no_grad():
            v = torch.zeros_like(X) if self.velocity is None else self.velocity
            if v.shape != X.shape:
                raise ValueError(f"X: shape {tuple(X.shape)} differs from the velocity's {tuple(v.shape)}")
            if self.momentum == "heavy_ball":
                d, lam, S = self.direction(X)
                if self.restart and float((v * d).sum()) > 0:  # momentum points uphill: restart
                    v = torch.zeros_like(X)
                    self.k = 1
                    self.n_restarts += 1
                v = self.alpha() * v - se * d
                X.add_(se * v)
            else:
                y = X + self.alpha() * se * v
                d, lam, S = self.direction(y)
                x_new = y - self.step_size * d
                step = x_new - X
                if self.restart and float((step * d).sum()) > 0:
                    self.k = 1
                    self.n_restarts += 1
                    d, lam, S = self.direction(X)
                    x_new = X - self.step_size * d
                    step = x_new - X
                v = step / se
                X.copy_(x_new)
        self.velocity = v
        self.k += 1
        self.lambdas, self.stationarity = lam, float(S)
        self.n_steps += 1
        return X

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            velocity=None if self.velocity is None else self.velocity.clone(),
            k=self.k,
            n_restarts=self.n_restarts,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        v = state["velocity"]
        self.velocity = None if v is None else v.clone()
        self.k, self.n_restarts = int(state["k"]), int(state["n_restarts"])


# ------------------------------------------------------------------------------------------ solver cases
def _gauss_targets(
    dtype: torch.dtype, device: Any
) -> tuple[list[LogProb], list[Callable[..., torch.Tensor]]]:
    means = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=dtype, device=device)

    def lp(m: torch.Tensor) -> LogProb:
        return lambda x: -0.5 * ((x - m) ** 2).sum(-1)

    def sc(m: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: m - x

    return [lp(m) for m in means], [sc(m) for m in means]


def _case_solve(
    *, dtype: torch.dtype, device: Any, seed: int, accelerated: bool = True, **overrides: Any
) -> Result:
    g = torch.Generator(device="cpu").manual_seed(seed)
    X0 = (3.0 * torch.randn(60, 2, generator=g, dtype=torch.float64)).to(dtype=dtype, device=device)
    lps, scs = _gauss_targets(dtype, device)
    kwargs: dict[str, Any] = {"n_steps": 400, "tol": 1e-6}
    ctor: dict[str, Any] = {"score_estimator": "gaussian", "step_size": overrides.pop("step_size", 0.1)}
    kwargs.update(overrides)
    cls = AcceleratedMWGraD if accelerated else MWGraD
    return cls(lps, scores=scs, **ctor).run(X0, **kwargs)


def _case_stationarity(res: Result) -> float:
    X = res.x.to(torch.float64)
    lps, scs = _gauss_targets(torch.float64, X.device)
    return MWGraD(lps, scores=scs, score_estimator="gaussian").measure(X)["stationarity"]


def solver_cases() -> list[SolverCase]:
    """MWGraD and A-MWGraD (exact Gaussian score) on three Gaussian targets in 2-D."""
    cases = []
    for acc in (True, False):
        name = "a-mwgrad" if acc else "mwgrad"

        def solve(*, dtype: torch.dtype, device: Any, seed: int, _acc: bool = acc, **ov: Any) -> Result:
            return _case_solve(dtype=dtype, device=device, seed=seed, accelerated=_acc, **ov)

        cases.append(
            SolverCase(
                name=name,
                solve=solve,
                statuses={
                    "converged": {"tol": 1e-6, "n_steps": 3000},
                    "max_iter": {"tol": None, "n_steps": 7},
                    "diverged": {"step_size": 50.0, "tol": None, "n_steps": 200},
                    "timeout": {"tol": None, "n_steps": 10**7, "time_limit_s": 0.05},
                },
                max_iter=7,
                tolerance_holds=lambda res: _case_stationarity(res) <= 1e-6 * (1 + 1e-6),
                optimality=_case_stationarity,
                optimality_tol=1e-6 * (1 + 1e-6),
                invalid=[({"n_steps": -1}, "n_steps"), ({"tol": -1.0}, "tol")],
            )
        )
    return cases


def gaussian_kl(X: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor) -> float:
    """KL(N(mu_hat, Sigma_hat) || N(mean, cov)) of the Gaussian fitted to the particles (1/n covariance)."""
    mu = X.mean(0)
    Xc = X - mu
    S = Xc.T @ Xc / X.shape[0]
    P = torch.linalg.inv(cov)
    z = mean - mu
    d = X.shape[1]
    return float(0.5 * (torch.trace(P @ S) + z @ P @ z - d + torch.logdet(cov) - torch.logdet(S)))
