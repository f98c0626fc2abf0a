r"""Distributed Lion and Lion-VR: full-precision gradient averaging, or bidirectional 1-bit sign compression.

Paper: Wei Jiang, Mao Xu, Wenhao Yang, Yibo Wang, Zechao Li, Lijun Zhang, "Convergence Analysis of the Lion
Optimizer in Centralized and Distributed Settings", ICML 2026, arXiv:2508.12327. Claims: with ``n`` nodes,
distributed Lion and Lion-VR get a linear speed-up, :math:`O(d^{1/2}(nT)^{-1/4})` and
:math:`O(d^{1/2}(nT)^{-1/3})`; the variant with unbiased sign compression in both directions converges at
:math:`O(\max\{d^{1/4}T^{-1/4}, d^{1/10}n^{-1/5}T^{-1/5}\})` (:math:`O(d^{1/4}T^{-1/4})` with VR).

SPMD over :class:`~optarium.distributed.comm.Communicator`: this process holds the clients
``comm.local_clients`` and ``step(grad_fn)`` receives their stochastic gradients stacked on a leading axis,
computed in one batched call. The parameters :math:`x` are shared (identical on every client and rank).

**Full precision** (``compression="none"``). :math:`\bar g_t = \frac1n\sum_i g^i_t` (one all-reduce; with VR
also :math:`\bar h_t = \frac1n\sum_i \nabla f_i(x_{t-1};\xi^i_t)`, in the same message), then the centralised
Lion / Lion-VR step of :func:`optarium.optim.lion_vr.lion_update_` on the shared :math:`x` and one shared
momentum. So ``n = 1`` is exactly :class:`~optarium.optim.Lion` / :class:`~optarium.optim.LionVR`.

**Sign-compressed** (``compression="unbiased_sign"``; suggested form, the paper's pseudo-code was not
reachable). Each client keeps its own momentum :math:`m^i` and forms (VR: :math:`u^i = m^i_{t-1} + g^i_t -
h^i_t`, else :math:`u^i = m^i_{t-1}`)

.. math::
    c^i_t = \beta_1 u^i + (1-\beta_1) g^i_t,\qquad m^i_t = \beta_2 u^i + (1-\beta_2) g^i_t,

sends the unbiased stochastic sign :math:`S_R(c^i_t)` (:func:`unbiased_sign`, :math:`\mathbb E[R\,S_R(v)] =
v`) packed 1 bit per coordinate; the server (rank ``server_rank``) forms :math:`\bar u = \frac1n\sum_i
S_R(c^i_t) \in [-1, 1]^d` and sends back 1 bit per coordinate, the majority vote
:math:`\operatorname{sign}(\bar u)` (``server_rule="majority"``; ties drawn uniformly) or the unbiased
:math:`S_1(\bar u)` (``"unbiased"``); every client applies :math:`x \leftarrow x - \eta(v + \lambda x)`.
:math:`R` is adaptive, :math:`R_t = \max_i\|c^i_t\|_\infty` by one scalar all-reduce(max) sent as float32
(``radius=None``, the spec's suggestion), or fixed (``radius=R``; coordinates beyond it are clipped, which
biases :math:`S_R`). ``compression="sign"`` sends the deterministic :math:`\operatorname{sign}(c^i_t)` instead
(Distributed Lion of Liu et al., 2024, "Communication Efficient Distributed Training with Distributed Lion";
with one client it is exactly Lion / Lion-VR, which the tests use to check the per-client momentum).

The compressed path computes :math:`c^i` itself because :func:`~optarium.optim.lion_vr.lion_update_` applies
the sign in place and never exposes :math:`c`; it uses the same operations in the same order.

Communication per client, per step and per direction, as counted by ``comm.stats`` from the tensors handed to
``torch.distributed``: full precision :math:`b\,d` bits (:math:`b` the dtype width, 32 for float32; twice
that for VR steps after the first); compressed :math:`d` bits (padded to a multiple of 8) with a fixed
:math:`R`, :math:`d + 32` with the adaptive :math:`R`.

Non-finite values. The compressed paths raise :class:`~optarium.optim._nonfinite.NonFiniteGradientError` (the
optim family's ``nonfinite="raise"`` policy; there is no skip option here) when a client's gradient is NaN or
inf, before any state is touched, and when :math:`c^i_t` or the adaptive :math:`R_t` is not finite (a sign of
NaN would otherwise silently become :math:`\pm 1`). The full-precision path leaves NaN visible in :math:`x`.
Mixed-dtype parameters are counted at each parameter's own width (the all-reduce payload is promoted to a
common dtype, the logical message is not).

Randomness does not depend on how clients are spread over ranks: every rank draws the uniforms of *all*
clients from one generator (seeded by ``seed``) and keeps its rows; the server's draws use a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.optim import Optimizer

from optarium._core.seeding import derive_seed
from optarium._core.validation import check_betas, check_choice, check_int, check_nonnegative, check_positive
from optarium.distributed.comm import Communicator, _bits_of, pack_signs, unpack_signs
from optarium.optim._nonfinite import NonFiniteGradientError, grads_finite
from optarium.optim.lion_vr import lion_update_

__all__ = ["DistributedLion", "per_client_grads", "unbiased_sign"]

GradFn = Callable[[list[torch.Tensor]], Sequence[torch.Tensor]]


def unbiased_sign(
    v: torch.Tensor,
    radius: float | torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    uniforms: torch.Tensor | None = None,
    clip: bool = False,
) -> torch.Tensor:
    r"""The unbiased stochastic sign :math:`S_R(v)_j = +1` w.p. :math:`\tfrac12 + v_j/(2R)`, else :math:`-1`.

    :math:`\mathbb E[R\,S_R(v)] = v` when :math:`|v_j| \le R`. ``radius`` is a positive number or a tensor
    broadcastable against ``v`` (e.g. one radius per client row). ``uniforms`` (same shape as ``v``, values
    in [0, 1)) replaces the internal draw from ``generator``. Entries with :math:`|v_j| > R` raise
    ``ValueError``, or are clipped to :math:`\pm R` with ``clip=True`` (then the sign is biased there).
    Returns a tensor of ``v``'s dtype with entries in :math:`\{-1, +1\}`.
    """
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise TypeError("v: must be a floating-point tensor")
    r = torch.as_tensor(radius, dtype=v.dtype, device=v.device)
    if not bool((r > 0).all()) or not bool(torch.isfinite(r).all()):
        raise ValueError(f"radius: must be finite and > 0, got {radius!r}")
    over = v.abs() > r
    if bool(over.any()):
        if not clip:
            raise ValueError(f"v: |v_j| must be <= radius, got max |v_j| = {float(v.abs().max()):.6g}")
        v = torch.maximum(torch.minimum(v, r), -r)
    if uniforms is None:
        uniforms = torch.rand(v.shape, generator=generator, dtype=v.dtype, device=v.device)
    elif uniforms.shape != v.shape:
        raise ValueError(f"uniforms: must have shape {tuple(v.shape)}, got {tuple(uniforms.shape)}")
    return _sign_draw(v, r, uniforms)


def _sign_draw(v: torch.Tensor, r: torch.Tensor | float, uniforms: torch.Tensor) -> torch.Tensor:
    """:math:`S_R(v)` from given uniforms, no checks (``|v| <= r`` assumed)."""
    return torch.where(uniforms < 0.5 + v / (2 * r), 1.0, -1.0).to(v.dtype)


class DistributedLion(Optimizer):
    r"""Distributed Lion / Lion-VR over a :class:`Communicator` (SPMD; see the module docstring).

    Args:
        params: the shared parameters :math:`x` (identical on every rank), or param groups (each may set
            ``lr``, ``betas``, ``weight_decay``).
        comm: the communicator (default ``Communicator.local(1)``: one client, centralised Lion).
        lr: :math:`\eta > 0` (default 1e-4).
        betas: :math:`(\beta_1, \beta_2)` in [0, 1) (default (0.9, 0.99)).
        weight_decay: :math:`\lambda \ge 0` (default 0).
        compression: ``"none"`` (all-reduce of gradients), ``"unbiased_sign"`` (1 bit each way, unbiased
            uplink) or ``"sign"`` (1 bit each way, deterministic uplink).
        server_rule: ``"majority"`` (sign of the vote) or ``"unbiased"`` (:math:`S_1`); compressed only.
        radius: ``None`` for the adaptive :math:`R_t = \max_i\|c^i_t\|_\infty` (32 bits each way per step),
            or a fixed :math:`R > 0` (clipping); ``"unbiased_sign"`` only.
        variance_reduction: Lion-VR (two gradient evaluations per step after the first).
        seed: seeds the clients' and the server's random draws.
        server_rank: the rank that hosts the server (compressed variants).

    ``step(grad_fn)`` calls ``grad_fn(xs)`` with a list of tensors shaped like the parameters (the current
    :math:`x_t`, and with VR from the second step also the stored :math:`x_{t-1}`, on **the same batches**);
    it must return, per parameter, this process's clients' stochastic gradients stacked as
    ``(n_local, *param.shape)``. :func:`per_client_grads` builds such a function from a batched loss.

    Example:
        >>> import torch
        >>> from optarium.distributed.comm import Communicator
        >>> comm = Communicator.local(4)
        >>> x = torch.zeros(3)
        >>> targets = torch.randn(4, 3)  # client i minimises ||x - t_i||^2 / 2
        >>> opt = DistributedLion([x], comm, lr=1e-2, compression="unbiased_sign")
        >>> opt.step(lambda xs: [xs[0].expand(4, 3) - targets])
        >>> opt.comm_stats()["uplink_bits"]  # 3 packed bits -> 1 byte, + 32 for the adaptive radius
        40.0
    """

    def __init__(
        self,
        params: Iterable[Any],
        comm: Communicator | None = None,
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        *,
        compression: str = "none",
        server_rule: str = "majority",
        radius: float | None = None,
        variance_reduction: bool = False,
        seed: int = 0,
        server_rank: int = 0,
    ) -> None:
        if comm is None:
            comm = Communicator.local(1)
        if not isinstance(comm, Communicator):
            raise TypeError(f"comm: must be a Communicator, got {type(comm).__name__}")
        check_positive("lr", lr)
        betas = check_betas("betas", betas)
        check_nonnegative("weight_decay", weight_decay)
        self.compression = check_choice("compression", compression, ("none", "sign", "unbiased_sign"))
        self.server_rule = check_choice("server_rule", server_rule, ("majority", "unbiased"))
        if radius is not None:
            if compression != "unbiased_sign":
                raise ValueError("radius: only used with compression='unbiased_sign'")
            radius = check_positive("radius", radius)
        self.radius = radius
        if not isinstance(variance_reduction, bool):
            raise TypeError("variance_reduction: must be a bool")
        self.variance_reduction = variance_reduction
        self.seed = check_int("seed", seed, minimum=0)
        self.server_rank = check_int("server_rank", server_rank, minimum=0, maximum=comm.world_size - 1)
        self.comm = comm
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        first = self.param_groups[0]["params"][0]
        self._client_gen = torch.Generator(device=first.device).manual_seed(derive_seed(seed, "clients"))
        self._server_gen = torch.Generator(device=first.device).manual_seed(derive_seed(seed, "server"))
        self.steps = 0

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group; its hyperparameters are validated."""
        super().add_param_group(param_group)
        g = self.param_groups[-1]
        check_positive("param_group: lr", g["lr"])
        g["betas"] = check_betas("param_group: betas", g["betas"])
        check_nonnegative("param_group: weight_decay", g["weight_decay"])

    # ------------------------------------------------------------------ accounting and state
    @property
    def bits_sent(self) -> float:
        """Uplink bits per client so far (mean over this process's clients)."""
        return self.comm.stats.as_dict()["uplink_bits"]

    def comm_stats(self) -> dict[str, float]:
        """The communicator's statistics (:meth:`CommStats.as_dict`) plus the step count."""
        return {**self.comm.stats.as_dict(), "steps": float(self.steps)}

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state plus the step count and both random generators' states."""
        sd = super().state_dict()
        sd["distributed_lion"] = {
            "steps": self.steps,
            "client_rng": self._client_gen.get_state(),
            "server_rng": self._server_gen.get_state(),
        }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        sd = dict(state_dict)
        extra = sd.pop("distributed_lion", None)
        super().load_state_dict(sd)
        if extra is not None:
            self.steps = int(extra["steps"])
            self._client_gen.set_state(extra["client_rng"])
            self._server_gen.set_state(extra["server_rng"])

    # ------------------------------------------------------------------ the step
    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def _grads(
        self, grad_fn: GradFn, xs: list[torch.Tensor], params: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        grads = list(grad_fn(xs))
        if len(grads) != len(params):
            raise ValueError(f"grad_fn: returned {len(grads)} gradients for {len(params)} parameters")
        n = self.comm.n_local
        for g, p in zip(grads, params, strict=True):
            if not isinstance(g, torch.Tensor) or tuple(g.shape) != (n, *p.shape):
                shape = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
                raise ValueError(f"grad_fn: gradients must have shape {(n, *p.shape)}, got {shape}")
        return [g.detach() for g in grads]

    @torch.no_grad()
    def step(self, grad_fn: GradFn) -> None:  # type: ignore[override]
        """One distributed Lion (or Lion-VR) step; ``grad_fn`` as in the class docstring."""
        if grad_fn is None or not callable(grad_fn):
            raise RuntimeError(
                "DistributedLion.step needs grad_fn(xs) -> per-client gradients (n_local, ...)"
            )
        params = self._params()
        with torch.enable_grad():
            g = self._grads(grad_fn, [p.detach() for p in params], params)
        h: list[torch.Tensor] | None = None
        if self.variance_reduction and "prev_param" in self.state[params[0]]:
            prev = [self.state[p]["prev_param"] for p in params]
            with torch.enable_grad():
                h = self._grads(grad_fn, prev, params)
        if self.compression != "none" and not grads_finite(g + (h or [])):
            raise NonFiniteGradientError(
                f"grad_fn: returned NaN or inf gradients on rank {self.comm.rank}; the compressed "
                f"DistributedLion (compression={self.compression!r}) cannot take their signs"
            )
        if self.variance_reduction:
            saved = [p.detach().clone() for p in params]
        if self.compression == "none":
            self._step_full(params, g, h)
        else:
            self._step_compressed(params, g, h)
        if self.variance_reduction:
            for p, s in zip(params, saved, strict=True):
                self.state[p]["prev_param"] = s
        self.steps += 1

    def _step_full(
        self, params: list[torch.Tensor], g: list[torch.Tensor], h: list[torch.Tensor] | None
    ) -> None:
        n = self.comm.n_local
        flat = [t.reshape(n, -1) for t in g] + ([t.reshape(n, -1) for t in h] if h is not None else [])
        # torch.cat promotes mixed dtypes: count each parameter at its own width (the logical message)
        total = sum(p.numel() for p in params)
        bpe = sum(p.numel() * _bits_of(p) for p in params) / max(total, 1)
        mean = self.comm.client_mean(torch.cat(flat, dim=1), bits_per_element=bpe)
        sizes = [p.numel() for p in params]
        parts = list(mean.split(sizes * (2 if h is not None else 1)))
        gbar = {p: parts[i].view_as(p) for i, p in enumerate(params)}
        hbar = {p: parts[len(params) + i].view_as(p) for i, p in enumerate(params)} if h is not None else None
        for group in self.param_groups:
            ps = group["params"]
            ms = []
            for p in ps:
                st = self.state[p]
                if "exp_avg" not in st:
                    st["exp_avg"] = torch.zeros_like(p)
                ms.append(st["exp_avg"])
            gs = [gbar[p] for p in ps]
            beta1, beta2 = group["betas"]
            lion_update_(
                ps,
                gs,
                ms,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                prev_grads=[hbar[p] for p in ps] if hbar is not None else None,
            )

    def _check_finite(self, t: torch.Tensor, what: str) -> None:
        if not bool(torch.isfinite(t).all()):
            raise NonFiniteGradientError(
                f"{what}: not finite on rank {self.comm.rank} (compression={self.compression!r}); a NaN or "
                "inf cannot be sent as a sign (check the gradients, the learning rate and the momentum)"
            )

    def _step_compressed(
        self, params: list[torch.Tensor], g: list[torch.Tensor], h: list[torch.Tensor] | None
    ) -> None:
        comm = self.comm
        n = comm.n_local
        index = {p: i for i, p in enumerate(params)}
        cs = []
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                i = index[p]
                st = self.state[p]
                if "exp_avg" not in st:
                    st["exp_avg"] = torch.zeros((n, *p.shape), dtype=p.dtype, device=p.device)
                m = st["exp_avg"]
                if h is not None:
                    m.add_(g[i] - h[i])  # u^i = m^i + g^i - h^i (same order as lion_update_)
                c = torch.mul(m, beta1).add_(g[i], alpha=1.0 - beta1)
                m.mul_(beta2).add_(g[i], alpha=1.0 - beta2)
                cs.append((i, c.reshape(n, -1)))
        cs.sort(key=lambda t: t[0])
        C = torch.cat([c for _, c in cs], dim=1)
        D = C.shape[1]
        one = torch.ones((), dtype=C.dtype, device=C.device)
        if self.compression == "sign":
            self._check_finite(C, "c")
            S = torch.where(C >= 0, one, -one)
        else:
            # the uniforms of all clients, one generator on every rank, this process's rows
            U = torch.rand((comm.n_clients, D), generator=self._client_gen, dtype=C.dtype, device=C.device)
            U = comm.shard(U)
            if self.radius is None:
                local = C.abs().amax(dim=1, keepdim=True).to(torch.float32)
                # a non-finite c_i makes its row inf, so every rank sees R = inf and raises together
                inf = torch.full_like(local, torch.inf)
                local = torch.where(torch.isfinite(C).all(dim=1, keepdim=True), local, inf)
                R = comm.client_max(local).to(C.dtype)  # one float32 each way
                self._check_finite(R, "R (the adaptive radius max_i ||c_i||_inf)")
                R = torch.where(R > 0, R, one)
                # float32 rounding may put R a hair below max|c|: clamp (probabilities stay in [0, 1])
                S = _sign_draw(torch.maximum(torch.minimum(C, R), -R), R, U)
            else:
                self._check_finite(C, "c")
                S = unbiased_sign(C, self.radius, uniforms=U, clip=True)
        gathered = comm.gather_clients(pack_signs(S), dst=self.server_rank)
        nbytes = (D + 7) // 8
        if comm.rank == self.server_rank:
            assert gathered is not None
            u = unpack_signs(gathered, D, C.dtype).mean(0)
            Us = torch.rand(D, generator=self._server_gen, dtype=C.dtype, device=C.device)
            if self.server_rule == "majority":
                v = torch.where(u > 0, one, torch.where(u < 0, -one, torch.where(Us < 0.5, one, -one)))
            else:
                v = _sign_draw(u, 1.0, Us)
            down = pack_signs(v)
        else:
            down = torch.empty(nbytes, dtype=torch.uint8, device=C.device)
        down = comm.broadcast(down, src=self.server_rank)
        v = unpack_signs(down, D, C.dtype)
        offset = 0
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                k = p.numel()
                if wd != 0:
                    p.mul_(1.0 - lr * wd)
                p.add_(v[offset : offset + k].view_as(p), alpha=-lr)
                offset += k


def per_client_grads(
    loss_fn: Callable[[list[torch.Tensor]], torch.Tensor], n_local: int
) -> Callable[[list[torch.Tensor]], list[torch.Tensor]]:
    """A ``grad_fn`` for :class:`DistributedLion` from a batched loss, by one backward pass.

    ``loss_fn(xs)`` receives each parameter expanded to ``(n_local, *shape)`` (one copy per client) and
    returns the ``(n_local,)`` client losses; client ``i``'s loss may only depend on row ``i``. The gradient
    of their sum with respect to the expanded copies is every client's gradient at once.
    """
    n_local = check_int("n_local", n_local, minimum=1)

    def grad_fn(xs: list[torch.Tensor]) -> list[torch.Tensor]:
        rep = [x.detach().unsqueeze(0).expand(n_local, *x.shape).clone().requires_grad_(True) for x in xs]
        losses = loss_fn(rep)
        return list(torch.autograd.grad(losses.sum(), rep))

    return grad_fn
