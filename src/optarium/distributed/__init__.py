"""Distributed, federated and decentralized optimization on one SPMD layer over ``torch.distributed``.

A process holds a block of clients stacked on a leading axis and talks through a :class:`Communicator`
(client sums and means, all-gather, gossip with a mixing matrix, broadcast), which counts rounds and bits per
client and direction. The same code runs with world size 1 (all clients in one process, no process
group), as local gloo processes started by :func:`launch`, and unchanged under ``torchrun``
(``Communicator.from_env``; nccl on GPUs).

Modules, one job each:

- :mod:`~optarium.distributed.comm` (the communicator and its statistics), :mod:`~optarium.distributed.launch`
  (local gloo processes), :mod:`~optarium.distributed.topology` (graphs and mixing matrices);
- :mod:`~optarium.distributed.federated`: the :class:`FederatedProblem` protocol, the heterogeneous ridge
  problem and :func:`ridge_case`, the conformance case of a federated solver;
- :mod:`~optarium.distributed.rounds`: what every federated solver's round loop shares (set-up, gradient
  noise, local SGD, recorded metrics, and the stopping rules on :class:`optarium._core.SolverLoop`); a new
  federated solver starts there;
- :mod:`~optarium.distributed.dual_accelerated_local_sgd` (the method), :mod:`~optarium.distributed.baselines`
  (FedAvg, SCAFFOLD), :mod:`~optarium.distributed.lion` (distributed Lion);
- :mod:`~optarium.distributed.ls2mc_gda` (LS²MC-GDA, federated multi-level compositional minimax, with
  local SGDA, Local-SCGDAM and CODASCA) on the problems of :mod:`~optarium.distributed.compositional`;
- :mod:`~optarium.distributed.decentralized_affine` (APAPC + Chebyshev for decentralized mixed affine
  constraints, with plain APAPC, a primal-dual baseline and EXTRA; its own SPMD entry ``spmd_solve``) and
  :mod:`~optarium.distributed.decentralized_affine_baselines` (Tracking-ADMM, DPMM);
- :mod:`~optarium.distributed.spmd`: :func:`spmd_run` / :func:`spmd_batch`, the entry points for
  :func:`launch`; each rank returns the solver's :class:`~optarium._core.Result`.
"""

from optarium.distributed.baselines import fedavg, scaffold
from optarium.distributed.comm import (
    CommStats,
    Communicator,
    DistributedError,
    block_range,
    pack_signs,
    unpack_signs,
)
from optarium.distributed.compositional import (
    CompositionalMinimaxProblem,
    TanhCompositional,
    make_tanh_compositional,
    nonnegative,
)
from optarium.distributed.decentralized_affine import (
    InfeasibleProblemError,
    MixedAffineProblem,
    chebyshev_apply,
    make_mixed_affine,
    solve_mixed_affine,
)
from optarium.distributed.dual_accelerated_local_sgd import (
    DualParameters,
    dual_accelerated_local_sgd,
    dual_parameters,
    round_spectral_radius,
)
from optarium.distributed.federated import (
    FederatedProblem,
    HeterogeneousRidge,
    client_index,
    make_heterogeneous_ridge,
    ridge_case,
)
from optarium.distributed.launch import launch
from optarium.distributed.lion import DistributedLion, per_client_grads, unbiased_sign
from optarium.distributed.ls2mc_gda import LS2MCGDA, codasca, local_scgdam, local_sgda, ls2mc_gda
from optarium.distributed.spmd import spmd_batch, spmd_run
from optarium.distributed.topology import (
    TOPOLOGIES,
    adjacency,
    check_mixing_matrix,
    is_connected,
    metropolis_weights,
    mixing_matrix,
    spectral_gap,
)

__all__ = [
    "LS2MCGDA",
    "TOPOLOGIES",
    "CommStats",
    "Communicator",
    "CompositionalMinimaxProblem",
    "DistributedError",
    "DistributedLion",
    "DualParameters",
    "FederatedProblem",
    "HeterogeneousRidge",
    "InfeasibleProblemError",
    "MixedAffineProblem",
    "TanhCompositional",
    "adjacency",
    "block_range",
    "chebyshev_apply",
    "check_mixing_matrix",
    "client_index",
    "codasca",
    "dual_accelerated_local_sgd",
    "dual_parameters",
    "fedavg",
    "is_connected",
    "launch",
    "local_scgdam",
    "local_sgda",
    "ls2mc_gda",
    "make_heterogeneous_ridge",
    "make_mixed_affine",
    "make_tanh_compositional",
    "metropolis_weights",
    "mixing_matrix",
    "nonnegative",
    "pack_signs",
    "per_client_grads",
    "ridge_case",
    "round_spectral_radius",
    "scaffold",
    "solve_mixed_affine",
    "spectral_gap",
    "spmd_batch",
    "spmd_run",
    "unbiased_sign",
    "unpack_signs",
]
