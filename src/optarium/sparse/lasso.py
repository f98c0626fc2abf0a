r"""The Lasso by FISTA: one penalty (:func:`lasso`), many at once (:func:`lasso_path`), or chosen by K-fold
cross-validation (:func:`lasso_cv`).

Problem (scikit-learn's ``Lasso`` objective without intercept):

.. math:: \min_w\ F_\alpha(w) = \frac{1}{2n}\|y - Xw\|_2^2 + \alpha \|w\|_1 .

FISTA (Beck and Teboulle, "A Fast Iterative Shrinkage-Thresholding Algorithm for Linear Inverse Problems",
SIAM J. Imaging Sci. 2009), from :math:`w_0 = z_0 = 0`, :math:`t_0 = 1`, with the constant step :math:`1/L`,
:math:`L = \|X\|_2^2 / n` (the largest singular value squared, so the smooth part is :math:`L`-smooth):

.. math::
    w_{k+1} = S_{\alpha/L}\big(z_k - \tfrac1L \nabla f(z_k)\big),\quad
    \nabla f(z) = \tfrac1n X^\top (X z - y),\quad
    t_{k+1} = \tfrac{1 + \sqrt{1 + 4 t_k^2}}{2},\quad
    z_{k+1} = w_{k+1} + \tfrac{t_k - 1}{t_{k+1}} (w_{k+1} - w_k),

with the soft threshold :math:`S_\tau(v) = \operatorname{sign}(v)\max(|v| - \tau, 0)`
(:func:`soft_threshold`). Stopping: once no coefficient moves by more than ``tol`` in a step
(:math:`\|w_{k+1} - w_k\|_\infty`), or after ``max_iter`` iterations. The optimality residual
:func:`lasso_kkt_residual` measures the subgradient condition
:math:`0 \in \nabla f(w) + \alpha\,\partial\|w\|_1` and is 0 exactly at a minimiser.

:func:`lasso_cv` is scikit-learn's ``LassoCV`` rebuilt on :func:`lasso_path` (the rewa experiment's
reference): K interleaved folds (sample ``i`` in fold ``i mod K``), the validation MSE of each penalty summed
over folds, the penalty of least CV error, then a refit on all data. Pure torch: dtype and device follow
``X``.

Example:
    >>> import torch
    >>> from optarium.sparse import lasso
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(50, 8, generator=g, dtype=torch.float64)
    >>> y = X[:, 0] - 2 * X[:, 3] + 0.1 * torch.randn(50, generator=g, dtype=torch.float64)
    >>> res = lasso(X, y, 0.1, max_iter=2000)
    >>> res.status, [i for i, v in enumerate(res.x.tolist()) if abs(v) > 1e-8]
    ('converged', [0, 3])
"""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium._core.result import Result, Trace
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.timing import Stopwatch
from optarium._core.validation import check_int, check_nonnegative, check_type

__all__ = [
    "lasso",
    "lasso_cv",
    "lasso_kkt_residual",
    "lasso_objective",
    "lasso_path",
    "soft_threshold",
    "solver_cases",
]


def soft_threshold(v: torch.Tensor, threshold: torch.Tensor | float) -> torch.Tensor:
    r""":math:`S_\tau(v) = \operatorname{sign}(v)\max(|v| - \tau, 0)` elementwise, the proximal map of
    :math:`\tau\|\cdot\|_1` (``threshold`` broadcasts against ``v``). A number ``threshold`` must be
    finite and >= 0 (``ValueError`` otherwise); a tensor one is not checked, since that would synchronise
    the device on every FISTA iteration."""
    if not isinstance(threshold, torch.Tensor):
        threshold = check_nonnegative("threshold", threshold)
    return torch.sign(v) * (v.abs() - threshold).clamp_min(0.0)


