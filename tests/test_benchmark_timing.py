"""The timing helpers that the benchmark scripts share (benchmarks/_timing.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "_timing.py"
_spec = importlib.util.spec_from_file_location("_timing", _PATH)
assert _spec is not None and _spec.loader is not None
timing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timing)


class _FakeClock:
    """A clock that advances by a fixed amount whenever a timed case runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def case(self, cost: float):
        def fn() -> None:
            self.now += cost

        return fn


def test_medians_per_call_per_item_and_warmup() -> None:
    clock = _FakeClock()
    calls = {"a": 0}

    def a() -> None:
        calls["a"] += 1
        clock.now += 2.0

    out = timing.medians({"a": a, "b": clock.case(0.5)}, 3, number=4, warmup=2, clock=clock)
    assert out == {"a": 2.0, "b": 0.5}
    assert calls["a"] == 2 + 3 * 4  # warm-up calls are not timed but do run
    per = timing.medians({"a": clock.case(8.0)}, 1, warmup=0, per={"a": 4}, clock=clock)
    assert per == {"a": 2.0}


def test_setup_runs_untimed_before_every_block() -> None:
    clock = _FakeClock()
    seen: list[float] = []

    def setup() -> None:
        clock.now += 100.0  # would dominate if it were timed
        seen.append(clock.now)

    t = timing.median_seconds(clock.case(1.0), 5, warmup=1, setup=setup, clock=clock)
    assert t == 1.0 and len(seen) == 6


def test_compare_prints_ratios_to_the_first(capsys: pytest.CaptureFixture[str]) -> None:
    clock = _FakeClock()
    med = timing.compare(
        "label", {"fast": clock.case(1e-3), "slow": clock.case(3e-3)}, 1, 3, clock=clock, unit="ms"
    )
    out = capsys.readouterr().out
    assert med == pytest.approx({"fast": 1e-3, "slow": 3e-3})
    assert "label" in out and "3.00x" in out and "1.00 ms" in out


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"number": 0}, "number"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"unit": "h"}, "unit"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs: dict, name: str) -> None:
    args = {"number": 1, "repeats": 1, "warmup": 0, "unit": "us"} | kwargs
    with pytest.raises(ValueError, match=name):
        timing.compare(
            "x",
            {"f": lambda: None},
            args["number"],
            args["repeats"],
            warmup=args["warmup"],
            unit=args["unit"],
        )


def test_no_cases_raise() -> None:
    with pytest.raises(ValueError, match="cases"):
        timing.medians({}, 1)
