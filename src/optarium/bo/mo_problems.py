"""Multi-objective test problems with several disjoint Pareto-set pieces, from pymoo, with known Pareto sets.

- :class:`OmniTest` (Deb & Tiwari's Omni-test; ``pymoo.problems.multi.omnitest.OmniTest``): :math:`f_1 =
  \\sum_i \\sin(\\pi x_i)`, :math:`f_2 = \\sum_i \\cos(\\pi x_i)`, minimised on :math:`[0, 6]^n`. The Pareto
  set is :math:`\\{x : x_i = a + 2 k_i,\\ a \\in [1, 1.5],\\ k_i \\in \\{0, 1, 2\\}\\}`: :math:`3^n` diagonal
  segments, one per :math:`2 \\times \\cdots \\times 2` cell; the front is the arc :math:`f_1^2 + f_2^2 = n^2`
  in the negative quadrant.
- :class:`SYMPART` (Rudolph, Naujoks & Preuss's SYM-PART, non-rotated;
  ``pymoo.problems.multi.sympart.SYMPART``): nine equivalent horizontal segments of length 2a on a 3 x 3
  tiling of :math:`[-100, 100]^2`; on the Pareto set :math:`\\sqrt{f_1} + \\sqrt{f_2} = 2a`.

Objectives are evaluated in torch (vectorised, dtype and device follow the input); the tests check them
against pymoo's ``evaluate``. Known Pareto sets come from pymoo's ``pareto_set``. ``piece_labels`` gives each
design the index of the Pareto-set piece of its tile (OmniTest: the 2 x 2 cell; SYMPART: the 3 x 3 tile), used
by :func:`optarium.bo.metrics.pieces_hit` with ``hit_radius`` = 0.02 x the domain width (the POM spec's rule).
:func:`sobol_pool` and :func:`pool_pareto_set` give a finite candidate pool and its exact Pareto set.
"""

from __future__ import annotations

import math

import torch

from optarium._core.validation import check_int, check_positive, check_type

__all__ = ["SYMPART", "MOProblem", "OmniTest", "pool_pareto_set", "sobol_pool"]


