r"""The Nyström method with uniformly sampled landmarks (Williams & Seeger, NIPS 2001).

A rank-:math:`m` approximation of the kernel matrix from :math:`m` sampled training
rows (landmarks) :math:`L`: with :math:`W = K(L, L)`,

.. math:: z(x) = K(x, L)\, W^{-1/2}, \qquad
          \langle z(x), z(y)\rangle = K(x, L) W^{-1} K(L, y) \approx K(x, y),

exact whenever :math:`x` or :math:`y` is a landmark. The landmarks are drawn
reproducibly from the seed (:mod:`dkrp.baselines._landmarks`), their row indices are
kept and saved with the model, and the transform is blockwise.
"""

from __future__ import annotations

import numpy as np

from .._threading import map_row_blocks
from .._validation import check_integer
from ..base import BaseProjector
from ..kernels import kernel_matrix
from ._landmarks import (
    inverse_sqrt_psd,
    resolve_kernel_params,
    sample_landmark_indices,
    take_landmarks,
)

__all__ = ["Nystroem"]


class Nystroem(BaseProjector):
    r"""Nyström feature map with landmarks sampled uniformly from the training rows.

    Parameters
    ----------
    kernel : str, default="rbf"
        Any name of :data:`dkrp.kernels.KERNEL_PARAMS`: scikit-learn's
        (``"rbf"``, ``"poly"``, ``"laplacian"``, ``"linear"``, ``"cosine"``,
        ``"sigmoid"``, ``"chi2"``, ``"additive_chi2"``, with scikit-learn's defaults,
        so ``dkrp.Nystroem`` is a drop-in for ``sklearn.kernel_approximation.Nystroem``)
        or dkrp's (``"homogeneous_polynomial"`` :math:`\langle x,y\rangle^g`, the
        kernel the KRP paper compares against, ``"polynomial"``, ``"gaussian"`` =
        ``"rbf"``).
    degree : int, default=None
        Degree, for the polynomial kernels; None is the kernel's default (3 for
        ``"poly"`` as in scikit-learn, 2 for dkrp's polynomial kernels).
    gamma : float, default=None
        For the kernels that take it; ``None`` is ``1 / n_features`` (scikit-learn's
        default; 1.0 for ``"chi2"``).
    coef0 : float, default=None
        For ``"poly"``/``"polynomial"`` and ``"sigmoid"``; None is 1.0.
    n_components : int, default=100
        Number :math:`m` of landmarks, which is also the output dimension. Must not
        exceed the number of training rows.
    random_state : int or None, default=None
        Seed of the landmark draw; ``None`` draws one at fit (kept in ``seed_``).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, ``n_features_in_``)
        The landmark rows (float64), as in scikit-learn; also ``landmarks_``.
    component_indices_ : ndarray of int64, shape (n_components,)
        Their training-row indices, sorted (scikit-learn's are in draw order); also
        ``landmark_indices_``.
    normalization_ : ndarray of shape (n_components, n_components)
        :math:`W^{-1/2}` (symmetric).
    kernel_params_ : dict
        Resolved kernel parameters (``gamma=None`` replaced by ``1/n_features``).
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : the same map; equal to 1e-8 on the same
        landmarks.
    KulisGraumanRP : a random projection built from sampled landmarks.

    Notes
    -----
    :math:`W^{-1/2}` is computed exactly as scikit-learn does: its SVD
    :math:`U \Sigma V^T` with singular values floored at :math:`10^{-12}`,
    :math:`U \Sigma^{-1/2} V^T`, written with ``eigh`` (for symmetric :math:`W`,
    :math:`\sigma_i = |\lambda_i|` and :math:`u_i = \operatorname{sign}(\lambda_i)
    v_i`). Duplicate landmark rows make :math:`W` singular: the floor keeps every
    feature finite, and the duplicate direction :math:`(e_i - e_j)/\sqrt 2` receives
    zero weight up to rounding because :math:`K(x, l_i) = K(x, l_j)` for every
    :math:`x`.

    Train :math:`O(m^2 d + m^3)`, transform :math:`O(m d + m^2)` per row (Section 3.4
    of López-Sánchez et al. 2018).

    References
    ----------
    .. [1] C. K. I. Williams, M. Seeger, "Using the Nyström method to speed up kernel
       machines", NIPS 2001.
    .. [2] D. López-Sánchez, A. González Arrieta, J. M. Corchado, Pattern Recognition
       82 (2018), Table 3 (Nyström on MNIST, g = 3).

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.baselines import Nystroem
    >>> from dkrp.kernels import kernel_matrix
    >>> X = np.random.default_rng(0).standard_normal((40, 5))
    >>> ny = Nystroem(kernel="gaussian", gamma=0.2, n_components=10, random_state=0).fit(X)
    >>> Z = ny.transform(X)
    >>> L = ny.landmark_indices_            # exact on the landmarks
    >>> K = kernel_matrix(X[L], X, kernel="gaussian", gamma=0.2)
    >>> bool(np.allclose(Z[L] @ Z.T, K))
    True
    """

    data_dependent = True
    learnt_arrays = {
        "landmark_indices": np.int64,
        "landmarks": np.float64,
        "normalization": np.float64,
    }

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=None,
        gamma=None,
        coef0=None,
        n_components=100,
        random_state=None,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("n_components", self.n_components, minimum=1)
        self.kernel_params_ = resolve_kernel_params(
            self.kernel, self.degree, self.gamma, self.coef0, n_features
        )

    def _fit_state(self, X, n_features):
        idx = sample_landmark_indices(self.seed_, X.shape[0], self.n_components,
                                      what="n_components")
        landmarks = take_landmarks(X, idx)
        W = kernel_matrix(landmarks, kernel=self.kernel, **self.kernel_params_)
        self._set_state_arrays({
            "landmark_indices": idx,
            "landmarks": landmarks,
            "normalization": inverse_sqrt_psd(W, mode="sklearn"),
        })

    def _after_state_arrays(self):
        self.n_components_ = int(self.landmarks_.shape[0])

    @property
    def components_(self):
        """The landmark rows (scikit-learn's name)."""
        return self.landmarks_

    @property
    def component_indices_(self):
        """Training-row indices of :attr:`components_` (scikit-learn's name)."""
        return self.landmark_indices_

    def _transform_array(self, X):
        # kernel_matrix works in float64 row blocks (sparse-aware); cast at the end.
        def features(rows):
            K = kernel_matrix(rows, self.landmarks_, kernel=self.kernel, **self.kernel_params_)
            return K @ self.normalization_

        return map_row_blocks(X, self.normalization_.shape[1], X.dtype, features)
