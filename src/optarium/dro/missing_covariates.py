r"""Robust contextual decisions from partially observed discrete covariates (missing-covariate DRO).

Paper: "Robust Contextual Optimization with Missing Covariates", ICML 2026 poster 66499 (abstract only: no
preprint, authors' text or code was found). The abstract's three properties are kept: the ambiguity set is
built from the observed partial data only (no imputed data set), it encodes a missingness-mechanism
structure, and the robust problem is tractable (linear programs). **The formulation below is our
reconstruction** (spec ``shared/papers/dro-incomplete-covariates.md``), not the paper's text.

Setting. Discrete covariates :math:`X \in \mathcal X` (a product of finite levels, ``K`` cells), an outcome
:math:`Y` on a finite grid :math:`y_1 < \dots < y_L` (always observed), a missingness pattern :math:`M`
(which coordinates of :math:`X` are missing; :math:`m = 0` is a complete row), a decision :math:`z` and a
piecewise-linear convex cost :math:`c(z, y) = \max_k \alpha_k(y) z + \beta_k(y)` (e.g.
:func:`newsvendor_cost`). The unknown joint law :math:`P(x, y, m)` is constrained by

1. *observational consistency per observable block* :math:`B = (x^{obs}, m)`: the law of what is observed,
   :math:`\mathrm{Obs}(P)(B, y) = \sum_{x \sim x^{obs}} P(x, y, m)`, keeps the empirical block mass
   :math:`\hat p_B`, and its conditional law of :math:`Y` lies in a ball around the empirical one:
   :math:`W_1 = \sum_k \Delta_k |F(y_k) - \hat F(y_k)| \le r_B` (``divergence="w1"``, CDFs on the line,
   :math:`\Delta_k = y_{k+1} - y_k`) or :math:`\tfrac12 \sum_y |p(y) - \hat p(y)| \le r_B` (``"tv"``);
   blocks never observed get no mass;
2. *the mechanism*: ``"bounded"``: :math:`a\,P(x, y) \le P(x, y, m) \le b\,P(x, y)` for every missing
   pattern ``m`` and cell :math:`(x, y)` (MNAR sensitivity bounds on the propensity); ``"mcar"``: the same
   with :math:`[a, b] = [\hat\pi_m - \tau, \hat\pi_m + \tau]` (:math:`\hat\pi_m` the pattern's empirical
   frequency, :math:`\tau` = ``mcar_slack``, equality for 0); ``"unrestricted"``: no constraint (Manski);
3. :math:`P \ge 0`, :math:`\sum P = 1`.

The set :math:`\mathcal A` is a polytope. The robust contextual decision for a context :math:`x` is
:math:`z^*(x) = \arg\min_z \sup_{P\in\mathcal A} E_P[c(z, Y) \mid X = x]`; the ratio is made linear by the
Charnes-Cooper change of variables :math:`\tilde P = tP` with :math:`\sum_{y, m}\tilde P(x, y, m) = 1`
(all constraints above are homogeneous in :math:`(\tilde P, t)`), and the min-max over continuous
:math:`z` is one LP by dualising the inner LP (:math:`\min \lambda_{norm}` s.t.
:math:`A_{ub}^\top\mu + A_{eq}^\top\lambda \ge \alpha_k(y) z + \beta_k(y)` on the context's columns and
:math:`\ge 0` elsewhere, :math:`\mu \ge 0`). The worst case is convex in :math:`z`, so on a decision grid
the minimiser is a grid neighbour of the continuous one: the two neighbours are evaluated with the inner LP
and, for flat minima, the smallest grid minimiser is taken (walking left while the value ties).
:meth:`MissingCovariateDRO.fit_policy` solves the joint-policy variant
:math:`\min_{z(\cdot)} \sup_{P\in\mathcal A} E_P\,c(z(X), Y)` (linear in :math:`P`, one dual LP) and
returns a ``Result``; :meth:`MissingCovariateDRO.joint_worst_case` is the certificate of any fixed policy.

Radii (per block, the spec's design): ``"bootstrap"``: the :math:`(1-\beta/B)`-quantile of
:math:`W_1` (or TV) between 200 multinomial resamples of the block's conditional law and the empirical one
(Bonferroni over the :math:`B` blocks, :math:`\beta = 1 -` ``confidence``), vectorised; ``"formula"``: the
L1 concentration bound :math:`r_B = \tfrac12\sqrt{(2L\ln 2 + 2\ln(B/\beta))/n_B}` (a TV radius); a number
(common to all blocks) or one number per block (in the order of ``blocks_``). An empty set is detected
from the LP status and reported (``status="infeasible"``, NaN decision), never silently replaced.

The LPs are solved by SciPy's HiGHS (``solver="linprog"``) or by cvxpy (``solver="cvxpy"``, the test
reference), from the same matrices. Inputs are arrays or tensors; tensors in the outputs follow ``y``'s
floating dtype and device (float64 on the CPU for arrays).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from scipy.optimize import linprog

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative

__all__ = [
    "MissingCovariateDRO",
    "PiecewiseLinearCost",
    "RobustDecision",
    "block_radii",
    "newsvendor_cost",
    "robust_grid_search",
    "solver_cases",
]

_BOOTSTRAP = 200


# ------------------------------------------------------------------------------------------------ costs
@dataclass(frozen=True)
class PiecewiseLinearCost:
    r"""A cost :math:`c(z, y) = \max_k\ \alpha_k(y)\, z + \beta_k(y)`, convex piecewise linear in ``z``.

    Attributes:
        slopes: ``slopes(y) -> array (len(y), k)`` of :math:`\alpha_k(y)`.
        intercepts: ``intercepts(y) -> array (len(y), k)`` of :math:`\beta_k(y)`.
        name: a label.
    """

    slopes: Callable[[np.ndarray], np.ndarray]
    intercepts: Callable[[np.ndarray], np.ndarray]
    name: str = "piecewise-linear"

    def __call__(self, z: Any, y: Any) -> np.ndarray:
        """:math:`c(z, y)` broadcast over ``z`` (shape ``s``) and ``y`` (shape ``(L,)``): ``s + (L,)``."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        z = np.asarray(z, dtype=np.float64)
        a, b = np.asarray(self.slopes(y), np.float64), np.asarray(self.intercepts(y), np.float64)
        return (z[..., None, None] * a + b).max(-1)


