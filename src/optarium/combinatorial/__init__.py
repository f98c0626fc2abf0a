"""Combinatorial optimisation on graphs: problems as data, exact and classical references, GNNs, samplers.

The family layer (:mod:`.graphs`, :mod:`.problems`, :mod:`.exact`, :mod:`.baselines`, :mod:`.gnn`) serves
the methods: :mod:`.qubo_ot` (qubo-ot-sampling) and :mod:`.asap` (asap-co, over the TSP/CVRP instances,
references and baselines of :mod:`.routing`). ``ortools`` and ``dwave-neal`` (the ``combinatorial``
extra) are imported inside the functions that use them.
"""

from optarium.combinatorial.asap import (
    ASAPPolicy,
    AttentionPolicy,
    SelectionHead,
    adapt,
    fomaml_selection,
    train_pomo,
)
from optarium.combinatorial.baselines import (
    greedy_decode,
    greedy_maxcut,
    greedy_mis,
    random_order_decode,
    simulated_annealing,
)
from optarium.combinatorial.exact import ExactSolution, cpsat_solve
from optarium.combinatorial.gcon import GCONConv, GCONNet, copt_loss, decode, train_unsupervised, transfer
from optarium.combinatorial.gnn import GIN, GINControl
from optarium.combinatorial.graphs import adjacency, barabasi_albert, edge_index, erdos_renyi, rb_graph
from optarium.combinatorial.problems import (
    QUBO,
    coordinate_round,
    is_feasible,
    multilinear_energy,
    objective,
    repair,
)
from optarium.combinatorial.qubo_ot import OTControlSampler, laplace_energy, nag_laplace_solver
from optarium.combinatorial.routing import (
    cvrp_instances,
    held_karp,
    nearest_neighbour,
    tour_length,
    tsp_instances,
    two_opt,
)

__all__ = [
    "GIN",
    "QUBO",
    "ASAPPolicy",
    "AttentionPolicy",
    "ExactSolution",
    "GCONConv",
    "GCONNet",
    "GINControl",
    "OTControlSampler",
    "SelectionHead",
    "adapt",
    "adjacency",
    "barabasi_albert",
    "coordinate_round",
    "copt_loss",
    "cpsat_solve",
    "cvrp_instances",
    "decode",
    "edge_index",
    "erdos_renyi",
    "fomaml_selection",
    "greedy_decode",
    "greedy_maxcut",
    "greedy_mis",
    "held_karp",
    "is_feasible",
    "laplace_energy",
    "multilinear_energy",
    "nag_laplace_solver",
    "nearest_neighbour",
    "objective",
    "random_order_decode",
    "rb_graph",
    "repair",
    "simulated_annealing",
    "tour_length",
    "train_pomo",
    "train_unsupervised",
    "transfer",
    "tsp_instances",
    "two_opt",
]
