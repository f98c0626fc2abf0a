r"""SAPO: does choosing each task's training instruction by lowest pre-update loss reduce forgetting?

Paper: Shi et al., "Training Prompt Matters: State-Adaptive Optimization for Robust Fine-Tuning",
arXiv:2606.01967 (see :mod:`optarium.llm.sapo_prompts`). Tasks: :mod:`optarium.problems.instruction_tasks`
(T1 sentiment, T2 antonym, T3 category, T4 upper-case copy, T5 country -> continent, held out).

**Quick = the mechanism check** (method ``candidate_sweep``; finding (c) of the paper: a lower pre-update loss
predicts a better prompt). Per seed: a :class:`~optarium.problems.TinyLM` of the ``QUICK`` shape over a
word-level vocabulary of the tasks (:class:`~optarium.problems.instruction_tasks.WordTokenizer`) is pretrained
(120 AdamW steps, batch 32, lr 3e-3) on a mixture of T1-T3 written with three "seen" phrasings each (the
original instruction and its first two bank rewrites). From that same state, T4 is learned with each of 12
candidate instructions (the original and its 11 bank rewrites, some worded like the seen phrasings, some not),
40 full-weight AdamW steps each. Recorded per candidate: the pre-update loss of T4's training examples
(:func:`~optarium.llm.sapo_prompts.prompt_losses`), and the forgetting = mean over T1-T3 of the increase of
the test answer NLL (original instructions). Seeds change pretraining and fine-tuning randomness; the
candidates are the same.

**Quick rule** (stated up front; spec): statistic = mean over the 3 seeds of Spearman rho(pre-update loss,
forgetting); one-sided permutation test with the forgetting ranks permuted within each seed (10,000
permutations; the null's 95 % point is about 0.29). Reproduced if p(greater) < 0.05; not reproduced if
p(less) < 0.05 (significant in the reverse direction, rho about <= -0.29); otherwise inconclusive (this
includes 0 < rho < 0.29).

**Full** (methods ``sapo``, ``original``, ``random``): SmolLM2-135M-Instruct
(:func:`optarium.llm.load_smollm2`) with a peft LoRA (r = 8 on q/v, LoRAInc) trained T1 -> T2 -> T3, 6
candidates per task (original + 5 bank rewrites), 24 scoring examples, S steps per task, 96 test items per
task (T5: its 34) scored by exact match of a <= 4-token greedy answer; the same test items in every condition;
row 0 of R (the initial model, original instructions) is computed once per process. ``sapo`` and ``original``
for 2 seeds, ``random`` (a uniformly drawn candidate per task) for 1 (its second-seed unit only logs that it
was skipped). **Full rule**: per seed paired bootstrap of the test items (2000 replicates, item indices
resampled once per replicate for every condition), seeds pooled by averaging the deltas within each replicate.
Reproduced if the 95 % CI of dBWT(SAPO - original) lies above 0, dBWT(SAPO - random) has a positive mean and
the dAP CI's lower bound is >= -2 points; not reproduced if the dBWT(SAPO - original) CI lies entirely <= 0;
otherwise inconclusive.

**Scaled down**: Qwen3-8B -> a 117k-parameter TinyLM (quick) / SmolLM2-135M Q4_1 dequantised (full); SuperNI /
TRACE -> generated tasks; the paraphrasing LLM (20 samples) -> a fixed bank of 11 hand-written rewrites per
task; 10 epochs -> 40 steps (quick) / S steps (full); 250 scoring examples -> 48 (quick) / 24 (full). The
smoke scale runs every method with a tiny random LlamaForCausalLM (config ``model = "tiny_llama"``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "Choosing each task's training instruction as the paraphrase with the lowest pre-update loss under the "
    "current model (SAPO) reduces forgetting (higher BWT) without lowering AP in continual fine-tuning; the "
    "mechanism: a candidate's pre-update loss predicts how much training on it makes the model forget."
)
RULE = (
    "Quick: mean over 3 seeds of Spearman rho(pre-update loss, forgetting) over 12 candidates, one-sided "
    "within-seed permutation test: reproduced if p(greater) < 0.05 (rho >= ~0.29), not reproduced if "
    "p(less) < 0.05, else inconclusive. Full: paired item bootstrap, seeds pooled: reproduced if the 95% CI "
    "of dBWT(SAPO - original) > 0, mean dBWT(SAPO - random) > 0 and the dAP CI lower bound >= -2 points; "
    "not reproduced if the dBWT(SAPO - original) CI <= 0; else inconclusive."
)
METHODS = ("candidate_sweep", "sapo", "original", "random")
BASELINES = ("original", "random")
_RULE_OF = {"sapo": "min_loss", "original": "original", "random": "random"}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": 1,
        "methods": list(METHODS),
        # candidate sweep
        "sweep_n_train": 16,
        "sweep_n_test": 8,
        "pretrain_steps": 3,
        "pretrain_batch": 8,
        "pretrain_lr": 3e-3,
        "n_candidates_sweep": 4,
        "finetune_steps": 2,
        "finetune_batch": 4,
        "finetune_lr": 1e-3,
        "n_perm": 200,
        # continual fine-tuning
        "model": "tiny_llama",
        "tasks": ["sentiment", "antonym"],
        "heldout": ["continent"],
        "n_train": 8,
        "n_test": 4,
        "n_candidates": 2,
        "max_examples": 4,
        "steps_per_task": 2,
        "lr": 1e-2,
        "batch_size": 4,
        "learner": "lorainc",
        "random_seeds": 1,
        "n_boot": 50,
    },
    "quick": {
        "seeds": 3,
        "methods": ["candidate_sweep"],
        "sweep_n_train": 48,
        "sweep_n_test": 48,
        "pretrain_steps": 120,
        "pretrain_batch": 32,
        "pretrain_lr": 3e-3,
        "n_candidates_sweep": 12,
        "finetune_steps": 40,
        "finetune_batch": 8,
        "finetune_lr": 1e-3,
        "n_perm": 10000,
    },
    "full": {
        "seeds": 2,
        "methods": ["sapo", "original", "random"],
        "model": "smollm2",
        "tasks": ["sentiment", "antonym", "category"],
        "heldout": ["continent"],
        "n_train": 48,
        "n_test": 96,
        "n_candidates": 5,
        "max_examples": 24,
        "steps_per_task": 12,
        "lr": 1e-3,
        "batch_size": 8,
        "learner": "lorainc",
        "random_seeds": 1,
        "n_boot": 2000,
        "unit_timeout_s": 900,
    },
}

SWEEP_PRE = ("sentiment", "antonym", "category")
SWEEP_TASK = "uppercase"
N_SEEN = 3  # the original instruction and its first two bank rewrites


# ----------------------------------------------------------------------------------------------------------
# Shared set-up
# ----------------------------------------------------------------------------------------------------------


def _suite(n_train: int, n_test: int) -> dict[str, Any]:
    from optarium.problems import instruction_tasks as it

    return it.sapo_task_suite(n_train, n_test, seed=0)  # data seed fixed: same items in every unit


def _word_tokenizer(suite: Mapping[str, Any]) -> Any:
    from optarium.problems import instruction_tasks as it

    texts = [
        it.format_prompt(p, x) + it.format_answer(y)
        for t in suite.values()
        for p in [t.instruction, *it.PARAPHRASE_BANK[t.name]]
        for x, y in t.train + t.test
    ]
    return it.WordTokenizer.from_texts(texts)


def _bank() -> Any:
    from optarium.llm.sapo_prompts import TemplateParaphraser
    from optarium.problems import instruction_tasks as it

    return TemplateParaphraser({it.INSTRUCTIONS[k]: v for k, v in it.PARAPHRASE_BANK.items()})


# ----------------------------------------------------------------------------------------------------------
# Quick: the candidate sweep
# ----------------------------------------------------------------------------------------------------------


def _overlap(candidate: str, seen: Sequence[str]) -> float:
    """Largest word-set Jaccard similarity of ``candidate`` with a seen (pretraining) phrasing."""
    import re

    def words(t: str) -> set[str]:
        return set(re.findall(r"[a-z]+", t.lower()))

    c = words(candidate)
    return max(len(c & words(s)) / len(c | words(s)) for s in seen)


def _sweep(ctx: Any, seed: int, config: Mapping[str, Any]) -> None:
    import torch

    from optarium.llm import sapo_prompts as sp
    from optarium.problems import instruction_tasks as it
    from optarium.problems.tiny_lm import QUICK, build_tiny_lm

    with ctx.untimed():
        suite = _suite(int(config["sweep_n_train"]), int(config["sweep_n_test"]))
        tok = _word_tokenizer(suite)
        model = build_tiny_lm(dataclasses.replace(QUICK, vocab_size=len(tok)), seed)
        ex, ins = [], []
        for name in SWEEP_PRE:
            t = suite[name]
            for p in [t.instruction, *it.PARAPHRASE_BANK[name][: N_SEEN - 1]]:
                ex += t.train
                ins += [p] * len(t.train)
    gen = torch.Generator().manual_seed(10_000 + seed)
    pre = sp.train_on_task(
        model,
        tok,
        ex,
        ins,
        steps=int(config["pretrain_steps"]),
        lr=float(config["pretrain_lr"]),
        batch_size=int(config["pretrain_batch"]),
        generator=gen,
    )

    def old_losses(m: Any) -> list[float]:
        return [
            -float(sp.evaluate_task(m, tok, suite[n].test, suite[n].instruction, metric="neg_loss").mean())
            for n in SWEEP_PRE
        ]

    t4 = suite[SWEEP_TASK]
    cands = [t4.instruction, *it.PARAPHRASE_BANK[SWEEP_TASK]][: int(config["n_candidates_sweep"])]
    seen = sorted(set(ins))
    with ctx.evaluating():
        before = old_losses(model)
        ctx.log(
            0,
            pretrain_loss_first=pre[0] if pre else math.nan,
            pretrain_loss_last=pre[-1] if pre else math.nan,
            **{f"old_loss_{n}": v for n, v in zip(SWEEP_PRE, before, strict=True)},
        )
    pre_loss = sp.prompt_losses(model, tok, t4.train, cands, batch_size=64, max_examples=len(t4.train))
    for c_i, c in enumerate(cands):
        m = copy.deepcopy(model)
        g = torch.Generator().manual_seed(20_000 + 100 * seed + c_i)
        losses = sp.train_on_task(
            m,
            tok,
            t4.train,
            c,
            steps=int(config["finetune_steps"]),
            lr=float(config["finetune_lr"]),
            batch_size=int(config["finetune_batch"]),
            generator=g,
        )
        with ctx.evaluating():
            after = old_losses(m)
            forget = [a - b for a, b in zip(after, before, strict=True)]
            in_task = -float(sp.evaluate_task(m, tok, t4.test, c, metric="neg_loss").mean())
            ctx.log(
                1 + c_i,
                candidate=c_i,
                seen_overlap=_overlap(c, seen),
                pre_loss=float(pre_loss[c_i]),
                forgetting=sum(forget) / len(forget),
                t4_test_loss=in_task,
                t4_train_loss_last=losses[-1] if losses else math.nan,
                **{f"forget_{n}": v for n, v in zip(SWEEP_PRE, forget, strict=True)},
            )


# ----------------------------------------------------------------------------------------------------------
# Full: continual fine-tuning
# ----------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2)
def _tiny_llama(vocab: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    m = LlamaForCausalLM(cfg).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def _model(config: Mapping[str, Any], suite: Mapping[str, Any]) -> tuple[Any, Any]:
    if config["model"] == "smollm2":
        from optarium.llm import load_smollm2

        return load_smollm2()
    if config["model"] == "tiny_llama":
        tok = _word_tokenizer(suite)
        return _tiny_llama(len(tok)), tok
    raise ValueError(f"model must be 'smollm2' or 'tiny_llama', got {config['model']!r}")


_ROW0: dict[tuple, list] = {}


def _continual(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.llm import sapo_prompts as sp

    if method == "random" and seed >= int(config.get("random_seeds", 1)):
        ctx.log(0, skipped=1.0)
        return
    with ctx.untimed():
        suite = _suite(int(config["n_train"]), int(config["n_test"]))
        model, tok = _model(config, suite)
        tasks = [suite[n] for n in config["tasks"]]
        held = [suite[n] for n in config["heldout"]]
        key = (
            config["model"],
            tuple(config["tasks"]),
            tuple(config["heldout"]),
            config["n_train"],
            config["n_test"],
        )
        if key not in _ROW0:
            _ROW0[key] = [
                sp.evaluate_task(model, tok, t.test, t.instruction, max_new_tokens=t.max_new_tokens)
                for t in [*tasks, *held]
            ]
    opt = sp.StateAdaptivePromptOptimizer(
        _bank(),
        n_candidates=int(config["n_candidates"]),
        max_examples=int(config["max_examples"]),
        rule=_RULE_OF[method],
        seed=seed,
        score_all=method != "original",
    )
    res = sp.continual_finetune(
        model,
        tok,
        tasks,
        opt,
        learner=str(config["learner"]),
        heldout_tasks=held,
        steps_per_task=int(config["steps_per_task"]),
        lr=float(config["lr"]),
        batch_size=int(config["batch_size"]),
        seed=seed,
        initial_scores=_ROW0[key],
    )
    with ctx.evaluating():
        step = 0
        for j, cell in enumerate(res.extras["per_item"]):
            for i in range(cell.shape[0]):
                for t in range(cell.shape[1]):
                    ctx.log(step, stage=i, col=j, item=t, score=float(cell[i, t]))
                    step += 1
        for k, sel in enumerate(res.extras["selections"]):
            ctx.log(
                step,
                check_finite=False,
                task=k,
                chosen=sel["index"],
                chosen_loss=sel["losses"][sel["index"]],
                original_loss=sel["original_loss"],
            )
            step += 1
        e = res.extras
        ctx.log(
            step,
            check_finite=False,
            ap=e["ap"],
            bwt=e["bwt"],
            fwt=e["fwt"],
            heldout_change=e["heldout_change"],
            seconds_training=e["seconds_training"],
            seconds_scoring=e["seconds_scoring"],
            seconds_eval=e["seconds_eval"],
            n_steps=res.n_iter,
        )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed) unit: the candidate sweep (quick) or one continual fine-tuning run (full)."""
    if method == "candidate_sweep":
        _sweep(ctx, seed, config)
    else:
        _continual(ctx, method, seed, config)


