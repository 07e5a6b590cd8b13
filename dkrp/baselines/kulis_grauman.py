r"""Kernelized random projection from sampled landmarks (KG-RP).

The random projection of Alavi et al. (2014) and Zhao, Alavi, Wiliem & Lovell
(Pattern Recognition 51, 2016), built on the kernelized LSH hyperplanes of Kulis &
Grauman (ICCV 2009, TPAMI 2012): approximately Gaussian hyperplanes in the kernel
feature space :math:`\mathcal H` are formed from :math:`p` sampled training rows
via the central limit theorem, and each output is the projection of
:math:`\phi(x)` on one of them. It is the data-dependent baseline of López-Sánchez
et al. (2018), Tables 2–3 and 5–11.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import draw_rows
from .._threading import map_row_blocks
from .._validation import check_integer
from ..base import BaseProjector
from ..errors import InvalidInputError
from ..features._samplers import index_sampler
from ..kernels import PSD_KERNELS, kernel_matrix
from ._landmarks import (
    inverse_sqrt_psd,
    resolve_kernel_params,
    sample_landmark_indices,
    take_landmarks,
)

__all__ = ["KulisGraumanRP"]


class KulisGraumanRP(BaseProjector):
    r"""Kulis–Grauman random projection (KG-RP) with landmarks sampled from the data.

    Parameters
    ----------
    kernel : {"homogeneous_polynomial", "polynomial", "gaussian", "laplacian"}, \
            default="homogeneous_polynomial"
    degree : int, default=2
    gamma : float, default=None
        ``None`` is ``1 / n_features`` for the kernels that take it.
    coef0 : float, default=1.0
    n_components : int, default=100
        Output dimension :math:`k`.
    n_landmarks : int, default=1000
        Number :math:`p` of sampled training rows (``--n-hyperplanes`` on the
        command line: like KRP's pool, it sets the test-time cost). Kulis & Grauman
        suggest :math:`p = O(\sqrt n)`.
    n_terms : int, default=30
        Number :math:`t \le p` of landmarks averaged per hyperplane (the CLT terms;
        30 as recommended by Kulis & Grauman and used in the paper).
    random_state : int or None, default=None
        Seed of the landmark draw (stream ``"landmarks"``) and of the per-component
        subsets (stream ``"subsets"``).

    Attributes
    ----------
    landmark_indices_ : ndarray of int64, shape (n_landmarks,)
        Sorted training-row indices of the landmarks.
    landmarks_ : ndarray of shape (n_landmarks, ``n_features_in_``)
    landmark_subsets_ : ndarray of int64, shape (n_components, n_terms)
        Positions (into ``landmarks_``) of the ``t`` landmarks of each component.
    weights_ : ndarray of shape (n_landmarks, n_components)
        :math:`W = [w_1, \dots, w_k] / \sqrt k`.
    kernel_col_mean_ : ndarray of shape (n_landmarks,)
        Column means of the uncentred landmark kernel matrix (for centring test rows).
    kernel_mean_ : ndarray of shape ()
        Mean of the uncentred landmark kernel matrix.
    kernel_params_ : dict
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    Nystroem : a low-rank kernel approximation on the same landmarks.
    dkrp.PolynomialRandomProjection : the data-independent KRP.

    Notes
    -----
    Let :math:`\Phi` be the landmarks' feature vectors centred on their mean
    :math:`\mu` in :math:`\mathcal H` and :math:`K_S = \Phi^T\Phi` the centred
    :math:`p \times p` kernel matrix (``K - 1K/p - K1/p + 1K1/p^2``). Component
    :math:`i` draws a set :math:`S_i` of :math:`t` distinct landmarks and uses
    (Section 3.4 of López-Sánchez et al. 2018)

    .. math:: w_i = \sqrt{\tfrac{p-1}{t}}\, K_S^{-1/2} e_{S_i}, \qquad
              f_i(x) = \tfrac{1}{\sqrt k}\, \bar k(x)^T w_i ,

    where :math:`e_{S_i}` is the indicator of :math:`S_i` and :math:`\bar k(x)_j =
    \langle \phi(l_j) - \mu, \phi(x) - \mu\rangle` is the test row centred the same
    way as :math:`K_S` (the Kulis–Grauman convention: data centred in
    :math:`\mathcal H`). :math:`f_i(x)` is :math:`\phi(x)` projected on
    :math:`r_i = \hat\Sigma^{-1/2} z_i` with :math:`z_i = \sqrt t\,(\text{mean of }
    S_i - \mu)` approximately :math:`N(0, \hat\Sigma)`, so :math:`r_i` is
    approximately standard Gaussian on the span of the landmarks; the
    :math:`1/\sqrt k` makes it a Johnson–Lindenstrauss projection, the scaling under
    which our distortion matches the paper's Table 2. Because :math:`1^T w_i = 0`,
    centring changes features only by a constant per component, never distances.

    Exactly, over the subsets, :math:`E\langle f(x), f(y)\rangle = (1 - t/p)\,
    \langle P\bar\phi(x), P\bar\phi(y)\rangle`, with :math:`P` the projection on the
    span of the centred landmarks (the factor :math:`1 - t/p` is the finite
    population correction of drawing :math:`S_i` without replacement, which the
    published :math:`\sqrt{(p-1)/t}` does not include). The part of
    :math:`\phi(x) - \phi(y)` outside that span is lost, which is why KG-RP distorts
    distances much more on w8a than on MNIST (paper, Table 8).

    :math:`K_S^{-1/2}` is the pseudo-inverse square root: eigenvalues at or below
    :math:`p\,\varepsilon\,\lambda_{max}` (the zero eigenvalue of the centring, and
    those of duplicate landmark rows or of a rank-deficient kernel) get weight 0.
    Duplicate rows therefore act like a single landmark: the features stay finite
    and never NaN.

    Train :math:`O(p^2 d + p^3 + k p^2)`, transform :math:`O(p d + p k)` per row.

    References
    ----------
    .. [1] B. Kulis, K. Grauman, "Kernelized locality-sensitive hashing", IEEE TPAMI
       34(6), 2012.
    .. [2] K. Zhao, A. Alavi, A. Wiliem, B. C. Lovell, "Efficient clustering on
       Riemannian manifolds: a kernelised random projection approach", Pattern
       Recognition 51 (2016).
    .. [3] D. López-Sánchez, A. González Arrieta, J. M. Corchado, Pattern Recognition
       82 (2018), Sections 1, 3.4 and Tables 2, 3, 8.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.baselines import KulisGraumanRP
    >>> X = np.random.default_rng(0).standard_normal((200, 4))
    >>> kg = KulisGraumanRP(degree=1, n_components=64, n_landmarks=50, n_terms=10,
    ...                     random_state=0).fit(X)
    >>> Z = kg.transform(X)
    >>> Z.shape
    (200, 64)
    >>> bool(np.isclose(kg.weights_.sum(axis=0), 0, atol=1e-8).all())  # 1^T w_i = 0
    True
    """

    data_dependent = True
    learnt_arrays = {
        "landmark_indices": np.int64,
        "landmarks": np.float64,
        "landmark_subsets": np.int64,
        "weights": np.float64,
        "kernel_col_mean": np.float64,
        "kernel_mean": np.float64,
    }

    def __init__(
        self,
        *,
        kernel="homogeneous_polynomial",
        degree=2,
        gamma=None,
        coef0=1.0,
        n_components=100,
        n_landmarks=1000,
        n_terms=30,
        random_state=None,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.n_landmarks = n_landmarks
        self.n_terms = n_terms
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("n_components", self.n_components, minimum=1)
        check_integer("n_landmarks", self.n_landmarks, minimum=2)
        check_integer("n_terms", self.n_terms, minimum=1)
        if self.n_terms > self.n_landmarks:
            raise InvalidInputError(
                "n_terms must not exceed n_landmarks: each component averages n_terms "
                f"distinct landmarks, but n_terms = {self.n_terms} > n_landmarks = "
                f"{self.n_landmarks}."
            )
        self.kernel_params_ = resolve_kernel_params(
            self.kernel, self.degree, self.gamma, self.coef0, n_features,
            supported=PSD_KERNELS,  # whitening by K(L, L)^(-1/2) needs a PSD kernel
        )

    def _fit_state(self, X, n_features):
        p, t, k = int(self.n_landmarks), int(self.n_terms), int(self.n_components)
        idx = sample_landmark_indices(self.seed_, X.shape[0], p, what="n_landmarks")
        landmarks = take_landmarks(X, idx)
        K = kernel_matrix(landmarks, kernel=self.kernel, **self.kernel_params_)
        col_mean = K.mean(axis=0)
        total_mean = K.mean()
        # Centre in feature space (Kulis & Grauman assume centred data).
        Kc = K - col_mean[None, :] - col_mean[:, None] + total_mean
        Kc = (Kc + Kc.T) / 2.0
        inv_sqrt = inverse_sqrt_psd(Kc, mode="pinv")
        subsets = draw_rows(self.seed_, "subsets", k, index_sampler(p, t))
        # w_i = sqrt((p-1)/t) K_S^{-1/2} e_S (paper, Section 3.4), O(k p^2).
        indicator = np.zeros((p, k))
        indicator[subsets, np.arange(k)[:, None]] = 1.0
        W = inv_sqrt @ indicator
        W *= math.sqrt((p - 1) / t) / math.sqrt(k)
        self._set_state_arrays({
            "landmark_indices": idx,
            "landmarks": landmarks,
            "landmark_subsets": subsets,
            "weights": W,
            "kernel_col_mean": col_mean,
            "kernel_mean": np.asarray(total_mean, dtype=np.float64),
        })

    def _after_state_arrays(self):
        self.n_components_ = int(self.weights_.shape[1])

    def _transform_array(self, X):
        def features(rows):
            K = kernel_matrix(rows, self.landmarks_, kernel=self.kernel, **self.kernel_params_)
            # Centre the test rows like K_S: k(x) - mean_j k(x, l_j) - colmean + mean.
            K -= K.mean(axis=1, keepdims=True)
            K -= self.kernel_col_mean_ - self.kernel_mean_
            return K @ self.weights_

        return map_row_blocks(X, self.weights_.shape[1], X.dtype, features)