def _check_data(X: Any, y: Any) -> None:
    check_type("X", X, torch.Tensor)
    check_type("y", y, torch.Tensor)
    if X.ndim != 2 or not X.is_floating_point() or X.shape[0] < 1:
        raise ValueError(f"X: must be a floating (n, d) tensor with n >= 1, got {X.dtype} {tuple(X.shape)}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y: must have shape ({X.shape[0]},), got {tuple(y.shape)}")
    if y.dtype != X.dtype or y.device != X.device:
        raise ValueError(
            f"y: must have X's dtype and device ({X.dtype}, {X.device}), got {y.dtype}, {y.device}"
        )
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X: contains NaN or inf")
    if not bool(torch.isfinite(y).all()):
        raise ValueError("y: contains NaN or inf")


def _check_alphas(alphas: Any, X: torch.Tensor) -> torch.Tensor:
    check_type("alphas", alphas, torch.Tensor)
    if alphas.ndim != 1 or alphas.numel() < 1:
        raise ValueError(f"alphas: must be a non-empty 1-d tensor, got shape {tuple(alphas.shape)}")
    if not bool(torch.isfinite(alphas).all()) or bool((alphas < 0).any()):
        raise ValueError("alphas: must be finite and >= 0")
    return alphas.to(dtype=X.dtype, device=X.device)


def _lipschitz(X: torch.Tensor) -> float:
    return float(torch.linalg.matrix_norm(X, ord=2)) ** 2 / X.shape[0]


