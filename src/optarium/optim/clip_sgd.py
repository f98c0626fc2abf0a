r"""ClipSGD: stochastic (sub)gradient descent with norm clipping and an optional projection.

Reference: Tianxi Zhu, Yi Xu, Xiangyang Ji, "Stochastic Weakly Convex Optimization Under Heavy-Tailed
Noises", arXiv:2507.13283 (v1, July 2025; revised as the ICML version with the same title).

Update rule (the paper's clipped stochastic subgradient method, "Clip-SGD"). With the stochastic
(sub)gradient :math:`g_t` of all parameters :math:`x_t` stacked into one vector,

.. math::
    \operatorname{clip}_\tau(g) = \min\Big(1, \frac{\tau}{\lVert g\rVert_2}\Big)\, g, \qquad
    x_{t+1} = \Pi_X\big(x_t - \eta_t \operatorname{clip}_\tau(g_t)\big),

where :math:`\Pi_X` is the Euclidean projection onto a closed convex set :math:`X` (the identity for
:math:`X = \mathbb{R}^d`, the paper's unbounded setting). ``clip=inf`` is plain (projected) SGD, bit for bit
``torch.optim.SGD`` without momentum when no projection is given. The paper's guarantees are for a fixed
horizon :math:`T` with constant :math:`\eta` and :math:`\tau` chosen from :math:`T` and the noise's
:math:`p`-th moment; those constants could not be read (only the abstract was reachable), so the optimizer
takes :math:`\eta` (``lr``, schedulable as usual) and :math:`\tau` (``clip``) as given.

Design (where the paper is silent):

- ``clip_mode="global"`` (default, the paper's rule) clips the norm of *all* gradients of the optimizer
  together, across param groups, so two groups with the same settings equal one group; a group's own
  ``clip`` is applied with that common norm. ``clip_mode="per_tensor"`` clips each tensor by its own norm
  (a common practical variant, not the paper's).
- ``projection`` (optional) is a callable ``projection(params) -> None`` that projects the list of *all*
  parameters of the optimizer in place after every step (they form the vector :math:`x`); it is not part of
  ``state_dict`` (pass it again when rebuilding the optimizer). :class:`BallProjection` projects onto
  :math:`\{x : \lVert x - c\rVert_2 \le r\}` (the paper's bounded-domain setting).
- The clipping factor is computed in float64 from per-tensor squared norms (one read of the gradients:
  ``torch.dot(g, g)`` per tensor on the CPU, the fastest single read there, ``torch._foreach_norm`` on
  other devices). A finite norm proves every gradient finite, so the family's non-finite check
  (:func:`should_step`) runs on the gradients themselves only when the norm is not finite (NaN/inf
  gradients, or a float32 square that overflowed, in which case the norms are recomputed in float64). The
  clip factor goes into the step's scalar (``p += -lr * factor * g``, one ``_foreach_add_``), never into a
  write pass over the gradients, so a step is SGD's pass plus one read of the gradients.
- ``norm_hooks=True`` (opt-in) moves that read into the backward pass: a
  ``register_post_accumulate_grad_hook`` on every parameter computes the squared norm of ``p.grad`` as soon
  as autograd has accumulated it (while it is hot in cache), and the step reuses it when ``p.grad`` is
  still the same tensor at the same version counter (``Tensor._version``, bumped by every in-place change:
  ``GradScaler.unscale_``, a second accumulation, a user's ``mul_``); any other gradient (set by hand,
  replaced, modified) is read again in the step. The squared norms come from the same per-tensor kernel
  either way, so the iterates are bit for bit those of ``norm_hooks=False`` (tested). The step itself is then
  one pass, SGD's. Costs: one extra squared norm per accumulation (gradient accumulation over ``k``
  micro-batches reads each gradient ``k`` times instead of once), and a hook per parameter. Hooks do not
  travel through ``pickle`` or ``copy.deepcopy`` (torch drops them), so the copy registers its own on its
  parameters; they hold the optimizer weakly and do nothing once it is gone. Measured on the CPU
  (``benchmarks/optim_step.py --only clipsgd``): see that benchmark's docstring for the ratios and floors.
- ``ClipSGD`` keeps no per-parameter state (plain SGD has none either).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from optarium._core.validation import check_choice, check_positive, check_type
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = ["CLIP_MODES", "BallProjection", "ClipSGD", "clip_by_norm"]

CLIP_MODES: tuple[str, ...] = ("global", "per_tensor")


def clip_by_norm(g: torch.Tensor, clip: float | torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Row-wise :math:`\min(1, \tau / \lVert g\rVert_2)\, g` along ``dim`` (a batched, out-of-place clip).

    ``clip`` is a float or a tensor broadcastable against ``g`` with ``dim`` reduced (one threshold per row).
    Rows with zero norm are returned unchanged; ``clip=inf`` returns ``g`` unchanged (exactly). A number
    ``clip`` must be > 0 (``ValueError`` otherwise); a tensor one is not checked (that would synchronise the
    device in the simulations that call this every step).
    """
    if not isinstance(clip, torch.Tensor):
        clip = _check_clip(clip)
    norm = torch.linalg.vector_norm(g, dim=dim, keepdim=True)
    factor = torch.clamp(clip / norm, max=1.0)  # tau / 0 = inf -> 1
    return g * factor


