"""Numpy-only evaluation worker for :mod:`optarium.kernels.kernelfoundry` (run as a script in a subprocess).

Usage: ``python _cworker.py SO_PATH TASK_JSON``; prints one JSON line ``{"perf_score", "runtime_ms", "log"}``.
It imports neither torch nor optarium, so a subprocess start costs ~0.1 s; a crash in the kernel kills only
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
    """Float32 inputs of one shape: matmul (M, N, K) -> A (M, K), B (K, N); softmax (R, C) -> X (R, C)."""
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
    raise ValueError(f"task: unknown {task!r}")


def reference(task: str, inputs: list[np.ndarray]) -> np.ndarray:
    """The float64 numpy reference output."""
    if task == "matmul":
        return inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
    x = inputs[0].astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def out_shape(task: str, shape: list[int]) -> tuple[int, ...]:
    return (shape[0], shape[1]) if task in ("matmul", "softmax") else tuple(shape)


def call(fn, task: str, inputs: list[np.ndarray], out: np.ndarray, shape: list[int]) -> None:
    ptrs = [a.ctypes.data_as(_F) for a in inputs]
    fn(*ptrs, out.ctypes.data_as(_F), *[ctypes.c_int(int(s)) for s in shape])


def main(argv: list[str]) -> dict:
    so, spec = argv[0], json.loads(argv[1])
    task = spec["task"]
    fn = ctypes.CDLL(so).kernel
    fn.restype = None
    log = []
    for shape in spec["check_shapes"]:
        inp = make_inputs(task, shape, 1)
        ref = reference(task, inp)
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
    shape = spec["time_shape"]
    inp = make_inputs(task, shape, 2)
    out = np.empty(out_shape(task, shape), np.float32)
    call(fn, task, inp, out, shape)  # warm-up
    ts = []
    for _ in range(int(spec.get("repeats", 7))):
        t0 = time.perf_counter()
        call(fn, task, inp, out, shape)
        ts.append(time.perf_counter() - t0)
    return {"perf_score": 5, "runtime_ms": 1e3 * float(np.median(ts)), "log": "; ".join(log)}


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    print(json.dumps(main(sys.argv[1:])))
