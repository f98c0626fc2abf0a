"""Sparse optimisation: l1-regularised regression and sparse-coding solvers returning a ``Result``.

Today: the Lasso by FISTA (:func:`lasso` one penalty, :func:`lasso_path` many at once, :func:`lasso_cv`
penalty chosen by K-fold cross-validation), the proximal reference of the rewa experiment and the
sparse-coding step that dictionary learning (db-ksvd, the family's planned method) builds on. Pure torch,
dtype and device follow the inputs; scikit-learn's ``Lasso`` / ``LassoCV`` are the references in the tests.
"""

from optarium.sparse.lasso import (
    lasso,
    lasso_cv,
    lasso_kkt_residual,
    lasso_objective,
    lasso_path,
    soft_threshold,
)

__all__ = [
    "lasso",
    "lasso_cv",
    "lasso_kkt_residual",
    "lasso_objective",
    "lasso_path",
    "soft_threshold",
]
