"""Black-box and Bayesian optimization: surrogates, acquisitions and ask/tell strategies.

Every strategy is an :class:`optarium._core.asktell.AskTellStrategy` (``ask``/``tell`` in the caller's units,
float64, a ``torch.Generator``, ``state_dict``) and passes :mod:`optarium.testing.asktell`. BoTorch, GPyTorch,
Optuna, pymoo and POT are imported inside the functions that need them, so ``import optarium.bo`` stays cheap.

GP surrogates are built and fitted in one place, :mod:`optarium.bo.gp` (Matérn-5/2 kernel, ``SingleTaskGP``
on standardised float64 targets, capped ML fit, hyperparameter state): POM, tcGP and the GP-TuRBO baseline
use it.
Single-objective test problems (BoTorch's, plus the sphere and Goldstein-Price) are in
:mod:`optarium.bo.problems`, multi-objective ones in :mod:`optarium.bo.mo_problems`.
"""

from optarium.bo.acquisition import non_dominated_mask, non_dominated_ranks, pareto_select, ucb_select
from optarium.bo.boba import (
    UCB1,
    BoBa,
    BootstrapRidge,
    EpsilonGreedy,
    PartitionedLibrary,
    PoolScreening,
    SyntheticLibrary,
    ThompsonGaussian,
    UniformArms,
    stratified_sample,
)
from optarium.bo.botorch_model import as_botorch_model, gaussian_model, strategy_model
from optarium.bo.calibration import (
    CalibratedPredictive,
    brier_score,
    conditional_pit,
    crps_gaussian,
    gennorm_cdf,
    gennorm_expected_improvement,
    gennorm_tail_quantile,
    ks_uniform,
    log_h,
    loo_predictions,
    reliability_curve,
    twcrps,
    twcrps_gaussian,
    twcrps_gennorm,
    twcrps_quadrature,
)
from optarium.bo.enn import ENN, ENNParams, ENNPosterior, fit_enn_params, loo_log_likelihood
from optarium.bo.gp import fit_gp, hyperparameter_state, matern52_kernel, single_task_gp
from optarium.bo.latent import LEBO, PullbackGeometry, pogs_path, riemannian_brownian_step, tangent_mutations
from optarium.bo.metasg_saea import MetaSGSAEA, RegionPolicy, mm_cci_level, train_region_policy
from optarium.bo.metrics import expected_minimum_distance, hypervolume, pieces_hit, rediscovery_ratio
from optarium.bo.minimize import make_strategy, minimize
from optarium.bo.mo_problems import SYMPART, MOProblem, OmniTest, pool_pareto_set, sobol_pool
from optarium.bo.optuna_sampler import asktell_sampler, pom_sampler, turbo_enn_sampler
from optarium.bo.pfn import (
    AlphaPFNAcquisition,
    AlphaPFNHead,
    BarDistribution,
    GPRFFPrior,
    PFNBayesOpt,
    PFNRegressor,
    train_alpha_pfn,
    train_pfn,
)
from optarium.bo.pom import (
    POM,
    QLogEHVI,
    coverage_log_probability,
    coverage_probability,
    fit_gp_hyperparameters,
    joint_posterior_samples,
    non_dominated_samples,
    pom_greedy_batch,
    pom_log_value,
    smoothed_log_quality,
    sobol_gp_hyperparameters,
)
from optarium.bo.problems import Problem, goldstein_price, make_problem
from optarium.bo.tcgp import CalibrationFit, TailCalibratedGP, TcGPEI, select_calibration
from optarium.bo.trust_region import TrustRegion, latin_hypercube, raasp_candidates, trust_region_bounds
from optarium.bo.turbo_enn import RandomSearch, TurboENN, TurboGP, TurboStrategy, TurboZero

__all__ = [
    "ENN",
    "LEBO",
    "POM",
    "SYMPART",
    "UCB1",
    "AlphaPFNAcquisition",
    "AlphaPFNHead",
    "BarDistribution",
    "BoBa",
    "BootstrapRidge",
    "CalibratedPredictive",
    "CalibrationFit",
    "ENNParams",
    "ENNPosterior",
    "EpsilonGreedy",
    "GPRFFPrior",
    "MOProblem",
    "MetaSGSAEA",
    "OmniTest",
    "PFNBayesOpt",
    "PFNRegressor",
    "PartitionedLibrary",
    "PoolScreening",
    "Problem",
    "PullbackGeometry",
    "QLogEHVI",
    "RandomSearch",
    "RegionPolicy",
    "SyntheticLibrary",
    "TailCalibratedGP",
    "TcGPEI",
    "ThompsonGaussian",
    "TrustRegion",
    "TurboENN",
    "TurboGP",
    "TurboStrategy",
    "TurboZero",
    "UniformArms",
    "as_botorch_model",
    "asktell_sampler",
    "brier_score",
    "conditional_pit",
    "coverage_log_probability",
    "coverage_probability",
    "crps_gaussian",
    "expected_minimum_distance",
    "fit_enn_params",
    "fit_gp",
    "fit_gp_hyperparameters",
    "gaussian_model",
    "gennorm_cdf",
    "gennorm_expected_improvement",
    "gennorm_tail_quantile",
    "goldstein_price",
    "hyperparameter_state",
    "hypervolume",
    "joint_posterior_samples",
    "ks_uniform",
    "latin_hypercube",
    "log_h",
    "loo_log_likelihood",
    "loo_predictions",
    "make_problem",
    "make_strategy",
    "matern52_kernel",
    "minimize",
    "mm_cci_level",
    "non_dominated_mask",
    "non_dominated_ranks",
    "non_dominated_samples",
    "pareto_select",
    "pieces_hit",
    "pogs_path",
    "pom_greedy_batch",
    "pom_log_value",
    "pom_sampler",
    "pool_pareto_set",
    "raasp_candidates",
    "rediscovery_ratio",
    "reliability_curve",
    "riemannian_brownian_step",
    "select_calibration",
    "single_task_gp",
    "smoothed_log_quality",
    "sobol_gp_hyperparameters",
    "sobol_pool",
    "strategy_model",
    "stratified_sample",
    "tangent_mutations",
    "train_alpha_pfn",
    "train_pfn",
    "train_region_policy",
    "trust_region_bounds",
    "turbo_enn_sampler",
    "twcrps",
    "twcrps_gaussian",
    "twcrps_gennorm",
    "twcrps_quadrature",
    "ucb_select",
]