def newsvendor_cost(h: float = 1.0, b: float = 4.0) -> PiecewiseLinearCost:
    r"""The newsvendor cost :math:`c(z, y) = h(z - y)_+ + b(y - z)_+` (critical quantile :math:`b/(h+b)`).

    >>> float(newsvendor_cost(1.0, 4.0)(3.0, [5.0])[0])
    8.0
    """
    h = check_nonnegative("h", h)
    b = check_nonnegative("b", b)

    def slopes(y: np.ndarray) -> np.ndarray:
        return np.stack([np.full(y.shape, h), np.full(y.shape, -b)], -1)

    def intercepts(y: np.ndarray) -> np.ndarray:
        return np.stack([-h * y, b * y], -1)

    return PiecewiseLinearCost(slopes, intercepts, name=f"newsvendor(h={h:g}, b={b:g})")


# ------------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class RobustDecision:
    """The robust decision for one context.

    Attributes:
        z: the decision (NaN when the ambiguity set is empty).
        worst_case_cost: the certificate, :math:`\\sup_{P\\in\\mathcal A} E_P[c(z, Y)\\mid X = x]` (NaN if
            infeasible).
        worst_case_distribution: the worst-case conditional law of ``Y`` given the context (a tensor over the
            outcome grid, following ``y``'s dtype and device).
        status: ``"optimal"`` or ``"infeasible"``.
        continuous_z: the minimiser over the decision interval (before rounding to the grid).
    """

    z: float
    worst_case_cost: float
    worst_case_distribution: torch.Tensor
    status: str = "optimal"
    continuous_z: float = math.nan


# ------------------------------------------------------------------------------------------------ radii
def _ball(
    counts: np.ndarray, ref: np.ndarray, divergence: str, spacing: np.ndarray
) -> np.ndarray:  # counts (..., L) laws, ref (L,)
    if divergence == "w1":
        diff = np.cumsum(counts, -1)[..., :-1] - np.cumsum(ref)[:-1]
        return (np.abs(diff) * spacing).sum(-1)
    return 0.5 * np.abs(counts - ref).sum(-1)


def block_radii(
    block_counts: np.ndarray,
    outcomes: np.ndarray,
    *,
    divergence: str = "w1",
    confidence: float = 0.9,
    method: str = "bootstrap",
    n_boot: int = _BOOTSTRAP,
    rng: np.random.Generator | int | None = 0,
) -> np.ndarray:
    r"""Per-block radii from the blocks' outcome counts (rows of ``block_counts``, shape ``(B, L)``).

    ``"bootstrap"``: the :math:`(1 - \beta/B)`-quantile over ``n_boot`` multinomial resamples of each block
    (its own row count, its empirical law) of the ball's distance (W1 on the grid ``outcomes`` or TV) to the
    empirical law; ``"formula"``: :math:`\tfrac12\sqrt{(2L\ln2 + 2\ln(B/\beta))/n_B}` (TV's L1 bound).
    Row counts may be fractional (weighted data): the resample size is their rounded sum, at least 1.
    """
    counts = np.asarray(block_counts, dtype=np.float64)
    if counts.ndim != 2 or not np.isfinite(counts).all() or (counts < 0).any():
        raise ValueError("block_counts: must be a finite, non-negative (B, L) array")
    check_choice("divergence", divergence, ("w1", "tv"))
    check_choice("method", method, ("bootstrap", "formula"))
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence: must lie in (0, 1), got {confidence}")
    outcomes = np.asarray(outcomes, dtype=np.float64)
    n_blocks, n_levels = counts.shape
    beta = 1.0 - float(confidence)
    n_b = counts.sum(1)
    if method == "formula":
        return 0.5 * np.sqrt(
            (2 * n_levels * math.log(2) + 2 * math.log(n_blocks / beta)) / np.maximum(n_b, 1e-300)
        )
    n_boot = check_int("n_boot", n_boot, minimum=1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    spacing = np.diff(outcomes)
    out = np.zeros(n_blocks)
    level = 1.0 - beta / n_blocks
    for i in range(n_blocks):
        law = counts[i] / max(n_b[i], 1e-300)
        size = max(round(n_b[i]), 1)
        draws = gen.multinomial(size, law, size=n_boot) / size
        out[i] = float(np.quantile(_ball(draws, law, divergence, spacing), level))
    return out


# ------------------------------------------------------------------------------------------------ LPs
@dataclass
class _LP:
    """max c^T w s.t. A_ub w <= 0, A_eq w = e_last (last row = 1), w >= 0 (upper bounds in ``ub``)."""

    A_ub: sp.csr_matrix
    A_eq: sp.csr_matrix
    b_eq: np.ndarray
    n_p: int  # the number of P columns (then t, then the auxiliaries)
    ub: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _solve_primal(lp: _LP, obj: np.ndarray, solver: str) -> tuple[str, float, np.ndarray]:  # maximise obj^T w
    n = lp.A_ub.shape[1]
    if solver == "cvxpy":
        import cvxpy as cp

        w = cp.Variable(n)
        cons = [lp.A_ub @ w <= 0, lp.A_eq @ w == lp.b_eq, w >= 0, w <= lp.ub]
        prob = cp.Problem(cp.Maximize(obj @ w), cons)
        prob.solve(solver="CLARABEL")
        if prob.status in ("infeasible", "infeasible_inaccurate"):
            return "infeasible", math.nan, np.full(n, math.nan)
        if prob.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"cvxpy returned {prob.status}")
        return "optimal", float(prob.value), np.asarray(w.value)
    res = linprog(
        -obj, A_ub=lp.A_ub, b_ub=np.zeros(lp.A_ub.shape[0]), A_eq=lp.A_eq, b_eq=lp.b_eq,
        bounds=np.stack([np.zeros(n), lp.ub], 1), method="highs",
    )  # fmt: skip
    if res.status == 2:
        return "infeasible", math.nan, np.full(n, math.nan)
    if res.status != 0:
        raise RuntimeError(f"linprog: {res.message}")
    return "optimal", float(-res.fun), np.asarray(res.x)


