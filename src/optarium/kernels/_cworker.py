"""Numpy-only evaluation worker for :mod:`optarium.kernels.kernelfoundry` (run as a script in a subprocess).

Usage: ``python _cworker.py SO_PATH TASK_JSON``; prints one JSON line ``{"perf_score", "runtime_ms", "log"}``
(or, with ``"mode": "time"`` and comma-separated SO paths, ``{"runtime_ms": [...]}``, interleaved). The
float64 reference outputs of the check shapes come from the parent as ``.npy`` files (``"references"``). It
imports neither torch nor optarium, so a subprocess start costs ~0.1 s; a crash in the kernel kills only
this process (perf_score 2 in the parent).
"""

from __future__ import annotations

import ctypes
import json
import sys
import time

import numpy as np

_F = ctypes.POINTER(ctypes.c_float)


def make_inputs(task: str, shape: list[int], seed: int = 0) -> list[np.ndarray]:
    """Float32 inputs of one shape: matmul (M, N, K) -> A (M, K), B (K, N); softmax (R, C) -> X (R, C);
    layernorm (R, C) -> X (R, C), G (C,), Bt (C,); conv2d (CI, H, W, CO) -> X (1, CI, H, W),
    Wt (CO, CI, 3, 3) scaled by 1/sqrt(9 CI), Bs (CO,)."""
    rng = np.random.default_rng(seed)
    if task == "matmul":
        m, n, k = shape
        return [
            rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32),
        ]
    if task == "softmax":
        r, c = shape
        return [(3.0 * rng.standard_normal((r, c))).astype(np.float32)]
    if task == "layernorm":
        r, c = shape
        return [
            (2.0 * rng.standard_normal((r, c)) + 0.5).astype(np.float32),
            (1.0 + 0.1 * rng.standard_normal(c)).astype(np.float32),
            (0.1 * rng.standard_normal(c)).astype(np.float32),
        ]
    if task == "conv2d":
        ci, h, w, co = shape
        return [
            rng.standard_normal((1, ci, h, w)).astype(np.float32),
            (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(9.0 * ci)).astype(np.float32),
            (0.1 * rng.standard_normal(co)).astype(np.float32),
        ]
    raise ValueError(f"task: unknown {task!r}")


def out_shape(task: str, shape: list[int]) -> tuple[int, ...]:
    """The output shape: (M, N) / (R, C) for matmul, softmax and layernorm; (1, CO, H, W) for conv2d."""
    if task == "conv2d":
        return (1, shape[3], shape[1], shape[2])
    return (shape[0], shape[1])


def call(fn, task: str, inputs: list[np.ndarray], out: np.ndarray, shape: list[int]) -> None:
    ptrs = [a.ctypes.data_as(_F) for a in inputs]
    fn(*ptrs, out.ctypes.data_as(_F), *[ctypes.c_int(int(s)) for s in shape])


def _load(so: str):
    fn = ctypes.CDLL(so).kernel
    fn.restype = None
    return fn


def time_interleaved(sos: list[str], spec: dict) -> dict:
    """Interleaved A/B/... timing on the timing shape: a warm-up call each, then ``repeats`` rounds that call
    every kernel once (the order rotated each round); the median per kernel, in ms."""
    task, shape = spec["task"], spec["time_shape"]
    fns = [_load(so) for so in sos]
    inp = make_inputs(task, shape, 2)
    out = np.empty(out_shape(task, shape), np.float32)
    ts: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        call(fn, task, inp, out, shape)
    for rep in range(int(spec.get("repeats", 7))):
        for i in range(len(fns)):
            j = (i + rep) % len(fns)
            t0 = time.perf_counter()
            call(fns[j], task, inp, out, shape)
            ts[j].append(time.perf_counter() - t0)
    return {"runtime_ms": [1e3 * float(np.median(t)) for t in ts]}


def main(argv: list[str]) -> dict:
    so, spec = argv[0], json.loads(argv[1])
    if spec.get("mode") == "time":
        return time_interleaved(so.split(","), spec)
    task = spec["task"]
    fn = _load(so)
    log = []
    for shape, ref_path in zip(spec["check_shapes"], spec["references"], strict=True):
        inp = make_inputs(task, shape, 1)
        ref = np.load(ref_path)
        outs = []
        for _ in range(int(spec.get("check_runs", 2))):
            out = np.full(out_shape(task, shape), np.nan, np.float32)
            call(fn, task, inp, out, shape)
            outs.append(out)
        for out in outs:
            if out.shape != ref.shape or np.isnan(out).any():
                return {"perf_score": 3, "runtime_ms": None, "log": f"output not fully written at {shape}"}
            if not np.allclose(out, ref, rtol=spec["rtol"], atol=spec["atol"]):
                err = float(np.abs(out - ref).max())
                return {
                    "perf_score": 4,
                    "runtime_ms": None,
                    "log": f"wrong values at {shape} (max err {err:.3g})",
                }
        if len(outs) > 1 and not all(np.array_equal(outs[0], o) for o in outs[1:]):
            return {"perf_score": 4, "runtime_ms": None, "log": f"runs disagree at {shape} (race)"}
        log.append(f"ok {shape}")
    (ms,) = time_interleaved([so], spec)["runtime_ms"]  # one kernel: warm-up + median of ``repeats``
    return {"perf_score": 5, "runtime_ms": ms, "log": "; ".join(log)}


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    print(json.dumps(main(sys.argv[1:])))
