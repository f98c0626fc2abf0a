r"""Analog in-memory training with a non-ideal reference: SP calibration and dynamic SP tracking.

Paper: Q. Xiao, J. Li, Z. Wu, T. Gokmen, T. Chen, "Dynamic Symmetric Point Tracking: Tackling Non-ideal
Reference in Analog In-memory Training", ICML 2026, arXiv:2602.21321. Device and Analog SGD model from
Z. Wu, Q. Xiao, T. Gokmen, O. Fagbohungbe, T. Chen, "Analog In-memory Training on General Non-ideal
Resistive Elements: The Impact of Response Functions", NeurIPS 2025, arXiv:2502.06309.

**Device model** (standard in that literature). Every weight element is a resistive device with
conductance ``w``. A requested increment :math:`\Delta` is realised as

.. math:: w \leftarrow w + \Delta F(w) - |\Delta| G(w), \qquad F = (q_+ + q_-)/2,\; G = (q_- - q_+)/2,

with response functions :math:`q_\pm`; the *symmetric point* (SP) :math:`w^\circ` solves
:math:`G(w^\circ) = 0`. :class:`SoftBoundsDevice`: :math:`q_\pm(w) = 1 \mp (w - w^\circ)/\tau`, so
:math:`F \equiv 1`, :math:`G = (w - w^\circ)/\tau`, conductances clipped to :math:`[w^\circ - \tau, w^\circ +
\tau]`, SP drawn per element as :math:`N(\mu, \sigma^2)` clipped to :math:`\mu \pm 0.8` (device-to-device
variation, from the device's own ``seed``, so paired runs share devices). Pulses have size ``dw_min``; an
update is applied in aggregate (:func:`pulse_update`): ``n = |Delta| / dw_min`` stochastically rounded to
whole pulses, change ``sign(Delta) n dw_min F(w) - n dw_min G(w)`` plus cycle-to-cycle noise
``c2c * dw_min * sqrt(n) * N(0, 1)``, then clipped (exact to :math:`O(n\,dw_{min}/\tau)`). Reads carry
Gaussian read noise. :class:`SymmetricDevice` has :math:`G \equiv 0` (same pulses and noise);
:class:`IdealDevice` is symmetric, continuous (no rounding), noise-free and unbounded with SP 0: there
:class:`AnalogSGD` is plain SGD bit for bit.

**Analog SGD** (:class:`AnalogSGD`): the computed weight is :math:`\bar W = W - R` (``p.data`` always holds
it); each step pulses :math:`W` with :math:`-\alpha \hat g`, so the :math:`|\hat g| G(W)` term pulls
:math:`\bar W` toward :math:`w^\circ - R`. ``reference``: ``"oracle"`` (:math:`R = w^\circ`),
``"calibrated"`` (:func:`calibrate_sp`: ``calibration_pulses`` alternating +-1 pulses per device, then
:math:`R` = mean of the last ``max(1, N // 10)`` noisy reads), ``"zero"`` (:math:`R = 0`).
After calibration the initial weight is programmed as :math:`W = R + \bar W_0` (an exact digital write,
our simplification); with the oracle or zero reference :math:`W = R + \bar W_0` as well, clipped to the
conductance range.

**Residual learning with SP tracking** (:class:`ResidualAnalogSGD`; our design following the abstract, the
paper's exact tracking, chopper and filter equations were not found, see the spec ``aimc-sp.md``). Two
arrays per weight: fast :math:`P` (gradient pulses, its own SPs :math:`p^\circ`) and slow :math:`W`. Each
step: (1) pulse :math:`P` with :math:`-\alpha c_t \hat g` (:math:`c_t = \pm 1` flips every
``chopper_period`` steps; :math:`c_t \equiv 1` without chopper); (2) read :math:`P` (noisy) as :math:`r`;
with ``sp_tracking="dynamic"`` update :math:`\hat s \leftarrow (1 - \gamma)\hat s + \gamma r`
(``sp_ema``); ``"calibrated"`` keeps :math:`\hat s` from :func:`calibrate_sp` of :math:`P`; ``"none"``
keeps :math:`\hat s = 0`; (3) demodulate :math:`u = c_t (r - \hat s)`, low-pass it with ``filter_ema``
:math:`\gamma_f` (:math:`y \leftarrow (1-\gamma_f) y + \gamma_f u`; no filter: :math:`y = u`); (4) every
``transfer_every`` steps pulse :math:`W` with :math:`\beta y` (``transfer_lr``). :math:`W`'s own reference
is its SP (the Residual Learning setting; this paper concerns the fast array's reference), :math:`P` and
:math:`\hat s` start at 0. The un-chopped dynamic variant is a proportional controller and is expected to
stall under a persistent gradient (spec); it is kept as the ablation.

On a leak-free (ideal) fast array the chopped variant carries no net signal: a steady gradient drives
:math:`P` as a triangle wave whose demodulated mean over each half period is zero, so chopping relies on the
fast array's leak toward its SP (soft bounds) or a reset; the ideal-device limit is the un-chopped variant,
which then is heavy-ball-like (effective step :math:`\alpha\beta/(\gamma T)`, momentum :math:`1 - \gamma`).

Deviations / our choices: the aggregate pulse model; the calibration routine (alternating pulses, average
of the last tenth of the reads); the tracking/chopper/filter design above; no reset of :math:`P` after a
transfer. SP drift (the spec's drifting-SP scenario) is a simulator hook, ``opt.shift_sp(delta)``: every
device's SP moves, references and :math:`\hat s` do not. Noise draws come from the optimizer's own
``torch.Generator`` (``seed``), saved in ``state_dict`` with :math:`W, R, P, \hat s`, the filter, the
chopper phase and the pulse counters.
Updates are whole-tensor elementwise ops with a Python loop over parameter tensors (not a ``torch._foreach``
path): ``foreach`` is accepted for interface compatibility and both settings run the same per-tensor path
(the pulse model draws its noise per tensor, in parameter order). Many small layers would profit from a
foreach path; the experiment vectorises its replicates as rows of one tensor instead.

**aihwkit** (IBM's simulator, the natural side-by-side reference) is not used: ``pip install --dry-run
aihwkit==1.2.0`` and ``==1.1.0`` both pull torch 2.14.1 (and a CUDA 13 toolkit, cmake and scikit-build for
a source build) over the pinned torch 2.13.0 (``AIHWKIT_CHECK``), so the tests compare against closed-form
stationary points and noise floors instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from optarium._core.validation import check_choice, check_finite, check_int, check_nonnegative, check_positive
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = [
    "AIHWKIT_CHECK",
    "REFERENCES",
    "SP_TRACKING",
    "AnalogSGD",
    "IdealDevice",
    "ResidualAnalogSGD",
    "SoftBoundsDevice",
    "SymmetricDevice",
    "calibrate_sp",
    "chopped_filter",
    "pulse_update",
]

#: result of the aihwkit install check (2026-12-02, this environment's local index)
AIHWKIT_CHECK = (
    "pip install --dry-run aihwkit==1.2.0 and aihwkit==1.1.0 both resolve to torch 2.14.1 (plus the CUDA 13 "
    "toolkit, cmake, scikit-build and pybind11: a source build), replacing the pinned torch 2.13.0; not added"
)

REFERENCES: tuple[str, ...] = ("oracle", "calibrated", "zero")
SP_TRACKING: tuple[str, ...] = ("dynamic", "calibrated", "none")


@dataclass(frozen=True)
class SoftBoundsDevice:
    """Soft-bounds resistive device: ``q_pm(w) = 1 -+ (w - sp) / tau``, range ``[sp - tau, sp + tau]``.

    Args:
        tau: half-width of the conductance range (> 0).
        dw_min: pulse size (> 0).
        sp_mean, sp_std: mean and spread of the per-element symmetric point (``sp_std >= 0``).
        sp_clip: SPs are clipped to ``sp_mean +- sp_clip`` (>= 0).
        c2c_noise: cycle-to-cycle noise per pulse, as a fraction of ``dw_min`` (>= 0).
        read_noise: standard deviation of a read (>= 0).
        seed: seed of the SP draws (device-to-device variation; independent of the optimizer's noise).
    """

    tau: float = 1.0
    dw_min: float = 1e-3
    sp_mean: float = 0.0
    sp_std: float = 0.3
    sp_clip: float = 0.8
    c2c_noise: float = 0.3
    read_noise: float = 1e-3
    seed: int = 0

    #: whether the device has an asymmetric response (G != 0)
    asymmetric = True
    #: whether pulses are whole (stochastically rounded) and noisy
    discrete = True
    #: whether conductances are clipped to the range
    bounded = True

    def __post_init__(self) -> None:
        check_positive("tau", self.tau)
        check_positive("dw_min", self.dw_min)
        for name in ("sp_std", "sp_clip", "c2c_noise", "read_noise"):
            check_nonnegative(name, getattr(self, name))
        check_finite("sp_mean", self.sp_mean)
        check_int("seed", self.seed, minimum=0)

    def draw_sp(self, like: Tensor, index: int, salt: int = 0) -> Tensor:
        """Per-element symmetric points for a tensor shaped like ``like`` (the ``index``-th parameter)."""
        gen = torch.Generator().manual_seed((int(self.seed) * 1_000_003 + 7919 * index + salt) % (2**63))
        z = torch.randn(like.shape, generator=gen, dtype=torch.float64)
        sp = (self.sp_mean + self.sp_std * z).clamp(self.sp_mean - self.sp_clip, self.sp_mean + self.sp_clip)
        return sp.to(dtype=like.dtype, device=like.device)

    def response(self, w: Tensor, sp: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """``(F, G)`` at conductances ``w`` (``None`` means F = 1 or G = 0 exactly)."""
        return None, (w - sp) / self.tau if self.asymmetric else None


@dataclass(frozen=True)
class SymmetricDevice(SoftBoundsDevice):
    """A symmetric device (``q_+ = q_-``, G = 0): same pulses, noise and bounds as soft bounds, no drift."""

    asymmetric = False


@dataclass(frozen=True)
class IdealDevice(SoftBoundsDevice):
    """Symmetric, continuous (no pulse rounding), noise-free and unbounded; SP 0. AnalogSGD on it is SGD."""

    sp_std: float = 0.0
    c2c_noise: float = 0.0
    read_noise: float = 0.0

    asymmetric = False
    discrete = False
    bounded = False

    def draw_sp(self, like: Tensor, index: int, salt: int = 0) -> Tensor:
        return torch.full_like(like, float(self.sp_mean))


def _randn(like: Tensor, gen: torch.Generator) -> Tensor:
    return torch.randn(like.shape, generator=gen, dtype=like.dtype, device=gen.device).to(like.device)


def _rand(like: Tensor, gen: torch.Generator) -> Tensor:
    return torch.rand(like.shape, generator=gen, dtype=like.dtype, device=gen.device).to(like.device)


def pulse_update(
    w: Tensor, delta: Tensor, sp: Tensor, device: SoftBoundsDevice, generator: torch.Generator | None
) -> Tensor:
    """Apply the requested increments ``delta`` to conductances ``w`` in place (aggregate pulses).

    Returns the number of whole pulses applied per element (``|delta|`` itself on a continuous device).
    """
    if not device.discrete:
        _, g = device.response(w, sp)
        w.add_(delta if g is None else delta - delta.abs() * g)
        return delta.abs()
    n = delta.abs() / device.dw_min
    n = torch.floor(n + _rand(n, generator))  # stochastic rounding to whole pulses
    step = torch.sign(delta) * n * device.dw_min
    _, g = device.response(w, sp)
    change = step if g is None else step - step.abs() * g
    if device.c2c_noise > 0:
        change = change + (device.c2c_noise * device.dw_min) * n.sqrt() * _randn(n, generator)
    w.add_(change)
    _clip(w, sp, device)
    return n


def _clip(w: Tensor, sp: Tensor, device: SoftBoundsDevice) -> None:
    if device.bounded:
        torch.minimum(torch.maximum(w, sp - device.tau), sp + device.tau, out=w)


def _read(w: Tensor, device: SoftBoundsDevice, generator: torch.Generator | None) -> Tensor:
    if device.read_noise > 0:
        return w + device.read_noise * _randn(w, generator)
    return w.clone()


def calibrate_sp(
    w: Tensor, sp: Tensor, device: SoftBoundsDevice, pulses: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """SP calibration: ``pulses`` alternating +1 / -1 single pulses on every element of ``w`` (in place),
    then the estimate = mean of the last ``max(1, pulses // 10)`` noisy reads.

    Returns ``(estimate, pulse_count)``. With ``pulses = 0`` the estimate is one read of ``w`` as it is.
    """
    pulses = check_int("calibration_pulses", pulses, minimum=0)
    n_read = max(1, pulses // 10)
    acc = torch.zeros_like(w)
    one = torch.full_like(w, device.dw_min)
    count = torch.zeros_like(w)
    for k in range(pulses):
        sign = 1.0 if k % 2 == 0 else -1.0
        count += pulse_update(w, sign * one, sp, device, generator)
        if k >= pulses - n_read:
            acc += _read(w, device, generator)
    if pulses == 0:
        acc = _read(w, device, generator)
    return acc / n_read, count


def chopped_filter(
    offset: Tensor | float, period: int, gamma_f: float, steps: int, signal: float = 0.0
) -> Tensor:
    """The chopper-filter chain on a constant input: ``y <- (1 - gamma_f) y + gamma_f c_t (c_t s + o)``.

    ``c_t`` flips every ``period`` steps (starting at +1), ``s`` is the signal (chopped on write and
    demodulated on read) and ``o`` the unmodulated offset. Returns the trajectory ``y_1 .. y_steps``
    (``y_0 = 0``). Used by the tests to check the filter's exact averaging identities.
    """
    o = torch.as_tensor(offset, dtype=torch.float64)
    y = torch.zeros_like(o)
    out = []
    for t in range(steps):
        c = 1.0 if (t // period) % 2 == 0 else -1.0
        y = (1 - gamma_f) * y + gamma_f * c * (c * signal + o)
        out.append(y)
    return torch.stack(out)


class _AnalogBase(DropInOptimizer):
    """Shared machinery: validation, generator, nonfinite policy, pulse counters, state_dict of the RNG."""

    _name = "analog"
    config_attrs = (
        "nonfinite",
        "skipped_steps",
        "device_model",
        "seed",
        "_generator",
        "reference",
        "calibration_pulses",
    )

    def __init__(
        self,
        params: Iterable[Any],
        defaults: dict[str, Any],
        device: SoftBoundsDevice,
        seed: int,
        nonfinite: str,
    ) -> None:
        if not isinstance(device, SoftBoundsDevice):
            raise TypeError(f"device: must be a SoftBoundsDevice, got {type(device).__name__}")
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.is_complex():
                    raise ValueError(f"params: {self._name} does not support complex parameters")
        self.device_model = device
        self.seed = check_int("seed", seed, minimum=0)
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        self._generator: torch.Generator | None = None

    def _gen(self, like: Tensor) -> torch.Generator:
        if self._generator is None:
            self._generator = torch.Generator(device=like.device).manual_seed(self.seed)
        return self._generator

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        if self._generator is not None:
            sd = {**sd, "generator": self._generator.get_state()}
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        gen_state = state_dict.pop("generator", None)
        super().load_state_dict(state_dict)
        if gen_state is not None:
            first = next(p for g in self.param_groups for p in g["params"])
            self._generator = torch.Generator(device=first.device)
            self._generator.set_state(gen_state)
        else:
            self._generator = None

    def _active(self) -> list[tuple[int, dict[str, Any], Tensor]]:
        out, index = [], 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if p.grad.is_sparse:
                        raise ValueError(f"grad: {self._name} does not support sparse gradients")
                    out.append((index, group, p))
                index += 1
        return out

    @property
    def pulse_count(self) -> float:
        """Total pulses applied so far over every device (calibration + gradient + transfer pulses)."""
        return float(sum(float(s["pulses"].sum()) for s in self.state.values() if "pulses" in s))

    def pulse_counts(self) -> list[Tensor]:
        """Per-parameter tensors of pulses per element (parameters without state are left out)."""
        return [s["pulses"] for s in self.state.values() if "pulses" in s]

    @torch.no_grad()
    def shift_sp(self, delta: float) -> None:
        """Simulator hook for SP drift: every device's symmetric point (of :math:`W` and, for residual
        learning, of :math:`P`) moves by ``delta``; conductances, references and :math:`\\hat s` stay as they
        are (so a one-shot calibration goes stale), then conductances are clipped to the moved ranges.

        ``ValueError`` for a non-finite ``delta`` or before the first step (no device state yet).
        """
        delta = check_finite("delta", delta)
        if not any("sp_rel" in s for s in self.state.values()):
            raise ValueError("delta: no device state to shift yet (call step() first)")
        dev = self.device_model
        for p, st in self.state.items():
            if "sp_rel" not in st:
                continue
            st["sp"].add_(delta)
            st["sp_rel"].add_(delta)
            _clip(p, st["sp_rel"], dev)
            if "fast_sp" in st:
                st["fast_sp"].add_(delta)
                _clip(st["fast"], st["fast_sp"], dev)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        active = self._active()
        if not should_step(self._name, [p.grad for _, _, p in active], self.nonfinite):
            self.skipped_steps += 1
            return loss
        for index, group, p in active:
            g = -p.grad if group["maximize"] else p.grad
            state = self.state[p]
            if len(state) == 0:
                self._init_state(state, p, index)
            self._update(state, p, g, group)
        return loss


def _check_common(lr: float) -> float:
    return float(check_lr(lr))


class AnalogSGD(_AnalogBase):
    r"""Analog SGD: pulse updates :math:`W \leftarrow W - \alpha\hat g F(W) - \alpha|\hat g| G(W)` on the
    analog array, computed weight ``p.data`` :math:`= W - R`.

    Args:
        params: parameters (``p.data`` is the effective weight :math:`\bar W`; its initial value is
            programmed relative to the reference).
        lr: :math:`\alpha` (>= 0).
        device: the device model (default :class:`SoftBoundsDevice`).
        reference: ``"oracle"`` (R = SP), ``"calibrated"`` (R from :func:`calibrate_sp`) or ``"zero"``.
        calibration_pulses: N for ``reference="calibrated"``.
        seed: seed of the optimizer's generator (pulse rounding, cycle-to-cycle and read noise).
        maximize, foreach, nonfinite: as in the optim family.

    Example:
        >>> w = torch.zeros(3, requires_grad=True)
        >>> opt = AnalogSGD([w], lr=0.1, device=IdealDevice())
        >>> (w - 1).pow(2).sum().backward(); _ = opt.step()
        >>> w.detach()
        tensor([0.2000, 0.2000, 0.2000])
    """

    _name = "AnalogSGD"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.05,
        *,
        device: SoftBoundsDevice | None = None,
        reference: str = "oracle",
        calibration_pulses: int = 1000,
        seed: int = 0,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        lr = _check_common(lr)
        reference = check_choice("reference", reference, REFERENCES)
        calibration_pulses = check_int("calibration_pulses", calibration_pulses, minimum=0)
        defaults = {"lr": lr, "maximize": bool(maximize), "foreach": foreach}
        self.reference = reference
        self.calibration_pulses = calibration_pulses
        super().__init__(params, defaults, device or SoftBoundsDevice(), seed, nonfinite)

    def _init_state(self, state: dict[str, Any], p: Tensor, index: int) -> None:
        dev, gen = self.device_model, self._gen(p)
        sp = dev.draw_sp(p, index)
        pulses = torch.zeros_like(p)
        if self.reference == "oracle":
            ref = sp.clone()
        elif self.reference == "zero":
            ref = torch.zeros_like(p)
        else:
            w = torch.zeros_like(p)  # a fresh device starts at conductance 0
            ref, pulses = calibrate_sp(w, sp, dev, self.calibration_pulses, gen)
        # p holds W - R; the device sees W - sp = p - (sp - R): the arrays are stored relative to R, so
        # reading p back is exact (no W - R round-off)
        sp_rel = sp - ref
        _clip(p, sp_rel, dev)
        state["step"] = torch.zeros((), dtype=torch.float64)
        state["ref"], state["sp"], state["sp_rel"], state["pulses"] = ref, sp, sp_rel, pulses

    def _update(self, state: dict[str, Any], p: Tensor, g: Tensor, group: dict[str, Any]) -> None:
        state["step"] += 1
        dev = self.device_model
        if not (dev.discrete or dev.asymmetric or dev.bounded):  # continuous symmetric: SGD's own update
            p.add_(g, alpha=-group["lr"])
            state["pulses"].add_(g.abs(), alpha=group["lr"])
            return
        n = pulse_update(p, g * (-group["lr"]), state["sp_rel"], dev, self._gen(p))
        state["pulses"].add_(n)

    @property
    def sp_estimate(self) -> list[Tensor]:
        """The reference R per parameter (the SP estimate; = SP for the oracle)."""
        return [s["ref"] for s in self.state.values() if "ref" in s]


class ResidualAnalogSGD(_AnalogBase):
    r"""Residual learning on a fast array :math:`P` and slow array :math:`W` with SP tracking of :math:`P`
    (dynamic EMA, calibrated or none), optional chopper and low-pass filter (see the module docstring).

    Args:
        params: parameters (``p.data`` = :math:`W - R_W`).
        lr: :math:`\alpha`, gradient step written to :math:`P` (>= 0).
        device: device model of both arrays (SPs of :math:`W` and :math:`P` drawn independently).
        transfer_every: steps between transfers (>= 1).
        transfer_lr: :math:`\beta` (>= 0).
        sp_tracking: ``"dynamic"``, ``"calibrated"`` or ``"none"``.
        sp_ema: :math:`\gamma` in (0, 1].
        calibration_pulses: N for ``sp_tracking="calibrated"``.
        chopper_period: :math:`T_c` (>= 1) or None (no chopper).
        filter_ema: :math:`\gamma_f` in (0, 1] or None (no filter).
        seed, maximize, foreach, nonfinite: as in :class:`AnalogSGD`.
    """

    _name = "ResidualAnalogSGD"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.05,
        *,
        device: SoftBoundsDevice | None = None,
        transfer_every: int = 10,
        transfer_lr: float = 0.1,
        sp_tracking: str = "dynamic",
        sp_ema: float = 0.01,
        calibration_pulses: int = 1000,
        chopper_period: int | None = 50,
        filter_ema: float | None = 0.05,
        seed: int = 0,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        lr = _check_common(lr)
        transfer_every = check_int("transfer_every", transfer_every, minimum=1)
        transfer_lr = check_nonnegative("transfer_lr", transfer_lr)
        sp_tracking = check_choice("sp_tracking", sp_tracking, SP_TRACKING)
        sp_ema = float(sp_ema)
        if not (0.0 < sp_ema <= 1.0):
            raise ValueError(f"sp_ema: must be in (0, 1], got {sp_ema!r}")
        if chopper_period is not None:
            chopper_period = check_int("chopper_period", chopper_period, minimum=1)
        if filter_ema is not None:
            filter_ema = float(filter_ema)
            if not (0.0 < filter_ema <= 1.0):
                raise ValueError(f"filter_ema: must be in (0, 1] or None, got {filter_ema!r}")
        self.calibration_pulses = check_int("calibration_pulses", calibration_pulses, minimum=0)
        defaults = {
            "lr": lr,
            "transfer_every": transfer_every,
            "transfer_lr": transfer_lr,
            "sp_tracking": sp_tracking,
            "sp_ema": sp_ema,
            "chopper_period": chopper_period,
            "filter_ema": filter_ema,
            "maximize": bool(maximize),
            "foreach": foreach,
        }
        super().__init__(params, defaults, device or SoftBoundsDevice(), seed, nonfinite)

    def _init_state(self, state: dict[str, Any], p: Tensor, index: int) -> None:
        dev, gen = self.device_model, self._gen(p)
        sp_w = dev.draw_sp(p, index)
        sp_p = dev.draw_sp(p, index, salt=1)
        sp_rel = torch.zeros_like(p)  # W's reference is its SP: p = W - R_W sees the device at p - 0
        _clip(p, sp_rel, dev)
        fast = torch.zeros_like(p)
        pulses = torch.zeros_like(p)
        s_hat = torch.zeros_like(p)
        group = next(g for g in self.param_groups if any(q is p for q in g["params"]))
        if group["sp_tracking"] == "calibrated":
            s_hat, pulses = calibrate_sp(fast, sp_p, dev, self.calibration_pulses, gen)
        state["step"] = torch.zeros((), dtype=torch.float64)
        state["ref"], state["sp"], state["sp_rel"] = sp_w.clone(), sp_w, sp_rel
        state["fast"], state["fast_sp"], state["s_hat"] = fast, sp_p, s_hat
        state["filter"], state["pulses"] = torch.zeros_like(p), pulses

    def _update(self, state: dict[str, Any], p: Tensor, g: Tensor, group: dict[str, Any]) -> None:
        dev, gen = self.device_model, self._gen(p)
        t = int(state["step"])
        state["step"] += 1
        period = group["chopper_period"]
        c = 1.0 if period is None or (t // period) % 2 == 0 else -1.0
        state["pulses"].add_(pulse_update(state["fast"], g * (-group["lr"] * c), state["fast_sp"], dev, gen))
        r = _read(state["fast"], dev, gen)
        if group["sp_tracking"] == "dynamic":
            state["s_hat"].lerp_(r, group["sp_ema"])
        u = (r - state["s_hat"]) * c
        if group["filter_ema"] is None:
            state["filter"].copy_(u)
        else:
            state["filter"].lerp_(u, group["filter_ema"])
        if (t + 1) % group["transfer_every"] == 0:
            n = pulse_update(p, state["filter"] * group["transfer_lr"], state["sp_rel"], dev, gen)
            state["pulses"].add_(n)

    @property
    def sp_estimate(self) -> list[Tensor]:
        """The fast array's SP estimate :math:`\\hat s` per parameter."""
        return [s["s_hat"] for s in self.state.values() if "s_hat" in s]

    @property
    def fast_sp(self) -> list[Tensor]:
        """The fast array's true SPs :math:`p^\\circ` per parameter (simulator ground truth)."""
        return [s["fast_sp"] for s in self.state.values() if "fast_sp" in s]
