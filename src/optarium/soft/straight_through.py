"""Straight-through estimation: hard forward pass, soft backward pass.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824
(the ``st`` / ``grad_replace`` decorators and the ready-made ``*_st`` operators); the estimator itself goes
back to Bengio, Leonard & Courville 2013 (arXiv:1308.3432).

Every tensor leaf of the output is combined as

    out = hard.detach() + (soft - soft.detach()),

where ``hard`` is the function evaluated with ``mode="hard"`` (computed under ``torch.no_grad``) and ``soft``
the same function in the requested mode. For finite ``soft`` the bracket is exactly +0 in the forward pass,
so ``out`` equals ``hard`` bit for bit (``torch.equal``; a -0.0 may become +0.0) and its gradient is exactly
the soft function's. Deliberate deviation from SoftTorch 0.1.1, which computes ``(hard - soft).detach() +
soft``: that expression is off by one ulp from ``hard`` in a few entries. Entries where ``soft`` is not finite
keep the hard value and get zero gradient (instead of a NaN forward).

The axis-wise ``*_st`` operators (sort, argmax, quantile, ...) live next to their soft versions in
:mod:`optarium.soft.axiswise` and are built with :func:`st` from this module.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from optarium.soft import elementwise as _ew
from optarium.soft import logic as _lg

__all__ = [
    "abs_st",
    "clamp_st",
    "eq_st",
    "grad_replace",
    "greater_equal_st",
    "greater_st",
    "heaviside_st",
    "isclose_st",
    "less_equal_st",
    "less_st",
    "make_st",
    "not_equal_st",
    "relu_st",
    "round_st",
    "sign_st",
    "st",
    "st_combine",
]


def _combine_leaf(hard: Any, soft: Any) -> Any:
    if hard is None:
        return None
    if not isinstance(hard, torch.Tensor):
        return hard
    hard = hard.detach()
    if not isinstance(soft, torch.Tensor) or not soft.is_floating_point() or not soft.requires_grad:
        return hard
    if soft.shape != hard.shape:
        raise ValueError(
            f"st: hard and soft outputs differ in shape ({tuple(hard.shape)} vs {tuple(soft.shape)})"
        )
    # Exactly +0 where soft is finite; masked (no host sync) so a non-finite soft cannot spoil the forward.
    delta = (soft - soft.detach()).masked_fill(~torch.isfinite(soft.detach()), 0.0)
    if hard.dtype != delta.dtype:
        hard = hard.to(delta.dtype)
    return hard + delta


def st_combine(hard: Any, soft: Any) -> Any:
    """Combine two outputs of the same structure leaf by leaf as ``hard.detach() + (soft - soft.detach())``.

    Handles tensors, ``None`` and (named/struct-)tuples, lists and dicts of them. A leaf whose soft
    counterpart is ``None``, non-floating or without grad is returned as the (detached) hard leaf.
    """
    if isinstance(hard, dict):
        return {k: st_combine(v, soft.get(k) if isinstance(soft, dict) else None) for k, v in hard.items()}
    if isinstance(hard, (tuple, list)):
        if isinstance(soft, (tuple, list)) and len(soft) == len(hard):
            items = [st_combine(h, s) for h, s in zip(hard, soft, strict=True)]
        else:
            items = [st_combine(h, None) for h in hard]
        if isinstance(hard, list):
            return items
        cls = type(hard)
        if cls is tuple:
            return tuple(items)
        if hasattr(hard, "_fields"):  # namedtuple
            return cls(*items)
        return cls(tuple(items))  # torch.return_types structseq
    return _combine_leaf(hard, soft)


def st(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Straight-through version of ``fn``: forward ``fn(..., mode="hard")``, gradient of ``fn(..., mode=m)``.

    ``m`` is the ``mode`` the caller passes (positionally or by keyword), else ``fn``'s own default for
    ``mode``, else ``"smooth"``. Each output tensor is ``hard.detach() + (soft - soft.detach())``, so the
    forward value equals the hard result exactly and the gradient equals the soft one exactly. With
    ``mode="hard"`` the hard function is returned unchanged.
    """
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        params = {}
    mode_param = params.get("mode")
    if mode_param is not None:
        mode_default = mode_param.default if mode_param.default is not inspect.Parameter.empty else "smooth"
        positional = [
            p.name
            for p in params.values()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        mode_idx = positional.index("mode") if "mode" in positional else None
    else:
        mode_default = "smooth"
        mode_idx = None
        positional = []

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if mode_idx is not None and len(args) > mode_idx:
            # Arguments after ``mode`` keep their meaning: they are passed on by name, not shifted left.
            mode, tail = args[mode_idx], args[mode_idx + 1 :]
            names = positional[mode_idx + 1 : mode_idx + 1 + len(tail)]
            if len(names) < len(tail):
                raise TypeError(f"{fn.__name__}() takes at most {len(positional)} positional arguments")
            for name, value in zip(names, tail, strict=True):
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}() got multiple values for argument {name!r}")
                kwargs[name] = value
            args = args[:mode_idx]
        else:
            mode = kwargs.pop("mode", mode_default)
        if mode == "hard":
            return fn(*args, mode="hard", **kwargs)
        soft = fn(*args, mode=mode, **kwargs)
        with torch.no_grad():
            hard = fn(*args, mode="hard", **kwargs)
        return st_combine(hard, soft)

    return wrapped


def grad_replace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Forward value of ``fn(..., forward=True)``, gradient of ``fn(..., forward=False)``.

    ``fn`` must accept a boolean keyword ``forward``. Each output tensor is combined as in :func:`st`:
    ``fw.detach() + (bw - bw.detach())``, exact in the forward pass.
    """

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        bw = fn(*args, forward=False, **kwargs)
        with torch.no_grad():
            fw = fn(*args, forward=True, **kwargs)
        return st_combine(fw, bw)

    return wrapped


def make_st(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The straight-through variant ``name`` of the soft operator ``fn``: :func:`st`, named and documented.

    Every ``*_st`` function of :mod:`optarium.soft` is made this way.
    """
    wrapped = st(fn)
    wrapped.__name__ = name
    wrapped.__qualname__ = name
    wrapped.__doc__ = (
        f"Straight-through :func:`optarium.soft.{fn.__name__}`: exactly the hard ``{fn.__name__}`` in the "
        f"forward pass (hard.detach() + (soft - soft.detach())), the gradient of the soft ``{fn.__name__}`` "
        f'(given ``mode``, default "smooth") in the backward pass. Same arguments as ``{fn.__name__}``.'
    )
    return wrapped


abs_st = make_st(_ew.abs, "abs_st")
clamp_st = make_st(_ew.clamp, "clamp_st")
heaviside_st = make_st(_ew.heaviside, "heaviside_st")
relu_st = make_st(_ew.relu, "relu_st")
round_st = make_st(_ew.round, "round_st")
sign_st = make_st(_ew.sign, "sign_st")
eq_st = make_st(_lg.eq, "eq_st")
greater_st = make_st(_lg.greater, "greater_st")
greater_equal_st = make_st(_lg.greater_equal, "greater_equal_st")
isclose_st = make_st(_lg.isclose, "isclose_st")
less_st = make_st(_lg.less, "less_st")
less_equal_st = make_st(_lg.less_equal, "less_equal_st")
not_equal_st = make_st(_lg.not_equal, "not_equal_st")
