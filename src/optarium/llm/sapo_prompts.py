r"""SAPO: state-adaptive choice of the *training* instruction in continual instruction tuning.

Paper: W. Shi, Y. Chen, S. Bian, Z. Zhao, J. Dong, P. Hu, W. Lu, X. Du, "Training Prompt Matters:
State-Adaptive Optimization for Robust Fine-Tuning", arXiv:2606.01967 (ICML 2026). The algorithm and settings
follow the official code (github.com/Eric8932/SAPO: ``src/run_prompt.py``, ``src/prompt_gen/prompt_gen.py``,
``scripts/*_SAPO/*.sh``; read only, nothing copied) as summarised in ``shared/papers/sapo-prompts.md``.

**Setting.** A causal LM is fine-tuned on tasks T_1..T_n in sequence. A task has an original instruction I_k
and a fixed output suffix; an example's prompt is ``I + "\n\nText:\n" + x + "\n" + suffix``
(:func:`optarium.problems.instruction_tasks.format_prompt`) and the loss is the token cross-entropy of the
answer tokens only (prompt and padding masked with -100).

**SAPO step before task k.** (1) Candidates: {I_k} plus P paraphrases that keep every label word
character-exact (:func:`validate_paraphrases`; duplicates removed). (2) State-adaptive scoring: with the
*current* model theta_{k-1}, the mean token-level training loss of task k's first ``max_examples`` examples
under every candidate, no gradient step (:func:`prompt_losses`):

.. math:: \mathcal L_k(c) = \frac{1}{\sum_i |y_i|} \sum_i \sum_{t \in y_i} -\log p_{\theta_{k-1}}(y_{i,t}
          \mid \text{prompt}(c, x_i), y_{i,<t}).

(3) Selection :math:`c^*_k = \arg\min_c \mathcal L_k(c)`, the original instruction winning ties
(:func:`select_training_prompt`). (4) Train task k with :math:`c^*_k`. (5) Task k is evaluated with
:math:`c^*_k` from then on; tasks not yet trained with their original instruction
(:func:`continual_finetune`). The choice is recomputed per task against the model state at that moment
(:class:`StateAdaptivePromptOptimizer` never caches scores across states unless ``cache_scores=True``).

**Base learners** (:func:`continual_finetune`): ``"lorainc"`` -- one peft LoRA adapter trained through the
whole sequence; ``"olora"`` -- O-LoRA (Wang et al. 2023): a fresh adapter per task, earlier adapters merged
into the (copied) weights and frozen, and the orthogonality penalty
:math:`\lambda_1 \sum_{\text{modules}} \sum_{\text{old}} \| A_{\text{old}} A_{\text{new}}^\top \|` with
:math:`\lambda_1 = 0.5` (:func:`olora_penalty`; ``norm="l1"`` is the elementwise absolute sum of the O-LoRA
code, ``norm="fro2"`` the squared Frobenius norm the spec writes; both vanish exactly for orthogonal row
spaces), :math:`\lambda_2 = 0`; ``"full"`` -- plain fine-tuning of all weights (for tiny models). Optimiser:
AdamW, cosine schedule with 5 % linear warm-up (code), gradient-norm clip 1.

**Metrics** (code ``run_evaluation.py``, stage-averaged, :func:`continual_metrics`): with R[i, j] the score on
task j after tasks 1..i and R[0, j] the initial model's,
AP = mean_j R[n, j]; BWT = 1/(n-1) sum_{i=2..n} 1/(i-1) sum_{j<i} (R[i, j] - R[j, j]);
FWT = 1/(n-1) sum_{i=1..n-1} 1/(n-i) sum_{j>i} (R[i, j] - R[0, j]).

**Deviations / reconstructed.** The paraphrasing LLM (20 samples at temperature 0.6 through an API) is
replaced by a pluggable ``paraphraser(instruction, n)``; the default :class:`TemplateParaphraser` reads a
fixed hand-written bank. Scores are exact match of a short greedy answer (the code uses ROUGE-L for every
task; on one-word answers exact match is the natural equivalent), or the negative per-item answer NLL
(``metric="neg_loss"``). The loss is pooled over all answer tokens of the scored examples (the code's batch
averaging was not checked). Budgets (steps, examples, model size) are the caller's; the code's are 10 epochs,
LR 1e-4, effective batch 64, <= 1000 training and 250 scoring instances per task.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from optarium._core.result import Result, Trace
from optarium._core.validation import check_int
from optarium.problems.instruction_tasks import SUFFIX, format_answer, format_prompt

__all__ = [
    "CLMetrics",
    "PromptSelection",
    "StateAdaptivePromptOptimizer",
    "TemplateParaphraser",
    "continual_finetune",
    "continual_metrics",
    "evaluate_task",
    "olora_penalty",
    "paired_bootstrap_cl",
    "param_checksum",
    "permutation_test_mean_spearman",
    "prompt_losses",
    "select_training_prompt",
    "spearman",
    "train_on_task",
    "validate_paraphrases",
]

RULES = ("min_loss", "original", "random")
LEARNERS = ("lorainc", "olora", "full")
METRICS = ("exact_match", "neg_loss")


# ----------------------------------------------------------------------------------------------------------
# Validation helpers
# ----------------------------------------------------------------------------------------------------------


def _check_instruction(name: str, s: Any) -> str:
    if not isinstance(s, str):
        raise ValueError(f"{name} must be a string, got {type(s).__name__}")
    if not s.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return s


def _check_examples(examples: Any) -> list[tuple[str, str]]:
    if examples is None or len(examples) == 0:
        raise ValueError("examples must be a non-empty sequence of (input, answer) pairs")
    out = []
    for e in examples:
        if not (isinstance(e, (tuple, list)) and len(e) == 2 and all(isinstance(v, str) for v in e)):
            raise ValueError(f"examples must hold (input, answer) string pairs, got {e!r}")
        out.append((e[0], e[1]))
    return out


def _check_candidates(candidates: Any) -> list[str]:
    if isinstance(candidates, str) or candidates is None or len(candidates) == 0:
        raise ValueError("candidates must be a non-empty sequence of strings")
    return [_check_instruction("candidates[" + str(i) + "]", c) for i, c in enumerate(candidates)]


# ----------------------------------------------------------------------------------------------------------
# Model plumbing: tokens, batches, logits
# ----------------------------------------------------------------------------------------------------------


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _pad_id(tokenizer: Any) -> int:
    p = getattr(tokenizer, "pad_token_id", None)
    if p is None:
        p = getattr(tokenizer, "eos_token_id", None)
    return int(p) if p is not None else 0


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


def _is_tiny_lm(model: Any) -> bool:
    from optarium.problems.tiny_lm import TinyLM

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return isinstance(base, TinyLM)


def _logits(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Next-token logits [B, T, V] of right-padded ``ids`` (causal: padding never affects real tokens)."""
    if _is_tiny_lm(model):
        return model(ids)
    out = model(input_ids=ids, attention_mask=mask)
    return out.logits if hasattr(out, "logits") else out


