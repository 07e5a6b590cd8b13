r"""Seeded hyperplane pools and index designs for KRP and random Fourier features.

This module owns how the pool :math:`S` (``n_rows × n_features``) of a random
projection is built beyond the paper's i.i.d. rows, and how KRP components pick
their pool rows. Every draw goes through :mod:`dkrp._random`, keyed by
``(seed, stream, block)``.

Pools (each row has :math:`E[r r^T] = I_d`, so the maps keep their scale):

``"iid"``
    Independent rows from the estimator's ``distribution`` (the paper; drawn by
    the estimator, not here).
``"orthogonal"``
    Blocks of :math:`d` orthogonal Gaussian directions with chi-distributed norms
    (Yu et al., "Orthogonal Random Features", NIPS 2016): block :math:`b` is
    :math:`\mathrm{diag}(s)\,Q^T`, :math:`Q` from the QR decomposition of a Gaussian
    :math:`d \times m` matrix with columns' signs fixed by :math:`\mathrm{diag}(R)`
    (so :math:`Q` is Haar distributed), :math:`s_i \sim \chi_d`.
``"tight_frame"``
    The i.i.d. Gaussian pool :math:`G` made a tight frame:
    :math:`R = G\,(G^T G / p)^{-1/2}`, so :math:`R^T R = p I` (for :math:`p \ge d`;
    for :math:`p < d` the rows are made orthogonal with norm :math:`\sqrt d`,
    :math:`R R^T = d I`).
``"structured"``
    SORF-style Hadamard blocks :math:`W_b = \frac{1}{D} H D_{b,1} H D_{b,2} H D_{b,3}`
    on :math:`x` zero-padded to :math:`D = 2^{\lceil\log_2 d\rceil}`, with random ±1
    diagonals; a full block is a tight frame (:math:`W_b^T W_b = D I` on the
    input coordinates). Applied by GEMM on the materialised pool or by the
    compiled FWHT of :mod:`dkrp.features._fwht`, chosen by :func:`use_fwht`.

Reproducibility. Every pool is a bit-for-bit function of the seed on every machine
(the structured pool's materialisation is exact integer arithmetic; the frame pools
orthonormalise with the compiled Gram–Schmidt of :mod:`dkrp.features._orthonormal`).
Pool draw version 1 (specs written before :data:`DRAW_VERSION` 2) built
``"orthogonal"`` and ``"tight_frame"`` with LAPACK (QR, ``eigh``), whose last bits
follow the BLAS kernel the CPU selects; such specs keep rebuilding version 1, on the
kind of machine that wrote them, and the spec's checksum refuses other bits with
:class:`dkrp.SpecError` instead of producing other features.

Bias. Rows of the non-i.i.d. pools are dependent (they sum to a frame), so KRP is
unbiased only up to :math:`O(1/p)`; see :func:`krp_pool_bias`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._choices import FOURIER_POOLS, INDEX_DESIGNS, POOLS
from .._random import block_generator, draw_rows
from .._threading import blas_one_thread
from ..errors import InvalidInputError
from ._fwht import sorf_project
from ._orthonormal import orthonormal_rows

__all__ = [
    "POOLS",
    "FOURIER_POOLS",
    "DRAW_VERSION",
    "draw_version",
    "set_draw_version",
    "INDEX_DESIGNS",
    "FWHT_COST_RATIO",
    "padded_size",
    "orthogonal_pool",
    "tight_frame_pool",
    "structured_signs",
    "structured_pool",
    "structured_project",
    "use_fwht",
    "balanced_indices",
    "krp_pool_bias",
    "matmul_transposed",
]

# POOLS, FOURIER_POOLS (random Fourier features, Gaussian kernel only) and INDEX_DESIGNS
# live in dkrp._choices so the command line lists them without importing this module.

#: Cost of one FWHT butterfly operation in units of one GEMM flop, measured with
#: ``python benchmarks/bench_pools.py --fwht`` (single thread, OpenBLAS 0.3.31,
#: AMD EPYC: GEMM ≈ 25–40 GFLOP/s, FWHT ≈ 1.5–1.9 Gop/s, ratio 9.5 at d = 54 and
#: 16–27 at d ≥ 784). Part of the seed contract through :func:`use_fwht`:
#: changing it may switch a shape's path and so the last bits of its features.
FWHT_COST_RATIO = 16.0


#: The pool draw procedure of new fits (a spec records it as ``draw_version_``): 2 for
#: the frame pools' compiled Gram–Schmidt; 1, LAPACK's QR and ``eigh``, is what specs
#: without the value imply. The i.i.d. and structured pools have one procedure (1).
DRAW_VERSION = 2


def draw_version(pool: str) -> int:
    """The newest draw version of ``pool``: :data:`DRAW_VERSION` for the frame pools
    (``"orthogonal"``, ``"tight_frame"``), 1 for the others (never changed)."""
    return DRAW_VERSION if pool in ("orthogonal", "tight_frame") else 1


def set_draw_version(est):
    """Set ``est.draw_version_``: a spec's value on rebuild (1 for specs without it, the
    class's ``legacy_fitted_values``), else the newest of ``est.pool``."""
    if not hasattr(est, "draw_version_"):
        est.draw_version_ = draw_version(est.pool)
    if est.draw_version_ not in (1, DRAW_VERSION):
        raise InvalidInputError(f"draw_version_ must be 1 or {DRAW_VERSION}, got "
                                f"{est.draw_version_!r}.")


