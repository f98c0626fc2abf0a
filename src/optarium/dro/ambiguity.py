r"""Ambiguity sets: the balls of distributions around an empirical distribution that DRO hedges against.

Each set is a small frozen dataclass that validates its radius; the solvers dispatch on its type.

*Reweighting sets* keep the support of the empirical distribution :math:`P = \sum_i p_i\delta_{\xi_i}` and
move its weights to :math:`q` (``optarium.dro.worst_case`` solves them exactly):

- :class:`KL`: :math:`\mathrm{KL}(Q\,\|\,P) = \sum_i q_i\log(q_i/p_i) \le \rho`;
- :class:`ChiSquare`: :math:`\tfrac12\sum_i p_i (q_i/p_i - 1)^2 \le \rho` (the Cressie-Read divergence with
  :math:`k = 2`, :math:`f(t) = (t-1)^2/2`, as in Duchi & Namkoong 2021; some papers drop the 1/2, which
  doubles the radius);
- :class:`TotalVariation`: :math:`\tfrac12\sum_i |q_i - p_i| \le \rho`, :math:`\rho\in[0, 1]`;
- :class:`CVaR`: :math:`q_i \le p_i/\alpha`, the worst :math:`\alpha` fraction (Rockafellar & Uryasev 2000).

*Transport sets* move the support points themselves (``optarium.dro.wasserstein``):

- :class:`Wasserstein`: :math:`W_p(Q, P) \le \rho` for the cost :math:`c(z, \xi) = \|z - \xi\|_2^p`.
"""

from __future__ import annotations

from dataclasses import dataclass

from optarium._core.validation import check_choice, check_in_range, check_nonnegative

__all__ = ["KL", "AmbiguitySet", "CVaR", "ChiSquare", "TotalVariation", "Wasserstein"]


@dataclass(frozen=True)
class AmbiguitySet:
    """Base of the ambiguity sets (use a subclass)."""

    def describe(self) -> str:
        """A short label for tables and logs, e.g. ``"KL(0.1)"``."""
        fields = ", ".join(f"{v!r}" for v in self.__dict__.values())
        return f"{type(self).__name__}({fields})"


@dataclass(frozen=True)
class KL(AmbiguitySet):
    r"""The KL ball :math:`\{Q \ll P: \mathrm{KL}(Q\,\|\,P) \le \text{radius}\}`; ``radius >= 0``."""

    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_nonnegative("radius", self.radius))


@dataclass(frozen=True)
class ChiSquare(AmbiguitySet):
    r"""The chi^2 ball :math:`\{Q \ll P: \tfrac12 E_P[(dQ/dP - 1)^2] \le \text{radius}\}`; ``radius >= 0``."""

    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_nonnegative("radius", self.radius))


@dataclass(frozen=True)
class TotalVariation(AmbiguitySet):
    r"""The total-variation ball :math:`\{Q: \tfrac12\|Q - P\|_1 \le \text{radius}\}`, radius in [0, 1]."""

    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_in_range("radius", self.radius, 0.0, 1.0))


@dataclass(frozen=True)
class CVaR(AmbiguitySet):
    r"""The CVaR set :math:`\{Q \ll P: dQ/dP \le 1/\alpha\}`, ``alpha`` in (0, 1]; alpha = 1 is P itself."""

    alpha: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_in_range("alpha", self.alpha, 0.0, 1.0, low_inclusive=False))


@dataclass(frozen=True)
class Wasserstein(AmbiguitySet):
    r"""The type-``p`` Wasserstein ball :math:`\{Q: W_p(Q, P) \le \text{radius}\}` for the Euclidean cost.

    ``p`` is 1 or 2; the transport cost of moving :math:`\xi` to :math:`z` is :math:`\|z-\xi\|_2^p`, so the
    budget is :math:`E_\pi \|z - \xi\|^p \le \text{radius}^p`.
    """

    radius: float
    p: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_nonnegative("radius", self.radius))
        check_choice("p", self.p, (1, 2))
