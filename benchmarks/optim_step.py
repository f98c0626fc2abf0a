"""Optimizer step time (and GradPower's peak memory) against peers, on a ~10M-parameter model.

Run: ``python benchmarks/optim_step.py [--only gradpower,lion,clipsgd,rewa,sam] [--device cpu|cuda]
[--repeats 7] [--steps 20] [--threads 1]``.

Optimizers are timed on identical models with fixed gradients (the step alone; SAM-Polyak, which needs two
gradients, is timed on forward + backward + step against SGD's forward + backward + step). Blocks of
``--steps`` steps are interleaved over ``--repeats`` rounds so that machine noise hits all alike; reported are
per-step min / median / max over the blocks and the ratio of medians. Targets (from the issues):

- AdamWPower <= 1.15x torch AdamW (foreach)
- Lion <= 1.0x lion-pytorch and <= 1.1x AdamW (foreach)
- ClipSGD <= 1.2x torch SGD (foreach)
- SAMPolyak <= 2.2x SGD (forward + backward + step)
- ReWA: reported against its SGD and AdamW bases (no target)

Ratios are measured, never asserted: the tests do not depend on them.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

Step = Callable[[], object]


def build_model(device: str) -> torch.nn.Module:
    """Ten 1024x1024 linear layers with biases (10.5M parameters) with fixed random gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(10)]).to(device)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    return model


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interleaved(
    steps_by_name: dict[str, Step], device: str, repeats: int, steps: int
) -> dict[str, list[float]]:
    """Seconds per step of each callable: one warm-up block, then ``repeats`` interleaved blocks."""
    times: dict[str, list[float]] = {n: [] for n in steps_by_name}
    names = list(steps_by_name)
    for name in names:
        steps_by_name[name]()
        steps_by_name[name]()  # state creation (and Lion-VR's stored previous iterate) outside the timing
    for i in range(repeats):
        for name in names if i % 2 == 0 else list(reversed(names)):
            fn = steps_by_name[name]
            _sync(device)
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            _sync(device)
            times[name].append((time.perf_counter() - t) / steps)
    return times


def report(title: str, times: dict[str, list[float]], ratios: list[tuple[str, str, float | None]]) -> dict:
    """Print min/median/max per optimizer and the requested ratios of medians (with their targets)."""
    print(f"\n== {title}")
    med = {n: statistics.median(ts) for n, ts in times.items()}
    for n, ts in times.items():
        lo, hi = min(ts) * 1e3, max(ts) * 1e3
        print(f"{n:>22}: min {lo:8.2f} ms  median {med[n] * 1e3:8.2f} ms  max {hi:8.2f} ms")
    out: dict[str, float] = {f"{n}_median_ms": v * 1e3 for n, v in med.items()}
    for a, b, target in ratios:
        r = med[a] / med[b]
        out[f"{a}/{b}"] = r
        verdict = (
            "" if target is None else f" (target <= {target:.2f}x: {'met' if r <= target else 'missed'})"
        )
        print(f"{'ratio ' + a + ' / ' + b:>40}: {r:.3f}x{verdict}")
    return out


def _fixed_grad_steps(
    makers: dict[str, Callable[[torch.nn.Module], torch.optim.Optimizer]], device: str
) -> dict:
    steps: dict[str, Step] = {}
    for name, make in makers.items():
        model = build_model(device)
        opt = make(model)
        grads = [p.grad for p in model.parameters()]

        def closure(model: torch.nn.Module = model, grads: list = grads) -> None:
            for p, g in zip(model.parameters(), grads, strict=True):
                p.grad = g  # re-install the fixed gradients (a closure optimizer calls this twice)

        steps[name] = (lambda opt=opt, closure=closure: opt.step(closure)) if name == "lionvr" else opt.step
    return steps


def bench_gradpower(device: str, repeats: int, steps: int) -> dict:
    from optarium.optim import AdamWPower

    kw = {"lr": 1e-4, "betas": (0.9, 0.95), "weight_decay": 0.1, "foreach": True}
    makers = {
        "adamw": lambda m: torch.optim.AdamW(m.parameters(), **kw),
        "adamwpower": lambda m: AdamWPower(m.parameters(), p=1.2, **kw),
    }
    out = report(
        "GradPower: AdamWPower (p=1.2) vs AdamW",
        interleaved(_fixed_grad_steps(makers, device), device, repeats, steps),
        [("adamwpower", "adamw", 1.15)],
    )
    for name in makers:
        mb = peak_memory_mb(name, device, 3)
        out[f"{name}_peak_extra_mb"] = mb
        print(
            f"{name:>22}: peak memory over model + grads {mb:8.1f} MiB (optimizer state + step temporaries)"
        )
    return out


