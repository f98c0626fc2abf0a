"""Step time and peak memory of AdamWPower against torch.optim.AdamW (foreach) on a ~10M-parameter model.

Run: ``python benchmarks/optim_step.py [--device cpu|cuda] [--repeats 7] [--steps 20] [--threads 1]``.

Each optimizer is timed on the same model with fixed gradients (the step alone: no forward or backward),
``--repeats`` blocks of ``--steps`` steps, interleaved so that machine noise hits both alike. Reported: the
per-step time (min / median / max over blocks) of each and the ratio of medians, and the peak extra memory
of a step (CUDA: ``max_memory_allocated``; CPU: the rise of the process's peak RSS during the steps, measured
in a fresh subprocess per optimizer). Target from the foundation issue: AdamWPower at most 1.15x AdamW.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from optarium.optim import AdamWPower


def build_model(device: str) -> torch.nn.Module:
    """Ten 1024x1024 linear layers with biases: 10.5M parameters."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024) for _ in range(10)]
    model = torch.nn.Sequential(*layers).to(device)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    return model


def make(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    kw = {"lr": 1e-4, "betas": (0.9, 0.95), "weight_decay": 0.1, "foreach": True}
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), **kw)
    return AdamWPower(model.parameters(), p=1.2, **kw)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(opt: torch.optim.Optimizer, steps: int, device: str) -> float:
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        opt.step()
    _sync(device)
    return (time.perf_counter() - t) / steps


def peak_memory_mb(name: str, device: str, steps: int) -> float:
    """Peak extra memory of ``steps`` steps (after one warm-up step that creates the state)."""
    if device == "cuda":
        model = build_model(device)
        opt = make(name, model)
        opt.step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for _ in range(steps):
            opt.step()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    code = (
        f"import resource, torch, sys; sys.path[:0] = [{sys.path[0]!r}]; torch.set_num_threads(1);"
        f"from optim_step import build_model, make; m = build_model('cpu'); o = make({name!r}, m); o.step();"
        "b = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        f"[o.step() for _ in range({steps})];"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - b) / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    models = {n: build_model(args.device) for n in ("adamw", "adamwpower")}
    n_params = sum(p.numel() for p in models["adamw"].parameters())
    opts: dict[str, torch.optim.Optimizer] = {n: make(n, m) for n, m in models.items()}
    for opt in opts.values():
        opt.step()  # create the state outside the timing
    times: dict[str, list[float]] = {n: [] for n in opts}
    order: Callable[[int], list[str]] = lambda i: list(opts) if i % 2 == 0 else list(reversed(opts))  # noqa: E731
    for i in range(args.repeats):
        for name in order(i):
            times[name].append(time_steps(opts[name], args.steps, args.device))

    result: dict[str, float] = {"n_params": float(n_params)}
    print(
        f"device={args.device} threads={args.threads} params={n_params / 1e6:.1f}M "
        f"repeats={args.repeats} x {args.steps} steps"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        result[f"{name}_median_ms"] = med * 1e3
        print(
            f"{name:>11}: step min {min(ts) * 1e3:8.2f} ms  median {med * 1e3:8.2f} ms  "
            f"max {max(ts) * 1e3:8.2f} ms"
        )
    ratio = result["adamwpower_median_ms"] / result["adamw_median_ms"]
    ratios = [a / b for a, b in zip(times["adamwpower"], times["adamw"], strict=True)]
    result["ratio_median"] = ratio
    print(
        f"ratio AdamWPower / AdamW (medians): {ratio:.3f}x "
        f"(per-block ratios min {min(ratios):.3f} max {max(ratios):.3f}; target <= 1.15x)"
    )
    for name in opts:
        mb = peak_memory_mb(name, args.device, 3)
        result[f"{name}_peak_extra_mb"] = mb
        print(f"{name:>11}: peak extra memory during steps {mb:8.1f} MiB")
    if args.json:
        print(json.dumps(result))
    _ = resource  # imported for the CPU subprocess path's documentation
    return result


if __name__ == "__main__":
    main()
