"""Step time of the gradient estimators against hand-written torch peers, on the fmad-zo-bp LoRA model.

Run: ``python benchmarks/fmad_zo_bp.py [--repeats 5] [--steps 10] [--batch 16] [--seq 64] [--threads 1]``.

Each estimator's :meth:`~optarium.optim.gradient_estimators.GradientEstimator.compute` is timed against the
same computation written directly in torch (the peer), on the same model and batch:

- ``bp`` vs ``loss.backward()``; ``bp_checkpoint`` vs the same with ``torch.utils.checkpoint`` per block;
- ``fmad`` vs a ``torch.autograd.forward_ad`` dual-number forward (one tangent) under the MATH SDPA backend;
- ``zo`` vs a two-point MeZO loop that keeps ``z`` in memory (no seed trick).

Variants, timed against their base estimator (the ratio is the variant's cost per step over the base's):

- ``fmad_k4_batched`` (``tangent_batch=4``, one vmapped call) vs ``fmad_k4`` (four JVPs one at a time);
- ``fmad_svrg`` / ``zo_svrg`` (both points per direction; anchor set once beforehand) vs ``fmad`` / ``zo``.

Blocks of ``--steps`` calls are interleaved over ``--repeats`` rounds; reported are per-call medians, the
ratio estimator / peer and the cost relative to one no-grad forward (measured forward-equivalents). Ratios
are measured, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from optarium.optim.gradient_estimators import make_estimator
from optarium.problems.lora import TinyLMClassifier, add_lora
from optarium.problems.tiny_lm import TinyLMConfig, build_tiny_lm


def _model() -> tuple[TinyLMClassifier, list[torch.nn.Parameter]]:
    cfg = TinyLMConfig(vocab_size=64, d_model=64, n_layers=2, n_heads=4, context=128, d_ff=176)
    model = TinyLMClassifier(build_tiny_lm(cfg, 0), generator=torch.Generator().manual_seed(1))
    return model, add_lora(model, 2, seed=0)


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, params = _model()
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 64, (args.batch, args.seq), generator=gen)
    y = torch.randint(0, 2, (args.batch,), generator=gen)
    lf = F.cross_entropy
    name_of = {id(p): n for n, p in model.named_parameters()}
    names = [name_of[id(p)] for p in params]

    def peer_bp() -> None:
        for p in params:
            p.grad = None
        lf(model(x), y).backward()

    def peer_ckpt() -> None:
        model.set_checkpointing(True)
        try:
            peer_bp()
        finally:
            model.set_checkpointing(False)

    def peer_fmad() -> None:
        import torch.autograd.forward_ad as fwad
        from torch.nn.attention import SDPBackend, sdpa_kernel

        tangents = [torch.randn_like(p) for p in params]
        with torch.no_grad(), fwad.dual_level(), sdpa_kernel(SDPBackend.MATH):
            triples = zip(names, params, tangents, strict=True)
            duals = {n: fwad.make_dual(p.detach(), t) for n, p, t in triples}
            s = fwad.unpack_dual(lf(torch.func.functional_call(model, duals, (x,)), y)).tangent
        for p, t in zip(params, tangents, strict=True):
            p.grad = s * t

    @torch.no_grad()
    def peer_zo() -> None:
        zs = [torch.randn_like(p) for p in params]
        for p, z in zip(params, zs, strict=True):
            p.add_(z, alpha=1e-2)
        lp = float(lf(model(x), y))
        for p, z in zip(params, zs, strict=True):
            p.add_(z, alpha=-2e-2)
        lm = float(lf(model(x), y))
        for p, z in zip(params, zs, strict=True):
            p.add_(z, alpha=1e-2)
            p.grad = z * ((lp - lm) / 2e-2)

    @torch.no_grad()
    def forward() -> None:
        lf(model(x), y)

    cases: dict[str, Callable[[], None]] = {"forward": forward}
    peers = {"bp": peer_bp, "bp_checkpoint": peer_ckpt, "fmad": peer_fmad, "zo": peer_zo}
    for name, peer in peers.items():
        est = make_estimator(name)
        cases[name] = lambda est=est: est.compute(model, lf, (x, y), params)
        cases[f"{name}_peer"] = peer
    variants = {
        "fmad_k4_batched": ("fmad_k4", make_estimator("fmad", num_directions=4, tangent_batch=4)),
        "fmad_svrg": ("fmad", make_estimator("fmad_svrg")),
        "zo_svrg": ("zo", make_estimator("zo_svrg")),
    }
    base_k4 = make_estimator("fmad", num_directions=4)
    cases["fmad_k4"] = lambda: base_k4.compute(model, lf, (x, y), params)
    for name, (_, est) in variants.items():
        if name.endswith("svrg"):
            est.set_anchor(model, lf, [(x, y)], params)
        cases[name] = lambda est=est: est.compute(model, lf, (x, y), params)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # warm-up
    for _ in range(args.repeats):
        for k, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn()
            times[k].append((time.perf_counter() - t0) / args.steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"batch {args.batch} x {args.seq}, {args.threads} thread(s), {args.repeats} x {args.steps} calls")
    print(f"{'estimator':<15}{'ms':>9}{'peer ms':>10}{'ratio':>8}{'fwd-eq':>9}")
    for name in peers:
        ratio = med[name] / med[f"{name}_peer"]
        fe = med[name] / med["forward"]
        print(f"{name:<15}{1e3 * med[name]:9.2f}{1e3 * med[f'{name}_peer']:10.2f}{ratio:8.2f}{fe:9.2f}")
    print(f"{'forward':<15}{1e3 * med['forward']:9.2f}")
    print(f"{'variant':<17}{'ms':>9}{'base':>10}{'base ms':>9}{'ratio':>8}")
    for name, (base, _) in variants.items():
        ratio = med[name] / med[base]
        print(f"{name:<17}{1e3 * med[name]:9.2f}{base:>10}{1e3 * med[base]:9.2f}{ratio:8.2f}")


if __name__ == "__main__":
    main()
