"""The kernelfoundry experiment: its verdict rule on hand-built records (each outcome reachable)."""

from __future__ import annotations

from typing import Any

from optarium.experiments.kernelfoundry import CONFIGS, decide

CONF = CONFIGS["quick"]


def _recs(gain: dict[str, float], jitter: float = 0.01) -> list[dict[str, Any]]:
    out = []
    for task in CONF["tasks"]:
        for seed in range(5):
            base = 6.0 + 0.1 * seed
            j = jitter if seed % 2 else -jitter
            vals = {"kernelfoundry": base + gain[task] + j, "greedy": base, "random": base - 0.01}
            for m, v in vals.items():
                out.append({"method": m, "seed": seed, "step": 60, f"{task}:best_fitness": v})
    return out


def test_rule_outcomes() -> None:
    assert decide(_recs({"matmul": 0.5, "softmax": 0.5}), CONF).outcome == "reproduced"
    assert decide(_recs({"matmul": 0.5, "softmax": 0.0}, jitter=0.2), CONF).outcome == "inconclusive"
    v = decide(_recs({"matmul": 0.5, "softmax": -0.5}), CONF)
    assert v.outcome == "not reproduced" and v.figures["softmax:vs_greedy:outcome"] == "not reproduced"
    assert v.figures["matmul:vs_random:n_pairs"] == 5
