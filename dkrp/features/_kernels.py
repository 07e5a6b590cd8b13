"""Compiled hot loops (numba): the fused gather-multiply-sum of KRP.

The loops are serial and release the GIL: :mod:`dkrp._threading` runs them on
row blocks in parallel, right after each block's GEMM, while it is in cache.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["gather_products"]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _gather_products(projections, indices, degree, scale, out, out_row0):
    n_rows = projections.shape[0]
    n_components, width = indices.shape
    n_terms = width // degree
    for i in range(n_rows):
        row = projections[i]
        dest = out[out_row0 + i]
        for comp in range(n_components):
            acc = 0.0
            for term in range(n_terms):
                prod = 1.0
                base = term * degree
                for j in range(degree):
                    prod *= row[indices[comp, base + j]]
                acc += prod
            dest[comp] = acc * scale


def gather_products(projections, indices, degree, scale, out, out_row0=0):
    """Fill ``out[out_row0:out_row0+n]`` with KRP components from the pool projections.

    ``out[r, l] = scale * sum_i prod_j projections[r, indices[l, i*degree + j]]``
    (López-Sánchez et al. 2018, eqs. (13)-(14)), accumulated in float64.

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
    _gather_products(projections, indices, np.int64(degree), np.float64(scale), out, np.int64(out_row0))
    return out
