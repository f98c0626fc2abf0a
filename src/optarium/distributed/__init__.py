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
    "TOPOLOGIES",
    "CommStats",
    "Communicator",
    "DistributedError",
    "DistributedLion",
    "DualParameters",
    "FederatedProblem",
    "HeterogeneousRidge",
    "adjacency",
    "block_range",
    "check_mixing_matrix",
    "client_index",
    "dual_accelerated_local_sgd",
    "dual_parameters",
    "fedavg",
    "is_connected",
    "launch",
    "make_heterogeneous_ridge",
    "metropolis_weights",
    "mixing_matrix",
    "pack_signs",
    "per_client_grads",
    "ridge_case",
    "round_spectral_radius",
    "scaffold",
    "spectral_gap",
    "spmd_batch",
    "spmd_run",
    "unbiased_sign",
    "unpack_signs",
]
