r"""PCA behind the projector API, for the "PCA then kernel SVM" comparison.

The components are the top eigenvectors of the sample covariance, computed from
two statistics, the column means and :math:`X^T X`, that one pass over the data
gives: a sum over the blocks of a dask array, a sparse product for CSR input
(never densified). This is scikit-learn's ``svd_solver="covariance_eigh"``; it is
exact and fast while ``n_features`` is moderate (the :math:`d \times d` matrix must
fit in memory: MNIST, w8a, covertype), and the numpy and dask fits agree to
rounding.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from .._threading import map_row_blocks
from .._validation import check_integer, is_dask_collection
from ..base import BaseProjector
from ..errors import InvalidInputError

logger = logging.getLogger(__name__)

__all__ = ["PCAProjector"]


def _moments(X):
    """Column sums and ``X^T X`` (float64) of a dense, CSR or dask block."""
    if sp.issparse(X):
        X = X.astype(np.float64)
        return np.asarray(X.sum(axis=0)).ravel(), np.asarray((X.T @ X).toarray())
    X = np.asarray(X, dtype=np.float64)
    return X.sum(axis=0), X.T @ X


class PCAProjector(BaseProjector):
    r"""Principal component analysis as a dkrp projector.

    Parameters
    ----------
    n_components : int, default=50
        Number of principal components kept; at most ``min(n_samples, n_features)``.
    whiten : bool, default=False
        Divide each component by the square root of its explained variance.
    random_state : int or None, default=None
        Recorded in the spec for API uniformity; the covariance solver is
        deterministic and does not use it.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, ``n_features_in_``)
        Principal axes, by decreasing explained variance; each axis' sign is
        fixed so that its largest-magnitude entry is positive (scikit-learn's
        ``svd_flip`` convention up to ties).
    explained_variance_ : ndarray of shape (n_components,)
        Variances along the axes (denominator ``n_samples - 1``).
    mean_ : ndarray of shape (``n_features_in_``,)
    n_samples_seen_ : int
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    sklearn.decomposition.PCA : equal up to the signs of the axes and rounding.
    dask_ml.decomposition.PCA : the tall-and-skinny SVD alternative.

    Notes
    -----
    With :math:`\mu` the column means and :math:`C = (X^T X - n\mu\mu^T)/(n-1)`,
    ``eigh(C)`` gives the axes; the transform is :math:`(x - \mu) V^T`, computed as
    :math:`x V^T - \mu V^T` so CSR rows stay sparse. Forming :math:`C` squares the
    condition number, which costs precision only in the components of negligible
    variance — the ones PCA discards.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.baselines import PCAProjector
    >>> X = np.random.default_rng(0).standard_normal((100, 6)) * [5, 4, 3, 2, 1, 0.5]
    >>> pca = PCAProjector(n_components=3, random_state=0).fit(X)
    >>> Z = pca.transform(X)
    >>> bool(np.allclose(Z.var(axis=0, ddof=1), pca.explained_variance_))
    True
    """

    data_dependent = True
    fitted_values = ("n_samples_seen_",)
    learnt_arrays = {
        "mean": np.float64,
        "components": np.float64,
        "explained_variance": np.float64,
    }

    def __init__(self, *, n_components=50, whiten=False, random_state=None):
        self.n_components = n_components
        self.whiten = whiten
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("n_components", self.n_components, minimum=1)
        if not isinstance(self.whiten, (bool, np.bool_)):
            raise InvalidInputError(f"whiten must be a bool, got {self.whiten!r}.")

    def _fit_state(self, X, n_features):
        n_samples = X.shape[0]
        limit = min(n_samples, n_features)
        if self.n_components > limit:
            raise InvalidInputError(
                f"n_components={self.n_components} must be <= min(n_samples, n_features)="
                f"{limit} (n_samples={n_samples}, n_features={n_features})."
            )
        if n_samples < 2:
            raise InvalidInputError(f"PCA needs at least 2 samples, got n_samples={n_samples}.")
        if is_dask_collection(X):
            import dask

            logger.info("PCA: one pass over the dask array for column sums and X^T X")
            Xf = X.astype(np.float64)
            sums, gram = dask.compute(Xf.sum(axis=0), Xf.T @ Xf)
            sums, gram = np.asarray(sums), np.asarray(gram)
            if not (np.isfinite(sums).all() and np.isfinite(gram).all()):
                raise InvalidInputError("Input X contains NaN or infinity.")
        else:
            sums, gram = _moments(X)
        mean = sums / n_samples
        cov = (gram - n_samples * np.outer(mean, mean)) / (n_samples - 1)
        cov = (cov + cov.T) / 2.0
        lam, vecs = np.linalg.eigh(cov)
        order = np.argsort(lam)[::-1][: self.n_components]
        components = vecs[:, order].T.copy()
        # Deterministic signs: the largest-magnitude entry of each axis is positive.
        pivot = np.argmax(np.abs(components), axis=1)
        components *= np.sign(components[np.arange(len(pivot)), pivot])[:, None]
        self.n_samples_seen_ = int(n_samples)
        self._set_state_arrays({
            "mean": mean,
            "components": components,
            "explained_variance": np.maximum(lam[order], 0.0),
        })


    def _after_state_arrays(self):
        self.n_components_ = int(self.components_.shape[0])

    def _projection(self, dtype):
        """Cached ``V^T`` (whitened if asked) and ``mu V^T`` in ``dtype``."""

        def build(dtype):
            V = self.components_.T
            if self.whiten:
                scale = np.sqrt(self.explained_variance_)
                V = V / np.where(scale > 0, scale, 1.0)
            return (np.ascontiguousarray(V, dtype=dtype),
                    np.ascontiguousarray(self.mean_ @ V, dtype=dtype))

        return self._cached("pca_projection", dtype, build)

    def _transform_array(self, X):
        V, shift = self._projection(X.dtype)

        def project(rows):
            Z = np.asarray(rows @ V)
            Z -= shift
            return Z

        return map_row_blocks(X, V.shape[1], X.dtype, project)