class MissingCovariateDRO:
    r"""Missing-covariate DRO for contextual decisions (the module docstring states the model).

    Args:
        cost: a :class:`PiecewiseLinearCost` (e.g. :func:`newsvendor_cost`).
        decisions: the decision grid (sorted, 1-d), or ``None`` for the continuous interval spanned by the
            outcome grid.
        outcomes: the outcome grid :math:`y_1 < \dots < y_L` (default: the observed values of ``y``).
        levels: per covariate, its levels (default: the observed values of each column).
        divergence: ``"w1"`` (W1 on the line) or ``"tv"``.
        radius: ``"bootstrap"``, ``"formula"``, a number >= 0 (every block) or one number per block.
        confidence: :math:`1 - \beta` for the radii.
        mechanism: ``"bounded"``, ``"mcar"`` or ``"unrestricted"``.
        propensity_bounds: ``(a, b)`` with :math:`0 \le a \le b \le 1` for ``"bounded"``.
        mcar_slack: :math:`\tau \ge 0` for ``"mcar"``.
        solver: ``"linprog"`` (HiGHS) or ``"cvxpy"``.
        seed: the seed of the bootstrap.
        n_boot: bootstrap resamples.

    Example:
        >>> import numpy as np
        >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, np.nan], [1.0, 0.0], [1.0, 1.0], [0.0, np.nan]])
        >>> y = np.array([1.0, 2.0, 2.0, 0.0, 1.0, 1.0])
        >>> m = MissingCovariateDRO(newsvendor_cost(1.0, 4.0), decisions=np.arange(3.0), radius=0.0,
        ...                         mechanism="unrestricted").fit(X, y)
        >>> m.decide([0.0, 0.0]).status
        'optimal'
    """

    def __init__(
        self,
        cost: PiecewiseLinearCost,
        decisions: Any = None,
        *,
        outcomes: Any = None,
        levels: Sequence[Sequence[float]] | None = None,
        divergence: str = "w1",
        radius: str | float | Sequence[float] = "bootstrap",
        confidence: float = 0.9,
        mechanism: str = "bounded",
        propensity_bounds: tuple[float, float] = (0.1, 0.7),
        mcar_slack: float = 0.0,
        solver: str = "linprog",
        seed: int = 0,
        n_boot: int = _BOOTSTRAP,
    ) -> None:
        if not isinstance(cost, PiecewiseLinearCost):
            raise TypeError(f"cost: must be a PiecewiseLinearCost, got {type(cost).__name__}")
        self.cost = cost
        self.decisions = None if decisions is None else self._grid("decisions", decisions)
        self.outcomes = None if outcomes is None else self._grid("outcomes", outcomes)
        self.levels = None if levels is None else [self._grid("levels", lv) for lv in levels]
        self.divergence = check_choice("divergence", divergence, ("w1", "tv"))
        if isinstance(radius, str):
            check_choice("radius", radius, ("bootstrap", "formula"))
            if radius == "formula" and divergence != "tv":
                raise ValueError("radius: 'formula' is the TV concentration bound; use divergence='tv'")
        elif isinstance(radius, (int, float)):
            check_nonnegative("radius", float(radius))
        else:
            r = np.asarray(radius, dtype=np.float64)
            if r.ndim != 1 or not np.isfinite(r).all() or (r < 0).any():
                raise ValueError("radius: per-block radii must be a finite, non-negative 1-d sequence")
        self.radius = radius
        if not 0.0 < float(confidence) < 1.0:
            raise ValueError(f"confidence: must lie in (0, 1), got {confidence}")
        self.confidence = float(confidence)
        self.mechanism = check_choice("mechanism", mechanism, ("bounded", "mcar", "unrestricted"))
        a, b = (float(v) for v in propensity_bounds)
        if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b > 1 or a > b:
            raise ValueError(f"propensity_bounds: need 0 <= a <= b <= 1, got ({a}, {b})")
        self.propensity_bounds = (a, b)
        self.mcar_slack = check_nonnegative("mcar_slack", mcar_slack)
        self.solver = check_choice("solver", solver, ("linprog", "cvxpy"))
        self.seed = check_int("seed", seed)
        self.n_boot = check_int("n_boot", n_boot, minimum=1)

    @staticmethod
    def _grid(name: str, values: Any) -> np.ndarray:
        arr = np.asarray(values.detach().cpu() if isinstance(values, torch.Tensor) else values, np.float64)
        arr = arr.reshape(-1)
        if arr.size == 0 or not np.isfinite(arr).all() or (np.diff(arr) <= 0).any():
            raise ValueError(f"{name}: must be a non-empty, finite, strictly increasing grid")
        return arr

    # -------------------------------------------------------------------------------------------- fit
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> MissingCovariateDRO:
        """Store the observed data: ``X`` (n, d) with NaN for missing entries, ``y`` (n,) observed outcomes.

        ``sample_weight`` (n,) gives the rows' probabilities (e.g. a population-level observed law); the
        block masses and laws are then weighted, and the bootstrap resamples ``round(sum of the block's
        weights x n)`` rows.
        """
        if isinstance(y, torch.Tensor) and y.is_floating_point():
            self._dtype, self._device = y.dtype, y.device
        else:
            self._dtype, self._device = torch.float64, torch.device("cpu")
        Xa = np.asarray(X.detach().cpu() if isinstance(X, torch.Tensor) else X, dtype=np.float64)
        ya = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[0] == 0:
            raise ValueError(f"X: must be a non-empty (n, d) array, got shape {Xa.shape}")
        if np.isinf(Xa).any():
            raise ValueError("X: must hold finite levels or NaN (missing)")
        if ya.shape != (Xa.shape[0],):
            raise ValueError(f"y: must have shape ({Xa.shape[0]},), got {ya.shape}")
        if not np.isfinite(ya).all():
            raise ValueError("y: must be observed and finite in every row (only X may be missing)")
        n, d = Xa.shape
        if sample_weight is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
                raise ValueError("sample_weight: must be n finite, non-negative weights with a positive sum")
            w = w / w.sum()
        outcomes = self.outcomes if self.outcomes is not None else np.unique(ya)
        yj = np.searchsorted(outcomes, ya)
        if (yj >= len(outcomes)).any() or not np.allclose(outcomes[np.minimum(yj, len(outcomes) - 1)], ya):
            raise ValueError("y: every outcome must lie on the outcome grid")
        if self.levels is not None:
            if len(self.levels) != d:
                raise ValueError(f"levels: {len(self.levels)} level lists for {d} covariates")
            levels = self.levels
        else:
            levels = [np.unique(Xa[~np.isnan(Xa[:, k]), k]) for k in range(d)]
            if any(len(lv) == 0 for lv in levels):
                raise ValueError("X: a covariate is missing in every row; give its levels")
        codes = np.full((n, d), -1)
        for k, lv in enumerate(levels):
            obs = ~np.isnan(Xa[:, k])
            idx = np.searchsorted(lv, Xa[obs, k])
            if (idx >= len(lv)).any() or not np.allclose(lv[np.minimum(idx, len(lv) - 1)], Xa[obs, k]):
                raise ValueError(f"X: column {k} holds a value that is not one of its levels")
            codes[obs, k] = idx
        miss = codes < 0
        patterns = sorted({tuple(r) for r in miss.astype(int)} | {(0,) * d})
        self.levels_ = levels
        self.outcomes_ = outcomes
        self.patterns_ = [np.array(p, dtype=bool) for p in patterns]
        self.cells_ = list(itertools.product(*[range(len(lv)) for lv in levels]))
        cell_index = {c: i for i, c in enumerate(self.cells_)}
        pat_index = {p: i for i, p in enumerate(patterns)}
        # blocks (pattern, observed codes) with their weighted outcome counts
        block_keys: dict[tuple[int, tuple[int, ...]], int] = {}
        rows_block = np.zeros(n, dtype=int)
        for i in range(n):
            g = pat_index[tuple(miss[i].astype(int))]
            key = (g, tuple(int(v) for v in codes[i]))
            rows_block[i] = block_keys.setdefault(key, len(block_keys))
        self.blocks_ = list(block_keys)
        L = len(outcomes)
        mass = np.zeros((len(self.blocks_), L))
        np.add.at(mass, (rows_block, yj), w)
        self.block_mass_ = mass  # p̂(B, y)
        if sample_weight is None:
            self.block_rows_ = np.bincount(rows_block, minlength=len(self.blocks_)).astype(np.float64)
        else:  # weighted rows: the block's share of n rows
            self.block_rows_ = mass.sum(1) * n
        self.pattern_freq_ = np.array(
            [
                mass[[b for b, (g, _) in enumerate(self.blocks_) if g == gi]].sum()
                for gi in range(len(patterns))
            ]
        )
        self.radii_ = self._radii()
        self._cell_index = cell_index
        self._block_of: dict[tuple[int, int], int] = {}
        for c, cell in enumerate(self.cells_):
            for g, p in enumerate(self.patterns_):
                key = (g, tuple(-1 if p[k] else cell[k] for k in range(d)))
                if key in block_keys:
                    self._block_of[(c, g)] = block_keys[key]
        self._observed_cells = {self.cells_.index(tuple(k)) for (g, k) in self.blocks_ if g == 0}
        self._lp_cache: dict[Any, _LP] = {}
        return self

    def _radii(self) -> np.ndarray:
        B = len(self.blocks_)
        if isinstance(self.radius, str):
            counts = self.block_mass_ / np.maximum(self.block_mass_.sum(1, keepdims=True), 1e-300)
            counts = counts * self.block_rows_[:, None]
            return block_radii(
                counts, self.outcomes_, divergence=self.divergence, confidence=self.confidence,
                method=self.radius, n_boot=self.n_boot, rng=self.seed,
            )  # fmt: skip
        if isinstance(self.radius, (int, float)):
            return np.full(B, float(self.radius))
        r = np.asarray(self.radius, dtype=np.float64)
        if r.shape != (B,):
            raise ValueError(f"radius: {r.size} radii for {B} blocks")
        return r

    def _check_fitted(self) -> None:
        if not hasattr(self, "blocks_"):
            raise RuntimeError("the model is not fitted: call fit(X, y) first")

    # ----------------------------------------------------------------------------------------- the LP
    def _column(self, c: int, j: int, g: int) -> int:
        return (c * len(self.outcomes_) + j) * len(self.patterns_) + g

    def _lp(self, context: int | None, common_radius: bool = False) -> _LP:
        """The homogenised constraint system; ``context`` = cell index (conditional) or None (joint)."""
        key = (context, common_radius)
        if key in self._lp_cache:
            return self._lp_cache[key]
        K, L, G, B = len(self.cells_), len(self.outcomes_), len(self.patterns_), len(self.blocks_)
        n_p = K * L * G
        t_col = n_p
        n_aux_per = L - 1 if self.divergence == "w1" else L
        aux0 = n_p + 1
        # W1: cumulative columns F[B, k] = F[B, k-1] + Obs(P)(B, y_k) keep the CDF rows sparse
        f0 = aux0 + B * n_aux_per
        n_f = B * (L - 1) if self.divergence == "w1" else 0
        r_col = f0 + n_f  # the common radius column (only for min_feasible_radius)
        n_col = r_col + (1 if common_radius else 0)
        ub = np.full(n_col, np.inf)
        rows_ub: list[tuple[list[int], list[float]]] = []
        rows_eq: list[tuple[list[int], list[float]]] = []
        members: list[list[tuple[int, int]]] = [[] for _ in range(B)]  # (column, y index)
        for (c, g), b in self._block_of.items():
            for j in range(L):
                members[b].append((self._column(c, j, g), j))
        covered = {self._column(c, j, g) for (c, g) in self._block_of for j in range(L)}
        for col in range(n_p):
            if col not in covered:
                ub[col] = 0.0  # blocks never observed carry no mass
        mass = self.block_mass_
        spacing = np.diff(self.outcomes_)
        for b in range(B):
            pb = float(mass[b].sum())
            cols = [col for col, _ in members[b]]
            rows_eq.append(([*cols, t_col], [1.0] * len(cols) + [-pb]))
            cum = np.cumsum(mass[b])
            for k in range(n_aux_per):
                u = aux0 + b * n_aux_per + k
                if self.divergence == "w1":
                    f = f0 + b * (L - 1) + k
                    at_k = [col for col, j in members[b] if j == k]
                    prev = [f - 1] if k > 0 else []
                    rows_eq.append(([f, *prev, *at_k], [1.0] + [-1.0] * (len(prev) + len(at_k))))
                    sel, ref = [f], float(cum[k])
                else:
                    sel = [col for col, j in members[b] if j == k]
                    ref = float(mass[b, k])
                for sgn in (1.0, -1.0):
                    rows_ub.append(([*sel, t_col, u], [sgn] * len(sel) + [-sgn * ref, -1.0]))
            us = [aux0 + b * n_aux_per + k for k in range(n_aux_per)]
            wts = list(spacing) if self.divergence == "w1" else [0.5] * L
            if common_radius:
                rows_ub.append(([*us, r_col], [*wts, -pb]))
            else:
                rows_ub.append(([*us, t_col], [*wts, -pb * float(self.radii_[b])]))
        if self.mechanism != "unrestricted" and G > 1:
            for g in range(1, G):
                if self.mechanism == "bounded":
                    lo, hi = self.propensity_bounds
                else:
                    pi = float(self.pattern_freq_[g])
                    lo, hi = max(pi - self.mcar_slack, 0.0), min(pi + self.mcar_slack, 1.0)
                for c in range(K):
                    for j in range(L):
                        allc = [self._column(c, j, gg) for gg in range(G)]
                        if lo > 0:
                            rows_ub.append((allc, [lo - (1.0 if gg == g else 0.0) for gg in range(G)]))
                        if hi < 1:
                            rows_ub.append((allc, [(1.0 if gg == g else 0.0) - hi for gg in range(G)]))
        rows_eq.append(([*range(n_p), t_col], [1.0] * n_p + [-1.0]))
        if context is None:
            rows_eq.append(([t_col], [1.0]))
        else:
            cols = [self._column(context, j, g) for j in range(L) for g in range(G)]
            rows_eq.append((cols, [1.0] * len(cols)))
        A_ub = _sparse(rows_ub, n_col)
        A_eq = _sparse(rows_eq, n_col)
        b_eq = np.zeros(A_eq.shape[0])
        b_eq[-1] = 1.0
        lp = _LP(A_ub, A_eq, b_eq, n_p, ub)
        self._lp_cache[key] = lp
        return lp

    def _context(self, x: Any) -> int:
        self._check_fitted()
        xa = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64).reshape(-1)
        if xa.shape != (len(self.levels_),) or not np.isfinite(xa).all():
            raise ValueError(f"x: must be {len(self.levels_)} observed covariate levels, got {xa.tolist()}")
        code = []
        for k, lv in enumerate(self.levels_):
            hit = np.flatnonzero(np.isclose(lv, xa[k]))
            if hit.size == 0:
                raise ValueError(f"x: level {xa[k]} of covariate {k} is not one of {lv.tolist()}")
            code.append(int(hit[0]))
        c = self._cell_index[tuple(code)]
        if c not in self._observed_cells:
            warnings.warn(
                f"x: context {xa.tolist()} has no complete training row; its law comes from the "
                "ambiguity set alone",
                stacklevel=3,
            )
        return c

    def _objective(self, lp: _LP, context: int | None, z: Any) -> np.ndarray:
        """The primal objective at decision ``z`` (a number, or one per cell for the joint policy)."""
        K, L, G = len(self.cells_), len(self.outcomes_), len(self.patterns_)
        obj = np.zeros(lp.A_ub.shape[1])
        costs = np.asarray(self.cost(np.asarray(z, dtype=np.float64), self.outcomes_), np.float64)
        if context is None:
            zc = costs.reshape(K, L)  # one decision per cell
            obj[: lp.n_p] = np.repeat(zc[:, :, None], G, 2).reshape(-1)
        else:
            for j in range(L):
                for g in range(G):
                    obj[self._column(context, j, g)] = costs.reshape(-1)[j]
        return obj

    def worst_case(self, x: Any, z: float) -> tuple[str, float, np.ndarray]:
        """``(status, value, conditional law of Y)`` of :math:`\\sup_{P\\in\\mathcal A} E_P[c(z, Y)|X=x]`."""
        c = self._context(x)
        lp = self._lp(c)
        status, val, w = _solve_primal(lp, self._objective(lp, c, z), self.solver)
        return status, val, self._conditional(w, c)

    def _conditional(self, w: np.ndarray, c: int) -> np.ndarray:
        L, G = len(self.outcomes_), len(self.patterns_)
        return np.array([sum(w[self._column(c, j, g)] for g in range(G)) for j in range(L)])

    def _dual(self, context: int | None) -> tuple[str, float, np.ndarray, np.ndarray | None]:
        """The single LP of min over z of the worst case (continuous z), by dualising the inner LP.

        Returns ``(status, value, z, w)``: ``w`` is the inner maximiser at ``z`` read from HiGHS' marginals
        (the dual of the dual), ``None`` for cvxpy.
        """
        lp = self._lp(context)
        K, L, G = len(self.cells_), len(self.outcomes_), len(self.patterns_)
        m_ub, m_eq = lp.A_ub.shape[0], lp.A_eq.shape[0]
        n_z = K if context is None else 1
        lo, hi = self._z_range()
        a = np.asarray(self.cost.slopes(self.outcomes_), np.float64)  # (L, k)
        bb = np.asarray(self.cost.intercepts(self.outcomes_), np.float64)
        n_pieces = a.shape[1]
        # variables: z (n_z), mu (m_ub) >= 0, lam (m_eq) free; constraint per primal column j with an upper
        # bound of 0 dropped (its reduced cost is free). (A^T y)_j - alpha z >= beta  ->  -(A^T y)_j + alpha z
        # <= -beta.
        AT = sp.hstack([lp.A_ub.T, lp.A_eq.T]).tocsr()  # (n_col, m_ub + m_eq)
        keep = np.flatnonzero(lp.ub > 0)
        rows, rhs, zcoef_rows, zcoef_cols, zcoef_vals = [], [], [], [], []
        ctx_cols: dict[int, tuple[int, int]] = {}
        if context is None:
            for c in range(K):
                for j in range(L):
                    for g in range(G):
                        ctx_cols[self._column(c, j, g)] = (c, j)
        else:
            for j in range(L):
                for g in range(G):
                    ctx_cols[self._column(context, j, g)] = (0, j)
        r = 0
        for col in keep:
            if col in ctx_cols:
                zi, j = ctx_cols[col]
                for k in range(n_pieces):
                    rows.append(col)
                    rhs.append(-bb[j, k])
                    zcoef_rows.append(r)
                    zcoef_cols.append(zi)
                    zcoef_vals.append(a[j, k])
                    r += 1
            else:
                rows.append(col)
                rhs.append(0.0)
                r += 1
        blocks = -AT[np.asarray(rows)]
        Z = sp.csr_matrix((zcoef_vals, (zcoef_rows, zcoef_cols)), shape=(r, n_z))
        A = sp.hstack([Z, blocks]).tocsr()
        cobj = np.zeros(n_z + m_ub + m_eq)
        cobj[n_z + m_ub + m_eq - 1] = 1.0  # b_eq = e_last
        bounds = [(lo, hi)] * n_z + [(0, None)] * m_ub + [(None, None)] * m_eq
        if self.solver == "cvxpy":
            import cvxpy as cp

            v = cp.Variable(n_z + m_ub + m_eq)
            cons = [A @ v <= np.asarray(rhs), v[:n_z] >= lo, v[:n_z] <= hi, v[n_z : n_z + m_ub] >= 0]
            prob = cp.Problem(cp.Minimize(cobj @ v), cons)
            prob.solve(solver="CLARABEL")
            if prob.status in ("unbounded", "unbounded_inaccurate", "infeasible", "infeasible_inaccurate"):
                return "infeasible", math.nan, np.full(n_z, math.nan), None
            return "optimal", float(prob.value), np.asarray(v.value[:n_z]), None
        res = linprog(cobj, A_ub=A, b_ub=np.asarray(rhs), bounds=bounds, method="highs")
        if res.status in (2, 3):  # primal (the inner max) infeasible <=> this dual unbounded (or infeasible)
            return "infeasible", math.nan, np.full(n_z, math.nan), None
        if res.status != 0:
            raise RuntimeError(f"linprog: {res.message}")
        w = np.zeros(lp.A_ub.shape[1])
        np.add.at(w, np.asarray(rows), -np.asarray(res.ineqlin.marginals))
        return "optimal", float(res.fun), np.asarray(res.x[:n_z]), np.maximum(w, 0.0)

    def _z_range(self) -> tuple[float, float]:
        if self.decisions is not None:
            return float(self.decisions[0]), float(self.decisions[-1])
        return float(self.outcomes_[0]), float(self.outcomes_[-1])

    def _snap(self, evaluate: Callable[[float], float], z_cont: float) -> tuple[float, float]:
        """The smallest grid minimiser of a convex function from its continuous minimiser ``z_cont``."""
        grid = self.decisions
        assert grid is not None
        i = int(np.searchsorted(grid, z_cont))  # the first grid point >= z_cont
        cand = sorted({min(max(i - 1, 0), len(grid) - 1), min(i, len(grid) - 1)})
        vals = {k: evaluate(float(grid[k])) for k in cand}
        best_val = min(vals.values())
        tie = 1e-9 * max(1.0, abs(best_val))
        best = min(k for k in cand if vals[k] <= best_val + tie)
        while best > 0:  # flat minima: walk left while the value ties
            v = evaluate(float(grid[best - 1]))
            if v > best_val + tie:
                break
            best, best_val = best - 1, min(v, best_val)
        return float(grid[best]), evaluate(float(grid[best]))

    def decide(self, x: Any) -> RobustDecision:
        """The robust decision for context ``x`` (all covariates observed) with its certificate."""
        c = self._context(x)
        status, dual_val, zc, w_dual = self._dual(c)
        L = len(self.outcomes_)
        if status != "optimal":
            nan = torch.full((L,), math.nan, dtype=self._dtype, device=self._device)
            return RobustDecision(math.nan, math.nan, nan, "infeasible")
        z_cont = float(zc[0])
        lp = self._lp(c)
        cache: dict[float, tuple[float, np.ndarray]] = {}
        if w_dual is not None:  # the worst case at z_cont comes with the dual LP
            cache[z_cont] = (dual_val, w_dual)

        def evaluate(z: float) -> float:
            if abs(z - z_cont) <= 1e-9 * max(1.0, abs(z)) and z_cont in cache:
                cache[z] = cache[z_cont]
            if z not in cache:
                st, val, w = _solve_primal(lp, self._objective(lp, c, z), self.solver)
                cache[z] = (val if st == "optimal" else math.inf, w)
            return cache[z][0]

        if self.decisions is None:
            z, val = z_cont, evaluate(z_cont)
        else:
            z, val = self._snap(evaluate, z_cont)
        law = self._conditional(cache[z][1], c)
        dist = torch.as_tensor(law, dtype=torch.float64).to(dtype=self._dtype, device=self._device)
        return RobustDecision(z, val, dist, "optimal", z_cont)

    def joint_worst_case(self, policy: Any) -> tuple[str, float]:
        """:math:`\\sup_{P\\in\\mathcal A} E_P\\,c(z(X), Y)` for one decision per cell (``cells_`` order)."""
        self._check_fitted()
        z = np.asarray(policy, dtype=np.float64).reshape(-1)
        if z.shape != (len(self.cells_),) or not np.isfinite(z).all():
            raise ValueError(f"policy: must hold {len(self.cells_)} finite decisions (one per cell)")
        lp = self._lp(None)
        status, val, _ = _solve_primal(lp, self._objective(lp, None, z), self.solver)
        return status, val

    def fit_policy(self) -> Result:
        """The joint-policy variant :math:`\\min_{z(\\cdot)}\\sup_{P\\in\\mathcal A} E_P c(z(X), Y)` (one LP).

        Returns a ``Result`` with ``x`` the decision per cell (a tensor), ``value`` the certificate and
        ``extras`` ``{"cells": ..., "status": ...}``; an empty set gives status ``diverged`` and value inf.
        """
        self._check_fitted()
        loop = SolverLoop(1, objective=None, blowup=None)
        out: dict[str, Any] = {}
        for _ in loop.iterate():
            out["status"], out["value"], out["z"], _ = self._dual(None)
            loop.stop("converged" if out["status"] == "optimal" else "diverged")
        x = torch.as_tensor(out["z"], dtype=torch.float64).to(dtype=self._dtype, device=self._device)
        return loop.result(x, value=out["value"], extras={"cells": list(self.cells_), "lp": out["status"]})

    def min_feasible_radius(self) -> float:
        """The smallest common radius for which the ambiguity set is non-empty (an LP; inf if none)."""
        self._check_fitted()
        lp = self._lp(None, common_radius=True)
        obj = np.zeros(lp.A_ub.shape[1])
        obj[-1] = -1.0  # maximise -r
        status, val, _ = _solve_primal(lp, obj, self.solver)
        return math.inf if status != "optimal" else max(-val, 0.0)


