r"""The SPMD communicator: clients stacked on a leading axis, collectives over ``torch.distributed``.

Programming model. ``n_clients`` logical clients are split into contiguous blocks, one block per process
(rank); a process holds its clients' tensors stacked on a leading axis of length ``n_local``. The same
algorithm code then runs

- with world size 1 (:meth:`Communicator.local`): every client in this process, no process group, pure
  tensor ops (the fast default for experiments and tests);
- as ``world_size`` processes that :func:`optarium.distributed.launch` spawns (gloo on loopback);
- unchanged under ``torchrun`` (:meth:`Communicator.from_env`; nccl on GPUs, gloo otherwise).

Every client-level operation takes ``x`` of shape ``(n_local, ...)``. Client reductions first reduce the
local block, then call ``dist.all_reduce`` across ranks, so every rank gets the same result. No sockets,
queues or messages of our own: every byte between processes goes through a ``torch.distributed`` collective.

Communication accounting (:class:`CommStats`). Each collective records, **per client and per direction**,
the rounds and the bits of the *logical* exchange of the algorithm, computed from the payload tensor that is
actually handed to the collective (``numel * bits_per_element``; default the dtype's width, so a sign vector
packed into ``uint8`` by :func:`pack_signs` counts 1 bit per coordinate, padded to a multiple of 8). The
model is a client <-> server (or all-to-all) exchange:

============================  =========================================  ===================================
operation                     uplink per client (client -> others)       downlink per client
============================  =========================================  ===================================
``client_sum/mean/max/min``   its payload                                 the reduced result
``all_gather_clients``        its payload                                 the other ``n_clients - 1`` payloads
``gather_clients`` (to a dst) its payload                                 nothing
``broadcast`` (from the src)  nothing                                     the payload
``gossip(x, W)``              payload x out-degree of the client in W     payload x in-degree
``all_reduce`` (ranks)        the payload (process level)                 the payload
============================  =========================================  ===================================

These counts do not depend on how the clients are spread over processes (the same run at world size 1 and
2 reports the same numbers). What physically crossed process boundaries is counted separately in
``CommStats.wire_bytes`` (bytes this process handed to ``torch.distributed``; 0 at world size 1).
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from optarium._core.validation import check_choice, check_int, check_positive

__all__ = [
    "CommStats",
    "Communicator",
    "DistributedError",
    "block_range",
    "pack_signs",
    "unpack_signs",
]

_OPS = ("sum", "mean", "max", "min")


class DistributedError(RuntimeError):
    """A distributed run failed: a rank raised, died, or the run timed out (the message names the rank)."""


def block_range(n_clients: int, world_size: int, rank: int) -> range:
    """The global client indices held by ``rank``: contiguous blocks, the first ``n % ws`` one larger."""
    n_clients = check_int("n_clients", n_clients, minimum=1)
    world_size = check_int("world_size", world_size, minimum=1)
    rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
    base, extra = divmod(n_clients, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def _bits_of(t: torch.Tensor) -> int:
    if t.dtype == torch.bool:
        return 8
    if t.is_floating_point() or t.is_complex():
        return torch.finfo(t.dtype).bits * (2 if t.is_complex() else 1)
    return torch.iinfo(t.dtype).bits


_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _shifts(device: torch.device) -> torch.Tensor:
    if device not in _SHIFTS:
        _SHIFTS[device] = torch.arange(7, -1, -1, device=device, dtype=torch.uint8)
    return _SHIFTS[device]


def pack_signs(s: torch.Tensor) -> torch.Tensor:
    """Pack a sign tensor (``> 0`` is bit 1, anything else bit 0) along its last axis into ``uint8``.

    ``(..., d)`` becomes ``(..., ceil(d / 8))``; the last byte is zero-padded. Inverse: :func:`unpack_signs`.
    """
    d = s.shape[-1]
    pad = (-d) % 8
    bits = (s > 0).to(torch.uint8)
    if pad:
        bits = torch.nn.functional.pad(bits, (0, pad))
    bits = bits.reshape(*s.shape[:-1], (d + pad) // 8, 8)
    return (bits << _shifts(s.device)).sum(-1, dtype=torch.uint8)


def unpack_signs(packed: torch.Tensor, d: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Unpack :func:`pack_signs` output into ``(..., d)`` signs in ``{-1, +1}`` of ``dtype``."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed: must be a uint8 tensor, got {packed.dtype}")
    bits = (packed.unsqueeze(-1) >> _shifts(packed.device)) & 1
    bits = bits.reshape(*packed.shape[:-1], -1)[..., :d]
    return bits.to(dtype) * 2 - 1


@dataclass
class CommStats:
    """Communication counters of one process: per local client and per direction, rounds and bits.

    ``uplink_bits`` / ``downlink_bits`` are float64 tensors of length ``n_local`` (one entry per local
    client); rounds are counted once per collective a client takes part in (the same for all clients).
    ``wire_bytes`` counts the bytes this process handed to ``torch.distributed``; ``ops`` counts calls.
    """

    n_local: int
    uplink_rounds: int = 0
    downlink_rounds: int = 0
    uplink_bits: torch.Tensor = field(default=None)  # type: ignore[assignment]
    downlink_bits: torch.Tensor = field(default=None)  # type: ignore[assignment]
    wire_bytes: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    _paused: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.uplink_bits is None:
            self.uplink_bits = torch.zeros(self.n_local, dtype=torch.float64)
        if self.downlink_bits is None:
            self.downlink_bits = torch.zeros(self.n_local, dtype=torch.float64)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Collectives inside the block are not counted (evaluation and monitoring traffic); nests."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def reset(self) -> None:
        """Zero every counter."""
        self.uplink_rounds = self.downlink_rounds = self.wire_bytes = 0
        self.uplink_bits.zero_()
        self.downlink_bits.zero_()
        self.ops.clear()

    def record(
        self,
        op: str,
        *,
        up: float | torch.Tensor = 0.0,
        down: float | torch.Tensor = 0.0,
        wire_bytes: int = 0,
    ) -> None:
        """Add one collective: ``up``/``down`` bits per local client (a scalar or one value per client)."""
        if self._paused:
            return
        self.ops[op] = self.ops.get(op, 0) + 1
        for value, attr, rounds in (
            (up, "uplink_bits", "uplink_rounds"),
            (down, "downlink_bits", "downlink_rounds"),
        ):
            if isinstance(value, torch.Tensor):
                vec = value.to(torch.float64)
                if bool((vec != 0).any()):
                    setattr(self, rounds, getattr(self, rounds) + 1)
                    getattr(self, attr).add_(vec)
            elif value:
                setattr(self, rounds, getattr(self, rounds) + 1)
                getattr(self, attr).add_(float(value))
        self.wire_bytes += int(wire_bytes)

    def as_dict(self) -> dict[str, float]:
        """Flat summary: rounds, mean and max bits per local client per direction, total bits and bytes."""
        up = self.uplink_bits
        down = self.downlink_bits
        n = max(self.n_local, 1)
        up_mean = float(up.sum()) / n
        down_mean = float(down.sum()) / n
        return {
            "uplink_rounds": float(self.uplink_rounds),
            "downlink_rounds": float(self.downlink_rounds),
            "uplink_bits": up_mean,
            "downlink_bits": down_mean,
            "uplink_bits_max": float(up.max()) if up.numel() else 0.0,
            "downlink_bits_max": float(down.max()) if down.numel() else 0.0,
            "bits": up_mean + down_mean,
            "bytes": (up_mean + down_mean) / 8.0,
            "wire_bytes": float(self.wire_bytes),
        }


class Communicator:
    """SPMD handle of one process holding the clients ``local_clients`` (see the module docstring).

    Build one with :meth:`local` (world size 1), :meth:`from_env` (``torchrun`` or a launched rank), or let
    :func:`optarium.distributed.launch` build it. Attributes: ``rank``, ``world_size``, ``n_clients``,
    ``local_clients`` (a ``range``), ``n_local``, ``stats`` (:class:`CommStats`), ``group`` (the process
    group or ``None``).
    """

    def __init__(self, n_clients: int, rank: int = 0, world_size: int = 1, group: Any = None) -> None:
        world_size = check_int("world_size", world_size, minimum=1)
        rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
        n_clients = check_int("n_clients", n_clients, minimum=1)
        if n_clients < world_size:
            raise ValueError(f"n_clients: must be >= world_size ({world_size}) so every rank holds a client")
        if world_size > 1 and not dist.is_initialized():
            raise RuntimeError("world_size > 1 needs an initialised torch.distributed process group")
        self.rank = rank
        self.world_size = world_size
        self.n_clients = n_clients
        self.group = group
        self.blocks = [block_range(n_clients, world_size, r) for r in range(world_size)]
        self.local_clients = self.blocks[rank]
        self.n_local = len(self.local_clients)
        self.stats = CommStats(self.n_local)

    # ------------------------------------------------------------------ construction
    @classmethod
    def local(cls, n_clients: int) -> Communicator:
        """World size 1: every client in this process; collectives are plain tensor ops."""
        return cls(n_clients, 0, 1)

    @classmethod
    def from_env(cls, n_clients: int, *, backend: str | None = None, timeout_s: float = 60.0) -> Communicator:
        """Join (initialising it if needed) the process group described by ``RANK``/``WORLD_SIZE`` env vars.

        This is the ``torchrun`` entry point: ``MASTER_ADDR``/``MASTER_PORT`` are read by torch's ``env://``
        rendezvous. ``backend`` defaults to nccl when CUDA is available, else gloo. Without ``WORLD_SIZE``
        (and no initialised group) it falls back to :meth:`local`.
        """
        timeout_s = check_positive("timeout_s", timeout_s)
        if not dist.is_initialized():
            if "WORLD_SIZE" not in os.environ:
                return cls.local(n_clients)
            if backend is None:
                backend = "nccl" if torch.cuda.is_available() else "gloo"
            check_choice("backend", backend, ("gloo", "nccl"))
            if backend == "nccl":
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(
                backend=backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s)
            )
        return cls(n_clients, dist.get_rank(), dist.get_world_size())

    def __repr__(self) -> str:
        return (
            f"Communicator(rank={self.rank}, world_size={self.world_size}, n_clients={self.n_clients}, "
            f"local_clients={self.local_clients})"
        )

    # ------------------------------------------------------------------ helpers
    def _check_block(self, name: str, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: must be a tensor, got {type(x).__name__}")
        if x.dim() == 0 or x.shape[0] != self.n_local:
            raise ValueError(
                f"{name}: leading axis must hold the {self.n_local} local clients, got shape {tuple(x.shape)}"
            )

    @staticmethod
    def _payload_bits(x: torch.Tensor, bits_per_element: float | None) -> float:
        bpe = _bits_of(x) if bits_per_element is None else float(bits_per_element)
        return float(x.numel()) * bpe

    def _wire(self, t: torch.Tensor) -> int:
        return t.numel() * t.element_size() if self.world_size > 1 else 0

    @property
    def distributed(self) -> bool:
        """Whether collectives cross processes (world size > 1)."""
        return self.world_size > 1

    # ------------------------------------------------------------------ client-level collectives
    def client_reduce(
        self, x: torch.Tensor, op: str = "sum", *, bits_per_element: float | None = None
    ) -> torch.Tensor:
        """Reduce ``x`` (``(n_local, ...)``) over all clients on all ranks with ``op`` (sum/mean/max/min)."""
        check_choice("op", op, _OPS)
        self._check_block("x", x)
        per_client = x[0]
        if op in ("sum", "mean"):
            out = x.sum(0)
        elif op == "max":
            out = x.amax(0)
        else:
            out = x.amin(0)
        if self.distributed:
            rop = {"sum": dist.ReduceOp.SUM, "mean": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}.get(
                op, dist.ReduceOp.MIN
            )
            out = out.contiguous()
            dist.all_reduce(out, op=rop, group=self.group)
        if op == "mean":
            out = out / self.n_clients
        bits = self._payload_bits(per_client, bits_per_element)
        self.stats.record(f"client_{op}", up=bits, down=bits, wire_bytes=2 * self._wire(out))
        return out

    def client_sum(self, x: torch.Tensor, *, bits_per_element: float | None = None) -> torch.Tensor:
        """Sum of ``x`` over all clients (identical on every rank)."""
        return self.client_reduce(x, "sum", bits_per_element=bits_per_element)

    def client_mean(self, x: torch.Tensor, *, bits_per_element: float | None = None) -> torch.Tensor:
        """Mean of ``x`` over all clients (identical on every rank)."""
        return self.client_reduce(x, "mean", bits_per_element=bits_per_element)

    def client_max(self, x: torch.Tensor, *, bits_per_element: float | None = None) -> torch.Tensor:
        """Elementwise max of ``x`` over all clients (identical on every rank)."""
        return self.client_reduce(x, "max", bits_per_element=bits_per_element)

    def _gather_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """All clients' rows, stacked in global order (pads blocks to equal size for the collective).

        Always a new tensor (a copy of ``x`` at world size 1), never a view of the input.
        """
        if not self.distributed:
            return x.clone()
        size = max(len(b) for b in self.blocks)
        buf = x.new_zeros((size, *x.shape[1:]))
        buf[: self.n_local] = x
        parts = [torch.empty_like(buf) for _ in range(self.world_size)]
        dist.all_gather(parts, buf.contiguous(), group=self.group)
        return torch.cat([p[: len(b)] for p, b in zip(parts, self.blocks, strict=True)])

    def all_gather_clients(self, x: torch.Tensor, *, bits_per_element: float | None = None) -> torch.Tensor:
        """Every client's ``x`` on every rank: ``(n_clients, ...)`` in global client order (a new tensor)."""
        self._check_block("x", x)
        out = self._gather_blocks(x)
        bits = self._payload_bits(x[0], bits_per_element)
        wire = self._wire(x) * self.world_size if self.distributed else 0
        self.stats.record("all_gather_clients", up=bits, down=bits * (self.n_clients - 1), wire_bytes=wire)
        return out

    def gather_clients(
        self, x: torch.Tensor, dst: int = 0, *, bits_per_element: float | None = None
    ) -> torch.Tensor | None:
        """Every client's ``x`` (``(n_clients, ...)``, global order) on rank ``dst``; ``None`` elsewhere.

        The uplink of a client -> server exchange (the server lives on rank ``dst``). The result is a new
        tensor (a copy of ``x`` at world size 1), never a view of the input.
        """
        self._check_block("x", x)
        dst = check_int("dst", dst, minimum=0, maximum=self.world_size - 1)
        out: torch.Tensor | None = None
        wire = 0
        if not self.distributed:
            out = x.clone()
        else:
            size = max(len(b) for b in self.blocks)
            buf = x.new_zeros((size, *x.shape[1:]))
            buf[: self.n_local] = x
            parts = [torch.empty_like(buf) for _ in range(self.world_size)] if self.rank == dst else None
            dist.gather(buf.contiguous(), parts, dst=dst, group=self.group)
            wire = self._wire(buf)
            out = (
                torch.cat([p[: len(b)] for p, b in zip(parts, self.blocks, strict=True)])
                if parts is not None
                else None
            )
        self.stats.record("gather_clients", up=self._payload_bits(x[0], bits_per_element), wire_bytes=wire)
        return out

    def gossip(
        self, x: torch.Tensor, W: torch.Tensor, *, bits_per_element: float | None = None
    ) -> torch.Tensor:
        """Rows ``local_clients`` of ``W @ X`` for the global stacked ``X`` (one gossip round).

        ``W`` is a dense ``(n_clients, n_clients)`` mixing matrix (see :mod:`optarium.distributed.topology`),
        the same on every rank. At world size 1 this is one matmul; across ranks each process receives, by
        point-to-point ``isend``/``irecv``, only the rows of other blocks that its clients' neighbours hold.
        Accounting: a client sends its payload once per out-neighbour and receives once per in-neighbour.
        """
        self._check_block("x", x)
        if not isinstance(W, torch.Tensor) or W.shape != (self.n_clients, self.n_clients):
            shape = tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__
            raise ValueError(f"W: must be a ({self.n_clients}, {self.n_clients}) tensor, got {shape}")
        W = W.to(device=x.device, dtype=x.dtype if x.is_floating_point() else W.dtype)
        flat = x.reshape(self.n_local, -1)
        rows = W[self.local_clients.start : self.local_clients.stop]
        wire = 0
        if not self.distributed:
            mixed = rows @ flat
        else:
            nz = W != 0
            full = flat.new_zeros((self.n_clients, flat.shape[1]))
            full[self.local_clients.start : self.local_clients.stop] = flat
            ops = []
            recv: list[tuple[torch.Tensor, torch.Tensor]] = []
            mine = self.local_clients
            for r, blk in enumerate(self.blocks):
                if r == self.rank:
                    continue
                # rows of my block that rank r's clients need, and rows of r's block that mine need
                send_idx = torch.nonzero(nz[blk.start : blk.stop, mine.start : mine.stop].any(0)).flatten()
                recv_idx = torch.nonzero(nz[mine.start : mine.stop, blk.start : blk.stop].any(0)).flatten()
                if send_idx.numel():
                    payload = flat[send_idx].contiguous()
                    wire += self._wire(payload)
                    ops.append(dist.P2POp(dist.isend, payload, r, group=self.group))
                if recv_idx.numel():
                    buf = flat.new_empty((recv_idx.numel(), flat.shape[1]))
                    ops.append(dist.P2POp(dist.irecv, buf, r, group=self.group))
                    recv.append((recv_idx + blk.start, buf))
            if ops:
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            for idx, buf in recv:
                full[idx] = buf
            mixed = rows @ full
        # neighbours without self-loops, from one nonzero mask (no copy of W per round)
        nz = W != 0
        self_loop = nz.diagonal().to(torch.int64)
        out_deg = (nz.sum(0) - self_loop)[self.local_clients.start : self.local_clients.stop]
        in_deg = (nz.sum(1) - self_loop)[self.local_clients.start : self.local_clients.stop]
        bits = self._payload_bits(x[0], bits_per_element)
        self.stats.record(
            "gossip",
            up=out_deg.to(torch.float64) * bits,
            down=in_deg.to(torch.float64) * bits,
            wire_bytes=wire,
        )
        return mixed.reshape(x.shape)

    # ------------------------------------------------------------------ process-level collectives
    def all_reduce(
        self, x: torch.Tensor, op: str = "sum", *, bits_per_element: float | None = None
    ) -> torch.Tensor:
        """Reduce ``x`` across ranks (process level; ``x`` is this process's value): sum/mean/max/min.

        Returns a new tensor (``x`` is not modified). At world size 1 it returns a copy of ``x``.
        """
        check_choice("op", op, _OPS)
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x: must be a tensor, got {type(x).__name__}")
        out = x.clone().contiguous()
        if self.distributed:
            rop = {"sum": dist.ReduceOp.SUM, "mean": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}.get(
                op, dist.ReduceOp.MIN
            )
            dist.all_reduce(out, op=rop, group=self.group)
            if op == "mean":
                out = out / self.world_size
        bits = self._payload_bits(x, bits_per_element)
        self.stats.record(f"all_reduce_{op}", up=bits, down=bits, wire_bytes=2 * self._wire(out))
        return out

    def broadcast(
        self, x: torch.Tensor, src: int = 0, *, bits_per_element: float | None = None
    ) -> torch.Tensor:
        """``x`` of rank ``src`` on every rank (the server -> clients downlink; ``x`` is updated in place)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x: must be a tensor, got {type(x).__name__}")
        src = check_int("src", src, minimum=0, maximum=self.world_size - 1)
        wire = 0
        if self.distributed:
            if not x.is_contiguous():
                raise ValueError("x: must be contiguous to be broadcast")
            dist.broadcast(x, src=src, group=self.group)
            wire = self._wire(x)
        self.stats.record("broadcast", down=self._payload_bits(x, bits_per_element), wire_bytes=wire)
        return x

    def barrier(self) -> None:
        """Wait for every rank (a no-op at world size 1)."""
        if self.distributed:
            dist.barrier(group=self.group)

    def shard(self, x: torch.Tensor) -> torch.Tensor:
        """The local block of a tensor that holds all ``n_clients`` on its leading axis."""
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != self.n_clients:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x: leading axis must hold the {self.n_clients} clients, got {shape}")
        return x[self.local_clients.start : self.local_clients.stop]
