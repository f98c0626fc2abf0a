"""The diffusion-timestep-bilevel experiment's rule on synthetic records, and its MMD² helper."""

from __future__ import annotations

import torch

from optarium.experiments.diffusion_timestep_bilevel import CONFIGS, HANDCRAFTED, decide, mmd2, ring_data


def _records(
    learned: list[float], hand_b: float = 0.02, extra: dict[str, list[float]] | None = None
) -> list[dict]:
    recs = []
    for seed, v in enumerate(learned):
        recs.append({"method": "mask@ddim-k5", "seed": seed, "step": 60, "mmd_A": 0.0, "mmd_B": v,
                     "status": "done"})
        for i, h in enumerate(HANDCRAFTED):
            # the hand-crafted schedule with the lowest A value (uniform) is the one compared on B
            recs.append({"method": f"{h}@ddim-k5", "seed": seed, "step": 0, "mmd_A": 0.01 * (i + 1),
                         "mmd_B": hand_b if i == 0 else 1e-6, "status": "done"})
        for m, vals in (extra or {}).items():
            recs.append(
                {"method": f"{m}@ddim-k5", "seed": seed, "step": 60, "mmd_B": vals[seed], "status": "done"}
            )
    return recs


def test_quick_rule_outcomes() -> None:
    cfg = CONFIGS["quick"]
    better = decide(_records([0.010, 0.011, 0.009]), cfg)
    assert better.outcome == "reproduced"
    assert abs(better.figures["ddim_k5_mean_1_minus_rho"] - 0.5) < 1e-12  # chosen on A (uniform), not B
    assert decide(_records([0.030, 0.031, 0.029]), cfg).outcome == "not reproduced"
    assert decide(_records([0.010, 0.030, 0.019]), cfg).outcome == "inconclusive"


def test_full_rule_needs_bilevel_to_beat_mask_and_control() -> None:
    cfg = CONFIGS["full"]
    learned = [0.010, 0.011, 0.009]
    win = {"bilevel": [0.005, 0.0055, 0.0045], "control": [0.02, 0.021, 0.019]}
    assert decide(_records(learned, extra=win), cfg).outcome == "reproduced"
    lose = {"bilevel": [0.010, 0.011, 0.009], "control": [0.02, 0.021, 0.019]}
    assert decide(_records(learned, extra=lose), cfg).outcome == "inconclusive"
    assert decide(_records([0.03, 0.031, 0.029], extra=win), cfg).outcome == "not reproduced"


def test_mmd2_is_zero_on_identical_sets_and_grows_with_a_shift() -> None:
    x = ring_data(300, 0)
    assert abs(float(mmd2(x, x, 1.0))) < 1e-6
    near, far = float(mmd2(x, ring_data(300, 1), 1.0)), float(mmd2(x, x + 1.0, 1.0))
    assert 0 <= near < far
    kyy = float(torch.exp(-torch.cdist(x, x).pow(2) / 2).mean())
    assert abs(float(mmd2(x + 1.0, x, 1.0, kyy)) - far) < 1e-6
