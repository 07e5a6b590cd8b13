r"""Random Fourier features for shift-invariant kernels (Rahimi & Recht, NIPS 2007).

By Bochner's theorem a shift-invariant kernel is the Fourier transform of a
probability density :math:`p(w)`: :math:`k(x - y) = E_w[\cos(w^T (x - y))]`.

* Gaussian :math:`\exp(-\gamma\|x-y\|_2^2)`: :math:`w \sim N(0, 2\gamma I)`.
* Laplacian :math:`\exp(-\gamma\|x-y\|_1)`: :math:`w_i \sim \mathrm{Cauchy}(0, \gamma)`
  i.i.d. (the L1 kernel is a product of 1-D Laplacian kernels, each the
  characteristic function of a Cauchy variable).
"""

from __future__ import annotations

import math

import numpy as np

from .._random import draw_rows
from .._threading import run_row_blocks, scratch
from .._validation import check_choice, check_integer, check_real
from ..base import BaseProjector
from ..errors import InvalidInputError, Message, Param
from ..kernels import SHIFT_INVARIANT_KERNELS, scale_gamma
from ._pools import (
    FOURIER_POOLS,
    matmul_transposed,
    orthogonal_pool,
    padded_size,
    set_draw_version,
    structured_pool,
    structured_project,
    structured_signs,
    use_fwht,
)
from ._trig import cos_features_block, cos_features_inplace, cos_sin_features_block

__all__ = ["RandomFourierFeatures"]

FEATURE_MAPS = ("cos", "cos_sin")
ROW_BLOCK = 1024
#: Cosine implementations, recorded in the spec as ``fitted.cosine_`` so that a spec's
#: features stay byte-identical: ``"dkrp2"`` (compiled, :mod:`dkrp.features._trig`,
#: kernel version 2: float32 in float32 arithmetic) for every new fit; ``"dkrp"``
#: (version 1: float32 evaluated in float64, the same float64 bits) for specs written
#: before version 2; ``"numpy"`` for specs written before the compiled cosine (dkrp <=
#: 0.1.x).
COSINES = ("dkrp2", "dkrp", "numpy")
_TRIG_VERSION = {"dkrp2": 2, "dkrp": 1}


def draw_phases(seed, feature_map, m):
    """Phases b_i ~ U[0, 2π) for the "cos" form (stream "phases"); zeros for the pair form."""
    if feature_map == "cos":
        return draw_rows(seed, "phases", m, lambda rng, n: rng.uniform(0.0, 2.0 * np.pi, size=n))
    return np.zeros(m)


