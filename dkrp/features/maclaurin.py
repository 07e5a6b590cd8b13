r"""Random Maclaurin features for dot-product kernels (Kar & Karnick, AISTATS 2012).

A dot-product kernel :math:`K(x, y) = f(\langle x, y\rangle)` whose Maclaurin
series :math:`f(u) = \sum_n a_n u^n` has non-negative coefficients is, by
Schoenberg's theorem, positive definite on every :math:`\mathbb R^d`, and

.. math:: Z(x) = \sqrt{a_N / q_N}\ \prod_{j=1}^{N} \langle \omega_j, x\rangle ,
          \qquad N \sim q, \quad \omega_j \sim \text{Rademacher}^d ,

is an unbiased estimator: :math:`E[Z(x) Z(y)] = \sum_n q_n (a_n/q_n)
\langle x, y\rangle^n = K(x, y)`.

Kernels (names shared with :mod:`dkrp.kernels` where they exist there):

* ``"polynomial"``: :math:`(\gamma\langle x,y\rangle + c_0)^g`,
  :math:`a_n = \binom g n \gamma^n c_0^{g-n}` for :math:`n \le g`;
* ``"homogeneous_polynomial"``: :math:`\langle x,y\rangle^g`, :math:`a_g = 1`;
* ``"exponential"``: :math:`\exp(\gamma\langle x,y\rangle)`, :math:`a_n = \gamma^n/n!`.

``"exponential"`` is not (yet) in :mod:`dkrp.kernels`; its exact Gram matrix is
``numpy.exp(gamma * X @ Y.T)``.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import draw_rows
from .._threading import run_row_blocks
from .._validation import check_choice, check_integer, check_real
from ..base import BaseProjector
from ..errors import InvalidInputError

__all__ = ["RandomMaclaurin", "MACLAURIN_KERNELS"]

MACLAURIN_KERNELS = ("polynomial", "homogeneous_polynomial", "exponential")

#: Kar & Karnick's order distribution is P(N = n) = 1 / P**(n + 1) with P = 2.
_ORDER_BASE = 2.0

_ROW_BLOCK = 2048


def _rademacher_sampler(n_features):
    def sample(rng, n):
        return rng.integers(0, 2, size=(n, n_features)).astype(np.float64) * 2.0 - 1.0

    return sample


class RandomMaclaurin(BaseProjector):
    r"""Random Maclaurin features (Kar & Karnick 2012) for dot-product kernels.

    Parameters
    ----------
    kernel : {"polynomial", "homogeneous_polynomial", "exponential"}, default="polynomial"
        The dot-product kernel (table in the module docstring). The default is the
        inhomogeneous polynomial kernel, the case the method was designed for; with
        ``"homogeneous_polynomial"`` every feature is a product of ``degree``
        Rademacher projections.
    degree : int, default=2
        Degree :math:`g` of the polynomial kernels.
    gamma : float, default=None
        Scale of :math:`\langle x, y\rangle` for ``"polynomial"`` and
        ``"exponential"``; ``None`` is ``1 / n_features``.
    coef0 : float, default=1.0
        :math:`c_0 \ge 0` of ``"polynomial"`` (a negative :math:`c_0` gives negative
        Maclaurin coefficients, which the method cannot sample).
    n_components : int, default=100
        Number :math:`D` of features.
    random_state : int or None, default=None
        Seed; orders come from stream ``"orders"``, Rademacher vectors from stream
        ``"rademacher"``.

    Attributes
    ----------
    orders_ : ndarray of int64, shape (n_components,)
        Order :math:`N_i` of each feature.
    hyperplanes_ : ndarray of shape (``orders_.sum()``, ``n_features_in_``)
        Rademacher vectors (entries ±1, float64); feature :math:`i` uses rows
        ``offsets_[i]:offsets_[i + 1]``.
    offsets_ : ndarray of int64, shape (n_components + 1,)
    coefficients_ : ndarray of shape (n_components,)
        :math:`\sqrt{a_{N_i}/q_{N_i}}`.
    gamma_ : float
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    TensorSketch : a lower-variance sketch of polynomial kernels.
    dkrp.PolynomialRandomProjection : KRP for the homogeneous polynomial kernel.

    Notes
    -----
    The output is :math:`z(x) = D^{-1/2}[Z_1(x), \dots, Z_D(x)]` with independent
    :math:`Z_i`, so :math:`E\langle z(x), z(y)\rangle = K(x, y)` exactly.

    Kar & Karnick draw :math:`N` with :math:`P(N = n) = 2^{-(n+1)}` over all
    :math:`n \ge 0`. For the polynomial kernels, whose coefficients vanish beyond
    :math:`g`, we use that distribution *conditioned on* :math:`a_n > 0`
    (:math:`q_n \propto 2^{-(n+1)}` on the support): still unbiased, and no feature
    is wasted on an order with :math:`a_n = 0`. For ``"exponential"`` it is Kar &
    Karnick's geometric law unchanged.

    Cost: :math:`O(d\,\sum_i N_i)` per row (one GEMM against the Rademacher
    vectors) plus the products.

    References
    ----------
    .. [1] P. Kar, H. Karnick, "Random Feature Maps for Dot Product Kernels",
       AISTATS 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.features.maclaurin import RandomMaclaurin
    >>> X = np.random.default_rng(0).standard_normal((4, 3)) / 2
    >>> rm = RandomMaclaurin(degree=2, gamma=1.0, coef0=1.0, n_components=20000,
    ...                      random_state=0).fit(X)
    >>> Z = rm.transform(X)
    >>> bool(np.allclose(Z @ Z.T, (X @ X.T + 1.0) ** 2, atol=0.15))
    True
    """

    def __init__(
        self,
        *,
        kernel="polynomial",
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
        check_choice("kernel", self.kernel, MACLAURIN_KERNELS)
        check_integer("n_components", self.n_components, minimum=1)
        if self.kernel in ("polynomial", "homogeneous_polynomial"):
            check_integer("degree", self.degree, minimum=1)
        if self.kernel == "homogeneous_polynomial":
            self.gamma_ = 1.0
        elif self.gamma is None:
            self.gamma_ = 1.0 / n_features
        else:
            self.gamma_ = check_real("gamma", self.gamma, minimum=0.0, include_min=False)
        if self.kernel == "polynomial":
            coef0 = check_real("coef0", self.coef0)
            if coef0 < 0:
                raise InvalidInputError(
                    f"coef0 must be >= 0 for RandomMaclaurin, got {coef0}: a negative coef0 "
                    "gives negative Maclaurin coefficients, which cannot be sampled."
                )

    # -- the order distribution -----------------------------------------------
    def _log_coefficient(self, n):
        """log a_n (−inf where a_n = 0)."""
        g, gamma = int(self.degree), self.gamma_
        if self.kernel == "exponential":
            return n * math.log(gamma) - math.lgamma(n + 1)
        if self.kernel == "homogeneous_polynomial":
            return 0.0 if n == g else -math.inf
        if n > g:
            return -math.inf
        coef0 = float(self.coef0)
        if coef0 == 0.0 and n < g:
            return -math.inf
        log_c0 = (g - n) * math.log(coef0) if n < g else 0.0
        return math.log(math.comb(g, n)) + n * math.log(gamma) + log_c0

    def _support(self):
        """Orders with a_n > 0 and their probabilities q_n (None: unbounded geometric)."""
        if self.kernel == "exponential":
            return None
        orders = np.array([n for n in range(int(self.degree) + 1)
                           if self._log_coefficient(n) > -math.inf], dtype=np.int64)
        q = _ORDER_BASE ** -(orders + 1.0)
        return orders, q / q.sum()

    def _log_q(self, n):
        support = self._support()
        if support is None:
            return -(n + 1) * math.log(_ORDER_BASE)
        orders, q = support
        return math.log(float(q[np.searchsorted(orders, n)]))

    def _order_sampler(self):
        support = self._support()
        if support is None:

            def sample(rng, n):
                # numpy's geometric counts trials (>= 1): N = trials - 1, P(N=n) = 2^-(n+1).
                return rng.geometric(1.0 / _ORDER_BASE, size=n).astype(np.int64) - 1

            return sample
        orders, q = support

        def sample_support(rng, n):
            return orders[rng.choice(len(orders), size=n, p=q)]

        return sample_support

    def _fit_state(self, X, n_features):
        self.orders_ = draw_rows(self.seed_, "orders", self.n_components, self._order_sampler())
        self.offsets_ = np.concatenate([[0], np.cumsum(self.orders_)]).astype(np.int64)
        self.hyperplanes_ = draw_rows(
            self.seed_, "rademacher", int(self.offsets_[-1]), _rademacher_sampler(n_features)
        )
        log_w = {int(n): 0.5 * (self._log_coefficient(int(n)) - self._log_q(int(n)))
                 for n in np.unique(self.orders_)}
        self.coefficients_ = np.array([math.exp(log_w[int(n)]) for n in self.orders_])

    def _state_arrays(self):
        return {"orders": self.orders_, "hyperplanes": self.hyperplanes_}

    def _groups(self):
        """Per order n: (feature indices, their (count × n) hyperplane rows)."""

        def build(_):
            groups = []
            for n in np.unique(self.orders_):
                features = np.flatnonzero(self.orders_ == n)
                rows = self.offsets_[features][:, None] + np.arange(int(n))[None, :]
                groups.append((int(n), features, rows))
            return groups

        return self._cached("groups", np.float64, build)

    def _transform_array(self, X):
        dtype = X.dtype
        R = self._cast("hyperplanes", self.hyperplanes_, dtype)
        coef = self._cast("coefficients", self.coefficients_ / math.sqrt(self.n_components),
                          dtype)
        out = np.empty((X.shape[0], self.n_components), dtype=dtype)
        groups = self._groups()

        def work(start, stop):
            # one BLAS thread per block (run_row_blocks): the bits do not depend on
            # the thread count
            block = X[start:stop]
            proj = np.asarray(block @ R.T) if R.shape[0] else None
            dest = out[start:stop]
            for n, features, rows in groups:
                if n == 0:
                    dest[:, features] = coef[features]
                    continue
                prod = proj[:, rows[:, 0]]
                for j in range(1, n):
                    prod = prod * proj[:, rows[:, j]]
                dest[:, features] = prod * coef[features]

        run_row_blocks(X.shape[0], _ROW_BLOCK, work)
        return out