def padded_size(n_features: int) -> int:
    """Power of two :math:`D \\ge d` the structured pool works in."""
    return 1 << max(0, int(n_features) - 1).bit_length()


def _gaussian(n_features):
    def sample(rng, n):
        return rng.standard_normal((n, n_features))

    return sample


# -- orthogonal ---------------------------------------------------------------
def orthogonal_pool(seed: int, n_rows: int, n_features: int, version: int = DRAW_VERSION
                    ) -> np.ndarray:
    """Blocks of ``n_features`` orthogonal Gaussian directions with chi norms.

    Block ``b`` (rows ``[b*d, (b+1)*d)``) uses only ``block_generator(seed,
    "pool-orthogonal", b)`` and ``(seed, "pool-orthogonal-norms", b)``; the last
    block may be partial (its first ``m`` rows are orthonormal directions of an
    ``m``-column QR, still Haar on the Stiefel manifold). ``version`` 2 orthonormalises
    with :func:`~dkrp.features._orthonormal.orthonormal_rows` (the same bits on every
    machine), 1 with LAPACK's QR and the sign fix (bits of the machine's BLAS kernel).

    Examples
    --------
    >>> R = orthogonal_pool(0, 6, 4)
    >>> G = R[:4] @ R[:4].T
    >>> bool(np.allclose(G - np.diag(np.diag(G)), 0, atol=1e-10))
    True
    """
    d = int(n_features)
    blocks = []
    with blas_one_thread():  # fixed LAPACK path: results do not depend on thread count
        for b, start in enumerate(range(0, n_rows, d)):
            m = min(d, n_rows - start)
            # The first m rows of a d×d draw, transposed: a d×m Gaussian matrix.
            g = block_generator(seed, "pool-orthogonal", b).standard_normal((m, d)).T
            if version >= 2:  # the QR factor with positive diag(R): Haar distributed
                q = orthonormal_rows(g.T).T
            else:
                q, r = np.linalg.qr(g)  # reduced: q is d×m with orthonormal columns
                signs = np.sign(np.diag(r))
                signs[signs == 0] = 1.0
                q = q * signs  # sign fix by diag(R): makes Q Haar distributed
            norms = np.sqrt(block_generator(seed, "pool-orthogonal-norms", b).chisquare(d, m))
            blocks.append(q.T * norms[:, None])
    if not blocks:
        return np.zeros((0, d))
    return np.ascontiguousarray(np.concatenate(blocks, axis=0))


