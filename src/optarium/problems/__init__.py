"""Shared problems with known structure and data generators, one module per kind.

- :mod:`~optarium.problems.least_squares`, :mod:`~optarium.problems.sparse_regression`,
  :mod:`~optarium.problems.nonconvex_logistic`,
  :mod:`~optarium.problems.weakly_convex` (with :class:`~optarium.problems.weakly_convex.WeaklyConvexOracle`):
  synthetic objectives with known constants or optima;
- :mod:`~optarium.problems.contaminated`: contaminated linear regression with clean high-leverage points and a
  shifted test split (nested DRO);
- :mod:`~optarium.problems.distribution_shift`: spurious-correlation, long-tail (synthetic, digits) and
  covariate-shift splits;
- :mod:`~optarium.problems.drifting`: drifting quadratics with four drift generators (moving optima);
- :mod:`~optarium.problems.heavy_tail`: heavy-tailed gradient noise; :mod:`~optarium.problems.sgd_simulation`:
  batched (clipped, projected) SGD runs on such oracles and the quantiles of their final metric;
- :mod:`~optarium.problems.portfolio`: synthetic factor universes with a known model and the S&P-20 returns;
- :mod:`~optarium.problems.datasets`: small bundled data sets; :mod:`~optarium.problems.text_corpus` and
  :mod:`~optarium.problems.tiny_lm`: the tiny language model and its corpus; :mod:`~optarium.problems.lora`:
  LoRA-style adapters and a sequence classifier on it.

Black-box test functions live with the ``bo`` family (:mod:`optarium.bo.problems`,
:mod:`optarium.bo.mo_problems`).
"""

from optarium.problems.contaminated import ContaminatedRegression, contaminated_regression
from optarium.problems.distribution_shift import (
    ShiftSplit,
    covariate_shift,
    long_tail,
    long_tail_digits,
    spurious_correlation,
)
from optarium.problems.drifting import DRIFTS, DriftingQuadratic, drift_path, drift_statistics
from optarium.problems.lora import LoRALinear, TinyLMClassifier, add_lora
from optarium.problems.portfolio import NOISE_SCALE, sp500_returns, synthetic_universe
from optarium.problems.sgd_simulation import quantile, simulate
from optarium.problems.text_corpus import (
    fixed_batches,
    sample_batch,
    split_corpus,
    stdlib_corpus,
    zipf_markov_corpus,
)
from optarium.problems.tiny_lm import (
    FULL_DENSE,
    FULL_MOE,
    QUICK,
    TinyLM,
    TinyLMConfig,
    build_tiny_lm,
    count_parameters,
)

__all__ = [
    "DRIFTS",
    "FULL_DENSE",
    "FULL_MOE",
    "NOISE_SCALE",
    "QUICK",
    "ContaminatedRegression",
    "DriftingQuadratic",
    "LoRALinear",
    "ShiftSplit",
    "TinyLM",
    "TinyLMClassifier",
    "TinyLMConfig",
    "add_lora",
    "build_tiny_lm",
    "contaminated_regression",
    "count_parameters",
    "covariate_shift",
    "drift_path",
    "drift_statistics",
    "fixed_batches",
    "long_tail",
    "long_tail_digits",
    "quantile",
    "sample_batch",
    "simulate",
    "sp500_returns",
    "split_corpus",
    "spurious_correlation",
    "stdlib_corpus",
    "synthetic_universe",
    "zipf_markov_corpus",
]
