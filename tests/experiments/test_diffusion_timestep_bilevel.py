"""The diffusion-timestep-bilevel experiment: its rule on synthetic records, its metrics (MMD², the Fréchet
distance in classifier features), the digit classifier, and the smoke run of both panels."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import scipy.linalg
import torch

from optarium.experiments.diffusion_timestep_bilevel import (
    CONFIGS,
    HANDCRAFTED,
    decide,
    digits_splits,
    feature_stats,
    frechet_distance,
    mmd2,
    ring_data,
    train_digit_classifier,
)
from optarium.harness.runner import run_experiment

PANELS = {"ddim-k5": "mmd", "digits-ddim-k5": "fd"}


def _records(
    learned: list[float],
    hand_b: float = 0.02,
    extra: dict[str, list[float]] | None = None,
    setting: str = "ddim-k5",
) -> list[dict]:
    metric = PANELS[setting]
    recs = []
    for seed, v in enumerate(learned):
        recs.append(
            {
                "method": f"mask@{setting}",
                "seed": seed,
                "step": 60,
                f"{metric}_A": 0.0,
                f"{metric}_B": v,
                "status": "done",
            }
        )
        for i, h in enumerate(HANDCRAFTED):
            # the hand-crafted schedule with the lowest A value (uniform) is the one compared on B
            recs.append(
                {
                    "method": f"{h}@{setting}",
                    "seed": seed,
                    "step": 0,
                    f"{metric}_A": 0.01 * (i + 1),
                    f"{metric}_B": hand_b if i == 0 else 1e-6,
                    "status": "done",
                }
            )
        for m, vals in (extra or {}).items():
            recs.append(
                {
                    "method": f"{m}@{setting}",
                    "seed": seed,
                    "step": 60,
                    f"{metric}_B": vals[seed],
                    "status": "done",
                }
            )
    return recs


def test_quick_rule_outcomes() -> None:
    cfg = CONFIGS["quick"]
    better = decide(_records([0.010, 0.011, 0.009]), cfg)
    assert better.outcome == "reproduced"
    assert abs(better.figures["ddim_k5_mean_1_minus_rho"] - 0.5) < 1e-12  # chosen on A (uniform), not B
    assert decide(_records([0.030, 0.031, 0.029]), cfg).outcome == "not reproduced"
    assert decide(_records([0.010, 0.030, 0.019]), cfg).outcome == "inconclusive"


WIN = {"bilevel": [0.005, 0.0055, 0.0045], "control": [0.02, 0.021, 0.019]}


def _both(ring: list[float], digits: list[float], ring_extra: dict, digits_extra: dict) -> list[dict]:
    """Both panels; the digits values are FDs (hand-crafted 20), scaled x1000 from the ring's MMD²."""
    scaled = {k: [1000 * v for v in vals] for k, vals in digits_extra.items()}
    return _records(ring, extra=ring_extra) + _records(
        [1000 * v for v in digits], hand_b=20.0, extra=scaled, setting="digits-ddim-k5"
    )


def test_full_rule_needs_both_panels_and_bilevel_to_beat_mask_and_control() -> None:
    cfg = CONFIGS["full"]
    learned = [0.010, 0.011, 0.009]
    win = decide(_both(learned, learned, WIN, WIN), cfg)
    assert win.outcome == "reproduced", win.summary
    assert abs(win.figures["digits_ddim_k5_mean_1_minus_rho"] - 0.5) < 1e-12
    assert win.figures["digits_bilevel_vs_mask_gap"] > 0 and win.figures["bilevel_vs_control_gap"] > 0
    lose = {"bilevel": [0.010, 0.011, 0.009], "control": [0.02, 0.021, 0.019]}
    assert decide(_both(learned, learned, WIN, lose), cfg).outcome == "inconclusive"  # digits bilevel ties
    assert decide(_both(learned, learned, lose, WIN), cfg).outcome == "inconclusive"  # ring bilevel ties
    worse = [0.03, 0.031, 0.029]
    assert decide(_both(worse, learned, WIN, WIN), cfg).outcome == "not reproduced"
    assert decide(_both(learned, worse, WIN, WIN), cfg).outcome == "not reproduced"  # either panel
    # without the digits panel the full rule cannot conclude "reproduced"
    assert decide(_records(learned, extra=WIN), cfg).outcome == "inconclusive"  # digits records missing
    ring_cfg = {**cfg, "methods": [m for m in cfg["methods"] if "digits" not in m]}
    ring_only = decide(_records(learned, extra=WIN), ring_cfg)
    assert ring_only.outcome == "inconclusive" and "digits: not run" in ring_only.summary


def test_mmd2_is_zero_on_identical_sets_and_grows_with_a_shift() -> None:
    x = ring_data(300, 0)
    assert abs(float(mmd2(x, x, 1.0))) < 1e-6
    near, far = float(mmd2(x, ring_data(300, 1), 1.0)), float(mmd2(x, x + 1.0, 1.0))
    assert 0 <= near < far
    kyy = float(torch.exp(-torch.cdist(x, x).pow(2) / 2).mean())
    assert abs(float(mmd2(x + 1.0, x, 1.0, kyy)) - far) < 1e-6


def _random_cov(d: int, seed: int) -> torch.Tensor:
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return a @ a.T / d + 0.1 * torch.eye(d, dtype=torch.float64)


