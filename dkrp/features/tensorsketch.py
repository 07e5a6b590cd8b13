r"""TensorSketch for polynomial kernels (Pham & Pagh, KDD 2013).

The CountSketch of :math:`x^{\otimes g}` under the hash :math:`H(i_1..i_g) =
\sum_j h_j(i_j) \bmod D` and sign :math:`S = \prod_j s_j(i_j)` is the circular
convolution of the :math:`g` CountSketches :math:`C_j(x)`, so it is computed with
FFTs in :math:`O(g(\mathrm{nnz}(x) + D\log D))` without ever forming
:math:`x^{\otimes g}`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._random import draw_rows
from .._validation import check_choice, check_integer, check_real
from ..base import BaseProjector
from ..errors import InvalidInputError

__all__ = ["TensorSketch", "TENSORSKETCH_KERNELS"]

TENSORSKETCH_KERNELS = ("homogeneous_polynomial", "polynomial")

_ROW_BLOCK = 1024


class TensorSketch(BaseProjector):
    r"""TensorSketch features (Pham & Pagh 2013) for (homogeneous) polynomial kernels.

    Parameters
    ----------
    kernel : {"homogeneous_polynomial", "polynomial"}, default="homogeneous_polynomial"
        :math:`\langle x, y\rangle^g` or :math:`(\gamma\langle x, y\rangle + c_0)^g`
        (names of :mod:`dkrp.kernels`).
    degree : int, default=2
        Degree :math:`g`.
    gamma : float, default=None
        For ``"polynomial"``; ``None`` is ``1 / n_features``.
    coef0 : float, default=1.0
        :math:`c_0 \ge 0` for ``"polynomial"``.
    n_components : int, default=100
        Sketch size :math:`D`.
    random_state : int or None, default=None
        Seed; hashes come from streams ``"hash_index"`` and ``"hash_sign"``.

    Attributes
    ----------
    index_hash_ : ndarray of int64, shape (degree, ``n_features_in_ + 1``)
        :math:`h_j(i) \in [0, D)`; the last column hashes the constant feature
        :math:`\sqrt{c_0}` of the polynomial kernel.
    sign_hash_ : ndarray of shape (degree, ``n_features_in_ + 1``)
        :math:`s_j(i) \in \{-1, +1\}` (float64).
    gamma_ : float
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    sklearn.kernel_approximation.PolynomialCountSketch : the same sketch (equal
        given the same hashes; the tests check it).
    RandomMaclaurin : Kar & Karnick's random features for dot-product kernels.

    Notes
    -----
    The polynomial kernel is the homogeneous kernel of
    :math:`x' = [\sqrt\gamma\,x, \sqrt{c_0}]`. With CountSketches
    :math:`C_j(x') = \sum_i s_j(i) x'_i e_{h_j(i)}` (one sparse product
    per degree, so CSR input is never densified),

    .. math:: z(x) = \mathrm{IFFT}\Big(\prod_{j=1}^g \mathrm{FFT}(C_j(x'))\Big),
              \qquad E\langle z(x), z(y)\rangle = \langle x', y'\rangle^g ,

    unbiased because the :math:`g` hash pairs are independent (Pham & Pagh 2013,
    Lemma 2); real FFTs of length :math:`D` are used.

    References
    ----------
    .. [1] N. Pham, R. Pagh, "Fast and scalable polynomial kernels via explicit
       feature maps", KDD 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.features.tensorsketch import TensorSketch
    >>> X = np.random.default_rng(0).standard_normal((4, 6))
    >>> ts = TensorSketch(degree=2, n_components=8192, random_state=0).fit(X)
    >>> Z = ts.transform(X)
    >>> bool(np.allclose(np.diag(Z @ Z.T), np.diag(X @ X.T) ** 2, rtol=0.2))
    True
    """

    def __init__(
        self,
        *,
        kernel="homogeneous_polynomial",
        degree=2,
        gamma=None,
        coef0=1.0,
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
        check_choice("kernel", self.kernel, TENSORSKETCH_KERNELS)
        check_integer("degree", self.degree, minimum=1)
        check_integer("n_components", self.n_components, minimum=1)
        if self.kernel == "homogeneous_polynomial":
            self.gamma_, self.coef0_ = 1.0, 0.0
            return
        self.gamma_ = (1.0 / n_features if self.gamma is None
                       else check_real("gamma", self.gamma, minimum=0.0, include_min=False))
        self.coef0_ = check_real("coef0", self.coef0)
        if self.coef0_ < 0:
            raise InvalidInputError(
                f"coef0 must be >= 0 for TensorSketch, got {self.coef0_}: the polynomial "
                "kernel is sketched as <x', y'>^g with x' = [sqrt(gamma) x, sqrt(coef0)]."
            )

    def _fit_state(self, X, n_features):
        D, width = self.n_components, n_features + 1

        def index_sampler(rng, n):
            return rng.integers(0, D, size=(n, width), dtype=np.int64)

        def sign_sampler(rng, n):
            return rng.integers(0, 2, size=(n, width)).astype(np.float64) * 2.0 - 1.0

        self.index_hash_ = draw_rows(self.seed_, "hash_index", self.degree, index_sampler)
        self.sign_hash_ = draw_rows(self.seed_, "hash_sign", self.degree, sign_sampler)

    def _state_arrays(self):
        return {"index_hash": self.index_hash_, "sign_hash": self.sign_hash_}

    def _sketch_matrices(self, dtype):
        """Per degree: the (d × D) CSR CountSketch matrix (√γ folded in) and its
        constant-feature row (√c0 · s_j(d) at h_j(d))."""

        def build(dtype):
            d, D = self.n_features_in_, self.n_components
            root_gamma, root_c0 = math.sqrt(self.gamma_), math.sqrt(self.coef0_)
            mats = []
            for j in range(self.degree):
                M = sp.csr_matrix(
                    (self.sign_hash_[j, :d] * root_gamma,
                     (np.arange(d), self.index_hash_[j, :d])),
                    shape=(d, D),
                    dtype=dtype,
                )
                const = np.zeros(D, dtype=dtype)
                const[self.index_hash_[j, d]] = self.sign_hash_[j, d] * root_c0
                mats.append((M, const))
            return mats

        return self._cached("sketch", dtype, build)

    def _transform_array(self, X):
        dtype = X.dtype
        D = self.n_components
        mats = self._sketch_matrices(dtype)
        out = np.empty((X.shape[0], D), dtype=dtype)
        for start in range(0, X.shape[0], _ROW_BLOCK):
            block = X[start : start + _ROW_BLOCK]
            spectrum = None
            for M, const in mats:
                # CountSketch C_j(x'): a sparse product (CSR·CSR or dense·CSR).
                sketch = block @ M
                sketch = sketch.toarray() if sp.issparse(sketch) else np.asarray(sketch)
                if self.coef0_ != 0.0:
                    sketch = sketch + const
                f = np.fft.rfft(sketch, axis=1)
                spectrum = f if spectrum is None else spectrum * f
            out[start : start + block.shape[0]] = np.fft.irfft(spectrum, n=D, axis=1)
        return out
