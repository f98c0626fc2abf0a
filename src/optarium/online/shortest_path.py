r"""Online shortest path on a layered DAG with an energy budget: the anytime-coco instances.

A DAG source -> ``layers`` layers of ``width`` nodes -> sink, consecutive layers fully connected, has
``width ** layers`` source-sink paths of ``layers + 1`` edges each. The learner plays a distribution
:math:`x \in \Delta_P` over the paths (:class:`optarium.online.anytime_coco.Simplex`); round :math:`t`
reveals per-edge delays and energies, hence the linear cost :math:`f_t(x) = \sum_P x_P\,\mathrm{delay}_t(P)`
and the linear constraint :math:`g_t(x) = \sum_P x_P\,\mathrm{energy}_t(P) - B` (spec ``anytime-coco.md``,
whose instance design this follows; the paper's own instance, built from RIPE Atlas measurements, is not
available).

Per seed: per-edge energies :math:`U[0.3, 1]`, those of one "green" path (drawn per seed) 0.1, plus
per-round noise :math:`U[-0.05, 0.05]` per edge; budget :math:`B = 0.25\,(L + 1)`, so the green path is
feasible in every round (the feasible set :math:`X^*` is never empty) and paths without green edges
violate by a constant amount.

- ``kind="binding"`` (adversarial costs): delays :math:`\mathrm{base}_e \sim U[0, 1]` plus a burst of
  :math:`2/(L+1)` on the edges of the path with the smallest cumulative delay so far, re-chosen every
  ``burst_every`` = 500 rounds (it punishes follow-the-leader; the spec's "currently cheapest path", read as
  cumulative; it does not depend on the learner's play, so the sequence is oblivious and reproducible).
- ``kind="regret"`` (stochastic costs): delays :math:`\mathrm{base}_e + N(0, 0.1^2)` per edge and round,
  green edges' base 0, the others' :math:`U[0.2, 1]`: the green path is the best fixed feasible point.

Rounds are generated in chunks of ``chunk`` rounds, each from its own derived seed, so the energies of any
chunk can be regenerated (the comparator's cutting planes at :math:`10^6` rounds scan them again instead of
keeping every row in memory); the binding costs depend on the cumulative costs, so they are streamed in order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from optarium._core.seeding import derive_seed
from optarium._core.validation import check_choice, check_int

__all__ = ["ShortestPathInstance", "best_fixed_feasible", "layered_dag"]


def layered_dag(layers: int, width: int) -> np.ndarray:
    """The ``(paths, edges)`` 0/1 incidence matrix of the layered DAG (paths in lexicographic order)."""
    layers = check_int("layers", layers, minimum=1)
    width = check_int("width", width, minimum=1)
    # edge ids: source -> layer 0 (width), layer i -> layer i + 1 (width^2 each), last layer -> sink (width)
    n_edges = 2 * width + (layers - 1) * width * width
    paths = list(itertools.product(range(width), repeat=layers))
    A = np.zeros((len(paths), n_edges))
    for p, nodes in enumerate(paths):
        A[p, nodes[0]] = 1.0
        for i in range(layers - 1):
            A[p, width + i * width * width + nodes[i] * width + nodes[i + 1]] = 1.0
        A[p, width + (layers - 1) * width * width + nodes[-1]] = 1.0
    return A


@dataclass
class ShortestPathInstance:
    """One seeded instance; :meth:`chunks` streams ``(delays, energies)`` as ``(n, paths)`` arrays.

    Attributes ``A`` (incidence), ``green`` (the green path's index), ``budget`` (:math:`B`),
    ``edge_energy`` and ``base`` (per-edge, fixed per seed).
    """

    kind: str
    seed: int
    layers: int = 2
    width: int = 2
    burst_every: int = 500
    chunk: int = 10_000
    energy_noise: float = 0.05
    A: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, ("binding", "regret"))
        self.A = layered_dag(self.layers, self.width)
        rng = np.random.default_rng(derive_seed(self.seed, "anytime-coco-instance", self.layers, self.width))
        n_paths, n_edges = self.A.shape
        self.green = int(rng.integers(n_paths))
        green_edges = self.A[self.green] > 0
        self.edge_energy = rng.uniform(0.3, 1.0, n_edges)
        self.edge_energy[green_edges] = 0.1
        self.budget = 0.25 * (self.layers + 1)
        if self.kind == "binding":
            self.base = rng.uniform(0.0, 1.0, n_edges)
        else:
            self.base = rng.uniform(0.2, 1.0, n_edges)
            self.base[green_edges] = 0.0

    @property
    def n_paths(self) -> int:
        """The number of paths (the dimension of the decision)."""
        return int(self.A.shape[0])

    def energies(self, k: int) -> np.ndarray:
        """The path energies of chunk ``k`` (rounds ``k * chunk + 1 ...``), ``(chunk, paths)``."""
        rng = np.random.default_rng(derive_seed(self.seed, "anytime-coco-energy", self.kind, k))
        noise = rng.uniform(-self.energy_noise, self.energy_noise, (self.chunk, self.A.shape[1]))
        return (self.edge_energy + noise) @ self.A.T

    def chunks(self, rounds: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(delays, energies)`` per path for rounds 1..``rounds``, in chunks of at most ``chunk`` rounds."""
        rounds = check_int("rounds", rounds, minimum=1)
        cum = np.zeros(self.n_paths)
        burst_size = 2.0 / (self.layers + 1)
        for k in range(-(-rounds // self.chunk)):
            n = min(self.chunk, rounds - k * self.chunk)
            E = self.energies(k)[:n]
            if self.kind == "regret":
                rng = np.random.default_rng(derive_seed(self.seed, "anytime-coco-delay", k))
                C = (self.base + 0.1 * rng.standard_normal((n, self.A.shape[1]))) @ self.A.T
            else:
                C = np.empty((n, self.n_paths))
                base = self.base @ self.A.T
                t0 = k * self.chunk
                i = 0
                while i < n:  # one block of burst_every rounds (or the chunk's end) at a time
                    t = t0 + i
                    if t % self.burst_every == 0:
                        leader = int(np.argmin(cum))
                        self._burst = base + burst_size * (self.A @ self.A[leader])
                    j = min(n, i + self.burst_every - t % self.burst_every)
                    C[i:j] = self._burst
                    cum += (j - i) * self._burst
                    i = j
            yield C, E


def best_fixed_feasible(
    instance: ShortestPathInstance,
    cum_cost: np.ndarray,
    t: int,
    *,
    rows: list[np.ndarray] | None = None,
    tol: float = 1e-9,
    max_cuts: int = 200,
) -> tuple[float, np.ndarray, int]:
    r"""min over :math:`x \in X^*_t` of :math:`\langle c, x\rangle`, :math:`X^*_t = \{x\in\Delta:
    \mathrm{energy}_s \cdot x \le B\ \forall s \le t\}`, by cutting planes (scipy HiGHS).

    Starts from the rows in ``rows`` (or the mean energy row of chunk 0, a relaxation) and adds the most
    violated round's row until no row of rounds 1..t is violated by more than ``tol``. ``rows`` is extended
    in place, so successive checkpoints warm-start. Returns (value, x, number of LPs solved).
    """
    from scipy.optimize import linprog

    P = instance.n_paths
    if rows is None:
        rows = []
    if not rows:
        rows.append(instance.energies(0)[: min(t, instance.chunk)].mean(0))
    n_chunks = -(-t // instance.chunk)
    for n_lp in range(1, max_cuts + 1):
        res = linprog(
            cum_cost,
            A_ub=np.array(rows),
            b_ub=np.full(len(rows), instance.budget),
            A_eq=np.ones((1, P)),
            b_eq=[1.0],
            bounds=[(0.0, None)] * P,
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"best_fixed_feasible: linprog failed at t = {t}: {res.message}")
        x = res.x
        worst, worst_row = -np.inf, None
        for k in range(n_chunks):
            E = instance.energies(k)[: t - k * instance.chunk]
            v = E @ x
            i = int(np.argmax(v))
            if v[i] > worst:
                worst, worst_row = float(v[i]), E[i]
        if worst <= instance.budget + tol:
            return float(cum_cost @ x), x, n_lp
        rows.append(worst_row)
    raise RuntimeError(f"best_fixed_feasible: no feasible optimum within {max_cuts} cuts at t = {t}")
