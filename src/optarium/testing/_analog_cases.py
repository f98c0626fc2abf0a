"""Conformance cases of the analog optimizers (aimc-sp), joined into :func:`optimizer_cases`.

On the ideal device (symmetric, continuous pulses, noise-free, unbounded) :class:`AnalogSGD` is SGD and
:class:`ResidualAnalogSGD` (un-chopped dynamic tracking) is heavy-ball-like, so both reach x* of the quadratic
and Rosenbrock checks. On the soft-bounds device the asymmetric response pulls the weights toward the
symmetric point (the implicit penalty), so x* is not a fixed point: those cases are exempt from the two
known-optimum checks and run everything else (state_dict, groups, nonfinite, copies, hooks, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["analog_cases"]

_NOT_AT_X_STAR = (
    "the soft-bounds device's asymmetric response pulls the weight toward its symmetric point (the "
    "implicit penalty of Analog SGD), so the unconstrained minimiser is not a fixed point; the known-optimum "
    "checks run on the ideal-device case here, and the biased stationary points (self-consistent "
    "folded-normal prediction, calibration error) are tested in tests/optim/test_analog.py"
)


def analog_cases() -> list[Any]:
    """The four cases: AnalogSGD and ResidualAnalogSGD on the ideal and on the soft-bounds device."""
    from optarium.optim.analog import AnalogSGD, IdealDevice, ResidualAnalogSGD, SoftBoundsDevice
    from optarium.testing.optimizers import OptimizerCase

    def analog_sgd(params: Iterable[Any], **kw: Any) -> Any:
        return AnalogSGD(params, **kw)

    def residual(params: Iterable[Any], **kw: Any) -> Any:
        return ResidualAnalogSGD(params, **kw)

    common_invalid = [({"lr": -1e-3}, "lr"), ({"lr": float("nan")}, "lr"), ({"seed": -1}, "seed")]
    sgd_invalid = [
        *common_invalid,
        ({"reference": "measured"}, "reference"),
        ({"calibration_pulses": -1}, "calibration_pulses"),
    ]
    res_invalid = [
        *common_invalid,
        ({"transfer_every": 0}, "transfer_every"),
        ({"transfer_lr": -0.1}, "transfer_lr"),
        ({"sp_tracking": "oracle"}, "sp_tracking"),
        ({"sp_ema": 0.0}, "sp_ema"),
        ({"sp_ema": 1.5}, "sp_ema"),
        ({"chopper_period": 0}, "chopper_period"),
        ({"filter_ema": 0.0}, "filter_ema"),
    ]
    exempt = {
        "quadratic_float64": _NOT_AT_X_STAR,
        "quadratic_float32": _NOT_AT_X_STAR,
        "rosenbrock": _NOT_AT_X_STAR,
    }
    return [
        OptimizerCase(
            name="AnalogSGD(ideal)",
            factory=analog_sgd,
            quadratic=(0.15, 600, 1e-4),
            rosenbrock=(1.9e-3, 5500, 2e-2),
            invalid=sgd_invalid,
            kwargs={"device": IdealDevice()},
        ),
        OptimizerCase(
            name="AnalogSGD(soft-bounds, calibrated)",
            factory=analog_sgd,
            quadratic=(0.15, 600, 1e-4),
            rosenbrock=(1.9e-3, 5500, 2e-2),
            invalid=sgd_invalid,
            kwargs={"device": SoftBoundsDevice(), "reference": "calibrated", "calibration_pulses": 20},
            exempt=exempt,
        ),
        # un-chopped dynamic tracking: on a leak-free (ideal) fast array the chopped demodulated signal of a
        # steady gradient averages to zero over a period, so the ideal case uses the un-chopped variant
        OptimizerCase(
            name="ResidualAnalogSGD(ideal)",
            factory=residual,
            quadratic=(0.05, 2000, 1e-4),
            rosenbrock=(3e-3, 5000, 2e-2),
            invalid=res_invalid,
            kwargs={"device": IdealDevice(), "chopper_period": None, "filter_ema": None},
        ),
        OptimizerCase(
            name="ResidualAnalogSGD(soft-bounds, chopped)",
            factory=residual,
            quadratic=(0.05, 2000, 1e-4),
            rosenbrock=(3e-3, 5000, 2e-2),
            invalid=res_invalid,
            kwargs={"device": SoftBoundsDevice()},
            exempt=exempt,
        ),
    ]
