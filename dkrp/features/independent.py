r"""The P-RP-style baseline: products of projections on fresh, unshared hyperplanes.

P-RP (López-Sánchez et al., Information Sciences 436–437, 2018) projects the
feature space of the degree-two homogeneous polynomial kernel with several complete
random projection matrices, costing :math:`O(dmk)` to draw and to apply. dkrp's
:class:`IndependentPolynomialProjection` is that construction for any degree: every
factor of every product term has its own hyperplane, nothing is pooled. It is the
reference that shows what KRP's shared pool costs (or doesn't) in accuracy, and
what it saves in time.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import draw_rows
from .._threading import ROW_BLOCK, run_row_blocks
from .._validation import check_choice, check_integer
from ..base import BaseProjector
from ._samplers import DISTRIBUTIONS, hyperplane_sampler, resolve_density

__all__ = ["IndependentPolynomialProjection"]

#: Budget (rows × projected columns) of one transform block: bounded memory.
_BLOCK_ENTRIES = 1 << 22


class IndependentPolynomialProjection(BaseProjector):
    r"""Random projection of :math:`x^{\otimes g}` with independent hyperplanes (P-RP style).

    Parameters
    ----------
    degree : int, default=2
        Degree :math:`g \ge 1` of the kernel :math:`\langle x, y\rangle^g`.
    n_components : int, default=100
        Output dimension :math:`k`.
    n_terms : int, default=1
        Number :math:`t` of product terms averaged per component (the :math:`m`
        projection matrices of P-RP, which uses :math:`m = 30`; KRP's default is 1).
    distribution : {"gaussian", "achlioptas"}, default="gaussian"
    density : float or "auto", default="auto"
        For ``"achlioptas"``: fraction :math:`1/s` of non-zero entries; ``"auto"``
        is :math:`1/\sqrt d`.
    random_state : int or None, default=None
        Seed; hyperplanes come from stream ``"independent"``.

    Attributes
    ----------
    hyperplanes_ : ndarray of shape (n_components * n_terms * degree, ``n_features_in_``)
        Row :math:`(l t + i) g + j` is :math:`r_{l,i,j}` (float64 master copy).
    density_ : float
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    See Also
    --------
    dkrp.PolynomialRandomProjection : KRP, which draws the same products from a
        shared pool of ``n_hyperplanes`` vectors.

    Notes
    -----
    Exactly what is computed:

    .. math:: f_l(x) = \frac{1}{\sqrt{k t}} \sum_{i=0}^{t-1} \prod_{j=0}^{g-1}
              \langle x, r_{l,i,j}\rangle ,

    with all :math:`k t g` vectors :math:`r_{l,i,j}` drawn independently — i.e.
    :math:`g t` complete :math:`d \times k` projection matrices
    :math:`R_{i,j} = [r_{0,i,j}, \dots, r_{k-1,i,j}]`, and
    :math:`f(x) = (kt)^{-1/2} \sum_i \bigodot_j R_{i,j}^T x`. This is KRP
    (López-Sánchez et al., Pattern Recognition 2018, eq. (13)–(14)) with a pool of
    :math:`p = g t k` hyperplanes and disjoint index sets
    (``hyperplane_indices_ = arange(g t k).reshape(k, g t)``), a fact the tests
    check bit for bit. Hence the same unbiasedness,
    :math:`E\langle f(x), f(y)\rangle = \langle x, y\rangle^g`, but independent
    components (KRP's components share pool vectors and are only pairwise
    uncorrelated). Cost: :math:`O(d g t k)` to draw and per transformed row,
    versus KRP's :math:`O(d p + g t k)`.

    Relation to the published P-RP: P-RP is defined for :math:`g = 2` only and
    averages products of projections by :math:`m` full matrices; we did not have
    its text, so the pairing of matrices into products here is our reading
    (independent factors for every term, the unbiased choice), not a verified
    transcription.

    References
    ----------
    .. [1] D. López-Sánchez, J. M. Corchado, A. González Arrieta, "Data-independent
       random projections from the feature-map of the homogeneous polynomial kernel
       of degree two", Information Sciences 436–437 (2018).
    .. [2] D. López-Sánchez, A. González Arrieta, J. M. Corchado, Pattern Recognition
       82 (2018), Section 3.4 and Tables 2, 5, 8.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.features.independent import IndependentPolynomialProjection
    >>> X = np.random.default_rng(0).standard_normal((3, 5))
    >>> prp = IndependentPolynomialProjection(degree=2, n_components=4000, random_state=0)
    >>> Z = prp.fit(X).transform(X)
    >>> bool(np.allclose(Z @ Z.T, (X @ X.T) ** 2, rtol=0.3, atol=3.0))
    True
    """

    def __init__(
        self,
        *,
        degree=2,
        n_components=100,
        n_terms=1,
        distribution="gaussian",
        density="auto",
        random_state=None,
    ):
        self.degree = degree
        self.n_components = n_components
        self.n_terms = n_terms
        self.distribution = distribution
        self.density = density
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("degree", self.degree, minimum=1)
        check_integer("n_components", self.n_components, minimum=1)
        check_integer("n_terms", self.n_terms, minimum=1)
        check_choice("distribution", self.distribution, DISTRIBUTIONS)
        self.density_ = resolve_density(self.density, n_features, self.distribution)

    def _fit_state(self, X, n_features):
        n_rows = self.n_components * self.n_terms * self.degree
        sampler = hyperplane_sampler(self.distribution, n_features, self.density_)
        self.hyperplanes_ = draw_rows(self.seed_, "independent", n_rows, sampler)

    def _state_arrays(self):
        return {"hyperplanes": self.hyperplanes_}

    def _transform_array(self, X):
        dtype = X.dtype
        R = self._cast("hyperplanes", self.hyperplanes_, dtype)
        k, t, g = self.n_components, self.n_terms, self.degree
        width = t * g
        scale = 1.0 / math.sqrt(k * t)
        n = X.shape[0]
        out = np.empty((n, k), dtype=dtype)
        # Blocks of components and rows so the n_block × (k_block·t·g) projections
        # stay within _BLOCK_ENTRIES whatever k, t and g are; n_block is a power of two
        # up to ROW_BLOCK, so it divides ROW_BLOCK (see dkrp._threading.ROW_BLOCK).
        k_block = max(1, min(k, _BLOCK_ENTRIES // (256 * width)))
        fit = max(1, _BLOCK_ENTRIES // (k_block * width))
        n_block = min(ROW_BLOCK, 1 << (fit.bit_length() - 1))

        def work(r0, r1):
            rows = X[r0:r1]
            for c0 in range(0, k, k_block):
                c1 = min(k, c0 + k_block)
                proj = np.asarray(rows @ R[c0 * width : c1 * width].T)
                proj = proj.reshape(proj.shape[0], c1 - c0, t, g)
                out[r0:r1, c0:c1] = proj.prod(axis=3).sum(axis=2) * scale

        run_row_blocks(n, n_block, work)
        return out