# -- tight frame --------------------------------------------------------------
def tight_frame_pool(seed: int, n_rows: int, n_features: int, stream: str = "pool",
                     version: int = DRAW_VERSION) -> np.ndarray:
    r"""The i.i.d. Gaussian pool :math:`G` of ``stream`` made a tight frame.

    Version 2: :math:`R = \sqrt{p}\,Q` with :math:`G = QT` the QR decomposition
    (:math:`T` upper triangular with a positive diagonal), so :math:`R^T R = p I_d`
    when :math:`p \ge d`; when :math:`p < d`, :math:`R = \sqrt{d}\,L^{-1} G` from
    :math:`G = LQ` (orthogonal rows of norm :math:`\sqrt d`). Computed by the compiled
    Gram–Schmidt (:mod:`dkrp.features._orthonormal`): the same bits on every machine.

    Version 1 (specs written before version 2): :math:`R = G\,(G^T G / p)^{-1/2}`
    (:math:`R = \sqrt{d}\,(G G^T)^{-1/2} G` for :math:`p < d`), the inverse square
    root from ``numpy.linalg.eigh`` (LAPACK, one BLAS thread).

    Both are the orthonormal factor of a Gaussian matrix times a constant, and both
    factors are equivariant (:math:`G \mapsto OG` maps the factor to :math:`O` times
    it for any orthogonal :math:`O`), so both are Haar distributed on the Stiefel
    manifold: the same distribution of pools, other draws.

    Examples
    --------
    >>> R = tight_frame_pool(0, 40, 5)
    >>> bool(np.allclose(R.T @ R, 40 * np.eye(5)))
    True
    """
    p, d = int(n_rows), int(n_features)
    G = draw_rows(seed, stream, p, _gaussian(d))
    if p == 0:
        return G
    if version >= 2:
        if p >= d:
            return np.ascontiguousarray(math.sqrt(p) * orthonormal_rows(G.T).T)
        return math.sqrt(d) * orthonormal_rows(G)
    with blas_one_thread():
        if p >= d:
            w, V = np.linalg.eigh(G.T @ G / p)
            inv_sqrt = (V / np.sqrt(w)) @ V.T
            R = G @ inv_sqrt
        else:
            w, V = np.linalg.eigh(G @ G.T)
            inv_sqrt = (V / np.sqrt(w)) @ V.T
            R = math.sqrt(d) * (inv_sqrt @ G)
    return np.ascontiguousarray(R)