# ----------------------------------------------------------------------------------------------------------
# Verdicts
# ----------------------------------------------------------------------------------------------------------


def _sweep_table(records: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    out: dict[int, list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("method") == "candidate_sweep" and "pre_loss" in r and r.get("status", "done") == "done":
            out.setdefault(int(r["seed"]), []).append(r)
    return {s: sorted(v, key=lambda r: int(r["candidate"])) for s, v in sorted(out.items())}


def _decide_sweep(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    from optarium.llm.sapo_prompts import permutation_test_mean_spearman, spearman

    tab = _sweep_table(records)
    n_c = int(config.get("n_candidates_sweep", 12))
    tab = {s: v for s, v in tab.items() if len(v) == n_c}
    if not tab:
        return Verdict("inconclusive", {"n_seeds": 0.0}, "no complete candidate sweep")
    X = [[float(r["pre_loss"]) for r in v] for v in tab.values()]
    Y = [[float(r["forgetting"]) for r in v] for v in tab.values()]
    pt = permutation_test_mean_spearman(X, Y, n_perm=int(config.get("n_perm", 10000)), seed=0)
    fig: dict[str, Any] = {f"sweep:{k}": v for k, v in pt.items()}
    for s, v in tab.items():
        fig[f"sweep:rho_seed{s}"] = float(spearman([r["pre_loss"] for r in v], [r["forgetting"] for r in v]))
        best = min(range(len(v)), key=lambda i: (v[i]["pre_loss"], i))
        fig[f"sweep:sapo_minus_original_forgetting_seed{s}"] = float(
            v[best]["forgetting"] - v[0]["forgetting"]
        )
        fig[f"sweep:rho_pre_loss_t4_loss_seed{s}"] = float(
            spearman([r["pre_loss"] for r in v], [r["t4_test_loss"] for r in v])
        )
    d = [fig[f"sweep:sapo_minus_original_forgetting_seed{s}"] for s in tab]
    fig["sweep:sapo_minus_original_forgetting_mean"] = sum(d) / len(d)
    if pt["p_greater"] < 0.05:
        outcome = "reproduced"
    elif pt["p_less"] < 0.05:
        outcome = "not reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"mean Spearman rho(pre-update loss, forgetting) = {pt['rho']:+.3f} over {len(tab)} seeds x {n_c} "
        f"candidates (within-seed permutation p(greater) = {pt['p_greater']:.3g}, p(less) = "
        f"{pt['p_less']:.3g}, null 95% point {pt['null_q95']:.2f}); min-loss pick minus original "
        f"forgetting = {fig['sweep:sapo_minus_original_forgetting_mean']:+.4f} nats (mean over seeds)"
    )
    return Verdict(outcome, fig, summary)


def _per_item(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, list[Any]]:
    import torch

    cells: dict[int, dict[tuple[int, int], dict[int, float]]] = {}
    for r in records:
        if r.get("method") == method and "score" in r:
            cells.setdefault(int(r["seed"]), {}).setdefault((int(r["col"]), int(r["stage"])), {})[
                int(r["item"])
            ] = float(r["score"])
    out: dict[int, list[Any]] = {}
    for s, c in cells.items():
        cols = sorted({j for j, _ in c})
        stages = sorted({i for _, i in c})
        out[s] = [
            torch.tensor([[c[(j, i)][t] for t in sorted(c[(j, i)])] for i in stages], dtype=torch.float64)
            for j in cols
        ]
    return out


def _decide_full(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict | None:
    from optarium.llm.sapo_prompts import paired_bootstrap_cl

    scores = {m: _per_item(records, m) for m in ("sapo", "original", "random")}
    scores = {m: v for m, v in scores.items() if v}
    if "sapo" not in scores or "original" not in scores:
        return None
    n = len(config["tasks"])
    pairs = [("sapo", "original")] + ([("sapo", "random")] if "random" in scores else [])
    bs = paired_bootstrap_cl(scores, pairs, n_trained=n, n_boot=int(config.get("n_boot", 2000)), seed=0)
    fig: dict[str, Any] = {}
    for pair, d in bs.items():
        for k, v in d.items():
            fig[f"{pair}:{k}"] = 100 * v if k != "n_seeds" else v
    for m in scores:
        for key in ("ap", "bwt", "fwt", "heldout_change"):
            vals = [r[key] for r in records if r.get("method") == m and key in r]
            fig[f"{m}:{key}"] = 100 * sum(vals) / len(vals) if vals else math.nan
    so = bs["sapo-original"]
    sr = bs.get("sapo-random")
    if so["bwt_lo"] > 0 and sr is not None and sr["bwt"] > 0 and 100 * so["ap_lo"] >= -2:
        outcome = "reproduced"
    elif so["bwt_hi"] <= 0:
        outcome = "not reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"dBWT(SAPO - original) = {100 * so['bwt']:+.1f} points, 95% CI [{100 * so['bwt_lo']:+.1f}, "
        f"{100 * so['bwt_hi']:+.1f}]; dAP = {100 * so['ap']:+.1f} [{100 * so['ap_lo']:+.1f}, "
        f"{100 * so['ap_hi']:+.1f}]"
        + (f"; dBWT(SAPO - random) = {100 * sr['bwt']:+.1f}" if sr is not None else "; no random condition")
    )
    return Verdict(outcome, fig, summary)


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The stated rules (module docstring): the sweep rule, the full rule, or both combined (smoke)."""
    from optarium.harness.verdicts import combine_outcomes

    parts = []
    if "candidate_sweep" in config["methods"]:
        parts.append(_decide_sweep(records, config))
    if "sapo" in config["methods"]:
        v = _decide_full(records, config)
        parts.append(v if v is not None else Verdict("inconclusive", {"full:n_runs": 0.0}, "no SAPO runs"))
    if len(parts) == 1:
        return parts[0]
    figures = {k: v for p in parts for k, v in p.figures.items()}
    outcome = combine_outcomes([p.outcome for p in parts])
    return Verdict(outcome, figures, " | ".join(p.summary for p in parts))


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Quick: pre-update loss vs forgetting per seed. Full: final R matrices and BWT/AP per condition."""
    from optarium.harness.figures import panel_grid

    figs: dict[str, Any] = {}
    tab = _sweep_table(records)
    if tab:
        fig, axes = panel_grid(len(tab))
        for ax, (s, v) in zip(axes, tab.items(), strict=False):
            xs = [r["pre_loss"] for r in v]
            ys = [r["forgetting"] for r in v]
            sc = ax.scatter(xs, ys, c=[r.get("seen_overlap", 0.0) for r in v], cmap="viridis", vmin=0)
            fig.colorbar(sc, ax=ax, label="word overlap with a seen phrasing")
            ax.scatter([xs[0]], [ys[0]], marker="x", color="k", label="original")
            ax.set_title(f"seed {s}", fontsize=8)
            ax.set_xlabel("pre-update loss on T4 (nats)")
            ax.set_ylabel("forgetting of T1-T3 (nats)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        figs["loss_vs_forgetting"] = fig
    conds = [m for m in ("original", "random", "sapo") if _per_item(records, m)]
    if conds:
        fig, axes = panel_grid(len(conds) + 1)
        import torch

        for ax, m in zip(axes, conds, strict=False):
            cols = next(iter(_per_item(records, m).values()))
            R = torch.stack([c.mean(-1) for c in cols], -1)
            ax.imshow(R.numpy(), vmin=0, vmax=1, cmap="viridis")
            for i in range(R.shape[0]):
                for j in range(R.shape[1]):
                    ax.text(j, i, f"{float(R[i, j]):.2f}", ha="center", va="center", fontsize=6, color="w")
            ax.set_title(f"R ({m}, first seed)", fontsize=8)
            ax.set_xlabel("task (last columns held out)")
            ax.set_ylabel("stage")
        ax = axes[len(conds)]
        for k, key in enumerate(("bwt", "ap", "fwt")):
            for i, m in enumerate(conds):
                vals = [r[key] for r in records if r.get("method") == m and key in r]
                if vals:
                    ax.bar(
                        k + 0.25 * i,
                        100 * sum(vals) / len(vals),
                        width=0.25,
                        color=f"C{i}",
                        label=m if k == 0 else None,
                    )
        ax.set_xticks([0.25, 1.25, 2.25], ["BWT", "AP", "FWT"])
        ax.set_ylabel("points")
        ax.axhline(0, color="k", lw=0.5)
        ax.legend(fontsize=7)
        figs["continual"] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="sapo-prompts",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quick: 117k-parameter TinyLM over a word vocabulary, pretrained briefly on T1-T3, 12 bank "
            "candidates for T4, 40 steps each, 3 seeds; full: SmolLM2-135M (Q4_1 dequantised) + LoRA for "
            "Qwen3-8B, generated tasks for SuperNI/TRACE, a fixed paraphrase bank for the LLM paraphraser, "
            "12 LoRA steps per task"
        ),
    )
)
