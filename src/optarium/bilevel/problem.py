r"""One way to state a bilevel problem, and the oracles every bilevel method calls on it.

A bilevel problem is

.. math::

    \min_v \Phi(v) = f(v, \theta^*(v)), \qquad
    \theta^*(v) = \arg\min_\theta g(v, \theta),\quad
    g(v, \theta) = \frac1n \sum_i \ell(v, \theta; z_i) + R(v, \theta),

with an *upper* (outer) objective ``f`` on validation data, a *lower* (inner) objective ``g`` given by a
**per-sample loss** ``ℓ`` (so minibatches, per-sample gradients and the empirical Fisher are available) and an
optional **exact regulariser** ``R`` (its Hessian is used exactly, never estimated from samples). The inner
variable ``theta`` is a flat 1-D tensor (flatten a model's parameters with
``torch.nn.utils.parameters_to_vector`` and write the losses on the flat vector); the outer variable ``v`` is
a tensor of any shape.

A *batch* is a tuple of tensors that share their leading (sample) dimension, e.g. ``(X, y)`` or
``(X, y, idx)`` (an index column lets a loss weight sample ``i`` by ``σ(v_i)``, as in data hyper-cleaning).
:func:`batch_size`, :func:`take` and :func:`sample_batch` slice such tuples, so solvers draw stochastic
minibatches from a data tuple with a ``torch.Generator``.

:class:`BilevelProblem` holds the three functions and provides the oracles (all pure autograd, dtype and
device follow the inputs, no graph leaks out of an oracle unless asked):

- :meth:`~BilevelProblem.inner_loss`, :meth:`~BilevelProblem.inner_grad` (∇_θ g on a batch),
  :meth:`~BilevelProblem.per_sample_grads` (the ``b × d`` matrix of ∇_θ ℓ_i, by ``torch.func.vmap`` or an
  analytic override such as the GLM form ``diag(p − y) X``);
- :meth:`~BilevelProblem.outer_grads` (∇_v f and ∇_θ f);
- :meth:`~BilevelProblem.hvp_operator` (``w ↦ ∇²_θθ g · w`` reusing one graph for many products),
  :meth:`~BilevelProblem.inner_hessian` (dense, small ``d`` only),
  :meth:`~BilevelProblem.regularizer_hessian`;
- :meth:`~BilevelProblem.mixed_vjp` (``∇_v ⟨∇_θ g(v, θ), w⟩``, one reverse pass).

A :class:`WorkCounter` passed to the oracles counts the work in hardware-independent units (sample-gradient
evaluations, Hessian-vector products, mixed backward passes, dense factorisations, flops of Fisher updates),
split into the phase before and after the inner loop ends, so methods can be compared by counted work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Batch",
    "BilevelProblem",
    "WorkCounter",
    "batch_size",
    "check_batch",
    "sample_batch",
    "take",
]

#: A batch: a tuple of tensors that share their leading (sample) dimension.
Batch = tuple[torch.Tensor, ...]


def check_batch(name: str, batch: Any) -> Batch:
    """``batch`` as a tuple of tensors with one common, positive leading size (``ValueError``/``TypeError``
    naming ``name`` otherwise)."""
    if isinstance(batch, torch.Tensor):
        batch = (batch,)
    if not isinstance(batch, (tuple, list)) or not batch:
        raise TypeError(f"{name}: expected a non-empty tuple of tensors, got {type(batch).__name__}")
    if not all(isinstance(t, torch.Tensor) for t in batch):
        raise TypeError(f"{name}: every entry must be a tensor")
    if any(t.dim() == 0 for t in batch):
        raise ValueError(f"{name}: every tensor needs a leading sample dimension")
    sizes = {int(t.shape[0]) for t in batch}
    if len(sizes) != 1:
        raise ValueError(f"{name}: tensors have different leading sizes {sorted(sizes)}")
    if sizes.pop() == 0:
        raise ValueError(f"{name}: the batch is empty")
    return tuple(batch)


def batch_size(batch: Batch) -> int:
    """The number of samples of ``batch`` (its tensors' common leading size)."""
    return int(batch[0].shape[0])


def take(batch: Batch, index: torch.Tensor) -> Batch:
    """The samples ``index`` of every tensor of ``batch`` (the index is moved to each tensor's device)."""
    return tuple(t[index.to(t.device)] for t in batch)


def sample_batch(data: Batch, size: int, generator: torch.Generator | None = None) -> Batch:
    """A minibatch of ``size`` samples of ``data`` drawn without replacement (all of it if ``size >= n``).

    The permutation is drawn on the CPU with ``generator``, so the same seed gives the same minibatches on
    every device.
    """
    data = check_batch("data", data)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size: must be a positive integer, got {size!r}")
    n = batch_size(data)
    if size >= n:
        return data
    idx = torch.randperm(n, generator=generator)[:size]
    return take(data, idx)


@dataclass
class WorkCounter:
    """Counted work of a hypergradient or a solver run, split into phases.

    Units: ``sample_grads`` (per-sample gradient evaluations; a mean gradient over ``b`` samples counts
    ``b``), ``hvp_samples`` (samples touched by Hessian-vector products; one HVP over ``n`` samples counts
    ``n`` and costs about two gradient passes), ``hvps`` (number of HVPs), ``mixed_backwards`` (mixed
    second-order reverse passes), ``factorizations`` (dense Cholesky or LU solves) and ``fisher_flops``
    (multiply-adds of Fisher updates). :attr:`phase` names where new counts go (``"inner"`` while the inner
    loop runs, ``"post"`` after it; the *post-inner overhead* is what lies on the critical path once the
    inner loop has ended).
    """

    phase: str = "inner"
    counts: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, kind: str, amount: float = 1.0) -> None:
        """Add ``amount`` of ``kind`` to the current phase."""
        bucket = self.counts.setdefault(self.phase, {})
        bucket[kind] = bucket.get(kind, 0.0) + float(amount)

    def get(self, kind: str, phase: str | None = None) -> float:
        """The count of ``kind`` in ``phase`` (all phases if ``None``)."""
        phases = self.counts.values() if phase is None else [self.counts.get(phase, {})]
        return float(sum(p.get(kind, 0.0) for p in phases))

    def gradient_pass_equivalents(self, n: int, phase: str | None = None) -> float:
        """The work in passes over ``n`` samples: sample gradients / n + 2 · hvp samples / n + mixed
        backwards (each counted as 2 passes over the batch it used, here taken as 2)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n: must be a positive integer, got {n!r}")
        return (
            self.get("sample_grads", phase) / n
            + 2.0 * self.get("hvp_samples", phase) / n
            + 2.0 * self.get("mixed_backwards", phase)
        )

    def as_dict(self) -> dict[str, float]:
        """``{"<phase>:<kind>": count}`` for logging."""
        return {f"{ph}:{k}": v for ph, kinds in self.counts.items() for k, v in kinds.items()}


def _count(counter: WorkCounter | None, kind: str, amount: float = 1.0) -> None:
    if counter is not None:
        counter.add(kind, amount)


def _check_theta(theta: Any) -> torch.Tensor:
    if not isinstance(theta, torch.Tensor):
        raise TypeError(f"theta: expected a tensor, got {type(theta).__name__}")
    if theta.dim() != 1 or not theta.is_floating_point():
        raise ValueError(f"theta: expected a flat 1-D floating tensor, got shape {tuple(theta.shape)}")
    return theta


def _check_v(v: Any) -> torch.Tensor:
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise TypeError(f"v: expected a floating tensor, got {type(v).__name__}")
    return v


@dataclass(frozen=True)
class BilevelProblem:
    """A bilevel problem: per-sample lower loss, upper objective, optional exact lower regulariser.

    Args:
        inner_loss_per_sample: ``ℓ(v, theta, batch) -> Tensor[b]``, one loss per sample of ``batch`` (for
            Fisher-based methods the negative log-likelihood *with its scale*; see
            :class:`optarium.bilevel.nhgd.NHGD`).
        outer_loss: ``f(v, theta, batch) -> scalar`` on an upper (validation) batch.
        inner_regularizer: optional ``R(v, theta) -> scalar`` added to the mean inner loss; its derivatives
            are always exact.
        per_sample_grad: optional analytic ``(v, theta, batch) -> Tensor[b, d]`` of ∇_θ ℓ_i (replaces the
            ``torch.func.vmap`` default; it must be correct, e.g. ``(sigmoid(X θ) − y)[:, None] * X``).
        sample_weight: optional ``(v, batch) -> Tensor[b]`` of sample weights ``w_i`` (e.g. ``σ(v_i)`` in
            hyper-cleaning): the inner loss is then ``mean_i w_i ℓ_i + R`` and the empirical Fisher the
            weighted ``(1/b) Σ w_i ∇ℓ_i ∇ℓ_iᵀ``; ``ℓ`` stays the unweighted per-sample NLL.
        regularizer_hessian_fn: optional analytic ``(v, theta) -> Tensor[d, d]``, the Hessian of ``R`` in
            ``θ`` (e.g. ``diag(e^v)``); without it :meth:`regularizer_hessian` builds it by ``d`` batched
            reverse passes, which costs seconds at ``d`` in the hundreds.

    The lower problem must have a unique minimiser (strongly convex ``g`` in ``theta``) for the implicit
    hypergradient to exist. Every oracle validates shapes and raises ``ValueError`` naming the function or
    argument at fault.
    """

    inner_loss_per_sample: Callable[[torch.Tensor, torch.Tensor, Batch], torch.Tensor]
    outer_loss: Callable[[torch.Tensor, torch.Tensor, Batch], torch.Tensor]
    inner_regularizer: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    per_sample_grad: Callable[[torch.Tensor, torch.Tensor, Batch], torch.Tensor] | None = None
    sample_weight: Callable[[torch.Tensor, Batch], torch.Tensor] | None = None
    regularizer_hessian_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        for name in ("inner_loss_per_sample", "outer_loss"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name}: must be callable")
        for name in ("inner_regularizer", "per_sample_grad", "sample_weight", "regularizer_hessian_fn"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name}: must be callable or None")

    # ------------------------------------------------------------------------------------------- values
    def per_sample_losses(self, v: torch.Tensor, theta: torch.Tensor, batch: Batch) -> torch.Tensor:
        """``ℓ(v, θ; z_i)`` for the samples of ``batch``: a tensor of shape ``(b,)`` (checked)."""
        batch = check_batch("batch", batch)
        losses = self.inner_loss_per_sample(v, theta, batch)
        b = batch_size(batch)
        if not isinstance(losses, torch.Tensor) or tuple(losses.shape) != (b,):
            shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
            raise ValueError(f"inner_loss_per_sample: must return a tensor of shape ({b},), got {shape}")
        return losses

    def regularizer(self, v: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """``R(v, θ)`` (0 when the problem has none)."""
        if self.inner_regularizer is None:
            return theta.new_zeros(())
        r = self.inner_regularizer(v, theta)
        if not isinstance(r, torch.Tensor) or r.dim() != 0:
            raise ValueError("inner_regularizer: must return a scalar tensor")
        return r

    def sample_weights(self, v: torch.Tensor, batch: Batch) -> torch.Tensor | None:
        """The weights ``w_i`` of the samples of ``batch`` (``None`` without ``sample_weight``; checked)."""
        if self.sample_weight is None:
            return None
        w = self.sample_weight(v, batch)
        b = batch_size(batch)
        if not isinstance(w, torch.Tensor) or tuple(w.shape) != (b,):
            raise ValueError(f"sample_weight: must return a tensor of shape ({b},)")
        return w

    def inner_loss(self, v: torch.Tensor, theta: torch.Tensor, batch: Batch) -> torch.Tensor:
        """``g(v, θ)`` on ``batch``: the (weighted) mean per-sample loss plus the regulariser
        (differentiable)."""
        losses = self.per_sample_losses(v, theta, batch)
        w = self.sample_weights(v, batch)
        mean = losses.mean() if w is None else (w * losses).mean()
        return mean + self.regularizer(v, theta)

    def outer(self, v: torch.Tensor, theta: torch.Tensor, batch: Batch) -> torch.Tensor:
        """``f(v, θ)`` on ``batch`` (a scalar, checked; differentiable)."""
        batch = check_batch("batch", batch)
        f = self.outer_loss(v, theta, batch)
        if not isinstance(f, torch.Tensor) or f.dim() != 0:
            raise ValueError("outer_loss: must return a scalar tensor")
        return f

    # ------------------------------------------------------------------------------------- first order
    def inner_grad(
        self, v: torch.Tensor, theta: torch.Tensor, batch: Batch, counter: WorkCounter | None = None
    ) -> torch.Tensor:
        """``∇_θ g(v, θ)`` on ``batch`` (detached; ``FloatingPointError`` if not finite)."""
        v, theta = _check_v(v).detach(), _check_theta(theta).detach().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(self.inner_loss(v, theta, batch), theta)
        _count(counter, "sample_grads", batch_size(batch))
        return _finite("inner gradient", grad)

    def per_sample_grads(
        self,
        v: torch.Tensor,
        theta: torch.Tensor,
        batch: Batch,
        counter: WorkCounter | None = None,
    ) -> torch.Tensor:
        """The ``(b, d)`` matrix of per-sample gradients ``∇_θ ℓ(v, θ; z_i)`` (regulariser excluded).

        ``torch.func.vmap`` over ``torch.func.grad`` of the per-sample loss (each sample as a batch of one),
        or the problem's analytic ``per_sample_grad``. ``FloatingPointError`` if any entry is not finite.
        """
        batch = check_batch("batch", batch)
        v, theta = _check_v(v).detach(), _check_theta(theta).detach()
        b, d = batch_size(batch), theta.numel()
        if self.per_sample_grad is not None:
            G = self.per_sample_grad(v, theta, batch)
        else:
            self.per_sample_losses(v, theta, take(batch, torch.arange(min(b, 1))))  # shape check, eagerly

            def one(th: torch.Tensor, *sample: torch.Tensor) -> torch.Tensor:
                return self.inner_loss_per_sample(v, th, tuple(s.unsqueeze(0) for s in sample))[0]

            G = torch.func.vmap(torch.func.grad(one), in_dims=(None, *([0] * len(batch))))(theta, *batch)
        if not isinstance(G, torch.Tensor) or tuple(G.shape) != (b, d):
            shape = tuple(G.shape) if isinstance(G, torch.Tensor) else type(G).__name__
            raise ValueError(f"per_sample_grad: must return a tensor of shape ({b}, {d}), got {shape}")
        _count(counter, "sample_grads", b)
        return _finite("per-sample gradients", G.detach())

    def regularizer_grad(self, v: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """``∇_θ R(v, θ)`` (zeros without a regulariser; detached)."""
        if self.inner_regularizer is None:
            return torch.zeros_like(theta)
        th = theta.detach().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(self.regularizer(v.detach(), th), th)
        return grad

    def outer_grads(
        self, v: torch.Tensor, theta: torch.Tensor, batch: Batch, counter: WorkCounter | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_v f, ∇_θ f)`` at ``(v, θ)`` on the upper ``batch`` (detached; zeros where ``f`` does not
        depend on a variable)."""
        v = _check_v(v).detach().requires_grad_(True)
        theta = _check_theta(theta).detach().requires_grad_(True)
        with torch.enable_grad():
            gv, gt = torch.autograd.grad(self.outer(v, theta, batch), (v, theta), allow_unused=True)
        _count(counter, "sample_grads", batch_size(batch))
        gv = torch.zeros_like(v) if gv is None else gv
        gt = torch.zeros_like(theta) if gt is None else gt
        return _finite("outer gradient", gv.detach()), _finite("outer gradient", gt.detach())

    # ------------------------------------------------------------------------------------ second order
    def hvp_operator(
        self, v: torch.Tensor, theta: torch.Tensor, batch: Batch, counter: WorkCounter | None = None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``w ↦ ∇²_θθ g(v, θ) w`` on ``batch`` (regulariser included), reusing one gradient graph.

        Each product is one reverse pass through the gradient (about two gradient passes over the batch);
        the counter gets one HVP and ``b`` HVP samples per call.
        """
        v, th = _check_v(v).detach(), _check_theta(theta).detach().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(self.inner_loss(v, th, batch), th, create_graph=True)
        b = batch_size(batch)

        def product(w: torch.Tensor) -> torch.Tensor:
            with torch.enable_grad():
                (hw,) = torch.autograd.grad(grad, th, w.detach(), retain_graph=True, allow_unused=True)
            _count(counter, "hvps")
            _count(counter, "hvp_samples", b)
            return torch.zeros_like(th) if hw is None else hw.detach()

        return product

    def inner_hessian(self, v: torch.Tensor, theta: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The dense ``(d, d)`` Hessian ``∇²_θθ g(v, θ)`` on ``batch`` (small ``d``).

        One gradient graph, then the ``d`` rows by batched reverse passes (``is_grads_batched``; a row loop
        where a loss does not support it).
        """
        v, theta = _check_v(v).detach(), _check_theta(theta).detach()
        batch = check_batch("batch", batch)
        return _dense_hessian(lambda th: self.inner_loss(v, th, batch), theta)

    def regularizer_hessian(self, v: torch.Tensor, theta: torch.Tensor) -> torch.Tensor | None:
        """The dense ``(d, d)`` Hessian of ``R`` in ``θ`` (``None`` without a regulariser)."""
        if self.inner_regularizer is None:
            return None
        v, theta = _check_v(v).detach(), _check_theta(theta).detach()
        if self.regularizer_hessian_fn is not None:
            H = self.regularizer_hessian_fn(v, theta)
            d = theta.numel()
            if not isinstance(H, torch.Tensor) or tuple(H.shape) != (d, d):
                raise ValueError(f"regularizer_hessian_fn: must return a ({d}, {d}) tensor")
            return H.detach()
        return _dense_hessian(lambda th: self.regularizer(v, th), theta)

    def mixed_vjp(
        self,
        v: torch.Tensor,
        theta: torch.Tensor,
        batch: Batch,
        w: torch.Tensor,
        counter: WorkCounter | None = None,
    ) -> torch.Tensor:
        """``∇_v ⟨∇_θ g(v, θ), w⟩ = ∇²_vθ g · w`` on ``batch`` (one mixed reverse pass; detached)."""
        v = _check_v(v).detach().requires_grad_(True)
        th = _check_theta(theta).detach().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(self.inner_loss(v, th, batch), th, create_graph=True)
            (m,) = torch.autograd.grad(grad, v, w.detach(), allow_unused=True)
        _count(counter, "mixed_backwards")
        return torch.zeros_like(v) if m is None else _finite("mixed term", m.detach())

    def hypergradient_from(
        self,
        v: torch.Tensor,
        theta: torch.Tensor,
        train_batch: Batch,
        w: torch.Tensor,
        grad_v: torch.Tensor,
        counter: WorkCounter | None = None,
    ) -> torch.Tensor:
        """``∇_v f − ∇²_vθ g · w``: the implicit hypergradient once ``w ≈ H^{-1} ∇_θ f`` is known."""
        return grad_v - self.mixed_vjp(v, theta, train_batch, w, counter)


def _dense_hessian(fn: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor) -> torch.Tensor:
    th = theta.detach().requires_grad_(True)
    d = th.numel()
    eye = torch.eye(d, dtype=th.dtype, device=th.device)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(fn(th), th, create_graph=True)
        if not grad.requires_grad:  # linear in theta
            return torch.zeros(d, d, dtype=th.dtype, device=th.device)
        try:
            (H,) = torch.autograd.grad(grad, th, eye, is_grads_batched=True, retain_graph=True)
        except RuntimeError:
            rows = [torch.autograd.grad(grad, th, eye[i], retain_graph=True)[0] for i in range(d)]
            H = torch.stack(rows)
    return H.detach()


def _finite(what: str, t: torch.Tensor) -> torch.Tensor:
    if not bool(torch.isfinite(t).all()):
        raise FloatingPointError(f"{what}: non-finite values (NaN or inf) at the current iterate")
    return t
