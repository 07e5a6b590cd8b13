r"""Random projections from the feature space of the homogeneous polynomial kernel.

The kernel is :math:`K(x, y) = \langle x, y\rangle^g` with feature map
:math:`\phi(x) = x^{\otimes g}`. This module owns

* :class:`PolynomialRandomProjection` — the Kernelized Random Projection (KRP) of
  López-Sánchez, González Arrieta & Corchado (Pattern Recognition, 2018), Algorithm 1:
  a data-independent, implicit random projection of :math:`\phi(x)`;
* :class:`ExplicitPolynomialProjection` — the explicit :math:`\phi(x)` + RP reference
  of the same paper, computed block-wise so memory stays bounded.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.sparse as sp

from .._choices import EXPLICIT_FORMS
from .._random import BLOCK_SIZE, draw_block, draw_rows
from .._threading import run_row_blocks, scratch
from .._validation import check_choice, check_integer
from ..base import BaseProjector
from ..errors import InvalidInputError, Message, Param
from ._gather import gather_products
from ._pools import (
    INDEX_DESIGNS,
    POOLS,
    balanced_indices,
    matmul_transposed,
    orthogonal_pool,
    padded_size,
    set_draw_version,
    structured_pool,
    structured_project,
    structured_signs,
    tight_frame_pool,
    use_fwht,
)
from ._samplers import DISTRIBUTIONS, hyperplane_sampler, index_sampler, resolve_density

__all__ = ["PolynomialRandomProjection", "ExplicitPolynomialProjection"]

#: Rows per GEMM block in transform: the (block × p) projections stay in cache
#: while the gather consumes them, and extra memory is independent of n.
#: Part of the seed contract's "same chunking" (a block's GEMM is one BLAS call).
ROW_BLOCK = 512


class PolynomialRandomProjection(BaseProjector):
    r"""Kernelized Random Projection (KRP) for the homogeneous polynomial kernel.

    Projects :math:`\phi(x) = x^{\otimes g}` onto ``n_components`` random directions
    without ever forming :math:`\phi(x)`: a pool of ``n_hyperplanes`` random vectors
    is drawn once, and each output component multiplies the projections of ``x`` on
    ``degree * n_terms`` distinct pool vectors.

    Parameters
    ----------
    degree : int, default=2
        Degree :math:`g \ge 1` of the kernel :math:`\langle x, y\rangle^g`.
    n_components : int, default=100
        Output dimension :math:`k`.
    n_hyperplanes : int, default=1000
        Size :math:`p` of the pool of hyperplanes; must be at least
        ``degree * n_terms``.
    n_terms : int, default=1
        Number :math:`t` of product terms summed per component (the CLT terms of
        the paper, which uses 30).
    distribution : {"gaussian", "achlioptas"}, default="gaussian"
        Distribution of the pool entries.
    density : float or "auto", default="auto"
        Fraction :math:`1/s` of non-zero entries for ``"achlioptas"`` (1 and 1/3 in
        the paper); ``"auto"`` is :math:`1/\sqrt{d}` (Li et al. 2006). Ignored for
        ``"gaussian"``.
    pool : {"iid", "orthogonal", "tight_frame", "structured"}, default="iid"
        How the pool is built (see :mod:`dkrp.features._pools`). ``"iid"``:
        independent rows from ``distribution`` (the paper). ``"orthogonal"``:
        blocks of :math:`d` orthogonal Gaussian directions with chi norms (Yu et
        al. 2016). ``"tight_frame"``: the Gaussian pool rescaled so
        :math:`S^T S = pI`. ``"structured"``: Hadamard blocks
        :math:`\frac1D H D_1 H D_2 H D_3` with random ±1 diagonals on ``x``
        zero-padded to :math:`D = 2^{\lceil \log_2 d\rceil}` (a tight frame when
        ``n_hyperplanes`` is a multiple of :math:`D`), applied by FWHT or GEMM
        (:func:`dkrp.features._pools.use_fwht`). The non-i.i.d. pools need
        ``distribution="gaussian"``.
    index_design : {"random", "balanced"}, default="random"
        How components pick their ``degree * n_terms`` distinct pool rows:
        independent uniform subsets (the paper), or consecutive chunks of a
        stream of permutations, so every pool row is used equally often (±1) and
        components overlap little (:func:`dkrp.features._pools.balanced_indices`).
    random_state : int or None, default=None
        Seed. ``None`` draws one at fit, recorded in ``seed_`` and the spec.

    Attributes
    ----------
    hyperplanes_ : ndarray of shape (n_hyperplanes, ``n_features_in_``) or None
        The pool :math:`S` (float64 master copy). ``None`` for the structured
        pool on its FWHT path, which never materialises it (``pool_signs_``
        defines it; :func:`dkrp.features._pools.structured_pool` builds it).
    pool_signs_ : ndarray of shape (n_blocks, 3, D), int8
        Structured pool only: the ±1 diagonals :math:`D_1, D_2, D_3` per block.
    uses_fwht_ : bool
        Whether the transform applies the pool by FWHT (structured pool only).
    hyperplane_indices_ : ndarray of shape (n_components, degree * n_terms)
        Pool rows used by each component; row ``l`` lists term ``i``'s ``degree``
        indices at positions ``i*degree ... i*degree + degree - 1``.
    density_ : float
        Resolved density (1.0 for Gaussian pools).
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str
        SHA-256 of the pool and indices; verified whenever a spec is rebuilt.

    See Also
    --------
    ExplicitPolynomialProjection : the explicit φ(x) + RP reference.
    sklearn.kernel_approximation.PolynomialCountSketch : a sketch of the same kernel.

    Notes
    -----
    Component :math:`l` is (eq. (13)–(14) of the paper)

    .. math:: f_l(x) = \frac{1}{\sqrt{k}} \sum_{i=0}^{t-1} \frac{1}{\sqrt t}
              \prod_{j=1}^{g} \langle x, r_{l,i,j}\rangle ,

    the projection of :math:`\phi(x)` on :math:`\frac{1}{\sqrt t}\sum_i
    \bigotimes_j r_{l,i,j}`. Because the ``g·t`` pool vectors of a component are
    distinct and have independent zero-mean, unit-variance entries,
    :math:`E\langle f(x), f(y)\rangle = \langle x, y\rangle^g` exactly and
    :math:`E\|f(x) - f(y)\|^2 = \|\phi(x) - \phi(y)\|^2`.

    Transform cost: one GEMM :math:`X S^T` (:math:`O(npd)`) and a fused, compiled
    gather-multiply-sum (:math:`O(nkgt)`), in row blocks of bounded memory. The
    structured pool replaces the GEMM by three FWHTs per Hadamard block,
    :math:`O(n \lceil p/D\rceil D \log D)`, when that is cheaper.

    *Pools and bias.* The extra distortion of KRP over the explicit
    :math:`\phi(x)` + RP comes from all components sharing one pool; its leading
    term, :math:`\frac1p \sum_i r_i^T M r_i - \operatorname{tr} M`, vanishes for a
    tight frame (:math:`S^T S = pI`), which is why the ``"tight_frame"`` and
    ``"structured"`` pools reach the :math:`\phi(x)` + RP distortion at the
    paper's :math:`p`. Their rows are dependent, so the estimator is unbiased only
    up to :math:`O(1/p)`: for :math:`g = 2`,

    .. math:: E\langle f(x), f(y)\rangle - \langle x, y\rangle^2 \approx
              -\frac{\|x\|^2\|y\|^2 + \langle x, y\rangle^2}{p - 1}

    (exact for the tight frame, whose rows are exchangeable and sign-symmetric; to
    leading order for the orthogonal and full structured pools), i.e. a relative
    bias of at most :math:`2/(p-1)` of :math:`\|x\|^2\|y\|^2`; for :math:`g > 2`
    it is :math:`O(g^2/p)`. The ``"iid"`` pool is exactly unbiased with either
    index design.

    *Specs.* Every pool is regenerated bit for bit from the seed on any machine (the
    structured pool's materialisation is exact integer arithmetic, its GEMM-or-FWHT
    choice depends only on :math:`(d, p)`; the frame pools orthonormalise with a
    compiled Gram–Schmidt, ``draw_version_ = 2``). Specs written before recorded no
    ``draw_version_``: their ``"orthogonal"`` and ``"tight_frame"`` pools are LAPACK's
    (version 1) and rebuild on the kind of machine that wrote them; elsewhere
    :func:`dkrp.from_spec` refuses them with :class:`dkrp.SpecError` naming the BLAS
    kernel, instead of silently producing other features.

    References
    ----------
    .. [1] D. López-Sánchez, A. González Arrieta, J. M. Corchado, "Data-independent
       Random Projections from the feature-space of the homogeneous polynomial
       kernel", Pattern Recognition 82 (2018). doi:10.1016/j.patcog.2018.05.003
    .. [2] D. Achlioptas, "Database-friendly random projections", PODS 2001.
    .. [3] F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar,
       "Orthogonal Random Features", NIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp import PolynomialRandomProjection
    >>> X = np.random.default_rng(0).standard_normal((5, 8))
    >>> krp = PolynomialRandomProjection(degree=2, n_components=16, n_hyperplanes=32,
    ...                                  random_state=0).fit(X)
    >>> krp.transform(X).shape
    (5, 16)
    >>> bool(np.array_equal(krp.transform(X), krp.transform(X)))
    True
    >>> tf = PolynomialRandomProjection(n_components=16, n_hyperplanes=32,
    ...                                 pool="tight_frame", random_state=0).fit(X)
    >>> S = tf.hyperplanes_
    >>> bool(np.allclose(S.T @ S, 32 * np.eye(8)))
    True
    """

    #: the pool's draw procedure (dkrp.features._pools.DRAW_VERSION); specs written
    #: before it was recorded drew the frame pools with LAPACK (version 1)
    fitted_values = ("draw_version_",)
    legacy_fitted_values = {"draw_version_": 1}

    def __init__(
        self,
        *,
        degree=2,
        n_components=100,
        n_hyperplanes=1000,
        n_terms=1,
        distribution="gaussian",
        density="auto",
        pool="iid",
        index_design="random",
        random_state=None,
    ):
        self.degree = degree
        self.n_components = n_components
        self.n_hyperplanes = n_hyperplanes
        self.n_terms = n_terms
        self.distribution = distribution
        self.density = density
        self.pool = pool
        self.index_design = index_design
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("degree", self.degree, minimum=1)
        check_integer("n_components", self.n_components, minimum=1)
        check_integer("n_hyperplanes", self.n_hyperplanes, minimum=1)
        check_integer("n_terms", self.n_terms, minimum=1)
        check_choice("distribution", self.distribution, DISTRIBUTIONS)
        check_choice("pool", self.pool, POOLS)
        check_choice("index_design", self.index_design, INDEX_DESIGNS)
        if self.pool != "iid" and self.distribution != "gaussian":
            raise InvalidInputError(Message(
                "{} builds its own Gaussian-based rows; {} applies to {} only.",
                Param("pool", self.pool), Param("distribution", self.distribution),
                Param("pool", "iid")))
        if self.pool == "structured" and padded_size(n_features) > 2**17:
            raise InvalidInputError(Message(
                "{} supports at most 2**17 = 131072 features (exact materialisation), got "
                "n_features = {}.", Param("pool", "structured"), n_features))
        if self.degree * self.n_terms > self.n_hyperplanes:
            degree, n_terms, pool_size = Param("degree"), Param("n_terms"), Param("n_hyperplanes")
            raise InvalidInputError(Message(
                "{} * {} must not exceed {}: each component uses {} * {} = {} distinct pool "
                "hyperplanes, but {} = {}.", degree, n_terms, pool_size, degree, n_terms,
                self.degree * self.n_terms, pool_size, self.n_hyperplanes))
        self.density_ = resolve_density(self.density, n_features, self.distribution)

    def _fit_state(self, X, n_features):
        set_draw_version(self)
        p = self.n_hyperplanes
        self.uses_fwht_ = False
        if self.pool == "iid":
            sampler = hyperplane_sampler(self.distribution, n_features, self.density_)
            self.hyperplanes_ = draw_rows(self.seed_, "pool", p, sampler)
        elif self.pool == "orthogonal":
            self.hyperplanes_ = orthogonal_pool(self.seed_, p, n_features,
                                                version=self.draw_version_)
        elif self.pool == "tight_frame":
            self.hyperplanes_ = tight_frame_pool(self.seed_, p, n_features,
                                                 version=self.draw_version_)
        else:
            self.pool_signs_ = structured_signs(self.seed_, p, n_features)
            self.uses_fwht_ = use_fwht(n_features, p)
            self.hyperplanes_ = (
                None if self.uses_fwht_ else structured_pool(self.pool_signs_, p, n_features)
            )
        width = self.degree * self.n_terms
        if self.index_design == "random":
            self.hyperplane_indices_ = draw_rows(
                self.seed_, "indices", self.n_components, index_sampler(p, width)
            )
        else:
            self.hyperplane_indices_ = balanced_indices(self.seed_, self.n_components, width, p)

    def _state_arrays(self):
        if self.pool != "structured":
            return {"hyperplanes": self.hyperplanes_, "indices": self.hyperplane_indices_}
        arrays = {"signs": self.pool_signs_, "indices": self.hyperplane_indices_}
        if self.hyperplanes_ is not None:
            arrays["hyperplanes"] = self.hyperplanes_
        return arrays

    def _project_block(self, X, dtype, out=None):
        """``X @ S.T`` for a row block (GEMM, or FWHT for the structured pool), into
        ``out`` (shape ``(n, n_hyperplanes)``) when given and ``X`` is dense."""
        if self.hyperplanes_ is None:
            signs = self._cast("signs", self.pool_signs_, dtype)
            return structured_project(X, signs, self.n_hyperplanes, out=out)
        return matmul_transposed(X, self._cast("hyperplanes", self.hyperplanes_, dtype),
                                 out=out)

    def _transform_array(self, X):
        dtype = X.dtype
        scale = 1.0 / math.sqrt(self.n_terms * self.n_components)
        out = np.empty((X.shape[0], self.n_components), dtype=dtype)
        indices = self.hyperplane_indices_

        def work(start, stop):
            # the projections live in this thread's work array, not a fresh allocation
            buf = scratch("krp.projections", (stop - start, self.n_hyperplanes), dtype)
            block = self._project_block(X[start:stop], dtype, out=buf)
            gather_products(block, indices, self.degree, scale, out, start)

        run_row_blocks(X.shape[0], ROW_BLOCK, work)
        return out


class ExplicitPolynomialProjection(BaseProjector):
    r"""Explicit :math:`\phi(x)` followed by a random projection.

    The reference the KRP paper measures itself against: project the explicit
    feature vector with a ``n_components × D`` Gaussian or Achlioptas matrix
    :math:`R`, scaled by :math:`1/\sqrt k`. :math:`R` is never held whole: it is
    regenerated from the seed in blocks of rows of :math:`R^T`, and :math:`\phi(X)`
    is formed one column block at a time, so memory is
    :math:`O(n k + b (n_{block} + k))` for block width :math:`b`.

    Parameters
    ----------
    degree : int, default=2
    n_components : int, default=100
    distribution : {"gaussian", "achlioptas"}, default="gaussian"
    density : float or "auto", default="auto"
        For ``"achlioptas"``; ``"auto"`` is :math:`1/\sqrt{D}`.
    form : {"tensor", "monomials"}, default="tensor"
        Which explicit map :math:`\phi` is projected. ``"tensor"``: the paper's
        :math:`\phi(x) = x^{\otimes g}`, :math:`D = d^g` coordinates.
        ``"monomials"``: each distinct monomial once, weighted,
        :math:`\phi_\alpha(x) = \sqrt{g! / \prod_i \alpha_i!}\, x^\alpha` for the
        :math:`D = \binom{d+g-1}{g}` multisets :math:`\alpha` of size :math:`g`
        (lexicographic order), about :math:`1/g!` of the tensor's cost. Both give
        :math:`\langle \phi(x), \phi(y) \rangle = \langle x, y \rangle^g`, so every
        JL projection of either preserves the kernel's distances alike; with Gaussian
        entries the two even give features of the same distribution (see Notes).
    random_state : int or None, default=None

    Attributes
    ----------
    n_features_in_ : int
    n_explicit_features_ : int
        :math:`D`: :math:`d^g` (tensor) or :math:`\binom{d+g-1}{g}` (monomials).
    density_ : float
    seed_ : int
    spec_checksum_ : str
        SHA-256 of the first block of :math:`R^T` (the whole matrix is too large to
        hash at fit time; a different generator shows in its first block).

    Notes
    -----
    Cost :math:`O(n D k)`: use it to measure approximations on small inputs (the
    paper's 500 test samples), not for production featurization.

    *Why the monomial form is the same projection, for Gaussian entries.* With the
    tensor form a component is :math:`\sum_{i_1 \dots i_g} R_{i_1 \dots i_g}
    x_{i_1} \cdots x_{i_g} = \sum_\alpha \big(\sum_{\pi(\alpha)} R_\pi\big)
    x^\alpha`, the inner sum running over the :math:`g!/\prod_i \alpha_i!` index
    tuples that are orderings of :math:`\alpha`. A sum of that many independent
    :math:`N(0, 1)` entries is :math:`N(0, g!/\prod_i \alpha_i!)`, i.e. the weight of
    :math:`\phi_\alpha` times one :math:`N(0, 1)` entry, independent across
    :math:`\alpha`: the monomial form's components have exactly the tensor form's
    distribution (not its values: the two draw different streams). Achlioptas
    entries do not add up that way; there the monomial form is another valid
    projection of the same kernel space, not the paper's.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp import ExplicitPolynomialProjection
    >>> X = np.random.default_rng(0).standard_normal((3, 4))
    >>> ExplicitPolynomialProjection(n_components=8, random_state=0).fit(X).transform(X).shape
    (3, 8)
    >>> ExplicitPolynomialProjection(form="monomials", random_state=0).fit(X).n_explicit_features_
    10
    """

    #: rows of R^T per processing block (a multiple of the seed-contract block).
    COLUMN_BLOCK = 16 * BLOCK_SIZE
    #: rows of X per thread's tile of phi (256 x COLUMN_BLOCK float64: 8 MiB): small
    #: enough that the paper's 500 test rows keep two cores busy, a divisor of the feature
    #: store's PIPELINE_ROWS so a chunk written in steps gets the whole chunk's bits
    ROW_TILE = 256
    #: the seed stream of each form (EXPLICIT_FORMS): the tensor form's is the one specs
    #: always used
    _STREAMS = dict(zip(EXPLICIT_FORMS, ("explicit", "explicit-monomials"), strict=True))

    def __init__(
        self,
        *,
        degree=2,
        n_components=100,
        distribution="gaussian",
        density="auto",
        form="tensor",
        random_state=None,
    ):
        self.degree = degree
        self.n_components = n_components
        self.distribution = distribution
        self.density = density
        self.form = form
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("degree", self.degree, minimum=1)
        check_integer("n_components", self.n_components, minimum=1)
        check_choice("distribution", self.distribution, DISTRIBUTIONS)
        check_choice("form", self.form, tuple(self._STREAMS))
        d, g = int(n_features), int(self.degree)
        self.n_explicit_features_ = d**g if self.form == "tensor" else math.comb(d + g - 1, g)
        self.density_ = resolve_density(self.density, self.n_explicit_features_,
                                        self.distribution)

    def _sampler(self):
        return hyperplane_sampler(self.distribution, self.n_components, self.density_)

    def _fit_state(self, X, n_features):
        """Nothing is drawn at fit: the hyperplanes over the d^g explicit features are drawn
        in blocks where they are used."""

    def _state_arrays(self):
        first = draw_block(self.seed_, self._STREAMS[self.form], 0, self.n_explicit_features_,
                           self._sampler())
        return {"first_block": first}

    def _transform_array(self, X):
        dtype = X.dtype
        if sp.issparse(X):
            X = X.toarray()  # φ(x) of a sparse row is formed densely per column block
        n, d = X.shape
        total = self.n_explicit_features_
        stream = self._STREAMS[self.form]
        sampler = self._sampler()
        out = np.zeros((n, self.n_components), dtype=np.float64)
        blocks = (_tensor_coordinates if self.form == "tensor" else _monomial_coordinates)(
            d, int(self.degree), self.COLUMN_BLOCK)
        start = 0
        for coords, weights in blocks:
            stop = start + len(coords[0])
            seed_blocks = range(start // BLOCK_SIZE, (stop - 1) // BLOCK_SIZE + 1)
            parts = [None] * len(seed_blocks)

            def draw(first, last, seed_blocks=seed_blocks, parts=parts):
                for i in range(first, last):  # numpy's generators fill without the GIL
                    parts[i] = draw_block(self.seed_, stream, seed_blocks[i], total, sampler)

            run_row_blocks(len(seed_blocks), 1, draw)
            R_t = np.concatenate(parts)[start - seed_blocks[0] * BLOCK_SIZE:
                                        stop - seed_blocks[0] * BLOCK_SIZE]

            def project(row_start, row_stop, coords=coords, weights=weights, R_t=R_t):
                rows = X[row_start:row_stop].astype(np.float64, copy=False)
                phi = scratch("explicit.phi", (len(rows), len(coords[0])), np.float64)
                np.take(rows, coords[0], axis=1, out=phi)
                for axis in coords[1:]:
                    phi *= rows[:, axis]
                if weights is not None:
                    phi *= weights
                out[row_start:row_stop] += phi @ R_t

            # row tiles in parallel, one-thread BLAS each: phi is formed in cache, and the
            # tiles (hence the bits: BLAS may sum a tile of another height in another
            # order) do not depend on the number of threads
            run_row_blocks(n, self.ROW_TILE, project)
            start = stop
        out *= 1.0 / math.sqrt(self.n_components)
        return out.astype(dtype, copy=False)


def _tensor_coordinates(d, degree, width):
    """The coordinates of ``x^{⊗degree}`` (C order) in blocks of ``width``: per block,
    one index array per factor and no weights."""
    total = d**degree
    for start in range(0, total, width):
        yield np.unravel_index(np.arange(start, min(total, start + width)), (d,) * degree), None


def _monomial_coordinates(d, degree, width):
    """The distinct monomials of degree ``degree`` in ``d`` variables, lexicographic, in
    blocks of ``width``: per block, one index array per factor and the weights
    ``sqrt(degree! / prod(multiplicity!))``."""
    combos = itertools.combinations_with_replacement(range(d), degree)
    while True:
        block = np.array(list(itertools.islice(combos, width)), dtype=np.intp)
        if block.size == 0:
            return
        block = block.reshape(-1, degree)
        # the running length of each run of equal indices: their product is prod(m_i!)
        run = np.ones(len(block), dtype=np.float64)
        factorials = np.ones(len(block), dtype=np.float64)
        for j in range(1, degree):
            run = np.where(block[:, j] == block[:, j - 1], run + 1, 1.0)
            factorials *= run
        weights = np.sqrt(math.factorial(degree) / factorials)
        yield tuple(block.T), weights