class RandomFourierFeatures(BaseProjector):
    r"""Random Fourier features for the Gaussian and Laplacian kernels.

    Parameters
    ----------
    kernel : {"gaussian", "laplacian"}, default="gaussian"
        :math:`\exp(-\gamma\|x-y\|_2^2)` or :math:`\exp(-\gamma\|x-y\|_1)`.
    gamma : float or "scale", default=1.0
        Kernel width. ``"scale"`` uses ``1 / (n_features * X.var())`` for the
        Gaussian kernel (as scikit-learn's SVC) and ``1 / (n_features * X.std())``
        for the Laplacian kernel (distances scale linearly there); it needs
        training data.
    n_components : int, default=100
        Output dimension :math:`D`.
    feature_map : {"cos", "cos_sin"}, default="cos"
        ``"cos"``: :math:`\sqrt{2/D}\cos(w_i^T x + b_i)` with :math:`D` frequencies
        and phases :math:`b_i \sim U[0, 2\pi)`. ``"cos_sin"``: :math:`D/2`
        frequencies, :math:`\sqrt{2/D}[\cos(w_i^T x), \sin(w_i^T x)]`, the
        lower-variance pair form (``n_components`` must be even).
    pool : {"iid", "orthogonal", "structured"}, default="iid"
        How the frequencies are drawn (Gaussian kernel only). ``"iid"``: i.i.d.
        :math:`N(0, 2\gamma I)` (Rahimi & Recht). ``"orthogonal"``: blocks of
        :math:`d` orthogonal directions with chi norms, times
        :math:`\sqrt{2\gamma}` (ORF, Yu et al. 2016). ``"structured"``:
        :math:`\sqrt{2\gamma}` times the Hadamard blocks
        :math:`\frac1D H D_1 H D_2 H D_3` on ``x`` zero-padded to a power of two
        (SORF), applied by FWHT or GEMM (see :mod:`dkrp.features._pools`).
    random_state : int or None, default=None

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_frequencies, ``n_features_in_``) or None
        Frequencies :math:`w_i` (float64), including the factor of ``gamma``: one
        row per frequency, the transpose of scikit-learn's ``RBFSampler.random_weights_``
        (dkrp keeps rows because pools are drawn and checksummed by row blocks).
        ``None`` for the structured pool on its FWHT path (``pool_signs_``
        defines the frequencies).
    pool_signs_ : ndarray of shape (n_blocks, 3, D), int8
        Structured pool only: the ±1 diagonals.
    uses_fwht_ : bool
    random_offset_ : ndarray of shape (n_frequencies,)
        Phases :math:`b_i` (zeros for ``"cos_sin"``).
    gamma_ : float
    cosine_ : {"dkrp2", "dkrp", "numpy"}
        The cosine implementation (see :data:`COSINES`): ``"dkrp2"`` for a new fit,
        the spec's own when rebuilt from a spec written before it (``"numpy"`` for one
        written before the compiled cosine).
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : the Gaussian ``"cos"`` map.

    Notes
    -----
    Both forms are unbiased: :math:`E\langle z(x), z(y)\rangle = k(\delta)`,
    :math:`\delta = x - y`. Their variances are :math:`(1 + k(2\delta) -
    2k(\delta)^2)/D` (pair form) and :math:`(1 + k(2\delta)/2 - k(\delta)^2)/D`
    (phase form) (Sutherland & Schneider, UAI 2015); for the Gaussian
    (:math:`k(2\delta) = k(\delta)^4`) and Laplacian (:math:`k(2\delta) =
    k(\delta)^2`) kernels the pair form is never worse.

    The orthogonal and structured pools (Gaussian kernel) have lower
    kernel-approximation variance than i.i.d. frequencies at equal :math:`D`
    (Yu et al. 2016, Theorem 1 for ORF); they are unbiased only
    asymptotically: the structured pool's rows are not exactly Gaussian, and
    for both the bias is :math:`O(1/d)`-small relative to the variance reduction
    (measured in ``benchmarks/bench_pools.py``). The orthogonal pool calls LAPACK
    (QR): its spec checksum is verified on rebuild and a process computing other
    bits is refused (:class:`dkrp.SpecError`); the structured pool is exact.

    References
    ----------
    .. [1] A. Rahimi, B. Recht, "Random Features for Large-Scale Kernel Machines",
       NIPS 2007.
    .. [2] F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar,
       "Orthogonal Random Features", NIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp import RandomFourierFeatures
    >>> X = np.random.default_rng(0).standard_normal((4, 3))
    >>> rff = RandomFourierFeatures(gamma=0.5, n_components=64, random_state=0).fit(X)
    >>> Z = rff.transform(X)
    >>> bool(np.allclose((Z ** 2).sum(axis=1), 1.0, atol=0.5))
    True
    """

    fitted_values = ("gamma_", "cosine_", "draw_version_")
    legacy_fitted_values = {"cosine_": "numpy", "draw_version_": 1}

    def __init__(
        self,
        *,
        kernel="gaussian",
        gamma=1.0,
        n_components=100,
        feature_map="cos",
        pool="iid",
        random_state=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.feature_map = feature_map
        self.pool = pool
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_choice("kernel", self.kernel, SHIFT_INVARIANT_KERNELS)
        check_choice("feature_map", self.feature_map, FEATURE_MAPS)
        check_integer("n_components", self.n_components, minimum=1)
        check_choice("pool", self.pool, FOURIER_POOLS)
        if self.pool != "iid" and self.kernel != "gaussian":
            raise InvalidInputError(Message(
                "{} is defined for {} only (its rows approximate Gaussian frequencies); got {}.",
                Param("pool", self.pool), Param("kernel", "gaussian"),
                Param("kernel", self.kernel)))
        if self.pool == "structured" and padded_size(n_features) > 2**17:
            raise InvalidInputError(Message(
                "{} supports at most 2**17 = 131072 features, got n_features = {}.",
                Param("pool", "structured"), n_features))
        if self.feature_map == "cos_sin" and self.n_components % 2:
            raise InvalidInputError(
                "n_components must be even with feature_map='cos_sin' (a cosine and a "
                f"sine per frequency); got {self.n_components}."
            )
        if isinstance(self.gamma, str):
            check_choice("gamma", self.gamma, ("scale",))
        else:
            check_real("gamma", self.gamma, minimum=0.0, include_min=False)

    def _fitted_values_from_params(self):
        return {} if isinstance(self.gamma, str) else {"gamma_": float(self.gamma)}

    def _resolve_gamma(self, X):
        if not isinstance(self.gamma, str):
            return float(self.gamma)
        if X is None:
            raise InvalidInputError(
                "gamma='scale' is computed from training data: call fit(X), or give a "
                "number for gamma."
            )
        return scale_gamma(X, self.kernel)

    @property
    def _n_frequencies(self):
        return self.n_components // 2 if self.feature_map == "cos_sin" else self.n_components

    def _fit_state(self, X, n_features):
        if not hasattr(self, "gamma_"):  # set by a spec's fitted values on rebuild
            self.gamma_ = self._resolve_gamma(X)
        set_cosine(self)
        set_draw_version(self)
        gamma = self.gamma_
        if self.kernel == "gaussian":
            scale = math.sqrt(2.0 * gamma)

            def sample(rng, n):
                return scale * rng.standard_normal((n, n_features))

        else:

            def sample(rng, n):
                return gamma * rng.standard_cauchy((n, n_features))

        m = self._n_frequencies
        self.uses_fwht_ = False
        if self.pool == "iid":
            self.random_weights_ = draw_rows(self.seed_, "frequencies", m, sample)
        elif self.pool == "orthogonal":
            pool = orthogonal_pool(self.seed_, m, n_features, version=self.draw_version_)
            self.random_weights_ = math.sqrt(2.0 * gamma) * pool
        else:
            self.pool_signs_ = structured_signs(self.seed_, m, n_features)
            self.uses_fwht_ = use_fwht(n_features, m)
            self.random_weights_ = (
                None
                if self.uses_fwht_
                else math.sqrt(2.0 * gamma) * structured_pool(self.pool_signs_, m, n_features)
            )
        self.random_offset_ = draw_phases(self.seed_, self.feature_map, m)

    def _state_arrays(self):
        if self.pool != "structured":
            return {"weights": self.random_weights_, "offset": self.random_offset_}
        arrays = {"signs": self.pool_signs_, "offset": self.random_offset_}
        if self.random_weights_ is not None:
            arrays["weights"] = self.random_weights_
        return arrays

    def _project_block(self, X, dtype, out=None):
        """``X @ W.T`` for a row block (GEMM, or FWHT for the structured pool), into
        ``out`` (C-contiguous, ``(n, n_frequencies)``) when given and ``X`` is dense."""
        if self.random_weights_ is None:
            signs = self._cast("signs", self.pool_signs_, dtype)
            scale = math.sqrt(2.0 * self.gamma_)
            return structured_project(X, signs, self._n_frequencies, scale=scale, out=out)
        return matmul_transposed(X, self._cast("weights", self.random_weights_, dtype), out=out)

    def _transform_array(self, X):
        return cosine_features(
            X.shape[0], X.dtype,
            lambda start, stop, out=None: self._project_block(X[start:stop], X.dtype, out=out),
            self._cast("offset", self.random_offset_, X.dtype),
            self.n_components, self.feature_map, math.sqrt(2.0 / self.n_components),
            cosine=self.cosine_,
        )


def _contiguous(a, dtype):
    return np.ascontiguousarray(a, dtype=dtype)


def set_cosine(est):
    """Set ``est.cosine_``: a spec's value on rebuild (``"numpy"`` for old specs), else ours."""
    if not hasattr(est, "cosine_"):
        est.cosine_ = COSINES[0]
    check_choice("cosine_", est.cosine_, COSINES)


def cosine_features(n_rows, dtype, project, offset, n_components, feature_map, scale,
                    cosine="dkrp2"):
    """``scale * cos(project(X) + offset)`` (or the cos/sin pair), by row blocks.

    Shared by the maps whose features are random Fourier features of some density
    (:class:`RandomFourierFeatures`, :class:`dkrp.SphericalRandomFeatures`).

    Parameters
    ----------
    n_rows : int
    dtype : float32 or float64
    project : callable
        ``project(start, stop, out=None)`` returns ``X[start:stop] @ W.T`` in
        ``dtype`` (rows ``start:stop`` of the input), written into ``out`` (a
        C-contiguous ``(stop - start, n_frequencies)`` array) when it can -- the same
        GEMM call either way, so the same bits -- else as a new array.
    offset : ndarray of shape (n_frequencies,), dtype of ``X``
    n_components : int
    feature_map : {"cos", "cos_sin"}
    scale : float
        Multiplies every feature (``sqrt(2 / D)`` for a probability density).
    cosine : {"dkrp2", "dkrp", "numpy"}, default="dkrp2"
        ``"dkrp2"`` / ``"dkrp"``: the compiled, branch-free cosine and sine of
        :mod:`dkrp.features._trig` (kernel version 2 / 1, which differ for float32
        only), fused with the offset and the scale (the same bits on every machine,
        within 1 ulp of the exact value). ``"numpy"``:
        ``np.cos`` / ``np.sin`` (the C library's; what specs written before the
        compiled cosine produce, see :data:`COSINES`).
    """
    check_choice("cosine", cosine, COSINES)
    scale = np.asarray(scale, dtype=dtype)
    m = n_components // 2 if feature_map == "cos_sin" else n_components
    out = np.empty((n_rows, n_components), dtype=dtype)
    cos_only = feature_map == "cos"

    if cosine in _TRIG_VERSION:
        version = _TRIG_VERSION[cosine]

        def work(start, stop):
            if cos_only:
                # the GEMM writes the block of the output and the cosine replaces it in
                # place: no projection array to allocate per block
                block = out[start:stop]
                proj = project(start, stop, block)
                if proj is block:
                    if not cos_features_inplace(block, offset, scale, version):
                        # an argument beyond the compiled reduction's range: the block
                        # was overwritten, so project it again and take the fallback
                        cos_features_block(_contiguous(project(start, stop), dtype), offset,
                                           scale, out, start, version)
                    return
                cos_features_block(_contiguous(proj, dtype), offset, scale, out, start,
                                   version)
            else:
                buf = scratch("rff.projections", (stop - start, m), dtype)
                proj = _contiguous(project(start, stop, buf), dtype)
                cos_sin_features_block(proj, scale, out, start, version)

        run_row_blocks(n_rows, ROW_BLOCK, work)
        return out

    def work(start, stop):
        proj = project(start, stop)
        if cos_only:
            proj += offset
            np.cos(proj, out=out[start:stop])
        else:
            np.cos(proj, out=out[start:stop, :m])
            np.sin(proj, out=out[start:stop, m:])
        out[start:stop] *= scale

    run_row_blocks(n_rows, ROW_BLOCK, work)
    return out