def _sparse(rows: list[tuple[list[int], list[float]]], n_col: int) -> sp.csr_matrix:
    if not rows:
        return sp.csr_matrix((0, n_col))
    r = np.concatenate([np.full(len(c), i) for i, (c, _) in enumerate(rows)])
    c = np.concatenate([np.asarray(c, dtype=int) for c, _ in rows])
    v = np.concatenate([np.asarray(v, dtype=np.float64) for _, v in rows])
    return sp.csr_matrix((v, (r, c)), shape=(len(rows), n_col))


# ------------------------------------------------------------------------------------------ the solver
def robust_grid_search(
    model: MissingCovariateDRO,
    x: Any,
    *,
    max_iter: int | None = None,
    time_limit_s: float | None = None,
) -> Result:
    """The robust decision for ``x`` by evaluating the worst case at every grid decision (one LP each).

    The exhaustive reference for :meth:`MissingCovariateDRO.decide` (which needs only the dual LP and two or
    three inner LPs). Iteration ``k`` evaluates the ``k``-th grid point; the history records ``objective``
    (the best worst case so far) and ``remaining`` (grid points not yet evaluated); ``converged`` once every
    point is evaluated (the grid minimum is then exact), ``max_iter``/``timeout`` for the budgets,
    ``diverged`` for a non-finite cost. ``x`` of the ``Result`` is the decision (a 0-d tensor following
    ``y``'s dtype and device); ``extras["values"]`` the worst case per evaluated grid point.
    """
    if not isinstance(model, MissingCovariateDRO):
        raise TypeError(f"model: must be a MissingCovariateDRO, got {type(model).__name__}")
    model._check_fitted()
    if model.decisions is None:
        raise ValueError("model: robust_grid_search needs a decision grid (decisions=...)")
    grid = model.decisions
    budget = len(grid) if max_iter is None else check_int("max_iter", max_iter, minimum=0)
    c = model._context(x)
    lp = model._lp(c)
    state = {"best": math.inf, "z": math.nan, "remaining": len(grid)}
    vals: list[float] = []
    loop = SolverLoop(
        budget, tol=0.0, criterion="remaining", time_limit_s=time_limit_s, objective=None, blowup=None,
        watch=("objective",),
    )  # fmt: skip

    def evaluate(k: int) -> dict[str, float]:
        return {"objective": state["best"] if k > 0 else 0.0, "remaining": state["remaining"]}

    for k in loop.iterate(evaluate):
        z = float(grid[k - 1])
        obj = model._objective(lp, c, z)
        if not np.isfinite(obj).all():
            state["best"] = math.nan
            loop.stop("diverged")
            continue
        st, val, _ = _solve_primal(lp, obj, model.solver)
        val = val if st == "optimal" else math.inf
        vals.append(val)
        if val < state["best"] - 1e-9 * max(1.0, abs(val)):
            state["best"], state["z"] = val, z
        state["remaining"] = len(grid) - k
        if state["remaining"] == 0:
            loop.stop("converged")
    xt = torch.tensor(state["z"], dtype=model._dtype, device=model._device)
    value = state["best"]
    return loop.result(
        xt, value=value, extras={"values": torch.tensor(vals, dtype=model._dtype, device=model._device)}
    )


