r"""Gradient estimators behind one interface: backprop, checkpointed backprop, accumulation, FmAD and ZO.

Reference: Panchal, Choudhary, Brun, Guan, "The Cost of Avoiding Backpropagation" (arXiv:2506.21833); MeZO
(Malladi et al. 2023); forward gradients (Baydin et al. 2022); activation checkpointing (Chen et al. 2016).

An estimator is not an optimizer: :meth:`GradientEstimator.compute` fills ``.grad`` of the trainable
parameters (and returns the loss) and any ``torch.optim`` optimizer then steps. The loss is
``loss_fn(model(X), Y)`` with ``batch = (X, Y)``.

- ``"bp"``: the exact gradient by reverse mode.
- ``"bp_checkpoint"``: the same gradient with every module of ``model.blocks`` (or ``segments``) run under
  ``torch.utils.checkpoint`` (non-reentrant): activations are recomputed in the backward pass.
- ``"bp_accumulate"``: ``micro_batches`` chunks along dimension 0, gradients summed with weights
  ``n_chunk / n`` (equal to the full-batch gradient of a mean-reduced loss).
- ``"fmad"`` (forward gradient): ``v ~ N(0, tangent_std^2 I)``; one ``torch.func.jvp`` gives ``L`` and
  :math:`s = \nabla L \cdot v`; :math:`\hat g = \frac1K \sum_k s_k v_k` (``E = tangent_std^2 \nabla L``).
  ``jvp_clip`` clamps ``s``; non-finite ``s`` are skipped (counted in :attr:`skipped`). The forwards run
  under the MATH SDPA backend (the fused CPU attention kernels have no forward-AD rule).
- ``"zo"`` (two-point SPSA, MeZO-style): ``z ~ N(0, I)``,
  :math:`\hat g = \frac1K\sum_k \frac{L(\theta+\epsilon z_k)-L(\theta-\epsilon z_k)}{2\epsilon} z_k`, the
  parameters moved in place (``+eps z``, ``-2 eps z``, ``+eps z``) with ``z`` regenerated from a stored seed
  instead of kept (``seed_trick``). ``zo_direction="eps_z"`` reproduces the official repository's variant
  whose direction is ``eps z`` (mean ``eps * grad``). ``sparse_keep < 1`` perturbs a random subset of
  coordinates (the -Sparse variant; the estimate then has mean ``sparse_keep * grad``); the same option
  masks FmAD's tangents (mean ``sparse_keep * tangent_std^2 * grad``).
- ``"fmad_svrg"`` / ``"zo_svrg"`` (the -SVRG variants): :meth:`GradientEstimator.set_anchor` stores a
  snapshot :math:`\tilde\theta` and an anchor estimate :math:`\tilde g` (the mean of the base estimate at
  :math:`\tilde\theta` over a list of batches); each step then uses the same batch and the same direction at
  both points, :math:`\hat g = \frac1K\sum_k (s_k(\theta) - s_k(\tilde\theta)) v_k + \tilde g`, whose
  mean over directions is :math:`\nabla L_B(\theta) - \nabla L_B(\tilde\theta) + \tilde g`. The caller
  refreshes the anchor (the official repository every 5 epochs, over the whole training set with one
  direction per batch).
- ``tangent_batch > 1`` evaluates FmAD's tangents in ``torch.func.vmap``-ed chunks of that many (the
  primal forward is shared; the same draws as the one-at-a-time loop, equal up to rounding).

Cost accounting (:class:`CostCounters`, in full-batch forward-pass equivalents): a forward is 1, a backward
2, a recomputed forward 1, a JVP 2.5 (the standard cost model: BP = 3, BP-ckpt = 4, FmAD = 2.5 per tangent,
ZO = 2 per perturbation; the -SVRG variants evaluate both points: 5 and 4 per direction;
:meth:`GradientEstimator.step_cost` gives the model's cost of one call). :func:`normalised_error`
measures ``E||g_hat - grad||^2 / ||grad||^2`` (for
Gaussian directions, ``(d + 1) / K``); :func:`saved_tensor_bytes` counts the bytes saved for backward (once
per storage) through ``torch.autograd.graph.saved_tensors_hooks``; :func:`peak_allocated_bytes` is the peak
of allocations from the ``torch.profiler`` memory events.

What is the paper's and what is reconstructed: the four estimators, their defaults (tangent variance 1,
ZO eps 1e-2, K = 1) and the variants follow the spec's reading of the official repository; the interface,
counters and the memory probes are optarium's. -SVRG follows the repository's trainers (snapshot, anchor
estimate, per-step difference with a shared direction and batch). The repository's -Sparse perturbs the
top 1 % of each tensor by magnitude; optarium's -Sparse is the spec's random keep-mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from optarium._core.validation import check_choice, check_int, check_positive, check_probability, check_type

__all__ = [
    "ESTIMATORS",
    "FORWARD_EQUIVALENTS",
    "CostCounters",
    "GradientEstimator",
    "make_estimator",
    "normalised_error",
    "peak_allocated_bytes",
    "saved_tensor_bytes",
]

#: Estimator names accepted by :func:`make_estimator`.
ESTIMATORS: tuple[str, ...] = ("bp", "bp_checkpoint", "bp_accumulate", "fmad", "zo", "fmad_svrg", "zo_svrg")
_SVRG = ("fmad_svrg", "zo_svrg")
#: Cost of one evaluation of each kind in forward-pass equivalents.
FORWARD_EQUIVALENTS: dict[str, float] = {"forward": 1.0, "backward": 2.0, "recompute": 1.0, "jvp": 2.5}

Batch = tuple[Any, Any]
LossFn = Callable[[Tensor, Any], Tensor]


@dataclass
class CostCounters:
    """Evaluations done so far, in units of one full-batch evaluation (micro-batches count fractionally)."""

    forward: float = 0.0
    backward: float = 0.0
    recompute: float = 0.0
    jvp: float = 0.0
    steps: int = 0

    @property
    def forward_equivalents(self) -> float:
        """Total cost in forward-pass equivalents (weights :data:`FORWARD_EQUIVALENTS`)."""
        w = FORWARD_EQUIVALENTS
        return (
            w["forward"] * self.forward
            + w["backward"] * self.backward
            + w["recompute"] * self.recompute
            + w["jvp"] * self.jvp
        )

    def reset(self) -> None:
        """Set every counter to zero."""
        self.forward = self.backward = self.recompute = self.jvp = 0.0
        self.steps = 0


def _set_grads(params: Sequence[Tensor], grads: Sequence[Tensor]) -> None:
    for p, g in zip(params, grads, strict=True):
        p.grad = g.detach().clone()


class GradientEstimator:
    """One gradient estimator (see the module docstring for the rules); build it with :func:`make_estimator`.

    Attributes:
        name: one of :data:`ESTIMATORS`.
        counters: the :class:`CostCounters` accumulated over calls to :meth:`compute`.
        skipped: FmAD tangents skipped because their directional derivative was not finite.
        last_directional: the FmAD directional derivatives ``s_k`` (before clipping) or the ZO projections
            of the last :meth:`compute` call (for -SVRG: ``s_k(theta) - s_k(anchor)``).
        anchor_params, anchor_grad: the -SVRG snapshot and anchor estimate (``None`` until
            :meth:`set_anchor`); ``steps_since_anchor`` counts :meth:`compute` calls since then.
    """

    def __init__(
        self,
        name: str,
        *,
        num_directions: int = 1,
        tangent_std: float = 1.0,
        jvp_clip: float | None = None,
        eps: float = 1e-2,
        zo_direction: str = "z",
        seed_trick: bool = True,
        sparse_keep: float = 1.0,
        micro_batches: int = 2,
        segments: Sequence[nn.Module] | None = None,
        tangent_batch: int = 1,
        seed: int = 0,
    ) -> None:
        self.name = check_choice("name", name, ESTIMATORS)
        self.num_directions = check_int("num_directions", num_directions, minimum=1)
        self.tangent_std = check_positive("tangent_std", tangent_std)
        self.jvp_clip = None if jvp_clip is None else check_positive("jvp_clip", jvp_clip)
        self.eps = check_positive("eps", eps)
        self.zo_direction = check_choice("zo_direction", zo_direction, ("z", "eps_z"))
        self.seed_trick = check_type("seed_trick", seed_trick, bool)
        self.sparse_keep = check_probability("sparse_keep", sparse_keep)
        if self.sparse_keep == 0.0:
            raise ValueError("sparse_keep: must be in (0, 1], got 0.0")
        self.micro_batches = check_int("micro_batches", micro_batches, minimum=1)
        self.segments = None if segments is None else list(segments)
        self.tangent_batch = check_int("tangent_batch", tangent_batch, minimum=1)
        self.seed = check_int("seed", seed)
        self._gen = torch.Generator().manual_seed(self.seed)
        self.counters = CostCounters()
        self.skipped = 0
        self.last_directional: list[float] = []
        self.anchor_params: list[Tensor] | None = None
        self.anchor_grad: list[Tensor] | None = None
        self.steps_since_anchor = 0

    # ------------------------------------------------------------------------------------------ interface
    def compute(
        self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: Sequence[nn.Parameter] | None = None
    ) -> Tensor:
        """Fill ``p.grad`` of every trainable parameter with this estimator's gradient; return the loss.

        Args:
            model: the network; ``model(X)`` gives the outputs.
            loss_fn: ``loss_fn(outputs, Y) -> scalar``.
            batch: ``(X, Y)``.
            params: the trainable parameters (default: those of ``model`` with ``requires_grad``).

        Returns:
            The (detached) loss at the current parameters (for ZO: the mean of the two perturbed losses).
        """
        check_type("model", model, nn.Module)
        if not callable(loss_fn):
            raise TypeError(f"loss_fn: must be callable, got {type(loss_fn).__name__}")
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise ValueError("batch: must be a pair (X, Y)")
        plist = [p for p in model.parameters() if p.requires_grad] if params is None else list(params)
        if not plist:
            raise ValueError("params: no trainable parameters")
        method = {
            "bp": self._bp,
            "bp_checkpoint": self._bp_checkpoint,
            "bp_accumulate": self._bp_accumulate,
            "fmad": self._fmad,
            "zo": self._zo,
            "fmad_svrg": self._fmad,
            "zo_svrg": self._zo,
        }[self.name]
        if self.name in _SVRG:
            if self.anchor_params is None or self.anchor_grad is None:
                raise ValueError(f"name: {self.name} needs an anchor; call set_anchor first")
            if len(self.anchor_params) != len(plist) or any(
                a.shape != p.shape for a, p in zip(self.anchor_params, plist, strict=True)
            ):
                raise ValueError("params: do not match the parameters of the anchor")
        loss = method(model, loss_fn, batch, plist)
        self.counters.steps += 1
        self.steps_since_anchor += 1
        return loss

    def step_cost(self) -> float:
        """Forward-equivalents of one :meth:`compute` call by the cost model (anchors not included)."""
        k = self.num_directions
        return {
            "bp": 3.0,
            "bp_checkpoint": 4.0,
            "bp_accumulate": 3.0,
            "fmad": 2.5 * k,
            "zo": 2.0 * k,
            "fmad_svrg": 5.0 * k,
            "zo_svrg": 4.0 * k,
        }[self.name]

    def anchor_cost(self, n_batches: int, directions: int | None = None) -> float:
        """Forward-equivalents of :meth:`set_anchor` over ``n_batches`` batches (``directions`` each)."""
        n_batches = check_int("n_batches", n_batches, minimum=1)
        k = self.num_directions if directions is None else check_int("directions", directions, minimum=1)
        per = {"fmad_svrg": 2.5, "zo_svrg": 2.0}.get(self.name)
        if per is None:
            raise ValueError(f"name: {self.name} has no anchor")
        return per * k * n_batches

    def set_anchor(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        batches: Sequence[Batch],
        params: Sequence[nn.Parameter] | None = None,
        *,
        directions: int | None = None,
    ) -> None:
        r"""(-SVRG) Snapshot the parameters and store the anchor estimate :math:`\tilde g` there.

        :math:`\tilde g` is the mean over ``batches`` of the base (FmAD or ZO) estimate with ``directions``
        directions (default ``num_directions``) each, drawn from this estimator's generator; its cost is added
        to :attr:`counters`. ``.grad`` of the parameters is left as it was.
        """
        if self.name not in _SVRG:
            raise ValueError(f"name: set_anchor needs an -SVRG estimator, not {self.name}")
        check_type("model", model, nn.Module)
        if not isinstance(batches, Sequence) or len(batches) == 0:
            raise ValueError("batches: need a non-empty sequence of (X, Y) pairs")
        k = self.num_directions if directions is None else check_int("directions", directions, minimum=1)
        plist = [p for p in model.parameters() if p.requires_grad] if params is None else list(params)
        if not plist:
            raise ValueError("params: no trainable parameters")
        saved = [p.grad for p in plist]
        base = "fmad" if self.name == "fmad_svrg" else "zo"
        name, keep_k = self.name, self.num_directions
        acc = [torch.zeros_like(p) for p in plist]
        try:
            self.name, self.num_directions = base, k
            for batch in batches:
                if not isinstance(batch, tuple | list) or len(batch) != 2:
                    raise ValueError("batches: every batch must be a pair (X, Y)")
                (self._fmad if base == "fmad" else self._zo)(model, loss_fn, batch, plist)
                for a, p in zip(acc, plist, strict=True):
                    a.add_(p.grad)  # type: ignore[arg-type]
        finally:
            self.name, self.num_directions = name, keep_k
            for p, g in zip(plist, saved, strict=True):
                p.grad = g
        self.anchor_params = [p.detach().clone() for p in plist]
        self.anchor_grad = [a / len(batches) for a in acc]
        self.steps_since_anchor = 0

    # ------------------------------------------------------------------------------------------ backprop
    def _bp(self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: list[nn.Parameter]) -> Tensor:
        x, y = batch
        with torch.enable_grad():
            loss = loss_fn(model(x), y)
            grads = torch.autograd.grad(loss, params, allow_unused=True)
        _set_grads(
            params, [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
        )
        self.counters.forward += 1
        self.counters.backward += 1
        return loss.detach()

    def _bp_checkpoint(
        self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: list[nn.Parameter]
    ) -> Tensor:
        from torch.utils.checkpoint import checkpoint

        segments = self.segments
        if segments is None:
            blocks = getattr(model, "blocks", None)
            if blocks is None and hasattr(model, "lm"):
                blocks = getattr(model.lm, "blocks", None)
            if not isinstance(blocks, nn.ModuleList):
                raise ValueError("segments: model has no `blocks` ModuleList; pass the modules to checkpoint")
            segments = list(blocks)
        originals = []
        for m in segments:
            fwd = m.forward
            originals.append((m, fwd))

            def wrapped(*a: Any, _f: Callable[..., Any] = fwd, **k: Any) -> Any:
                if torch.is_grad_enabled():
                    return checkpoint(_f, *a, use_reentrant=False, **k)
                return _f(*a, **k)

            m.forward = wrapped  # type: ignore[method-assign]
        try:
            loss = self._bp(model, loss_fn, batch, params)
        finally:
            for m, fwd in originals:
                m.forward = fwd  # type: ignore[method-assign]
        self.counters.recompute += 1
        return loss

    def _bp_accumulate(
        self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: list[nn.Parameter]
    ) -> Tensor:
        x, y = batch
        n = len(x)
        if n < self.micro_batches:
            raise ValueError(f"batch: {n} examples cannot be split into micro_batches={self.micro_batches}")
        sizes = [
            n // self.micro_batches + (1 if i < n % self.micro_batches else 0)
            for i in range(self.micro_batches)
        ]
        acc = [torch.zeros_like(p) for p in params]
        total = torch.zeros((), dtype=params[0].dtype)
        start = 0
        for size in sizes:
            xs, ys = x[start : start + size], y[start : start + size]
            start += size
            with torch.enable_grad():
                loss = loss_fn(model(xs), ys) * (size / n)
                grads = torch.autograd.grad(loss, params, allow_unused=True)
            for a, g in zip(acc, grads, strict=True):
                if g is not None:
                    a.add_(g)
            total = total + loss.detach()
            self.counters.forward += size / n
            self.counters.backward += size / n
        _set_grads(params, acc)
        return total

    # ---------------------------------------------------------------------------------------------- FmAD
    def _tangent(self, p: Tensor) -> Tensor:
        t = torch.randn(p.shape, generator=self._gen, dtype=p.dtype).to(p.device) * self.tangent_std
        if self.sparse_keep < 1.0:
            keep = torch.rand(p.shape, generator=self._gen, dtype=p.dtype) < self.sparse_keep
            t = t * keep.to(device=p.device, dtype=p.dtype)
        return t

    def _fmad(self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: list[nn.Parameter]) -> Tensor:
        from torch.func import functional_call, jvp, vmap
        from torch.nn.attention import SDPBackend, sdpa_kernel

        x, y = batch
        name_of = {id(p): n for n, p in model.named_parameters()}
        if any(id(p) not in name_of for p in params):
            raise ValueError("params: every trainable parameter must belong to model")
        names = [name_of[id(p)] for p in params]
        primals = tuple(p.detach() for p in params)
        svrg = self.name == "fmad_svrg"

        def f(*ps: Tensor) -> Tensor:
            return loss_fn(functional_call(model, dict(zip(names, ps, strict=True)), (x,)), y)

        def directional(points: tuple[Tensor, ...], chunk: list[tuple[Tensor, ...]]) -> tuple[Tensor, Tensor]:
            try:
                with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
                    if len(chunk) == 1:
                        value, s = jvp(f, points, chunk[0])
                        return value, s.reshape(1)
                    stacked = tuple(torch.stack(ts) for ts in zip(*chunk, strict=True))
                    values, s = vmap(lambda *ts: jvp(f, points, ts))(*stacked)
                    return values[0], s
            except NotImplementedError as err:
                raise NotImplementedError(
                    f"model: {type(model).__name__} has an operation without forward-mode AD support ({err})"
                ) from err

        acc = [torch.zeros_like(p) for p in params]
        loss_val = None
        self.last_directional = []
        done = 0
        while done < self.num_directions:
            n = min(self.tangent_batch, self.num_directions - done)
            chunk = [tuple(self._tangent(p) for p in params) for _ in range(n)]
            done += n
            loss_val, s_all = directional(primals, chunk)
            self.counters.jvp += n
            if svrg:
                assert self.anchor_params is not None
                _, s_anchor = directional(tuple(self.anchor_params), chunk)
                self.counters.jvp += n
            for i, tangents in enumerate(chunk):
                s = s_all[i]
                if not bool(torch.isfinite(s)) or (svrg and not bool(torch.isfinite(s_anchor[i]))):
                    self.last_directional.append(float(s - s_anchor[i]) if svrg else float(s))
                    self.skipped += 1
                    continue
                if self.jvp_clip is not None:
                    s = s.clamp(-self.jvp_clip, self.jvp_clip)
                coef = float(s)
                if svrg:
                    sa = s_anchor[i]
                    if self.jvp_clip is not None:
                        sa = sa.clamp(-self.jvp_clip, self.jvp_clip)
                    coef -= float(sa)
                    self.last_directional.append(float(s_all[i] - s_anchor[i]))
                else:
                    self.last_directional.append(float(s_all[i]))
                for a, t in zip(acc, tangents, strict=True):
                    a.add_(t, alpha=coef)
        scale = 1.0 / self.num_directions
        grads = [a * scale for a in acc]
        if svrg:
            assert self.anchor_grad is not None
            grads = [g + a for g, a in zip(grads, self.anchor_grad, strict=True)]
        _set_grads(params, grads)
        assert loss_val is not None
        return loss_val.detach()

    # ------------------------------------------------------------------------------------------------ ZO
    def _perturb(self, params: list[nn.Parameter], seed: int, scale: float, zs: list[Tensor] | None) -> None:
        gen = torch.Generator().manual_seed(seed)
        for i, p in enumerate(params):
            z = zs[i] if zs is not None else self._draw(p, gen)
            p.data.add_(z, alpha=scale)

    def _draw(self, p: Tensor, gen: torch.Generator) -> Tensor:
        z = torch.randn(p.shape, generator=gen, dtype=p.dtype)
        if self.sparse_keep < 1.0:
            z = z * (torch.rand(p.shape, generator=gen, dtype=p.dtype) < self.sparse_keep)
        return z.to(p.device)

    def _two_point(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        batch: Batch,
        params: list[nn.Parameter],
        seed: int,
        zs: list[Tensor] | None,
    ) -> tuple[float, float]:
        x, y = batch
        eps = self.eps
        self._perturb(params, seed, eps, zs)
        lp = float(loss_fn(model(x), y))
        self._perturb(params, seed, -2 * eps, zs)
        lm = float(loss_fn(model(x), y))
        self._perturb(params, seed, eps, zs)
        self.counters.forward += 2
        return lp, lm

    @torch.no_grad()
    def _zo(self, model: nn.Module, loss_fn: LossFn, batch: Batch, params: list[nn.Parameter]) -> Tensor:
        eps = self.eps
        svrg = self.name == "zo_svrg"
        acc = [torch.zeros_like(p) for p in params]
        losses = []
        self.last_directional = []
        for _ in range(self.num_directions):
            seed = int(torch.randint(0, 2**62, (1,), generator=self._gen))
            zs = None
            if not self.seed_trick:
                gen = torch.Generator().manual_seed(seed)
                zs = [self._draw(p, gen) for p in params]
            lp, lm = self._two_point(model, loss_fn, batch, params, seed, zs)
            proj = (lp - lm) / (2 * eps)
            if svrg:  # the same direction and batch at the anchor: swap it in, evaluate, swap back
                assert self.anchor_params is not None
                current = [p.detach().clone() for p in params]
                try:
                    for p, a in zip(params, self.anchor_params, strict=True):
                        p.copy_(a)
                    lpa, lma = self._two_point(model, loss_fn, batch, params, seed, zs)
                finally:
                    for p, c in zip(params, current, strict=True):
                        p.copy_(c)
                proj -= (lpa - lma) / (2 * eps)
            if self.zo_direction == "eps_z":
                proj *= eps
            losses.append(0.5 * (lp + lm))
            self.last_directional.append(proj)
            gen = torch.Generator().manual_seed(seed)
            for i, (a, p) in enumerate(zip(acc, params, strict=True)):
                z = zs[i] if zs is not None else self._draw(p, gen)
                a.add_(z, alpha=proj)
        grads = [a / self.num_directions for a in acc]
        if svrg:
            assert self.anchor_grad is not None
            grads = [g + a for g, a in zip(grads, self.anchor_grad, strict=True)]
        _set_grads(params, grads)
        return torch.tensor(sum(losses) / len(losses), dtype=params[0].dtype)


def make_estimator(name: str, **options: Any) -> GradientEstimator:
    """A :class:`GradientEstimator` named ``name`` (one of :data:`ESTIMATORS`) with keyword ``options``.

    >>> est = make_estimator("zo", num_directions=4, eps=1e-3)
    >>> est.name, est.num_directions
    ('zo', 4)
    """
    return GradientEstimator(name, **options)


def normalised_error(
    estimator: GradientEstimator,
    model: nn.Module,
    loss_fn: LossFn,
    batch: Batch,
    params: Sequence[nn.Parameter] | None = None,
    *,
    draws: int = 100,
) -> tuple[float, float]:
    """Monte Carlo ``E||g_hat - grad||^2 / ||grad||^2`` of ``estimator`` and its standard error.

    ``grad`` is the backprop gradient at the current parameters; ``draws`` independent calls of
    :meth:`GradientEstimator.compute` (which leave ``.grad`` set to the last estimate).
    """
    check_type("estimator", estimator, GradientEstimator)
    draws = check_int("draws", draws, minimum=2)
    plist = [p for p in model.parameters() if p.requires_grad] if params is None else list(params)
    GradientEstimator("bp").compute(model, loss_fn, batch, plist)
    true = torch.cat([p.grad.reshape(-1) for p in plist]).clone()  # type: ignore[union-attr]
    denom = float(true.square().sum())
    if denom == 0.0:
        raise ValueError("batch: the true gradient is zero; the normalised error is undefined")
    errs = []
    for _ in range(draws):
        estimator.compute(model, loss_fn, batch, plist)
        g = torch.cat([p.grad.reshape(-1) for p in plist])  # type: ignore[union-attr]
        errs.append(float((g - true).square().sum()) / denom)
    mean = sum(errs) / draws
    var = sum((e - mean) ** 2 for e in errs) / (draws - 1)
    return mean, math.sqrt(var / draws)


def saved_tensor_bytes(fn: Callable[[], Any]) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` runs, each storage counted once.

    Tensors saved inside a checkpointed region are not kept (they are recomputed), so they do not count;
    a forward under ``no_grad`` or a JVP saves nothing.
    """
    if not callable(fn):
        raise TypeError(f"fn: must be callable, got {type(fn).__name__}")
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        try:
            st = t.untyped_storage()
            seen.setdefault(st.data_ptr(), st.nbytes())
        except (RuntimeError, NotImplementedError):
            seen.setdefault(id(t), t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return int(sum(seen.values()))


def peak_allocated_bytes(fn: Callable[[], Any]) -> int:
    """Peak of CPU allocations above the level at entry while ``fn()`` runs, from ``torch.profiler``.

    The profiler's ``[memory]`` events (allocations positive, frees negative) are summed in time order;
    the peak of the running sum is returned (0 if nothing was allocated).
    """
    if not callable(fn):
        raise TypeError(f"fn: must be callable, got {type(fn).__name__}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    sizes = [int(e.nbytes()) for e in events]
    run = peak = 0
    for size in sizes:
        run += size
        peak = max(peak, run)
    return peak
