"""Distributed, federated and decentralized optimization on one SPMD layer over ``torch.distributed``.

A process holds a block of clients stacked on a leading axis and talks through a :class:`Communicator`
(client sums and means, all-gather, gossip with a mixing matrix, broadcast), which counts rounds and bits per
client and direction. The same code runs with world size 1 (all clients in one process, no process
group), as local gloo processes started by :func:`launch`, and unchanged under ``torchrun``
(``Communicator.from_env``; nccl on GPUs).
"""

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
    fedavg,
    round_spectral_radius,
    scaffold,
)
from optarium.distributed.federated import (
    FederatedProblem,
    HeterogeneousRidge,
    client_index,
    make_heterogeneous_ridge,
)
from optarium.distributed.launch import launch
from optarium.distributed.lion import DistributedLion, per_client_grads, unbiased_sign
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
    "round_spectral_radius",
    "scaffold",
    "spectral_gap",
    "unbiased_sign",
    "unpack_signs",
]