class BallProjection:
    r"""Euclidean projection of a list of tensors (one stacked vector) onto the ball ``||x - c|| <= r``.

    Args:
        radius: ``r``, finite and > 0.
        center: optional list of tensors shaped like the parameters (default: the origin).

    Calling it on a list of tensors projects them in place (under ``torch.no_grad``).
    """

    def __init__(self, radius: float, center: Sequence[torch.Tensor] | None = None) -> None:
        self.radius = check_positive("radius", radius)
        if center is not None:
            center = [check_type("center", c, torch.Tensor).detach().clone() for c in center]
        self.center = center

    @torch.no_grad()
    def __call__(self, params: Sequence[torch.Tensor]) -> None:
        """Project ``params`` in place."""
        if not params:
            return
        if self.center is None:
            offsets = list(params)
        else:
            if len(self.center) != len(params):
                raise ValueError(f"center: has {len(self.center)} tensors, params have {len(params)}")
            offsets = [p - c.to(p) for p, c in zip(params, self.center, strict=True)]
        norms = [torch.linalg.vector_norm(o, dtype=torch.float64) for o in offsets]
        total = float(torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms])))
        if total <= self.radius:
            return
        factor = self.radius / total
        for i, p in enumerate(params):
            if self.center is None:
                p.mul_(factor)
            else:
                c = self.center[i].to(p)
                p.copy_(c + (p - c) * factor)

    def __repr__(self) -> str:
        return f"BallProjection(radius={self.radius!r})"


def _check_clip(value: Any, name: str = "clip") -> float:
    return check_positive(name, value, allow_inf=True)


_check_lr = check_lr


def _sq_norm(g: torch.Tensor) -> torch.Tensor:
    """The squared Euclidean norm of one dense gradient, as the step uses it (a 0-d tensor)."""
    if g.device.type == "cpu" and g.dtype in (torch.float32, torch.float64):
        flat = g.reshape(-1)
        return torch.dot(flat, flat)
    return torch.linalg.vector_norm(g).square()


class _NormHook:
    """Post-accumulate-grad hook: caches ``(grad, version, squared norm)`` in its optimizer (held weakly)."""

    def __init__(self, opt: ClipSGD) -> None:
        self.opt = weakref.ref(opt)

    def __call__(self, p: torch.Tensor) -> None:
        opt = self.opt()
        g = p.grad
        if opt is None or g is None or g.is_sparse:
            return
        with torch.no_grad():
            opt._norm_cache[id(p)] = (weakref.ref(g), g._version, _sq_norm(g))