def peak_memory_mb(name: str, device: str, steps: int) -> float:
    """Peak memory added by ``steps`` steps over the model and its gradients (optimizer state included).

    CUDA: ``max_memory_allocated``. CPU: peak RSS of a fresh subprocess during the steps minus its RSS before.
    """
    if device == "cuda":
        from optarium.optim import AdamWPower

        model = build_model(device)
        cls = torch.optim.AdamW if name == "adamw" else AdamWPower
        opt = cls(model.parameters(), lr=1e-4, foreach=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for _ in range(steps):
            opt.step()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    # VmHWM (the peak RSS of this process image) read from /proc in a fresh subprocess: getrusage's ru_maxrss
    # would report the parent's peak, which Linux carries over fork and exec.
    cls = "torch.optim.AdamW" if name == "adamw" else "optarium.optim.AdamWPower"
    code = (
        "import sys, torch, optarium.optim; torch.set_num_threads(1);"
        f"sys.path[:0] = [{sys.path[0]!r}]; from optim_step import build_model; m = build_model('cpu');"
        f"o = {cls}(m.parameters(), lr=1e-4, foreach=True);"
        "kb = lambda key: int(next(l for l in open('/proc/self/status') if l.startswith(key)).split()[1]);"
        "b = kb('VmRSS');"
        f"[o.step() for _ in range({steps})];"
        "print((kb('VmHWM') - b) / 1024)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(res.stdout.strip())


def bench_lion(device: str, repeats: int, steps: int) -> dict:
    from optarium.optim import Lion, LionVR

    try:
        import lion_pytorch
        import lion_pytorch.foreach
    except ImportError:
        print("\n== Lion: lion-pytorch is not installed (pip install -e .[test]); skipped")
        return {}
    kw = {"lr": 1e-4, "weight_decay": 0.1}
    makers = {
        "adamw": lambda m: torch.optim.AdamW(m.parameters(), betas=(0.9, 0.95), foreach=True, **kw),
        "lion": lambda m: Lion(m.parameters(), **kw),
        "lion_foreach": lambda m: Lion(m.parameters(), foreach=True, **kw),
        "lion_pytorch": lambda m: lion_pytorch.Lion(m.parameters(), **kw),
        "lion_pytorch_foreach": lambda m: lion_pytorch.foreach.Lion(m.parameters(), **kw),
        "lionvr": lambda m: LionVR(m.parameters(), **kw),
    }
    return report(
        "Lion vs lion-pytorch 0.2.5 and AdamW (Lion-VR: its own step work, gradients fixed)",
        interleaved(_fixed_grad_steps(makers, device), device, repeats, steps),
        [
            ("lion", "lion_pytorch", 1.0),
            ("lion", "lion_pytorch_foreach", None),
            ("lion", "adamw", 1.1),
            ("lionvr", "lion", None),
        ],
    )


def bench_clip_sgd(device: str, repeats: int, steps: int) -> dict:
    from optarium.optim import ClipSGD

    class ClipThenSGD:
        """The usual two-call recipe: clip_grad_norm_ then SGD."""

        def __init__(self, model: torch.nn.Module) -> None:
            self.params = list(model.parameters())
            self.opt = torch.optim.SGD(self.params, lr=1e-4, foreach=True)

        def step(self) -> None:
            torch.nn.utils.clip_grad_norm_(self.params, 0.5, foreach=True)
            self.opt.step()

    makers = {
        "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=1e-4, foreach=True),
        "clipsgd": lambda m: ClipSGD(m.parameters(), lr=1e-4, clip=0.5, foreach=True),
        "clip_grad_norm+sgd": ClipThenSGD,
    }
    return report(
        "ClipSGD vs SGD (foreach) and clip_grad_norm_ + SGD",
        interleaved(_fixed_grad_steps(makers, device), device, repeats, steps),  # type: ignore[arg-type]
        [("clipsgd", "sgd", 1.2), ("clip_grad_norm+sgd", "sgd", None)],
    )


def bench_rewa(device: str, repeats: int, steps: int) -> dict:
    from optarium.optim import ReWA

    makers = {
        "sgd": lambda m: torch.optim.SGD(
            m.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-4, foreach=True
        ),
        "rewa_sgd": lambda m: ReWA(m.parameters(), lr=1e-3, weight_decay=1e-4, base="sgd", foreach=True),
        "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.1, foreach=True),
        "rewa_adamw": lambda m: ReWA(m.parameters(), lr=1e-4, weight_decay=0.1, base="adamw", foreach=True),
    }
    return report(
        "ReWA vs its bases (SGD with momentum, AdamW)",
        interleaved(_fixed_grad_steps(makers, device), device, repeats, steps),
        [("rewa_sgd", "sgd", None), ("rewa_adamw", "adamw", None)],
    )


def bench_sam_polyak(
    device: str, repeats: int, steps: int, widths: tuple[int, ...] = (784, 512, 512, 10), batch: int = 128
) -> dict:
    from optarium.optim import SAMPolyak

    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for a, b in itertools.pairwise(widths):
            layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers[:-1]).to(device)

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, widths[0], generator=gen).to(device)
    y = torch.randint(0, widths[-1], (batch,), generator=gen).to(device)
    fns: dict[str, Step] = {}
    for name in ("sgd", "sam_polyak"):
        model = build()
        if name == "sgd":
            opt: torch.optim.Optimizer = torch.optim.SGD(
                model.parameters(), lr=1e-2, weight_decay=5e-4, foreach=True
            )
        else:
            opt = SAMPolyak(model.parameters(), rho=0.05, weight_decay=5e-4)

        def closure(model: torch.nn.Module = model, opt: torch.optim.Optimizer = opt) -> torch.Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        if name == "sgd":
            fns[name] = lambda closure=closure, opt=opt: (closure(), opt.step())
        else:
            fns[name] = lambda closure=closure, opt=opt: opt.step(closure)
    return report(
        f"SAMPolyak vs SGD, forward + backward + step, MLP {widths}, batch {batch}",
        interleaved(fns, device, repeats, steps),
        [("sam_polyak", "sgd", 2.2)],
    )


BENCHES = {
    "gradpower": bench_gradpower,
    "lion": bench_lion,
    "clipsgd": bench_clip_sgd,
    "rewa": bench_rewa,
    "sam": bench_sam_polyak,
}


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated: " + ", ".join(BENCHES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(BENCHES)
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {sorted(unknown)}; choose from {list(BENCHES)}")
    torch.set_num_threads(args.threads)
    print(
        f"device={args.device} threads={args.threads} torch={torch.__version__} "
        f"repeats={args.repeats} x {args.steps} steps"
    )
    return {name: BENCHES[name](args.device, args.repeats, args.steps) for name in args.only.split(",")}


if __name__ == "__main__":
    main()
