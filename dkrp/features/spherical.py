r"""Spherical Random Features for polynomial kernels (Pennington, Yu & Kumar, NIPS 2015).

On L2-normalised inputs the polynomial kernel is a function of the distance
:math:`z = \|x - y\| \in [0, 2]`:

.. math:: K(x, y) = \Big(1 - \frac{\|x - y\|^2}{a^2}\Big)^p
   = \Big(\frac{a^2/2 - 1 + \langle x, y\rangle}{a^2/2}\Big)^p .

Its Fourier transform is not non-negative, so SRF fits a surrogate :math:`\hat K`
whose transform, clipped at zero, is a radial density (:mod:`._srf_fit`), and then
draws random Fourier features of that density.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.sparse as sp

from .._random import draw_rows
from .._validation import check_choice, check_integer, check_real
from ..base import BaseProjector
from ..errors import InvalidInputError
from ._pools import matmul_transposed
from ._srf_fit import (
    FIT_VERSION,
    fit_surrogate,
    libm_exp,
    libm_log,
    polynomial_kernel,
    radial_density,
    radial_grid,
    surrogate_kernel,
)
from .fourier import FEATURE_MAPS, cosine_features, draw_phases, set_cosine

__all__ = ["SphericalRandomFeatures"]

#: The radius draw of new fits (``draw_version_``): 2 computes the sampler's grid,
#: density and radii with the same bits on every machine (see ``legacy_fitted_values``).
DRAW_VERSION = 2

#: Refinement of the radial grid used for inverse-CDF sampling (and for
#: :meth:`SphericalRandomFeatures.surrogate_kernel`).
SAMPLER_REFINE = 4


@functools.lru_cache(maxsize=32)
def _fit_surrogate_cached(n_features, degree, scale, n_terms, version):
    # keyed by the fitter's version too: fits of two procedures never stand in for each other
    return fit_surrogate(n_features, degree, scale, n_terms, version=version)


class SphericalRandomFeatures(BaseProjector):
    r"""Spherical Random Features for the polynomial kernel on the unit sphere.

    Parameters
    ----------
    degree : int, default=3
        :math:`p \ge 1`.
    scale : float, default=4.0
        :math:`a \ge 2` (for :math:`a < 2` the kernel is negative on part of
        :math:`[0, 2]`). :math:`a = 2` gives :math:`((1 + \langle x, y\rangle)/2)^p`.
    n_components : int, default=100
        Output dimension :math:`D`.
    n_terms : int, default=10
        Number :math:`N` of Gaussians in the surrogate.
    feature_map : {"cos", "cos_sin"}, default="cos"
        ``"cos"``: :math:`\sqrt{2M/D}\cos(w_i^T x + b_i)`, :math:`b_i \sim U[0, 2\pi)`.
        ``"cos_sin"``: :math:`D/2` frequencies, :math:`\sqrt{2M/D}[\cos w_i^T x,
        \sin w_i^T x]` (``n_components`` even). As in
        :class:`dkrp.RandomFourierFeatures`, whose transform this map reuses.
    random_state : int or None, default=None
        Seeds the frequencies and phases only; the surrogate does not depend on it.

    Attributes
    ----------
    surrogate_ : dict
        The fitted surrogate: ``sigma`` and ``coef`` (the :math:`N` Gaussians),
        ``mass`` :math:`M = \hat K(0)`, ``max_error`` (max :math:`|\hat K - K|` on
        [0, 2]), ``objective`` and the ``n_features``, ``degree``, ``scale``,
        ``n_terms`` it was fitted for, and ``fit_version``, the fitting procedure
        (``dkrp.features._srf_fit.FIT_VERSION``; absent from specs written before version 2, whose
        surrogates came from version 1). Carried by the spec: workers never refit,
        and a spec's stored surrogate is used whatever its ``fit_version``.
    random_weights_ : ndarray of shape (n_frequencies, ``n_features_in_``)
    random_offset_ : ndarray of shape (n_frequencies,)
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    Notes
    -----
    Choices, each following the paper's mathematics (see :mod:`._srf_fit` for the
    fit):

    * **Normalisation.** ``transform`` maps :math:`x / \|x\|_2`; it computes
      :math:`(X W^T) / \|x\|` so CSR input stays sparse through the GEMM. An
      all-zero row has no direction and raises ``ValueError`` naming the row.
    * **Surrogate.** :math:`\hat K(z) = \sum_{i \le N} c_i e^{-\sigma_i^2 z^2}`,
      :math:`c_i` of any sign; the density is the clipped Fourier transform
      :math:`p_+ = \max(0, p)` (the paper's formula, not the reference code's
      :math:`w^{d-1}`-weighted variant the review found). :math:`\theta` minimises
      :math:`\frac12\int_0^2 (K - \hat K_\theta)^2` with :math:`\hat K_\theta` the
      Hankel transform of :math:`p_+`, by L-BFGS-B (on the log of the objective)
      from deterministic restarts (NNLS start plus log-spaced spreads), keeping the
      best and polishing it on the sampler's radial grid; for :math:`d < 128`, where
      that stays above 1.1 times the floor, further starts whose clipped density sits
      in narrow windows at the floor's shells (fitter version 3), minimised by
      Gauss-Newton where L-BFGS still stalls above it (fitter version 4,
      ``surrogate_["fit_version"]``). It depends on :math:`(d, p, a, N)` only, so
      every seed estimates the same :math:`\hat K` on one machine. L-BFGS runs with
      BLAS in the loop and stops where the BLAS's rounding leads it, so another
      machine may fit another surrogate of nearly the same error (d = 20, p = 3,
      a = 4: :math:`\sigma_1` = 0.164 on an AVX2 machine, 0.171 on an AVX-512 one):
      the spec carries the surrogate, so featurize elsewhere from the saved spec
      (as ``dkrp featurize`` and the cluster path do), not by refitting the seed.
    * **Floor.** No non-negative radial density matches :math:`K` exactly: the
      best max error on [0, 2] is about 1.6e-2 (p = 3, 7), 1.2e-2 (p = 10),
      5e-3 (p = 20) at :math:`a = 4`. The features are unbiased for
      :math:`\hat K` (:meth:`surrogate_kernel`), not for :math:`K`.
    * **Sampling.** :math:`\|w\|` by inverse CDF (linear interpolation in
      :math:`\log r`) of the radial density :math:`q(r) \propto r^{d-1}p_+(r)` on
      a log-spaced grid :math:`4\times` finer than the fit's; direction
      :math:`g/\|g\|`, :math:`g \sim N(0, I_d)`; per block of 256 rows the
      generator draws :math:`g` then the uniforms.
    * **Mass.** :math:`M = \int q = \hat K(0) \ne 1`: radii come from :math:`q/M`
      and the features carry :math:`\sqrt M`, so
      :math:`E\langle z(x), z(y)\rangle = \hat K(\|x - y\|)`.

    References
    ----------
    .. [1] J. Pennington, F. X. Yu, S. Kumar, "Spherical Random Features for
       Polynomial Kernels", NIPS 2015.
    .. [2] H. Janati, review of [1], ENSAE 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp import SphericalRandomFeatures
    >>> X = np.random.default_rng(0).standard_normal((5, 16))
    >>> srf = SphericalRandomFeatures(degree=3, scale=4.0, n_components=256,
    ...                               random_state=0).fit(X)
    >>> srf.transform(X).shape
    (5, 256)
    >>> bool(srf.surrogate_["max_error"] < 0.02)
    True
    """

    fitted_values = ("surrogate_", "cosine_", "draw_version_")
    #: ``draw_version_`` 2 samples the radii with the same bits on every machine (the C
    #: library's exp/log, a sum in order); 1, numpy's CPU-dispatched exp/log and a BLAS
    #: GEMV, is what specs without the value imply
    legacy_fitted_values = {"cosine_": "numpy", "draw_version_": 1}

    def __init__(self, *, degree=3, scale=4.0, n_components=100, n_terms=10, feature_map="cos",
                 random_state=None):
        self.degree = degree
        self.scale = scale
        self.n_components = n_components
        self.n_terms = n_terms
        self.feature_map = feature_map
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("degree", self.degree, minimum=1)
        check_real("scale", self.scale, minimum=2.0)
        check_integer("n_components", self.n_components, minimum=1)
        check_integer("n_terms", self.n_terms, minimum=1)
        check_choice("feature_map", self.feature_map, FEATURE_MAPS)
        if self.feature_map == "cos_sin" and self.n_components % 2:
            raise InvalidInputError(
                "n_components must be even with feature_map='cos_sin' (a cosine and a "
                f"sine per frequency); got {self.n_components}."
            )

    @property
    def _n_frequencies(self):
        return self.n_components // 2 if self.feature_map == "cos_sin" else self.n_components

    def _surrogate_key(self, n_features):
        return {"n_features": int(n_features), "degree": int(self.degree),
                "scale": float(self.scale), "n_terms": int(self.n_terms)}

    def _fit_state(self, X, n_features):
        set_cosine(self)
        key = self._surrogate_key(n_features)
        current = getattr(self, "surrogate_", None)
        if not (isinstance(current, dict) and all(current.get(k) == v for k, v in key.items())):
            # a pure function of (d, p, a, N): fitted once per process for every seed
            fit = _fit_surrogate_cached(n_features, key["degree"], key["scale"],
                                        key["n_terms"], FIT_VERSION)
            self.surrogate_ = {**key, "sigma": list(fit.sigma), "coef": list(fit.coef),
                               "mass": fit.mass, "max_error": fit.max_error,
                               "objective": fit.objective, "fit_version": fit.version}
        if not hasattr(self, "draw_version_"):  # a spec's value on rebuild
            self.draw_version_ = DRAW_VERSION
        portable = self.draw_version_ >= 2
        exp, log = (libm_exp, libm_log) if portable else (np.exp, np.log)
        sigma = np.asarray(self.surrogate_["sigma"], dtype=np.float64)
        coef = np.asarray(self.surrogate_["coef"], dtype=np.float64)
        r, w = radial_grid(n_features, key["degree"], key["scale"],
                                    refine=SAMPLER_REFINE, portable=portable)
        q = radial_density(r, sigma, coef, n_features, portable=portable)
        mass_cells = 0.5 * (q[1:] * r[1:] + q[:-1] * r[:-1])  # trapezoid in log r
        cdf = np.concatenate([[0.0], np.cumsum(mass_cells)])
        log_r = log(r)
        self.mass_ = float(cdf[-1] * (log_r[1] - log_r[0]))
        cdf /= cdf[-1]

        def sample(rng, n):
            g = rng.standard_normal((n, n_features))
            u = rng.random(n)
            norms = np.linalg.norm(g, axis=1)
            radius = exp(np.interp(u, cdf, log_r))
            return g * (radius / norms)[:, None]

        m = self._n_frequencies
        self.random_weights_ = draw_rows(self.seed_, "frequencies", m, sample)
        self.random_offset_ = draw_phases(self.seed_, self.feature_map, m)

    def _state_arrays(self):
        surrogate = np.concatenate([self.surrogate_["sigma"], self.surrogate_["coef"]])
        return {"surrogate": np.asarray(surrogate, dtype=np.float64),
                "weights": self.random_weights_, "offset": self.random_offset_}

    def _row_norms(self, X):
        if sp.issparse(X):
            sq = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
        else:
            sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        zero = np.flatnonzero(sq == 0)
        if zero.size:
            raise InvalidInputError(
                f"SphericalRandomFeatures maps x / ||x||: row {int(zero[0])} is all zeros "
                f"({zero.size} zero row(s) in this block) and has no direction. Drop such "
                "rows or add a constant feature."
            )
        return np.sqrt(sq)

    def _transform_array(self, X):
        dtype = X.dtype
        inv_norm = (1.0 / self._row_norms(X)).astype(dtype)
        weights = self._cast("weights", self.random_weights_, dtype)

        def project(start, stop, out=None):
            proj = matmul_transposed(X[start:stop], weights, out=out)
            proj *= inv_norm[start:stop, None]
            return proj

        return cosine_features(X.shape[0], dtype, project,
                               self._cast("offset", self.random_offset_, dtype),
                               self.n_components, self.feature_map,
                               math.sqrt(2.0 * self.mass_ / self.n_components),
                               cosine=self.cosine_)

    def surrogate_kernel(self, z):
        r"""The kernel the features estimate, :math:`\hat K(z)`, at distances ``z``.

        Parameters
        ----------
        z : array-like
            Distances :math:`\|x/\|x\| - y/\|y\|\|` in [0, 2].

        Returns
        -------
        ndarray
            :math:`\int q(r)\,\Omega_d(rz)\,dr` for the clipped density on the
            sampler's grid.
        """
        s = self.surrogate_
        return surrogate_kernel(z, s["sigma"], s["coef"], s["n_features"],
                                         s["degree"], s["scale"], refine=SAMPLER_REFINE)

    def exact_kernel(self, z):
        """The polynomial kernel :math:`(1 - z^2/a^2)^p` at distances ``z``."""
        return polynomial_kernel(z, self.degree, self.scale)