class ClipSGD(DropInOptimizer):
    r"""SGD on the clipped gradient, :math:`x \leftarrow \Pi_X(x - \eta \min(1, \tau/\lVert g\rVert) g)`.

    Args:
        params: parameters or param groups (a group may carry its own ``lr``, ``clip``, ``maximize``).
        lr: step size :math:`\eta`, finite and >= 0 (default 1e-2; 0 freezes a group, as in torch).
        clip: threshold :math:`\tau` on the gradient's Euclidean norm, > 0; ``inf`` disables clipping
            (default 1.0).
        clip_mode: ``"global"`` (default: the norm of all gradients together, the paper's rule) or
            ``"per_tensor"`` (each tensor clipped by its own norm).
        projection: optional callable ``projection(params) -> None`` projecting all parameters in place
            after each step, e.g. :class:`BallProjection` (default ``None``: unconstrained).
        maximize: ascend instead of descend (as in ``torch.optim.SGD``).
        foreach: use ``torch._foreach_*`` kernels (default ``None``: yes); ``False`` takes the per-tensor
            path, with the same results.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"``: what a step with NaN or inf gradients does.
        norm_hooks: compute each gradient's squared norm in the backward pass, right after autograd
            accumulates it (``register_post_accumulate_grad_hook``), so that the step is one pass (default
            ``False``; the same iterates bit for bit, see the module docstring for when it pays).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = ClipSGD(model.parameters(), lr=1e-2, clip=5.0)
        >>> model(torch.randn(8, 4)).square().mean().backward()
        >>> opt.step()
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        clip: float = 1.0,
        *,
        clip_mode: str = "global",
        projection: Callable[[list[torch.Tensor]], None] | None = None,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: str = "raise",
        norm_hooks: bool = False,
    ) -> None:
        lr = _check_lr(lr)
        clip = _check_clip(clip)
        check_type("maximize", maximize, bool)
        self.clip_mode = check_choice("clip_mode", clip_mode, CLIP_MODES)
        if projection is not None and not callable(projection):
            raise TypeError(f"projection: must be callable or None, got {type(projection).__name__}")
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.projection = projection
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        self.norm_hooks = check_type("norm_hooks", norm_hooks, bool)
        self._init_hooks()
        super().__init__(params, {"lr": lr, "clip": clip, "maximize": maximize})

    config_attrs = ("clip_mode", "projection", "foreach", "nonfinite", "skipped_steps", "norm_hooks")

    def _init_hooks(self) -> None:
        self._norm_cache: dict[int, tuple[Any, int, torch.Tensor]] = {}
        self._hook_handles: dict[int, Any] = {}

    def _register_hooks(self, params: Iterable[torch.Tensor]) -> None:
        if not self.__dict__.get("norm_hooks", False):
            return
        for p in params:
            if id(p) not in self._hook_handles and p.requires_grad:
                self._hook_handles[id(p)] = p.register_post_accumulate_grad_hook(_NormHook(self))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore settings (see :class:`DropInOptimizer`) and, with ``norm_hooks``, hook the parameters."""
        super().__setstate__(state)
        if "_hook_handles" not in self.__dict__:  # a copy or an unpickled optimizer, not load_state_dict
            self._init_hooks()
        self._register_hooks(p for group in self.param_groups for p in group["params"])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its own ``lr``/``clip``/``maximize`` are validated like the constructor's."""
        if "lr" in param_group:
            _check_lr(param_group["lr"], "param_group['lr']")
        if "clip" in param_group:
            _check_clip(param_group["clip"], "param_group['clip']")
        if "maximize" in param_group:
            check_type("param_group['maximize']", param_group["maximize"], bool)
        super().add_param_group(param_group)
        self._register_hooks(self.param_groups[-1]["params"])

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load groups and state; every loaded group's ``clip`` and ``lr`` are validated."""
        for i, group in enumerate(state_dict["param_groups"]):
            _check_clip(group.get("clip", self.defaults["clip"]), f"param_groups[{i}]['clip']")
            _check_lr(group.get("lr", self.defaults["lr"]), f"param_groups[{i}]['lr']")
        super().load_state_dict(state_dict)

    def _sq_norms(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """Per-tensor squared norms: from the hooks' cache where it is current, else read now."""
        cache, self._norm_cache = self._norm_cache, {}
        out: list[torch.Tensor | None] = [None] * len(grads)
        todo: list[int] = []
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            hit = cache.get(id(p))
            if hit is not None and hit[0]() is g and hit[1] == g._version:
                out[i] = hit[2]
            else:
                todo.append(i)
        if todo:
            on_cpu = [i for i in todo if grads[i].device.type == "cpu"]
            for i in on_cpu:
                out[i] = _sq_norm(grads[i])
            rest = [i for i in todo if grads[i].device.type != "cpu"]
            if self.foreach is False:
                for i in rest:
                    out[i] = _sq_norm(grads[i])
            else:
                by_device: dict[tuple[torch.device, torch.dtype], list[int]] = {}
                for i in rest:
                    by_device.setdefault((grads[i].device, grads[i].dtype), []).append(i)
                for idx in by_device.values():
                    for i, n in zip(idx, torch._foreach_norm([grads[i] for i in idx]), strict=True):
                        out[i] = n.square()
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One clipped (projected) step. Evaluates ``closure`` (if given) first; returns its loss or None."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = [(group, params, [p.grad for p in params]) for group, params in self._groups_with_grads()]
        grads = [g for _, _, gs in groups for g in gs]
        if not grads:
            self._norm_cache = {}
            return loss

        # Per-tensor squared norms in float64, moved to the CPU at once (one sync, as the family's non-finite
        # check needs anyway).
        norms = self._sq_norms([p for _, ps, _ in groups for p in ps], grads)
        device = norms[0].device
        sq = torch.stack([n.to(device=device, dtype=torch.float64) for n in norms]).cpu()
        if not bool(torch.isfinite(sq).all()):
            # NaN/inf gradients (raise or skip), or a low-precision norm that overflowed (recompute in
            # float64).
            if not should_step(type(self).__name__, grads, self.nonfinite):
                self.skipped_steps += 1
                return loss
            sq = torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64).cpu() for g in grads]).square()
        sq_list = sq.tolist()
        total = math.sqrt(math.fsum(sq_list))

        start = 0
        for group, params, gs in groups:
            lr = float(group["lr"])
            sign = 1.0 if group["maximize"] else -1.0
            clip = group["clip"]
            if self.clip_mode == "global":
                factor = min(1.0, clip / total) if total > 0 else 1.0
                if self.foreach is False:
                    for p, g in zip(params, gs, strict=True):
                        p.add_(g, alpha=sign * lr * factor)
                else:
                    torch._foreach_add_(params, gs, alpha=sign * lr * factor)
            else:
                factors = []
                for s in sq_list[start : start + len(params)]:
                    n = math.sqrt(s)
                    factors.append(min(1.0, clip / n) if n > 0 else 1.0)
                if self.foreach is False:
                    for p, g, f in zip(params, gs, factors, strict=True):
                        p.add_(g * (sign * lr * f))
                else:
                    torch._foreach_add_(params, torch._foreach_mul(gs, [sign * lr * f for f in factors]))
            start += len(params)

        if self.projection is not None:
            self.projection([p for group in self.param_groups for p in group["params"]])
        return loss