# -- structured (SORF-style Hadamard blocks) -----------------------------------
def structured_signs(seed: int, n_rows: int, n_features: int) -> np.ndarray:
    """The ±1 diagonals of the structured pool, shape ``(n_blocks, 3, D)``, int8.

    Block ``b`` (pool rows ``[b*D, (b+1)*D)``) draws its three diagonals from
    ``block_generator(seed, "pool-structured", b)`` alone.
    """
    D = padded_size(n_features)
    n_blocks = -(-int(n_rows) // D)
    out = np.empty((n_blocks, 3, D), dtype=np.int8)
    for b in range(n_blocks):
        rng = block_generator(seed, "pool-structured", b)
        bits = rng.integers(0, 2, size=(3, D), dtype=np.int8)
        out[b] = 1 - 2 * bits
    return out


def structured_project(X, signs, n_rows, scale=1.0, out=None, out_row0=0):
    """``scale * X @ W.T`` for the structured pool ``W`` by FWHT (dense ``X`` rows).

    ``X`` may be CSR: a block of rows is densified (callers pass bounded row blocks).
    With ``out`` given, rows ``[out_row0, out_row0 + len(X))`` of it are filled; a
    ``ValueError`` is raised before the compiled kernel runs if they do not exist
    (:func:`dkrp.features._fwht.sorf_project` checks every shape and offset).
    """
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.toarray()
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    if out is None:
        out = np.empty((X.shape[0], n_rows), dtype=dtype)
    D = signs.shape[2]
    s = np.ascontiguousarray(signs, dtype=out.dtype)
    return sorf_project(X, s, n_rows, scale / D, out, out_row0)


def structured_pool(signs: np.ndarray, n_rows: int, n_features: int) -> np.ndarray:
    r"""The structured pool materialised, shape ``(n_rows, n_features)``, float64.

    Computed as the FWHT of the unit vectors :math:`e_j`: every intermediate value
    is an integer below :math:`D^3 < 2^{53}` and the final :math:`1/D` is a power
    of two, so the result is exact and identical on every machine.

    Examples
    --------
    >>> S = structured_pool(structured_signs(0, 8, 8), 8, 8)
    >>> bool(np.array_equal(S.T @ S, 8 * np.eye(8)))
    True
    """
    d = int(n_features)
    D = signs.shape[2]
    if D ** 3 >= 2**53:  # pragma: no cover - d > 131072
        raise InvalidInputError(f"The structured pool supports n_features <= 2**17, got {d}.")
    eye = np.eye(d)
    St = structured_project(eye, signs, n_rows)  # (d, n_rows) = S^T
    return np.ascontiguousarray(St.T)


def use_fwht(n_features: int, n_rows: int) -> bool:
    r"""Whether the structured pool is applied by FWHT (True) or by GEMM (False).

    The rule compares operation counts per input row, weighting a butterfly by
    :data:`FWHT_COST_RATIO` GEMM flops:

    .. math:: \lceil p / D\rceil \cdot 3 D \log_2 D \cdot c \;<\; 2 d p .

    It depends only on :math:`(d, p)` — never on a timing taken at run time — so
    every process chooses the same path and produces the same bits. With
    :math:`c = 16`: GEMM for :math:`d = 54` (:math:`p = 1024`), FWHT for
    :math:`d \ge 256`.
    """
    d, p = int(n_features), int(n_rows)
    D = padded_size(d)
    n_blocks = -(-p // D)
    log_d = max(1, int(math.log2(D)))
    return n_blocks * 3 * D * log_d * FWHT_COST_RATIO < 2 * d * p


# -- index designs ------------------------------------------------------------
def balanced_indices(seed: int, n_components: int, width: int, pool_size: int) -> np.ndarray:
    """Index design that uses every pool row equally often, ``(n_components, width)`` int64.

    Components take consecutive chunks of ``width`` entries from a stream of
    permutations of ``range(pool_size)``; permutation ``q`` comes from
    ``block_generator(seed, "indices-balanced", q)``. A chunk that spans the end
    of permutation ``q`` and the start of ``q + 1`` would repeat indices; the
    start of ``q + 1`` is reordered (stably) so that its first entries avoid the
    tail of ``q``. Each permutation stays a permutation, so after ``r`` full
    rounds every pool row has been used exactly ``r`` times (usage counts differ
    by at most one overall), indices within a component are distinct, and two
    components share no index unless they draw from two different rounds.

    Examples
    --------
    >>> idx = balanced_indices(0, 10, 3, 7)
    >>> counts = np.bincount(idx.ravel(), minlength=7)
    >>> int(counts.max() - counts.min()) <= 1
    True
    >>> all(len(set(row)) == 3 for row in idx)
    True
    """
    k, w, p = int(n_components), int(width), int(pool_size)
    if w > p:
        raise InvalidInputError(f"width ({w}) must not exceed pool_size ({p}).")
    total = k * w
    stream = np.empty(total, dtype=np.int64)
    pos = 0
    q = 0
    while pos < total:
        perm = block_generator(seed, "indices-balanced", q).permutation(p).astype(np.int64)
        tail_len = pos % w  # entries of the current component already placed
        if tail_len:
            tail = stream[pos - tail_len : pos]
            need = w - tail_len
            head = perm[~np.isin(perm, tail)][:need]
            # The rest keeps perm's order: the avoided entries move behind the head.
            perm = np.concatenate([head, perm[~np.isin(perm, head)]])
        n = min(p, total - pos)
        stream[pos : pos + n] = perm[:n]
        pos += n
        q += 1
    return stream.reshape(k, w)


# -- bias --------------------------------------------------------------------
def krp_pool_bias(sq_norm_x, sq_norm_y, inner, n_hyperplanes):
    r"""Leading bias of :math:`\langle f(x), f(y)\rangle` for g = 2 on a frame pool.

    For the tight-frame pool (and, to leading order, the orthogonal and full
    structured pools) two distinct rows :math:`r_a, r_b` of a component satisfy
    :math:`\sum_a r_a r_a^T = pI`, hence

    .. math:: E\langle f(x), f(y)\rangle - \langle x, y\rangle^2
              \approx -\frac{\|x\|^2\|y\|^2 + \langle x, y\rangle^2}{p - 1} .

    Returns that value (negative); the bias of squared distances follows as
    ``bias(x, x) + bias(y, y) - 2 bias(x, y)``.
    """
    return -(np.asarray(sq_norm_x) * np.asarray(sq_norm_y) + np.asarray(inner) ** 2) / (
        n_hyperplanes - 1
    )


def matmul_transposed(X, S, out=None):
    """``X @ S.T`` for a dense or CSR block ``X`` (never densifies ``X``).

    ``out`` (dense ``X`` only; C-contiguous, shape ``(n, len(S))``) receives the
    product: the same GEMM call, so the same bits, without allocating.
    """
    if sp.issparse(X):
        return np.asarray(X @ S.T)
    if out is None:
        return X @ S.T
    return np.matmul(X, S.T, out=out)
