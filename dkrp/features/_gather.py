"""Compiled hot loops (numba): the fused gather-multiply-sum of KRP.

The loops are serial and release the GIL: :mod:`dkrp._threading` runs them on
row blocks in parallel, right after each block's GEMM, while it is in cache.

Within a block, rows are processed in tiles of ``TILE`` rows: the tile's
projections are transposed into a (p × TILE) scratch so that every product term
becomes a contiguous, SIMD-vectorised multiply-add across the tile's rows, instead
of ``degree`` scattered loads per output. Each output is accumulated in the input
dtype, term by term in index order, so results do not depend on threads.
"""

from __future__ import annotations

import numpy as np

from .._jit import numba

__all__ = ["gather_products", "TILE"]

#: Rows per vectorised tile (a tile of projections, p × TILE, stays in L1/L2).
TILE = 32


# noqa below: a hot @njit kernel whose speed (benchmarks/RESULTS.md) and bits (golden tests)
# are pinned; it is not split until a benchmark shows the split costs nothing (issue 31)
@numba.njit(cache=True, nogil=True, boundscheck=False)
def _gather_products(projections, indices, degree, scale, out, out_row0):  # noqa: C901
    n_rows, pool = projections.shape
    n_components, width = indices.shape
    n_terms = width // degree
    dtype = projections.dtype
    scratch = np.empty((pool, TILE), dtype=dtype)
    acc = np.empty(TILE, dtype=dtype)
    prod = np.empty(TILE, dtype=dtype)
    for tile0 in range(0, n_rows, TILE):
        m = min(TILE, n_rows - tile0)
        for r in range(m):
            for q in range(pool):
                scratch[q, r] = projections[tile0 + r, q]
        for r in range(m, TILE):  # keep the unused lanes of a last, short tile finite
            for q in range(pool):
                scratch[q, r] = 0
        for comp in range(n_components):
            for r in range(TILE):
                acc[r] = 0
            if degree == 2:  # the common case, fused: acc += a * b
                for term in range(n_terms):
                    a = scratch[indices[comp, 2 * term]]
                    b = scratch[indices[comp, 2 * term + 1]]
                    for r in range(TILE):
                        acc[r] += a[r] * b[r]
                for r in range(m):
                    out[out_row0 + tile0 + r, comp] = acc[r] * scale
                continue
            for term in range(n_terms):
                base = term * degree
                first = scratch[indices[comp, base]]
                for r in range(TILE):
                    prod[r] = first[r]
                for j in range(1, degree):
                    col = scratch[indices[comp, base + j]]
                    for r in range(TILE):
                        prod[r] *= col[r]
                for r in range(TILE):
                    acc[r] += prod[r]
            for r in range(m):
                out[out_row0 + tile0 + r, comp] = acc[r] * scale
    return out


def gather_products(projections, indices, degree, scale, out, out_row0=0):
    """Fill ``out[out_row0:out_row0+n]`` with KRP components from the pool projections.

    ``out[r, l] = scale * sum_i prod_j projections[r, indices[l, i*degree + j]]``
    (López-Sánchez et al. 2018, eqs. (13)-(14)), accumulated in the input dtype.

    Parameters
    ----------
    projections : ndarray of shape (n, p)
        ``X @ S.T`` for the block of rows.
    indices : ndarray of shape (k, degree * n_terms), int64
    degree : int
    scale : float
        ``1 / sqrt(n_terms * n_components)``.
    out : ndarray of shape (N, k), C-contiguous
    out_row0 : int
        First row of ``out`` to fill.
    """
    _gather_products(projections, indices, np.int64(degree), np.float64(scale), out,
                     np.int64(out_row0))
    return out
