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
- The clipping factor is computed in float64 from per-tensor norms (one read of the gradients). A finite
  norm proves every gradient finite, so the family's non-finite check (:func:`should_step`) runs on the
  gradients themselves only when the norm is not finite (NaN/inf gradients, or a float32 norm that
  overflowed, in which case the norm is recomputed in float64). This keeps a step at one extra read of the
  gradients over SGD.
- ``ClipSGD`` keeps no per-parameter state (plain SGD has none either).
"""

from __future__ import annotations

import math
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
    Rows with zero norm are returned unchanged; ``clip=inf`` returns ``g`` unchanged (exactly).
    """
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
        super().__init__(params, {"lr": lr, "clip": clip, "maximize": maximize})

    config_attrs = ("clip_mode", "projection", "foreach", "nonfinite", "skipped_steps")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its own ``lr``/``clip``/``maximize`` are validated like the constructor's."""
        if "lr" in param_group:
            _check_lr(param_group["lr"], "param_group['lr']")
        if "clip" in param_group:
            _check_clip(param_group["clip"], "param_group['clip']")
        if "maximize" in param_group:
            check_type("param_group['maximize']", param_group["maximize"], bool)
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load groups and state; every loaded group's ``clip`` and ``lr`` are validated."""
        for i, group in enumerate(state_dict["param_groups"]):
            _check_clip(group.get("clip", self.defaults["clip"]), f"param_groups[{i}]['clip']")
            _check_lr(group.get("lr", self.defaults["lr"]), f"param_groups[{i}]['lr']")
        super().load_state_dict(state_dict)

    def _norms(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.foreach is False:
            return [torch.linalg.vector_norm(g) for g in grads]
        by_device: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, g in enumerate(grads):
            by_device.setdefault((g.device, g.dtype), []).append(i)
        out: list[torch.Tensor] = [grads[0]] * len(grads)
        for idx in by_device.values():
            for i, n in zip(idx, torch._foreach_norm([grads[i] for i in idx]), strict=True):
                out[i] = n
        return out

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One clipped (projected) step. Evaluates ``closure`` (if given) first; returns its loss or None."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups: list[tuple[dict[str, Any], list[torch.Tensor], list[torch.Tensor]]] = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if any(p.grad.is_sparse for p in params):
                raise ValueError("grad: ClipSGD does not support sparse gradients")
            if params:
                groups.append((group, params, [p.grad for p in params]))
        grads = [g for _, _, gs in groups for g in gs]
        if not grads:
            return loss

        # Per-tensor squared norms in float64, moved to the CPU at once (one sync, as the family's non-finite
        # check needs anyway).
        norms = self._norms(grads)
        device = norms[0].device
        sq = torch.stack([n.to(device=device, dtype=torch.float64) for n in norms]).cpu().square()
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
