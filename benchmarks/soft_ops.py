"""Speed and memory of optarium.soft's axis-wise ops against softtorch 0.1.1 and plain torch hard ops.

Forward time (no grad), forward+backward time (loss = sum(out * r) for a fixed random r) and the bytes of
tensors saved for backward ("saved", a device-independent proxy for activation memory: every tensor that
autograd keeps between the passes, counted with ``torch.autograd.graph.saved_tensors_hooks``) of
``sort``, ``rank``, ``topk`` (k = n / 8) and ``argmax`` for every method (mode "smooth", softness 0.1,
defaults otherwise) at batch 64, float32, n in {64, 256, 1024, 4096} (OT up to 1024), one thread.
softtorch's ``smooth_sort`` raises NotImplementedError and value-only methods have no argmax: "n/a".
A configuration whose first run exceeds ``--cap`` seconds is reported once and larger n are skipped;
configurations whose estimated footprint exceeds ``--mem-gb`` (O(n^2) soft permutations at batch 64) are
skipped and listed.

Usage:  nice -n 10 python benchmarks/soft_ops.py [--quick] [--cap SECONDS]
Prints a table with times in ms and the ratios ours / softtorch ("x st", < 1 means faster) and
ours / hard torch.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch

__all__ = ["main"]

METHODS = ["softsort", "neuralsort", "sorting_network", "ot", "fast_soft_sort", "smooth_sort"]
OPS = ["sort", "rank", "topk", "argmax"]
VALUE_ONLY = ("fast_soft_sort", "smooth_sort")


def _call(lib, op: str, x: torch.Tensor, method: str | None):
    n = x.shape[-1]
    if lib == "hard":
        if op == "sort":
            return torch.sort(x, dim=-1).values
        if op == "rank":
            return (torch.argsort(torch.argsort(-x, dim=-1), dim=-1) + 1).to(x.dtype)
        if op == "topk":
            return torch.topk(x, max(1, n // 8), dim=-1).values
        return torch.nn.functional.one_hot(torch.argmax(x, dim=-1), n).to(x.dtype)
    if op == "sort":
        return lib.sort(x, dim=-1, method=method).values
    if op == "rank":
        return lib.rank(x, dim=-1, method=method)
    if op == "topk":
        return lib.topk(x, max(1, n // 8), dim=-1, method=method).values
    return lib.argmax(x, dim=-1, method=method)


def _est_bytes(op: str, method: str, n: int, batch: int) -> float:
    """Rough activation footprint, used to skip configurations that would not fit in memory."""
    if method in ("fast_soft_sort", None):
        return 0.0
    if method == "sorting_network":
        lg = max(1.0, math.log2(n))
        return batch * n * n * lg * lg / 2 * 4 if op in ("rank", "argmax") else batch * n * lg * lg * 64
    if method == "smooth_sort":
        return batch * n * n * 12.0
    return batch * n * n * 4 * 6.0


def _time(fn: Callable[[], object], reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _measure(lib, op, method, n, batch, reps, cap):
    """(fwd_s, fwdbwd_s, saved_bytes or None) or a string reason. One untimed warm-up call per pass."""
    g = torch.Generator().manual_seed(n)
    x0 = torch.randn(batch, n, generator=g)
    try:
        with torch.no_grad():
            t0 = time.perf_counter()
            out = _call(lib, op, x0, method)  # warm-up
            first = time.perf_counter() - t0
            if first > cap:
                return f"timeout>{cap:.0f}s"
            fwd = _time(lambda: _call(lib, op, x0, method), reps)
        r = torch.randn(out.shape, generator=g)

        def fb():
            x = x0.clone().requires_grad_(True)
            y = _call(lib, op, x, method)
            if y.requires_grad:
                (y * r).sum().backward()

        t0 = time.perf_counter()
        fb()  # warm-up
        if time.perf_counter() - t0 > cap:
            return (fwd, float("nan"), None)
        fwdbwd = _time(fb, reps)
        saved = [0]

        def pack(t):
            saved[0] += t.numel() * t.element_size()
            return t

        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                fb()
            mem = saved[0]
        except RuntimeError:  # torch.func-based code (softtorch's torchopt OT) refuses saved-tensor hooks
            mem = None
        return (fwd, fwdbwd, mem)
    except NotImplementedError:
        return "n/a"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {str(exc)[:60]}"


def _mb(v) -> str:
    return f"{v:8.1f}" if v is not None else "     n/a"


def _fmt(v) -> str:
    if isinstance(v, str):
        return v
    return "-" if v != v else f"{1e3 * v:9.2f}"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="n in {64, 256}, 1 repetition")
    ap.add_argument("--cap", type=float, default=30.0, help="skip larger n once a run exceeds this (s)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--mem-gb", type=float, default=3.0, help="skip configs estimated above this footprint")
    ap.add_argument("--sizes", default=None, help="comma-separated n values (overrides --quick)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import optarium.soft.axiswise as ours

    try:
        import softtorch as st
    except Exception:
        st = None
    sizes = [64, 256] if args.quick else [64, 256, 1024, 4096]
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    # Warm-up (numba JIT of both libraries, lazy imports).
    for lib in (ours, st):
        if lib is not None:
            for m in ("fast_soft_sort", "ot"):
                try:
                    lib.sort(torch.randn(2, 4096 if lib is ours else 8), dim=-1, method=m)
                except Exception:
                    pass
    hdr = (
        f"{'op':7s} {'method':16s} {'n':>5s} | {'ours fwd':>9s} {'st fwd':>9s} {'hard fwd':>9s} "
        f"{'x st':>6s} |"
        f" {'ours f+b':>9s} {'st f+b':>9s} {'x st':>6s} | {'ours MB':>8s} {'st MB':>8s}"
    )
    print(f"batch {args.batch}, float32, 1 thread, mode smooth, softness 0.1; times in ms (median)")
    print(hdr)
    print("-" * len(hdr))
    skip: set[tuple[str, str, str]] = set()
    for op in args.ops.split(","):
        for method in args.methods.split(","):
            if op == "argmax" and method in VALUE_ONLY:
                continue
            for n in sizes:
                if method == "ot" and n > 1024:
                    continue
                if _est_bytes(op, method, n, args.batch) > args.mem_gb * 2**30:
                    print(f"{op:7s} {method:16s} {n:5d} | skipped: estimated footprint > {args.mem_gb} GB")
                    continue
                reps = 1 if (args.quick or n >= 1024 or method == "ot") else 3
                row = {}
                for name, lib in (("ours", ours), ("st", st), ("hard", "hard")):
                    if lib is None or (name, op, method) in skip:
                        row[name] = "skipped"
                        continue
                    res = _measure(lib, op, None if name == "hard" else method, n, args.batch, reps, args.cap)
                    if isinstance(res, str) and res.startswith("timeout"):
                        skip.add((name, op, method))
                    row[name] = res
                of, sf, hf = (
                    row[k][0] if isinstance(row[k], tuple) else row[k] for k in ("ours", "st", "hard")
                )
                ob, sb = (row[k][1] if isinstance(row[k], tuple) else row[k] for k in ("ours", "st"))
                om, sm = (
                    row[k][2] / 2**20 if isinstance(row[k], tuple) and row[k][2] is not None else None
                    for k in ("ours", "st")
                )
                rf = f"{of / sf:6.2f}" if isinstance(of, float) and isinstance(sf, float) else "   n/a"
                rb = (
                    f"{ob / sb:6.2f}"
                    if isinstance(ob, float) and isinstance(sb, float) and ob == ob and sb == sb
                    else "   n/a"
                )
                print(
                    f"{op:7s} {method:16s} {n:5d} | {_fmt(of):>9s} {_fmt(sf):>9s} {_fmt(hf):>9s} {rf} |"
                    f" {_fmt(ob):>9s} {_fmt(sb):>9s} {rb} | "
                    f"{_mb(om)} {_mb(sm)}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
