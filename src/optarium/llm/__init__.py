"""Language-model layer: a shared offline loader of a real small LM and methods that adapt frozen LMs.

Heavy imports (``transformers``, ``peft``) happen inside functions; ``import optarium.llm`` stays cheap.
"""

from optarium.llm.context_tuning import ContextState, ContextTuner, mcnemar_exact
from optarium.llm.loader import load_smollm2, smollm2_available, smollm2_path, smollm2_snapshot_path

__all__ = [
    "ContextState",
    "ContextTuner",
    "load_smollm2",
    "mcnemar_exact",
    "smollm2_available",
    "smollm2_path",
    "smollm2_snapshot_path",
]