class _Fista:
    """FISTA's state on a batch of penalties (one row of ``W`` each); :meth:`step` is one iteration."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, alphas: torch.Tensor) -> None:
        self.X, self.n = X, X.shape[0]
        self.lip = _lipschitz(X)
        self.Xty = X.T @ y / self.n
        self.W = torch.zeros(len(alphas), X.shape[1], dtype=X.dtype, device=X.device)
        self.Z, self.t = self.W.clone(), 1.0
        # lip = 0 only for X = 0, where w = 0 is optimal: keep it (a 0/0 threshold would be NaN)
        self.thr = (alphas / self.lip)[:, None] if self.lip > 0 else None
        self.change = math.inf

    def step(self) -> None:
        if self.thr is None:
            self.change = 0.0
            return
        X, n, lip = self.X, self.n, self.lip
        grad = ((self.Z @ X.T) @ X) / n - self.Xty
        V = self.Z - grad / lip
        W_new = soft_threshold(V, self.thr)
        t_new = (1 + math.sqrt(1 + 4 * self.t * self.t)) / 2
        self.Z = W_new + ((self.t - 1) / t_new) * (W_new - self.W)
        self.change = float((W_new - self.W).abs().max())
        self.W, self.t = W_new, t_new


def _path(
    X: torch.Tensor, y: torch.Tensor, alphas: torch.Tensor, max_iter: int, tol: float
) -> tuple[torch.Tensor, int, bool]:
    state = _Fista(X, y, alphas)
    for k in range(1, max_iter + 1):
        state.step()
        if state.change < tol:
            return state.W, k, True
    return state.W, max_iter, False


def lasso_path(
    X: torch.Tensor, y: torch.Tensor, alphas: torch.Tensor, max_iter: int, *, tol: float = 1e-10
) -> torch.Tensor:
    r"""Lasso solutions for every penalty at once: row ``i`` minimises :math:`F_{\alpha_i}` (module
    docstring).

    All penalties run in one batched FISTA and stop together, after ``max_iter`` iterations or once no
    coefficient of any row moves by ``tol`` or more in a step.

    Args:
        X: ``(n, d)`` design. y: ``(n,)`` targets (X's dtype and device).
        alphas: ``(k,)`` penalties, ``>= 0``.
        max_iter: iteration cap (``>= 0``).
        tol: the step-size threshold of the early stop (``>= 0``; 0 never stops early).

    Returns:
        ``(k, d)`` coefficients in X's dtype, on X's device.
    """
    _check_data(X, y)
    alphas = _check_alphas(alphas, X)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    tol = check_nonnegative("tol", tol)
    return _path(X, y, alphas, max_iter, tol)[0]


def lasso_objective(X: torch.Tensor, y: torch.Tensor, w: torch.Tensor, alpha: float) -> torch.Tensor:
    r""":math:`F_\alpha(w) = \|y - Xw\|^2 / (2n) + \alpha\|w\|_1` (a 0-d tensor)."""
    r = y - X @ w
    return (r @ r) / (2 * X.shape[0]) + alpha * w.abs().sum()


def lasso_kkt_residual(X: torch.Tensor, y: torch.Tensor, w: torch.Tensor, alpha: float) -> float:
    r"""The largest violation of the Lasso's optimality conditions at ``w``, with :math:`g = \nabla f(w)`:
    :math:`|g_j + \alpha\,\operatorname{sign}(w_j)|` where :math:`w_j \ne 0`, :math:`\max(|g_j| - \alpha, 0)`
    where :math:`w_j = 0`. Zero exactly at a minimiser."""
    g = X.T @ (X @ w - y) / X.shape[0]
    active = w != 0
    viol = torch.where(active, (g + alpha * torch.sign(w)).abs(), (g.abs() - alpha).clamp_min(0.0))
    return float(viol.max()) if viol.numel() else 0.0


def lasso(
    X: torch.Tensor,
    y: torch.Tensor,
    alpha: float,
    *,
    max_iter: int = 1000,
    tol: float = 1e-10,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Minimise :math:`F_\alpha(w) = \|y - Xw\|^2/(2n) + \alpha\|w\|_1` by FISTA (module docstring).

    Args:
        X: ``(n, d)`` design. y: ``(n,)`` targets (X's dtype and device).
        alpha: the penalty, ``>= 0``.
        max_iter: iteration cap. tol: ``converged`` once :math:`\|w_{k+1} - w_k\|_\infty \le` ``tol``.
        record_every: record the history every this many iterations (the stop is decided on recorded
            rows only). time_limit_s: time budget in solver seconds (status ``timeout``).

    Returns:
        A :class:`~optarium._core.Result`: ``x`` the ``(d,)`` coefficients, ``value`` :math:`F_\alpha(x)`,
        history ``objective`` and ``change`` (:math:`\|w_k - w_{k-1}\|_\infty`, ``inf`` at iteration 0),
        extras ``alpha``, ``lipschitz`` and ``kkt_residual`` (:func:`lasso_kkt_residual` at ``x``). The
        iterates are those of :func:`lasso_path` on ``alphas = [alpha]``.
    """
    _check_data(X, y)
    alpha = check_nonnegative("alpha", alpha)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    tol = check_nonnegative("tol", tol)
    loop = SolverLoop(
        max_iter,
        tol=tol,
        criterion="change",
        record_every=record_every,
        time_limit_s=time_limit_s,
        blowup=None,
        watch=("objective",),
    )
    state = _Fista(X, y, torch.tensor([alpha], dtype=X.dtype, device=X.device))

    def evaluate(k: int) -> dict[str, Any]:
        return {"objective": lasso_objective(X, y, state.W[0], alpha), "change": state.change}

    for _ in loop.iterate(evaluate):
        state.step()
    w = state.W[0]
    extras = {"alpha": alpha, "lipschitz": state.lip, "kkt_residual": lasso_kkt_residual(X, y, w, alpha)}
    return loop.result(w, value=lambda: float(lasso_objective(X, y, w, alpha)), extras=extras)


def lasso_cv(
    X: torch.Tensor,
    y: torch.Tensor,
    alphas: torch.Tensor,
    max_iter: int,
    *,
    folds: int = 5,
    refit_max_iter: int | None = None,
    tol: float = 1e-10,
) -> Result:
    r"""The Lasso with its penalty chosen by K-fold cross-validation (scikit-learn's ``LassoCV``, by FISTA).

    Rule: sample ``i`` is in fold ``i mod folds`` (interleaved, no shuffling); for each fold, every penalty
    is fitted on the other folds by :func:`lasso_path` (``max_iter``, ``tol``) and scored by its mean squared
    error on the fold; the penalty with the least error summed over folds (the first on ties) is refitted on
    all data with ``refit_max_iter`` iterations (default ``2 * max_iter``).

    Args:
        X: ``(n, d)`` design. y: ``(n,)`` targets. alphas: ``(k,)`` candidate penalties.
        max_iter: FISTA iterations per fold fit. folds: ``K``, ``2 <= K <= n``.
        refit_max_iter: FISTA iterations of the final fit. tol: the early stop of every fit.

    Returns:
        A :class:`~optarium._core.Result`: ``x`` the refitted ``(d,)`` coefficients, ``value`` their
        objective, ``status``/``n_iter`` those of the refit (``converged`` if it stopped early), extras
        ``alpha`` (the chosen penalty, a float), ``alphas`` and ``cv_mse`` (``(k,)`` mean validation MSE over
        folds) and ``kkt_residual`` of the refit.
    """
    _check_data(X, y)
    alphas = _check_alphas(alphas, X)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    n = X.shape[0]
    folds = check_int("folds", folds, minimum=2, maximum=n)
    refit = 2 * max_iter if refit_max_iter is None else check_int("refit_max_iter", refit_max_iter, minimum=0)
    tol = check_nonnegative("tol", tol)
    clock = Stopwatch().start()
    cv = torch.zeros(len(alphas), dtype=X.dtype, device=X.device)
    fold = torch.arange(n, device=X.device) % folds
    for k in range(folds):
        tr, va = fold != k, fold == k
        W = _path(X[tr], y[tr], alphas, max_iter, tol)[0]
        cv += ((X[va] @ W.T - y[va, None]) ** 2).mean(0)
    best = alphas[int(cv.argmin())]
    W, n_iter, stopped = _path(X, y, best[None], refit, tol)
    w = W[0]
    alpha = float(best)
    extras = {
        "alpha": alpha,
        "alphas": alphas.clone(),
        "cv_mse": cv / folds,
        "kkt_residual": lasso_kkt_residual(X, y, w, alpha),
    }
    value = float(lasso_objective(X, y, w, alpha))
    seconds = clock.stop()
    return Result(
        x=w,
        value=value if math.isfinite(value) else math.inf,
        status=("converged" if stopped else "max_iter") if math.isfinite(value) else "diverged",
        n_iter=n_iter,
        history=Trace(),
        wall_time_s=seconds,
        extras=extras,
    )


# ------------------------------------------------------------------------------------------ solver cases
def _case_problem(dtype: torch.dtype, device: Any, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234 + seed)
    X = torch.randn(40, 10, generator=g, dtype=torch.float64)
    w = torch.zeros(10, dtype=torch.float64)
    w[:3] = torch.tensor([1.5, -2.0, 0.5], dtype=torch.float64)
    y = X @ w + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)
    return X.to(dtype=dtype, device=device), y.to(dtype=dtype, device=device)


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    X, y = _case_problem(dtype, device, seed)
    kwargs = {"alpha": 0.1, "max_iter": 3000, "tol": 1e-9 if dtype == torch.float64 else 1e-6, **overrides}
    return lasso(X, y, **kwargs)


def _case_kkt(res: Result) -> float:
    X, y = _case_problem(res.x.dtype, res.x.device, 0)
    return lasso_kkt_residual(X, y, res.x, float(res.extras["alpha"]))


def _case_tolerance(res: Result) -> bool:
    # the stated tolerance is on the change of w; independently of it, a converged FISTA iterate is optimal
    return _case_kkt(res) <= (1e-7 if res.x.dtype == torch.float64 else 1e-4)


def solver_cases() -> list[SolverCase]:
    """The cases of :func:`lasso` for :mod:`optarium.testing.solvers` (a 40 x 10 problem, 3-sparse truth)."""
    return [
        SolverCase(
            name="lasso-fista",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 5},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=5,
            tolerance_holds=_case_tolerance,
            optimality=_case_kkt,
            optimality_tol=1e-4,
            invalid=[({"alpha": -1.0}, "alpha"), ({"max_iter": -1}, "max_iter"), ({"tol": -1.0}, "tol")],
            exempt={
                "diverged": "FISTA with step 1/L cannot diverge on finite data; non-finite X is refused "
                "(ValueError naming X), tested in tests/sparse/test_lasso.py",
            },
        )
    ]