def test_frechet_distance_zero_for_identical_and_symmetric() -> None:
    mu = torch.randn(6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    c1, c2 = _random_cov(6, 1), _random_cov(6, 2)
    assert abs(float(frechet_distance(mu, c1, mu, c1))) < 1e-10
    d12, d21 = float(frechet_distance(mu, c1, mu + 1, c2)), float(frechet_distance(mu + 1, c2, mu, c1))
    assert d12 > 0 and abs(d12 - d21) < 1e-10 * d12
    # a singular covariance (rank 2 of 6) is fine
    low = torch.zeros(6, 6, dtype=torch.float64)
    low[:2, :2] = torch.eye(2, dtype=torch.float64)
    assert math.isfinite(float(frechet_distance(mu, low, mu, c1)))
    assert abs(float(frechet_distance(mu, low, mu, low))) < 1e-10


def test_frechet_distance_matches_known_gaussian_pairs() -> None:
    # 1-D: (m1 - m2)^2 + (s1 - s2)^2
    one = frechet_distance(
        torch.tensor([1.0]), torch.tensor([[4.0]]), torch.tensor([-2.0]), torch.tensor([[0.25]])
    )
    assert abs(float(one) - (9.0 + 1.5**2)) < 1e-12
    # commuting covariances R diag(a) R^T, R diag(b) R^T: |dmu|^2 + sum (sqrt a - sqrt b)^2
    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    a = torch.tensor([0.5, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    b = torch.tensor([2.0, 0.1, 2.0, 1.0, 9.0], dtype=torch.float64)
    m1, m2 = torch.zeros(5, dtype=torch.float64), torch.full((5,), 0.5, dtype=torch.float64)
    got = float(frechet_distance(m1, q @ torch.diag(a) @ q.T, m2, q @ torch.diag(b) @ q.T))
    want = 5 * 0.25 + float((a.sqrt() - b.sqrt()).pow(2).sum())
    assert abs(got - want) < 1e-10
    # non-commuting: the scipy.linalg.sqrtm form of FID
    c1, c2 = _random_cov(7, 4), _random_cov(7, 5)
    ref = float(c1.trace() + c2.trace()) - 2 * float(scipy.linalg.sqrtm(c1.numpy() @ c2.numpy()).real.trace())
    assert abs(float(frechet_distance(m1[:1].expand(7), c1, m1[:1].expand(7), c2)) - ref) < 1e-8


def test_feature_stats_and_frechet_distance_inputs() -> None:
    f = torch.randn(50, 4, generator=torch.Generator().manual_seed(0))
    mu, cov = feature_stats(f)
    assert mu.dtype == torch.float64 and torch.allclose(cov, torch.cov(f.T).double(), atol=1e-6)
    with pytest.raises(ValueError, match="features"):
        feature_stats(f[:1])
    with pytest.raises(ValueError, match="cov2"):
        frechet_distance(mu, cov, mu, cov[:3, :3])
    with pytest.raises(ValueError, match="mu2"):
        frechet_distance(mu, cov, mu[:3], cov)
    with pytest.raises(FloatingPointError, match="cov1"):
        frechet_distance(mu, cov * math.nan, mu, cov)


def test_digit_classifier_reaches_a_sane_held_out_accuracy() -> None:
    dc = CONFIGS["full"]["digits"]
    d = digits_splits(dc["n_set_a"], dc["n_set_b"], dc["data_seed"])
    assert d["x_train"].shape == (997, 64) and d["x_a"].shape == (400, 64) and d["x_b"].shape == (400, 64)
    assert float(d["x_train"].min()) == -1.0 and float(d["x_train"].max()) == 1.0
    clf = train_digit_classifier(d["x_train"], d["y_train"], seed=dc["data_seed"], **dc["classifier"])
    with torch.no_grad():
        acc = float((clf(d["x_b"]).argmax(1) == d["y_b"]).double().mean())
        assert clf.features(d["x_b"]).shape == (400, dc["classifier"]["features"])
    assert acc >= 0.92, acc  # chance is 0.1; an MLP on 8x8 digits reaches about 0.96
    with pytest.raises(ValueError, match="y"):
        train_digit_classifier(d["x_train"], d["y_train"][:5])
    # real held-out sets are close in feature space; noise is far
    fa, fb = feature_stats(clf.features(d["x_a"])), feature_stats(clf.features(d["x_b"]))
    noise = torch.rand(400, 64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    fn = feature_stats(clf.features(noise))
    assert 10 * float(frechet_distance(*fa, *fb)) < float(frechet_distance(*fn, *fb))


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("diffusion-timestep-bilevel", "smoke", out=tmp_path, jobs=1)
    check_smoke("diffusion-timestep-bilevel", out)
    fig = out.verdict.figures
    for key in ("ddim_k5", "digits_ddim_k5"):
        assert fig[f"{key}_n_seeds"] == 2 and math.isfinite(fig[f"{key}_mean_1_minus_rho"])
    assert 0 < fig["digits_classifier_accuracy"] <= 1 and fig["digits_fd_floor"] > 0
    recs = [json.loads(line) for line in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in recs if "fd_B" in r]
    assert {r["method"].split("@")[0] for r in finals} == {"mask", "bilevel", "control", *HANDCRAFTED}
    for r in finals:
        assert r["method"].endswith("@digits-ddim-k5") and r["nfe"] == 4
        assert r["fd_B"] > 0 and r["fd_A"] > 0 and 0.1 <= r["conf_B"] <= 1.0
    learned = [r for r in finals if r["method"].startswith("mask@")]
    for r in learned:  # K = 5 strictly decreasing timesteps from 999 to 0
        ts = [r[f"t{i}"] for i in range(5)]
        assert ts[0] == 999 and ts[-1] == 0 and all(a > b for a, b in itertools.pairwise(ts))