def _encode(tokenizer: Any, instruction: str, x: str, y: str, suffix: str) -> tuple[list[int], list[int]]:
    return _ids(tokenizer, format_prompt(instruction, x, suffix)), _ids(tokenizer, format_answer(y))


def _batch(
    seqs: Sequence[tuple[list[int], list[int]]], pad: int, device: torch.device
) -> tuple[torch.Tensor, ...]:
    """Right-padded ``ids`` [B, T], ``labels`` [B, T] (-100 on prompt and padding), attention ``mask``."""
    T = max(len(a) + len(b) for a, b in seqs)
    B = len(seqs)
    ids = torch.full((B, T), pad, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    for r, (a, b) in enumerate(seqs):
        n = len(a) + len(b)
        ids[r, :n] = torch.tensor(a + b)
        labels[r, len(a) : n] = torch.tensor(b)
        mask[r, :n] = 1
    return ids.to(device), labels.to(device), mask.to(device)


def _token_nll(model: Any, ids: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token NLL [B, T-1] of the shifted labels (0 where the label is -100)."""
    logits = _logits(model, ids, mask)[:, :-1]
    tgt = labels[:, 1:]
    nll = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1), ignore_index=-100, reduction="none"
    )
    return nll.reshape(tgt.shape)


class _EvalMode:
    """Context: eval mode and no_grad; the previous train/eval mode is restored on exit."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __enter__(self) -> None:
        self.was_training = bool(self.model.training)
        self.grad = torch.no_grad()
        self.grad.__enter__()
        self.model.eval()

    def __exit__(self, *exc: Any) -> None:
        self.model.train(self.was_training)
        self.grad.__exit__(*exc)


def param_checksum(model: Any) -> float:
    """A float64 checksum of all parameters (sum of sum and weighted sum; changes with any update)."""
    with torch.no_grad():
        tot = 0.0
        for i, p in enumerate(model.parameters()):
            d = p.detach().double()
            tot += float(d.sum()) + (i + 1) * 1e-3 * float((d * d).sum())
        return tot


# ----------------------------------------------------------------------------------------------------------
# Scoring and selection
# ----------------------------------------------------------------------------------------------------------


def prompt_losses(
    model: Any,
    tokenizer: Any,
    examples: Sequence[tuple[str, str]],
    candidates: Sequence[str],
    *,
    batch_size: int = 8,
    max_examples: int = 250,
    suffix: str = SUFFIX,
) -> torch.Tensor:
    """Pre-update training loss of every candidate instruction: float64 tensor [len(candidates)].

    The mean token cross-entropy of the answer tokens of the first ``max_examples`` examples, pooled over
    all their answer tokens, with each candidate as the instruction. Side-effect free: runs in eval mode
    (dropout off) under ``torch.no_grad`` and restores the model's previous train/eval mode.
    """
    ex = _check_examples(examples)[: check_int("max_examples", max_examples, minimum=1)]
    cands = _check_candidates(candidates)
    check_int("batch_size", batch_size, minimum=1)
    pad, dev = _pad_id(tokenizer), _device(model)
    seqs = [_encode(tokenizer, c, x, y, suffix) for c in cands for x, y in ex]
    owner = torch.arange(len(cands)).repeat_interleave(len(ex))
    sums = torch.zeros(len(cands), dtype=torch.float64)
    counts = torch.zeros(len(cands), dtype=torch.float64)
    with _EvalMode(model):
        for s in range(0, len(seqs), batch_size):
            ids, labels, mask = _batch(seqs[s : s + batch_size], pad, dev)
            nll = _token_nll(model, ids, labels, mask).double().sum(1).cpu()
            n = (labels[:, 1:] != -100).sum(1).double().cpu()
            o = owner[s : s + batch_size]
            sums.index_add_(0, o, nll)
            counts.index_add_(0, o, n)
    return sums / counts.clamp_min(1.0)


@dataclass(frozen=True)
class PromptSelection:
    """The chosen training instruction: ``best`` (= ``candidates[index]``), every candidate's loss."""

    best: str
    index: int
    losses: list[float]
    original_loss: float
    candidates: list[str] = field(default_factory=list)


def _argmin_original_first(losses: Sequence[float]) -> int:
    best = 0
    for i, v in enumerate(losses):
        if v < losses[best]:  # strict: the original (index 0) and earlier candidates win ties
            best = i
    return best


def select_training_prompt(
    model: Any,
    tokenizer: Any,
    examples: Sequence[tuple[str, str]],
    original: str,
    candidates: Sequence[str] = (),
    *,
    batch_size: int = 8,
    max_examples: int = 250,
    suffix: str = SUFFIX,
) -> PromptSelection:
    """``argmin`` of :func:`prompt_losses` over ``[original, *candidates]``; the original wins ties.

    ``candidates`` are the paraphrases (the original is prepended; a candidate equal to it is dropped). With
    no paraphrases the original is returned (its loss is still computed).
    """
    _check_instruction("original", original)
    if isinstance(candidates, str):
        raise ValueError("candidates must be a sequence of strings, not a string")
    paras = [_check_instruction(f"candidates[{i}]", c) for i, c in enumerate(candidates)]
    cands = [original, *[c for c in dict.fromkeys(paras) if c != original]]
    losses = prompt_losses(
        model, tokenizer, examples, cands, batch_size=batch_size, max_examples=max_examples, suffix=suffix
    ).tolist()
    i = _argmin_original_first(losses)
    return PromptSelection(cands[i], i, losses, losses[0], cands)


# ----------------------------------------------------------------------------------------------------------
# Paraphrases
# ----------------------------------------------------------------------------------------------------------


def validate_paraphrases(original: str, candidates: Sequence[Any], labels: Sequence[str] = ()) -> list[str]:
    """The candidates that keep every label word character-exact, deduplicated, the original removed.

    A label that the original instruction names (as a whole word) must appear in the candidate as the same
    whole word, and every case-insensitive whole-word occurrence of it must be exact ("positive",
    "POSITIVE" or a dropped label reject the candidate). Whitespace-normalised duplicates are dropped
    (first kept). A non-string candidate raises ``ValueError``.
    """
    _check_instruction("original", original)
    norm = " ".join(original.split())
    seen = {norm}
    named = [lab for lab in labels if re.search(rf"\b{re.escape(lab)}\b", original)]
    out = []
    for i, c in enumerate(candidates):
        if not isinstance(c, str):
            raise ValueError(f"candidates[{i}] must be a string, got {type(c).__name__}")
        if not c.strip():
            continue
        ok = True
        for lab in named:
            hits = re.findall(rf"\b{re.escape(lab)}\b", c, flags=re.IGNORECASE)
            if not hits or any(h != lab for h in hits):
                ok = False
                break
        key = " ".join(c.split())
        if ok and key not in seen:
            seen.add(key)
            out.append(c)
    return out


class TemplateParaphraser:
    """Deterministic paraphraser reading a fixed bank: ``paraphraser(instruction, n) -> list[str]``.

    ``bank`` maps an original instruction to its rewrites (or is one list used for every instruction). Returns
    the first ``n`` rewrites (all of them when the bank has fewer); an instruction without a bank entry gets
    none. Stands in for the paper's LLM paraphraser (20 samples at temperature 0.6).
    """

    def __init__(self, bank: Mapping[str, Sequence[str]] | Sequence[str]) -> None:
        if isinstance(bank, str):
            raise ValueError("bank must be a mapping or a sequence of strings, not a string")
        if isinstance(bank, Mapping):
            self.bank = {k: list(v) for k, v in bank.items()}
            self.default: list[str] = []
        else:
            self.bank, self.default = {}, list(bank)
        for vs in [*self.bank.values(), self.default]:
            for v in vs:
                if not isinstance(v, str):
                    raise ValueError(f"bank entries must be strings, got {type(v).__name__}")

    def __call__(self, instruction: str, n: int) -> list[str]:
        """The first ``n`` rewrites of ``instruction``."""
        _check_instruction("instruction", instruction)
        check_int("n", n, minimum=0)
        return list(self.bank.get(instruction, self.default))[:n]


class StateAdaptivePromptOptimizer:
    """SAPO's per-task prompt choice against the current model state.

    ``select(model, tokenizer, examples, original, labels)`` builds the candidates (the original plus up to
    ``n_candidates`` validated paraphrases from ``paraphraser``), scores them with :func:`prompt_losses` on
    the model *as it is now* and applies ``rule``: ``"min_loss"`` (SAPO), ``"original"`` (fixed prompt) or
    ``"random"`` (a uniformly drawn candidate, seeded by ``seed``; the random-paraphrase control). Scores are
    recomputed at every call unless ``cache_scores=True`` (then keyed by original and candidates only, i.e.
    *not* state-adaptive). ``score_all=False`` skips scoring for the rules that do not need it.
    """

    def __init__(
        self,
        paraphraser: Callable[[str, int], Sequence[str]] | None = None,
        *,
        n_candidates: int = 20,
        max_examples: int = 250,
        rule: str = "min_loss",
        batch_size: int = 8,
        seed: int = 0,
        cache_scores: bool = False,
        score_all: bool = True,
    ) -> None:
        check_int("n_candidates", n_candidates, minimum=0)
        check_int("max_examples", max_examples, minimum=1)
        check_int("batch_size", batch_size, minimum=1)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.paraphraser = paraphraser
        self.n_candidates, self.max_examples, self.rule = n_candidates, max_examples, rule
        self.batch_size, self.cache_scores, self.score_all = batch_size, cache_scores, score_all
        self.generator = torch.Generator().manual_seed(int(seed))
        self._cache: dict[tuple[str, ...], list[float]] = {}
        self.n_scorings = 0

    def candidates(self, original: str, labels: Sequence[str] = ()) -> list[str]:
        """``[original, *validated paraphrases]`` (at most ``n_candidates`` paraphrases)."""
        _check_instruction("original", original)
        if self.paraphraser is None or self.n_candidates == 0:
            return [original]
        raw = list(self.paraphraser(original, self.n_candidates))
        return [original, *validate_paraphrases(original, raw, labels)[: self.n_candidates]]

    def select(
        self,
        model: Any,
        tokenizer: Any,
        examples: Sequence[tuple[str, str]],
        original: str,
        labels: Sequence[str] = (),
        *,
        suffix: str = SUFFIX,
    ) -> PromptSelection:
        """The training instruction for the next task (see the class docstring)."""
        ex = _check_examples(examples)
        cands = self.candidates(original, labels)
        need = self.rule == "min_loss" or self.score_all
        losses: list[float] = [math.nan] * len(cands)
        if need:
            key = tuple(cands)
            if self.cache_scores and key in self._cache:
                losses = list(self._cache[key])
            else:
                losses = prompt_losses(
                    model,
                    tokenizer,
                    ex,
                    cands,
                    batch_size=self.batch_size,
                    max_examples=self.max_examples,
                    suffix=suffix,
                ).tolist()
                self.n_scorings += 1
                if self.cache_scores:
                    self._cache[key] = list(losses)
        if self.rule == "min_loss":
            i = _argmin_original_first(losses)
        elif self.rule == "original":
            i = 0
        else:
            i = int(torch.randint(len(cands), (1,), generator=self.generator))
        return PromptSelection(cands[i], i, losses, losses[0], cands)


# ----------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------


def olora_penalty(
    new_a: Mapping[str, torch.Tensor], old_a: Mapping[str, Sequence[torch.Tensor]], *, norm: str = "l1"
) -> torch.Tensor:
    """O-LoRA orthogonality penalty ``sum_modules sum_old ||A_old A_new^T||`` (LoRA A is [r, in]).

    ``norm="l1"``: elementwise absolute sum (the O-LoRA code); ``"fro2"``: squared Frobenius norm. Zero iff
    every new A's row space is orthogonal to every old one of the same module.
    """
    if norm not in ("l1", "fro2"):
        raise ValueError(f"norm must be 'l1' or 'fro2', got {norm!r}")
    total: torch.Tensor | None = None
    for name, a in new_a.items():
        for old in old_a.get(name, ()):
            m = old.to(a) @ a.T
            v = m.abs().sum() if norm == "l1" else (m * m).sum()
            total = v if total is None else total + v
    if total is None:
        ref = next(iter(new_a.values()), None)
        return torch.zeros((), dtype=ref.dtype if ref is not None else torch.float32)
    return total


def _lora_a(pm: Any, adapter: str) -> dict[str, torch.Tensor]:
    out = {}
    for name, mod in pm.named_modules():
        la = getattr(mod, "lora_A", None)
        if la is not None and hasattr(la, "keys") and adapter in la:
            out[name] = la[adapter].weight
    return out


def train_on_task(
    model: Any,
    tokenizer: Any,
    examples: Sequence[tuple[str, str]],
    instruction: str | Sequence[str],
    *,
    params: Sequence[torch.Tensor] | None = None,
    steps: int = 15,
    lr: float = 1e-4,
    batch_size: int = 8,
    warmup: float = 0.05,
    grad_clip: float = 1.0,
    generator: torch.Generator | None = None,
    penalty: Callable[[], torch.Tensor] | None = None,
    suffix: str = SUFFIX,
) -> list[float]:
    """``steps`` AdamW steps (cosine, linear warm-up) on the answer-token loss with ``instruction``.

    ``instruction`` is one string or one per example (a mixture of phrasings). Batches are consecutive
    slices of seeded permutations of ``examples``. ``params`` default to the model's
    trainable parameters; ``penalty()`` is added to the loss. Returns the per-step loss (without penalty).
    The model is left in the train/eval mode it had.
    """
    ex = _check_examples(examples)
    instrs = [instruction] * len(ex) if isinstance(instruction, str) else list(instruction)
    if len(instrs) != len(ex):
        raise ValueError("instruction must be a string or one string per example")
    for i, s in enumerate(instrs):
        _check_instruction(f"instruction[{i}]", s)
    check_int("steps", steps, minimum=0)
    check_int("batch_size", batch_size, minimum=1)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    ps = [p for p in (params if params is not None else model.parameters()) if p.requires_grad]
    if not ps and steps:
        raise ValueError("params: nothing to train (no parameter requires grad)")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    pad, dev = _pad_id(tokenizer), _device(model)
    enc = [_encode(tokenizer, c, x, y, suffix) for c, (x, y) in zip(instrs, ex, strict=True)]
    n_warm = math.ceil(warmup * steps)

    def sched(s: int) -> float:
        if s < n_warm:
            return (s + 1) / (n_warm + 1)
        return 0.5 * (1 + math.cos(math.pi * (s - n_warm) / max(steps - n_warm, 1)))

    opt = torch.optim.AdamW(ps, lr=lr, weight_decay=0.0)
    lrs = torch.optim.lr_scheduler.LambdaLR(opt, sched)
    was = bool(model.training)
    model.train()
    order: list[int] = []
    losses = []
    try:
        for _ in range(steps):
            while len(order) < batch_size:
                order += torch.randperm(len(enc), generator=gen).tolist()
            idx, order = order[:batch_size], order[batch_size:]
            ids, labels, mask = _batch([enc[i] for i in idx], pad, dev)
            nll = _token_nll(model, ids, labels, mask)
            loss = nll.sum() / (labels[:, 1:] != -100).sum().clamp_min(1)
            total = loss + penalty() if penalty is not None else loss
            opt.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(ps, grad_clip)
            opt.step()
            lrs.step()
            losses.append(float(loss.detach()))
    finally:
        model.train(was)
    return losses


# ----------------------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------------------


def _greedy(model: Any, tokenizer: Any, prompts: list[list[int]], max_new: int, batch_size: int) -> list[str]:
    """Greedy continuations: the first non-empty line of the decoded text, stripped."""
    dev = _device(model)
    pad = _pad_id(tokenizer)
    eos = getattr(tokenizer, "eos_token_id", None)
    outs: list[list[int]] = [[] for _ in prompts]
    tiny = _is_tiny_lm(model)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for s in range(0, len(order), batch_size):
        rows = order[s : s + batch_size]
        if tiny:  # no attention mask: decode groups of equal prompt length (no padding)
            groups: dict[int, list[int]] = {}
            for r in rows:
                groups.setdefault(len(prompts[r]), []).append(r)
            for g in groups.values():
                x = torch.tensor([prompts[r] for r in g], device=dev)
                for _ in range(max_new):
                    nxt = model(x[:, -model.config.context :])[:, -1].argmax(-1, keepdim=True)
                    x = torch.cat([x, nxt], 1)
                for k, r in enumerate(g):
                    outs[r] = x[k, len(prompts[r]) :].tolist()
        else:  # left padding + HF generate (KV cache across decoding steps)
            T = max(len(prompts[r]) for r in rows)
            ids = torch.full((len(rows), T), pad, dtype=torch.long)
            mask = torch.zeros(len(rows), T, dtype=torch.long)
            for k, r in enumerate(rows):
                ids[k, T - len(prompts[r]) :] = torch.tensor(prompts[r])
                mask[k, T - len(prompts[r]) :] = 1
            gen = model.generate(
                input_ids=ids.to(dev),
                attention_mask=mask.to(dev),
                max_new_tokens=max_new,
                do_sample=False,
                pad_token_id=pad,
                eos_token_id=eos,
            )
            for k, r in enumerate(rows):
                outs[r] = gen[k, T:].tolist()
    return [_answer_text(tokenizer, o) for o in outs]


def _answer_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """The answer in generated ``ids``: up to EOS, decoded, its first non-empty line, stripped."""
    ids = list(ids)
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None and eos in ids:
        ids = ids[: ids.index(eos)]
    lines = [ln.strip() for ln in tokenizer.decode(ids).split("\n")]
    return next((ln for ln in lines if ln), "")


def evaluate_task(
    model: Any,
    tokenizer: Any,
    items: Sequence[tuple[str, str]],
    instruction: str,
    *,
    metric: str = "exact_match",
    max_new_tokens: int = 4,
    batch_size: int = 32,
    suffix: str = SUFFIX,
) -> torch.Tensor:
    """Per-item score (float64 [len(items)]) of ``model`` on ``items`` with ``instruction``.

    ``"exact_match"``: 1 if the greedy answer (<= ``max_new_tokens`` tokens, its first non-empty line)
    equals the reference; ``"neg_loss"``: minus the item's mean answer-token NLL. Eval mode, no_grad,
    previous mode restored.
    """
    its = _check_examples(items)
    _check_instruction("instruction", instruction)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    with _EvalMode(model):
        if metric == "neg_loss":
            pad, dev = _pad_id(tokenizer), _device(model)
            out = []
            for s in range(0, len(its), batch_size):
                seqs = [_encode(tokenizer, instruction, x, y, suffix) for x, y in its[s : s + batch_size]]
                ids, labels, mask = _batch(seqs, pad, dev)
                nll = _token_nll(model, ids, labels, mask).double()
                n = (labels[:, 1:] != -100).sum(1).double()
                out.append(-(nll.sum(1) / n.clamp_min(1)).cpu())
            return torch.cat(out)
        prompts = [_ids(tokenizer, format_prompt(instruction, x, suffix)) for x, _ in its]
        preds = _greedy(model, tokenizer, prompts, max_new_tokens, batch_size)
    return torch.tensor(
        [float(p == y.strip()) for p, (_, y) in zip(preds, its, strict=True)], dtype=torch.float64
    )


# ----------------------------------------------------------------------------------------------------------
# Continual metrics and the bootstrap
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CLMetrics:
    """AP, BWT, FWT of an (n+1) x n matrix R; ``status`` is ``"ok"`` or ``"n=1: BWT and FWT undefined"``."""

    ap: float
    bwt: float
    fwt: float
    status: str = "ok"


def continual_metrics(R: torch.Tensor | Sequence[Sequence[float]]) -> CLMetrics:
    """Stage-averaged AP / BWT / FWT (module docstring) of ``R`` [(n+1), n], row 0 the initial model.

    With n = 1 BWT and FWT have no terms: they are NaN and ``status`` says so (no exception).
    """
    R = torch.as_tensor(R, dtype=torch.float64)
    if R.dim() != 2 or R.shape[1] < 1 or R.shape[0] != R.shape[1] + 1:
        raise ValueError(f"R must have shape (n+1, n) with n >= 1, got {tuple(R.shape)}")
    ap, bwt, fwt = _metrics_batched(R[None])[0].tolist()
    return CLMetrics(ap, bwt, fwt, "n=1: BWT and FWT undefined" if R.shape[1] == 1 else "ok")


def _metrics_batched(R: torch.Tensor) -> torch.Tensor:
    """AP, BWT, FWT of a batch of R matrices [B, n+1, n] -> [B, 3] (same formulas, vectorised)."""
    n = R.shape[2]
    ap = R[:, n].mean(1)
    if n == 1:
        nan = torch.full_like(ap, math.nan)
        return torch.stack([ap, nan, nan], 1)
    diag = R[:, 1:].diagonal(dim1=1, dim2=2)  # R[j, j] for j = 1..n  -> [B, n]
    bwt = torch.zeros_like(ap)
    fwt = torch.zeros_like(ap)
    for i in range(2, n + 1):
        bwt += (R[:, i, : i - 1] - diag[:, : i - 1]).mean(1)
    for i in range(1, n):
        fwt += (R[:, i, i:] - R[:, 0, i:]).mean(1)
    return torch.stack([ap, bwt / (n - 1), fwt / (n - 1)], 1)


def paired_bootstrap_cl(
    per_item_scores: Mapping[str, Mapping[int, Sequence[torch.Tensor]]],
    pairs: Sequence[tuple[str, str]] | None = None,
    *,
    n_trained: int | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, dict[str, float]]:
    """Paired bootstrap of ΔAP / ΔBWT / ΔFWT between conditions, seeds pooled within each replicate.

    ``per_item_scores[condition][seed]`` is a list over task columns of tensors [n+1, m_j] (per-item scores
    at every stage; the first ``n_trained`` columns -- default all -- are the trained tasks, later ones
    held-out tasks whose final-minus-initial change is reported as ``heldout``). Item j of a column is the
    same test item in every condition and seed. Each replicate resamples the item indices of every column
    once and recomputes every condition's R; for a pair (a, b) the delta is averaged over the seeds both
    conditions have. Returns ``{"a-b": {"ap", "ap_lo", "ap_hi", "bwt", ..., "heldout_hi", "n_seeds"}}`` with
    point estimates on the full sample and percentile intervals. ``pairs`` default: every condition
    against the first.
    """
    conds = list(per_item_scores)
    if len(conds) < 2:
        raise ValueError("per_item_scores needs at least two conditions")
    if pairs is None:
        pairs = [(c, conds[0]) for c in conds[1:]]
    check_int("n_boot", n_boot, minimum=1)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    any_cols = next(iter(next(iter(per_item_scores.values())).values()))
    sizes = [int(t.shape[-1]) for t in any_cols]
    n_cols = len(sizes)
    n = n_cols if n_trained is None else int(n_trained)
    if not 1 <= n <= n_cols:
        raise ValueError(f"n_trained must lie in 1..{n_cols}, got {n_trained!r}")
    for c in conds:
        for s, cols in per_item_scores[c].items():
            if [int(t.shape[-1]) for t in cols] != sizes or any(t.shape[0] != n + 1 for t in cols):
                raise ValueError(f"per_item_scores[{c!r}][{s!r}]: columns must match in shape [n+1, m_j]")
    g = torch.Generator().manual_seed(int(seed))
    idx = [torch.randint(m, (n_boot, m), generator=g) for m in sizes]

    def stats(cols: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Bootstrap [B, 4] and point [4] of (AP, BWT, FWT, held-out change)."""
        cols = [torch.as_tensor(t, dtype=torch.float64) for t in cols]
        Rb = torch.stack([cols[j][:, idx[j]].mean(-1).T for j in range(n_cols)], -1)  # [B, n+1, cols]
        R0 = torch.stack([cols[j].mean(-1) for j in range(n_cols)], -1)[None]
        out = []
        for R in (Rb, R0):
            m = _metrics_batched(R[:, :, :n])
            ho = (R[:, n, n:] - R[:, 0, n:]).mean(1) if n_cols > n else torch.full_like(m[:, 0], math.nan)
            out.append(torch.cat([m, ho[:, None]], 1))
        return out[0], out[1][0]

    cache = {(c, s): stats(cols) for c in conds for s, cols in per_item_scores[c].items()}
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    res: dict[str, dict[str, float]] = {}
    for a, b in pairs:
        seeds = sorted(set(per_item_scores[a]) & set(per_item_scores[b]))
        if not seeds:
            raise ValueError(f"conditions {a!r} and {b!r} share no seed")
        db = torch.stack([cache[(a, s)][0] - cache[(b, s)][0] for s in seeds]).mean(0)
        dp = torch.stack([cache[(a, s)][1] - cache[(b, s)][1] for s in seeds]).mean(0)
        d: dict[str, float] = {"n_seeds": float(len(seeds))}
        for k, name in enumerate(("ap", "bwt", "fwt", "heldout")):
            col = db[:, k]
            d[name] = float(dp[k])
            if torch.isnan(col).all():
                d[name + "_lo"] = d[name + "_hi"] = math.nan
            else:
                d[name + "_lo"] = float(torch.quantile(col, lo_q))
                d[name + "_hi"] = float(torch.quantile(col, hi_q))
        res[f"{a}-{b}"] = d
    return res


# ----------------------------------------------------------------------------------------------------------
# Rank correlation and the within-seed permutation test (the mechanism check)
# ----------------------------------------------------------------------------------------------------------


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks along the last dimension (ties share their mean rank)."""
    x = x.double()
    less = (x[..., None, :] < x[..., :, None]).sum(-1).double()
    eq = (x[..., None, :] == x[..., :, None]).sum(-1).double()
    return less + (eq + 1) / 2


def spearman(x: torch.Tensor | Sequence[float], y: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """Spearman's rho along the last dimension (Pearson correlation of average ranks)."""
    x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    if x.shape != y.shape or x.shape[-1] < 2:
        raise ValueError("x and y must have the same shape with at least 2 entries")
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(-1, keepdim=True), ry - ry.mean(-1, keepdim=True)
    return (rx * ry).sum(-1) / (rx.norm(dim=-1) * ry.norm(dim=-1)).clamp_min(1e-300)


def permutation_test_mean_spearman(
    x: Sequence[Sequence[float]], y: Sequence[Sequence[float]], *, n_perm: int = 10000, seed: int = 0
) -> dict[str, float]:
    """Mean over seeds (rows) of Spearman rho(x_s, y_s) and its one-sided permutation p-values.

    The null permutes y within each row independently. ``p_greater = (1 + #{perm >= obs}) / (1 + n_perm)``,
    ``p_less`` likewise, ``null_q95`` the null's 95 % point.
    """
    X, Y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    if X.dim() != 2 or X.shape != Y.shape:
        raise ValueError("x and y must be [n_seeds, n_candidates] of the same shape")
    check_int("n_perm", n_perm, minimum=1)
    obs = float(spearman(X, Y).mean())
    g = torch.Generator().manual_seed(int(seed))
    perm = torch.rand(n_perm, *Y.shape, generator=g).argsort(-1)
    Yp = Y[None].expand(n_perm, -1, -1).gather(-1, perm)
    null = spearman(X[None].expand_as(Yp), Yp).mean(-1)
    return {
        "rho": obs,
        "p_greater": float((1 + (null >= obs - 1e-12).sum()) / (1 + n_perm)),
        "p_less": float((1 + (null <= obs + 1e-12).sum()) / (1 + n_perm)),
        "null_q95": float(torch.quantile(null, 0.95)),
        "n_seeds": float(X.shape[0]),
        "n_candidates": float(X.shape[1]),
    }


# ----------------------------------------------------------------------------------------------------------
# The continual fine-tuning loop
# ----------------------------------------------------------------------------------------------------------


def _selection_dict(sel: PromptSelection) -> dict[str, Any]:
    return {
        "best": sel.best,
        "index": sel.index,
        "losses": list(sel.losses),
        "original_loss": sel.original_loss,
    }


def continual_finetune(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Any],
    prompt_optimizer: StateAdaptivePromptOptimizer | None = None,
    *,
    learner: str = "lorainc",
    heldout_tasks: Sequence[Any] = (),
    lora_r: int = 8,
    lora_alpha: float | None = None,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
    olora_lambda: float = 0.5,
    olora_norm: str = "l1",
    steps_per_task: int = 15,
    lr: float = 1e-4,
    batch_size: int = 8,
    seed: int = 0,
    metric: str = "exact_match",
    eval_batch_size: int = 32,
    initial_scores: Sequence[torch.Tensor] | None = None,
    copy_model: bool = True,
) -> Result:
    """Fine-tune on ``tasks`` in order (optionally choosing each task's instruction with SAPO).

    ``tasks`` / ``heldout_tasks`` are :class:`~optarium.problems.instruction_tasks.InstructionTask`-like
    (``name``, ``instruction``, ``labels``, ``train``, ``test``, ``max_new_tokens``, ``suffix``). Before task
    k, ``prompt_optimizer.select`` is called on the current (adapted) model; ``None`` keeps the original
    instruction. After every stage all tasks are evaluated (trained ones with their chosen instruction,
    later and held-out ones with the original). ``initial_scores`` (per-column per-item scores of the
    initial model with the original instructions, as returned in ``extras["per_item"]`` row 0) skips the
    row-0 evaluation. ``copy_model`` (default) trains a deep copy, leaving ``model`` untouched.

    Returns a :class:`~optarium._core.result.Result`: ``x`` = R [n+1, n + n_heldout] (float64), ``value`` =
    AP, status ``max_iter`` (a fixed step budget, no tolerance), ``history`` = training loss per step;
    ``extras``: ``R``, ``per_item`` (list over columns of [n+1, m] tensors), ``chosen_prompts``,
    ``selections``, ``ap``, ``bwt``, ``fwt``, ``metric_status``, ``heldout_change`` (final minus initial
    score of the held-out columns, mean), ``task_names``,
    ``seconds_training``, ``seconds_scoring``, ``seconds_eval``.
    """
    if learner not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}, got {learner!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    tasks, held = list(tasks), list(heldout_tasks)
    if not tasks:
        raise ValueError("tasks must be a non-empty sequence")
    for t in [*tasks, *held]:
        _check_instruction(f"task {getattr(t, 'name', '?')!r} instruction", t.instruction)
        if not t.train or not t.test:
            raise ValueError(f"task {getattr(t, 'name', '?')!r}: train and test must be non-empty")
    check_int("steps_per_task", steps_per_task, minimum=0)
    check_int("lora_r", lora_r, minimum=1)
    if olora_lambda < 0:
        raise ValueError(f"olora_lambda must be >= 0, got {olora_lambda!r}")
    t_start = time.perf_counter()
    m = copy.deepcopy(model) if copy_model else model
    if learner != "full":
        for p in m.parameters():
            p.requires_grad_(False)
    torch.manual_seed(int(seed))  # LoRA A initialisation draws from the global RNG
    gen = torch.Generator().manual_seed(int(seed))
    n, cols = len(tasks), [*tasks, *held]
    timing = {"train": 0.0, "score": 0.0, "eval": 0.0}

    def evaluate(cur: Any, instr: Sequence[str]) -> list[torch.Tensor]:
        t0 = time.perf_counter()
        out = [
            evaluate_task(
                cur,
                tokenizer,
                t.test,
                instr[j],
                metric=metric,
                max_new_tokens=int(getattr(t, "max_new_tokens", 4)),
                batch_size=eval_batch_size,
                suffix=getattr(t, "suffix", SUFFIX),
            )
            for j, t in enumerate(cols)
        ]
        timing["eval"] += time.perf_counter() - t0
        return out

    originals = [t.instruction for t in cols]
    rows: list[list[torch.Tensor]] = []
    if initial_scores is not None:
        rows.append([torch.as_tensor(s, dtype=torch.float64) for s in initial_scores])
        if len(rows[0]) != len(cols):
            raise ValueError(f"initial_scores must hold {len(cols)} columns, got {len(rows[0])}")
    else:
        rows.append(evaluate(m, originals))
    alpha = float(lora_alpha) if lora_alpha is not None else float(2 * lora_r)
    cur: Any = m
    pm: Any = None
    old_a: dict[str, list[torch.Tensor]] = {}
    chosen = list(originals)
    selections: list[dict[str, Any]] = []
    all_losses: list[float] = []
    for k, task in enumerate(tasks):
        if prompt_optimizer is not None:
            t0 = time.perf_counter()
            sel = prompt_optimizer.select(
                cur,
                tokenizer,
                task.train,
                task.instruction,
                getattr(task, "labels", ()),
                suffix=getattr(task, "suffix", SUFFIX),
            )
            timing["score"] += time.perf_counter() - t0
            chosen[k] = sel.best
            selections.append(_selection_dict(sel))
        t0 = time.perf_counter()
        penalty = None
        if learner == "full":
            params = [p for p in cur.parameters() if p.requires_grad]
        else:
            from peft import LoraConfig, get_peft_model

            adapter = "default" if learner == "lorainc" else f"task{k}"
            if pm is None or learner == "olora":
                cfg = LoraConfig(
                    r=lora_r, lora_alpha=alpha, target_modules=list(target_modules), lora_dropout=0.0
                )
                pm = get_peft_model(m, cfg, adapter_name=adapter)
                cur = pm
            params = [p for p in pm.parameters() if p.requires_grad]
            if learner == "olora" and old_a:
                new_a = _lora_a(pm, adapter)
                frozen = {name: list(v) for name, v in old_a.items()}

                def penalty(new_a: dict = new_a, frozen: dict = frozen) -> torch.Tensor:
                    return olora_lambda * olora_penalty(new_a, frozen, norm=olora_norm)

        losses = train_on_task(
            cur,
            tokenizer,
            task.train,
            chosen[k],
            params=params,
            steps=steps_per_task,
            lr=lr,
            batch_size=batch_size,
            generator=gen,
            penalty=penalty,
            suffix=getattr(task, "suffix", SUFFIX),
        )
        all_losses += losses
        if learner == "olora":
            for name, a in _lora_a(pm, adapter).items():
                old_a.setdefault(name, []).append(a.detach().clone())
            m = pm.merge_and_unload()  # earlier adapters live on in the (copied) weights, frozen
            for p in m.parameters():
                p.requires_grad_(False)
            pm, cur = None, m
        timing["train"] += time.perf_counter() - t0
        instr = [chosen[j] if j <= k else originals[j] for j in range(len(cols))]
        rows.append(evaluate(cur, instr))
    per_item = [torch.stack([rows[i][j] for i in range(n + 1)]) for j in range(len(cols))]
    R = torch.stack([p.mean(-1) for p in per_item], -1)
    cm = continual_metrics(R[:, :n])
    held_change = float((R[n, n:] - R[0, n:]).mean()) if held else math.nan
    return Result(
        x=R,
        value=cm.ap,
        status="max_iter",  # a fixed step budget per task, no tolerance
        n_iter=len(all_losses),
        wall_time_s=time.perf_counter() - t_start,
        history=Trace(steps=tuple(range(len(all_losses))), metrics={"loss": tuple(all_losses)}),
        extras={
            "R": R,
            "per_item": per_item,
            "chosen_prompts": chosen[:n],
            "selections": selections,
            "ap": cm.ap,
            "bwt": cm.bwt,
            "fwt": cm.fwt,
            "metric_status": cm.status,
            "heldout_change": held_change,
            "task_names": [getattr(t, "name", str(j)) for j, t in enumerate(cols)],
            "seconds_training": timing["train"],
            "seconds_scoring": timing["score"],
            "seconds_eval": timing["eval"],
        },
    )
