"""Language-model layer: a shared offline loader of a real small LM and methods that adapt frozen LMs.

Heavy imports (``transformers``, ``peft``) happen inside functions; ``import optarium.llm`` stays cheap.
"""

from optarium.llm.context_tuning import ContextState, ContextTuner, mcnemar_exact
from optarium.llm.loader import load_smollm2, smollm2_available, smollm2_path, smollm2_snapshot_path
from optarium.llm.sapo_prompts import (
    CLMetrics,
    PromptSelection,
    StateAdaptivePromptOptimizer,
    TemplateParaphraser,
    continual_finetune,
    continual_metrics,
    paired_bootstrap_cl,
    prompt_losses,
    select_training_prompt,
    validate_paraphrases,
)

__all__ = [
    "CLMetrics",
    "ContextState",
    "ContextTuner",
    "PromptSelection",
    "StateAdaptivePromptOptimizer",
    "TemplateParaphraser",
    "continual_finetune",
    "continual_metrics",
    "load_smollm2",
    "mcnemar_exact",
    "paired_bootstrap_cl",
    "prompt_losses",
    "select_training_prompt",
    "smollm2_available",
    "smollm2_path",
    "smollm2_snapshot_path",
    "validate_paraphrases",
]
