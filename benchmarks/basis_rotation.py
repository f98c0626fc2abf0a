"""The basis-rotation experiment's hot path: the batched simulator against the same runs looped with torch.

Run: ``python benchmarks/basis_rotation.py [--seeds 3] [--steps 400] [--threads 1]`` (quadratic) or
``python benchmarks/basis_rotation.py --pipeline [--repeats 5]`` (tiny-LM pipeline step).

One (delay, step size, seed) run is one row of the batched float64 program of
:func:`optarium.experiments.basis_rotation.simulate`; the peer computes the same rows one at a time with the
library's optimizers (``torch.optim.Adam`` for the coordinate-wise arm, :class:`optarium.optim.RotatedAdamW`
for the estimated-basis arm; x as a d x 1 parameter, delayed exact gradients from a ring of past iterates).
Reported: seconds per run and the ratio looped / batched (the speed-up the batching buys). Ratios are
measured, never asserted.

``--pipeline``: the transformer study's hot path, one :class:`optarium.optim.AsyncPipelineSimulator` step of
the full-scale tiny LM (d = 64, 4 blocks, context 32, batch 16, global clipping at 1) with P = 1 (no stale
snapshot: ordinary forward/backward) and P = 8 (ring-buffer snapshots, ``functional_call`` on the stale
weights), against a plain ``torch.optim.AdamW`` training step of the same model (the peer), interleaved.
"""

from __future__ import annotations

import argparse
import time

import torch

from optarium.experiments.basis_rotation import CONFIGS, problem, simulate
from optarium.optim import RotatedAdamW


def _looped(method: str, tau: int, lrs: list[float], seeds: list[int], cfg: dict) -> float:
    t0 = time.perf_counter()
    for lr in lrs:
        for seed in seeds:
            q, lam, x0 = problem(seed, int(cfg["d"]), float(cfg["lam_max"]))
            h = q @ torch.diag(lam) @ q.T
            x = x0.clone().reshape(-1, 1).requires_grad_(True)
            if method == "estimated":
                opt: torch.optim.Optimizer = RotatedAdamW([x], lr=lr, betas=(0.9, 0.95), refresh="eigh")
            else:
                opt = torch.optim.Adam([x], lr=lr, betas=(0.9, 0.95))
            hist = [x.detach().clone()]
            f0 = float(0.5 * x0 @ h @ x0)
            for t in range(int(cfg["cap"])):
                x.grad = h @ hist[max(t - tau, 0)]
                opt.step()
                hist.append(x.detach().clone())
                if float(0.5 * (x.detach().T @ h @ x.detach())) <= cfg["target"] * f0:
                    break
    return time.perf_counter() - t0


def _pipeline(repeats: int, steps: int) -> dict[str, float]:
    import statistics

    import torch.nn.functional as F

    from optarium.experiments.basis_rotation import CONFIGS as _CFG
    from optarium.experiments.basis_rotation import lm_units
    from optarium.optim import AsyncPipelineSimulator, staleness_factory
    from optarium.problems.text_corpus import sample_batch, split_corpus, stdlib_corpus
    from optarium.problems.tiny_lm import TinyLMConfig, build_tiny_lm

    lm = _CFG["full"]["lm"]
    cfg = TinyLMConfig(d_model=lm["d_model"], n_layers=lm["n_layers"], n_heads=lm["n_heads"],
                       context=lm["context"], d_ff=lm["d_ff"])  # fmt: skip
    train, _ = split_corpus(stdlib_corpus(200_000))
    gen = torch.Generator().manual_seed(0)

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    fns = {}
    plain_model = build_tiny_lm(cfg, 0)
    plain = torch.optim.AdamW(plain_model.parameters(), lr=1e-3, betas=(0.9, 0.95))

    def plain_step() -> None:
        x, y = sample_batch(train, lm["batch"], lm["context"], gen)
        plain.zero_grad()
        loss_fn(plain_model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(plain_model.parameters(), 1.0)
        plain.step()

    fns["plain_adamw"] = plain_step
    for name, stages in (("sim_adamw_P1", 1), ("sim_adamw_P8", 8), ("sim_rotated_P8", 8)):
        model = build_tiny_lm(cfg, 0)
        sim = AsyncPipelineSimulator(
            model,
            stages,
            optimizer_factory=staleness_factory("rotated" if "rotated" in name else "pipedream", 1e-3),
            units=lm_units(cfg.n_layers),
        )

        def sim_step(sim: AsyncPipelineSimulator = sim) -> None:
            sim.step(sample_batch(train, lm["batch"], lm["context"], gen), loss_fn, max_grad_norm=1.0)

        fns[name] = sim_step
    times: dict[str, list[float]] = {n: [] for n in fns}
    for f in fns.values():
        for _ in range(10):  # past the rotated optimizer's first refreshes and the ring buffer's fill
            f()
    for r in range(repeats):
        for n in list(fns) if r % 2 == 0 else list(reversed(fns)):
            t0 = time.perf_counter()
            for _ in range(steps):
                fns[n]()
            times[n].append((time.perf_counter() - t0) / steps)
    out: dict[str, float] = {}
    for n, ts in times.items():
        print(f"{n:>16}: min {min(ts) * 1e3:7.1f} ms  median {statistics.median(ts) * 1e3:7.1f} ms per step")
    for n in ("sim_adamw_P1", "sim_adamw_P8", "sim_rotated_P8"):
        out[f"{n}/plain_adamw_min"] = min(times[n]) / min(times["plain_adamw"])
        out[f"{n}/plain_adamw_median"] = statistics.median(times[n]) / statistics.median(times["plain_adamw"])
        print(
            f"{n + ' / plain_adamw':>32}: min {out[f'{n}/plain_adamw_min']:.3f}x  "
            f"median {out[f'{n}/plain_adamw_median']:.3f}x"
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pipeline", action="store_true", help="time the simulator's step instead")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.pipeline:
        return _pipeline(args.repeats, 10)
    cfg = {**CONFIGS["quick"], "cap": args.steps, "sigma": 0.0, "target": 0.0}
    lrs = list(cfg["grid_delay"])
    seeds = list(range(args.seeds))
    rows = len(lrs) * len(seeds)
    out: dict[str, float] = {}
    for method in ("adam", "estimated"):
        t0 = time.perf_counter()
        simulate(method, [8], [lrs], seeds, cfg)
        batched = time.perf_counter() - t0
        looped = _looped(method, 8, lrs, seeds, cfg)
        out[f"{method}_batched_s_per_run"] = batched / rows
        out[f"{method}_looped_s_per_run"] = looped / rows
        out[f"{method}_looped/batched"] = looped / batched
        print(
            f"{method:>10}: {rows} runs x {args.steps} steps: batched {batched:.2f} s, "
            f"looped {looped:.2f} s, ratio looped / batched {looped / batched:.1f}x"
        )
    return out


if __name__ == "__main__":
    main()
