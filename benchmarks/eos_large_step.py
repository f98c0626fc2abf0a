"""eos-large-step's hot paths against peers, as ratios measured in one run.

Run: ``python benchmarks/eos_large_step.py [--repeats 5] [--steps 20] [--threads 1] [--n 1438]``.

On the full scale's problem (tanh MLP 64-32-32-10, float64, digits-sized full batch):

1. One :class:`~optarium.optim.NonmonotoneLineSearchGD` step (equality search, 30 trial evaluations) against
   its floor, the same work written by hand: one forward + backward and 30 forwards at hand-moved parameters
   (``p.copy_(x); p.add_(g, alpha=-eta)`` per trial); the ratio is the optimizer's overhead.
2. The same step against ``torch.optim.LBFGS(history_size=1, line_search_fn="strong_wolfe", max_iter=1)``,
   torch's line-search optimizer (a different search, for scale: its evaluations carry gradients).
3. :class:`~optarium.optim.AdGD` forward + backward + step against ``torch.optim.SGD``'s.
4. Sharpness (Lanczos, tolerance 1e-4) three ways: the experiment's warm-started
   :class:`~optarium.optim.diagnostics.SharpnessTracker` (reverse-over-reverse products) against a cold
   :func:`~optarium.optim.diagnostics.sharpness` with reverse-over-reverse and with forward-over-reverse
   products.

Blocks of ``--steps`` steps are interleaved over ``--repeats`` rounds so machine noise hits all alike; the
median per step and the ratio of medians are printed. Ratios are measured, never asserted.

Measured (2026-12-02, the shared 2-core CPU machine, one thread, load average below 1, ``--repeats 5
--steps 10``): nm_step 16.3 ms against the hand-written floor 15.7 ms (1.04x: the optimizer's overhead is 4 %
over its 31 passes); against LBFGS(strong Wolfe, one iteration) 5.3x (it evaluates far fewer trials); AdGD
1.19x SGD (forward + backward + step); the experiment's first, private warm-started meter (since moved into
diagnostics.SharpnessTracker) was 0.14x a cold forward-over-reverse diagnostics.sharpness at a fixed point
(there its warm start is exact; along a training trajectory it needs about 9 products per call instead of 21,
at about 5 ms instead of 14-19 ms each on the quick's problem, so about 0.2x).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _timing import medians


def _problem(n: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n, 64, generator=gen, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.randint(0, 10, (n,), generator=gen), 10).to(torch.float64)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 10)).to(torch.float64)
    return model, x, y


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((model(x) - y) ** 2).sum(1).mean()


def main() -> None:
    """Parse the arguments, time every pair, print medians and ratios."""
    from optarium.optim import AdGD, NonmonotoneLineSearchGD
    from optarium.optim.diagnostics import SharpnessTracker, sharpness

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n", type=int, default=1438)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    models = {k: _problem(args.n) for k in ("nm", "hand", "lbfgs", "adgd", "sgd")}
    opts = {
        "nm": NonmonotoneLineSearchGD(models["nm"][0].parameters(), max_evals=30),
        "lbfgs": torch.optim.LBFGS(
            models["lbfgs"][0].parameters(), lr=1.0, max_iter=1, history_size=1, line_search_fn="strong_wolfe"
        ),
        "adgd": AdGD(models["adgd"][0].parameters(), lr=1e-3),
        "sgd": torch.optim.SGD(models["sgd"][0].parameters(), lr=1e-3),
    }

    def closure_for(name: str) -> Callable[[], torch.Tensor]:
        model, x, y = models[name]
        opt = opts[name]

        def closure() -> torch.Tensor:
            loss = _loss(model, x, y)
            if torch.is_grad_enabled():
                opt.zero_grad()
                loss.backward()
            return loss

        return closure

    closures = {k: closure_for(k) for k in opts}
    hand_model, hx, hy = models["hand"]
    hand_params = list(hand_model.parameters())

    def hand() -> None:  # the floor: 1 forward + backward, 30 forwards at hand-moved parameters
        for p in hand_params:
            p.grad = None
        _loss(hand_model, hx, hy).backward()
        saved = [p.detach().clone() for p in hand_params]
        grads = [p.grad for p in hand_params]
        with torch.no_grad():
            for j in range(30):
                eta = 0.5**j
                for p, s, g in zip(hand_params, saved, grads, strict=True):
                    p.copy_(s)
                    p.add_(g, alpha=-eta)
                float(_loss(hand_model, hx, hy))
            for p, s in zip(hand_params, saved, strict=True):
                p.copy_(s)

    fns = {
        "nm_step": lambda: opts["nm"].step(closures["nm"]),
        "hand_floor": hand,
        "lbfgs_step": lambda: opts["lbfgs"].step(closures["lbfgs"]),
        "adgd_step": lambda: opts["adgd"].step(closures["adgd"]),
        "sgd_step": lambda: opts["sgd"].step(closures["sgd"]),
    }
    med = medians(fns, args.repeats, number=args.steps, warmup=0)
    print(f"== steps (median per step over {args.repeats} blocks of {args.steps}; n = {args.n})")
    for k, v in med.items():
        print(f"{k:>22}: {v * 1e3:9.3f} ms")
    print(f"{'nm_step / hand_floor':>40}: {med['nm_step'] / med['hand_floor']:.3f}x")
    print(f"{'nm_step / lbfgs_step':>40}: {med['nm_step'] / med['lbfgs_step']:.3f}x")
    print(f"{'adgd_step / sgd_step':>40}: {med['adgd_step'] / med['sgd_step']:.3f}x")

    model, x, y = _problem(args.n)

    def mse(o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((o - t) ** 2).sum(1).mean()

    tracker = SharpnessTracker(model, mse, (x, y), tol=1e-4)
    tracker()  # the warm start and the imports
    sharpness(model, mse, (x, y), tol=1e-4, products="forward")
    s_med = medians(
        {
            "tracker_warm": lambda: tracker(),
            "cold_reverse": lambda: sharpness(model, mse, (x, y), tol=1e-4, products="reverse"),
            "cold_forward": lambda: sharpness(model, mse, (x, y), tol=1e-4, products="forward"),
        },
        args.repeats,
        number=max(1, args.steps // 5),
        warmup=0,
    )
    print("== sharpness (Lanczos, tol 1e-4)")
    for k, v in s_med.items():
        print(f"{k:>22}: {v * 1e3:9.3f} ms")
    print(f"{'tracker_warm / cold_forward':>40}: {s_med['tracker_warm'] / s_med['cold_forward']:.3f}x")
    print(f"{'cold_reverse / cold_forward':>40}: {s_med['cold_reverse'] / s_med['cold_forward']:.3f}x")


if __name__ == "__main__":
    main()
