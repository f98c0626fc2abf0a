"""Sparse optimisation: l1-regularised regression and sparse-coding solvers returning a ``Result``.

Today: the Lasso by FISTA (:func:`lasso` one penalty, :func:`lasso_path` many at once, :func:`lasso_cv`
penalty chosen by K-fold cross-validation), the proximal reference of the rewa experiment and the
sparse-coding step that dictionary learning (db-ksvd, the family's planned method) builds on. Pure torch,
dtype and device follow the inputs; scikit-learn's ``Lasso`` / ``LassoCV`` are the references in the tests.
"""

from optarium.sparse.db_ksvd import (
    DBKSVD,
    TopKSAE,
    atom_recovery,
    db_ksvd,
    dead_atoms,
    ksvd_dictionary_update,
    matching_pursuit,
    mean_max_coherence,
    planted_dictionary,
    reconstruct,
    train_topk_sae,
)
from optarium.sparse.lasso import (
    lasso,
    lasso_cv,
    lasso_kkt_residual,
    lasso_objective,
    lasso_path,
    soft_threshold,
)

__all__ = [
    "DBKSVD",
    "TopKSAE",
    "atom_recovery",
    "db_ksvd",
    "dead_atoms",
    "ksvd_dictionary_update",
    "lasso",
    "lasso_cv",
    "lasso_kkt_residual",
    "lasso_objective",
    "lasso_path",
    "matching_pursuit",
    "mean_max_coherence",
    "planted_dictionary",
    "reconstruct",
    "soft_threshold",
    "train_topk_sae",
]