# ------------------------------------------------------------------------------ conformance cases
def _case_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    n = 40
    X = np.stack([rng.integers(0, 2, n), rng.integers(0, 2, n)], 1).astype(np.float64)
    y = np.minimum(rng.poisson(1.0 + X[:, 0] + X[:, 1]), 4).astype(np.float64)
    X[rng.random(n) < 0.3, 1] = np.nan
    return X, y


def _case_model(dtype: torch.dtype, device: Any, poison: bool = False) -> MissingCovariateDRO:
    X, y = _case_data()
    cost = newsvendor_cost(1.0, 4.0)
    if poison:
        nan = math.nan
        cost = PiecewiseLinearCost(lambda v: np.full((len(v), 1), nan), lambda v: np.zeros((len(v), 1)))
    model = MissingCovariateDRO(
        cost, decisions=np.arange(5.0), outcomes=np.arange(5.0), radius=0.6, mechanism="bounded",
        propensity_bounds=(0.05, 0.8),
    )  # fmt: skip
    return model.fit(X, torch.as_tensor(y, dtype=dtype, device=device))


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, poison: bool = False, **kw: Any) -> Result:
    del seed
    model = _case_model(dtype, device, poison)
    return robust_grid_search(model, [0.0, 1.0], **kw)


def _case_gap(r: Result) -> float:
    """|grid-search value - the dual LP's decision value| (independent path: dual LP + inner LPs)."""
    model = _case_model(torch.float64, "cpu")
    dec = model.decide([0.0, 1.0])
    return abs(r.value - dec.worst_case_cost) + abs(float(r.x) - dec.z)


def solver_cases() -> list[SolverCase]:
    """The case of :func:`robust_grid_search`: a 2 x 2-cell newsvendor with a missing covariate."""
    return [
        SolverCase(
            name="dro-missing-covariates-grid",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 2},
                "diverged": {"poison": True},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=2,
            tolerance_holds=lambda r: int(r.history.last("remaining")) == 0 and _case_gap(r) <= 1e-7,
            optimality=_case_gap,
            optimality_tol=1e-7,
            invalid=[({"max_iter": -1}, "max_iter"), ({"time_limit_s": -1.0}, "time_limit_s")],
        )
    ]