class MOProblem:
    """Base class: a box-bounded multi-objective problem, minimised, with a labelled Pareto set.

    Attributes:
        bounds: ``(2, d)`` float64 box.
        num_objectives: ``m``.
        ref_point: ``(m,)`` hypervolume reference point (nadir of the front + 10 % of its range).
        hit_radius: 0.02 x domain width, for :func:`optarium.bo.metrics.pieces_hit`.
        num_pieces: number of disjoint Pareto-set pieces.
    """

    name: str = ""
    num_objectives: int = 2

    def __init__(self, bounds: torch.Tensor, ref_point: torch.Tensor, num_pieces: int) -> None:
        self.bounds = bounds
        self.ref_point = ref_point
        self.num_pieces = num_pieces
        self.hit_radius = 0.02 * float((bounds[1] - bounds[0]).max())

    @property
    def dim(self) -> int:
        """Number of design variables."""
        return int(self.bounds.shape[1])

    def _check(self, X: torch.Tensor) -> torch.Tensor:
        check_type("X", X, torch.Tensor)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X: must have shape (n, {self.dim}), got {tuple(X.shape)}")
        if not X.is_floating_point():
            raise ValueError(f"X: must be floating point, got {X.dtype}")
        return X

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """Objective values ``(n, m)`` (minimised) of the designs ``X`` ``(n, d)``."""
        return self.evaluate(self._check(X))

    def evaluate(self, X: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Objectives of validated designs."""
        raise NotImplementedError

    def piece_labels(self, X: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Integer label ``(n,)`` of the Pareto-set piece whose tile contains each design."""
        raise NotImplementedError

    def pymoo_problem(self) -> object:  # pragma: no cover - abstract
        """The corresponding pymoo problem instance."""
        raise NotImplementedError

    def pareto_set(self, n_points: int = 500) -> torch.Tensor:
        """pymoo's known Pareto set (``(~n_points, d)`` float64), evenly spread over every piece."""
        n_points = check_int("n_points", n_points, minimum=self.num_pieces)
        ps = self.pymoo_problem().pareto_set(n_points)  # type: ignore[attr-defined]
        return torch.as_tensor(ps, dtype=torch.float64)


class OmniTest(MOProblem):
    """pymoo's Omni-test problem in ``n_var`` dimensions (:math:`3^n` Pareto-set pieces), minimised on
    [0, 6]^n."""

    name = "omnitest"

    def __init__(self, n_var: int = 2) -> None:
        self.n_var = check_int("n_var", n_var, minimum=2)
        d = self.n_var
        bounds = torch.stack([torch.zeros(d), torch.full((d,), 6.0)]).double()
        super().__init__(bounds, torch.full((2,), 0.1 * d, dtype=torch.float64), 3**d)

    def evaluate(self, X: torch.Tensor) -> torch.Tensor:
        """:math:`(\\sum \\sin \\pi x_i, \\sum \\cos \\pi x_i)`."""
        return torch.stack([torch.sin(math.pi * X).sum(-1), torch.cos(math.pi * X).sum(-1)], dim=-1)

    def piece_labels(self, X: torch.Tensor) -> torch.Tensor:
        """The 2 x 2 cell index :math:`\\sum_i \\lfloor x_i / 2 \\rfloor 3^i` (cells clamped to 0..2)."""
        X = self._check(X)
        cell = torch.clamp(torch.floor(X / 2.0), 0, 2).long()
        powers = 3 ** torch.arange(self.dim, device=X.device)
        return (cell * powers).sum(-1)

    def pymoo_problem(self) -> object:
        """``pymoo.problems.multi.omnitest.OmniTest(n_var)``."""
        from pymoo.problems.multi.omnitest import OmniTest as PymooOmniTest

        return PymooOmniTest(n_var=self.n_var)


class SYMPART(MOProblem):
    """pymoo's non-rotated SYM-PART problem (9 Pareto-set pieces) on [-100, 100]^2, minimised."""

    name = "sympart"

    def __init__(self, length: float = 1.0, v_dist: float = 10.0, h_dist: float = 10.0) -> None:
        self.a = check_positive("length", length)
        self.b = check_positive("v_dist", v_dist)
        self.c = check_positive("h_dist", h_dist)
        r = 10.0 * max(self.b, self.c)
        bounds = torch.tensor([[-r, -r], [r, r]], dtype=torch.float64)
        nadir = 4.0 * self.a**2
        super().__init__(bounds, torch.full((2,), 1.1 * nadir, dtype=torch.float64), 9)

    def _tiles(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b, c = self.a, self.b, self.c
        x1, x2 = X[..., 0], X[..., 1]
        t1 = torch.sign(x1) * torch.ceil((x1.abs() - a - c / 2) / (2 * a + c))
        t2 = torch.sign(x2) * torch.ceil((x2.abs() - b / 2) / b)
        return torch.sign(t1) * t1.abs().clamp(max=1), torch.sign(t2) * t2.abs().clamp(max=1)

    def evaluate(self, X: torch.Tensor) -> torch.Tensor:
        """:math:`((p_1 + a)^2 + p_2^2, (p_1 - a)^2 + p_2^2)`, :math:`p` the position in the design's tile."""
        t1, t2 = self._tiles(X)
        p1 = X[..., 0] - t1 * self.c
        p2 = X[..., 1] - t2 * self.b
        return torch.stack([(p1 + self.a) ** 2 + p2**2, (p1 - self.a) ** 2 + p2**2], dim=-1)

    def piece_labels(self, X: torch.Tensor) -> torch.Tensor:
        """The 3 x 3 tile index ``3 (t_1 + 1) + (t_2 + 1)``, :math:`t_i \\in \\{-1, 0, 1\\}`."""
        t1, t2 = self._tiles(self._check(X))
        return (3 * (t1 + 1) + (t2 + 1)).long()

    def pymoo_problem(self) -> object:
        """``pymoo.problems.multi.sympart.SYMPART(length, v_dist, h_dist)``."""
        from pymoo.problems.multi.sympart import SYMPART as PymooSYMPART

        return PymooSYMPART(self.a, self.b, self.c)


def sobol_pool(problem: MOProblem, n: int, seed: int) -> torch.Tensor:
    """``n`` scrambled Sobol points (float64) in the problem's box, seeded."""
    n = check_int("n", n, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    u = torch.quasirandom.SobolEngine(problem.dim, scramble=True, seed=seed).draw(n, dtype=torch.float64)
    lo, hi = problem.bounds
    return lo + (hi - lo) * u


def pool_pareto_set(problem: MOProblem, pool: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact Pareto set of a finite pool: ``(X*_pool, piece labels)``, by exhaustive evaluation."""
    from optarium.bo.pom import non_dominated_samples

    Y = problem(pool)
    mask = non_dominated_samples(Y)
    ps = pool[mask]
    return ps, problem.piece_labels(ps)
