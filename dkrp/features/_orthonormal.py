r"""Orthonormal rows by Gram–Schmidt, compiled, with the same bits on every machine.

The frame pools of :mod:`dkrp.features._pools` orthonormalise Gaussian draws. LAPACK's QR
and ``eigh`` (pool draw version 1) round by the BLAS kernel the CPU selects, so a spec
written on one machine could be refused by a worker of another kind ("the spec was
edited or corrupted"). :func:`orthonormal_rows` instead runs modified Gram–Schmidt twice
("twice is enough": Giraud, Langou, Rozložník 2005, orthogonality to working precision
for any numerically full-rank input) with only ``+ - * / sqrt`` in round-to-nearest, in
a fixed order: numba compiles without ``fastmath``, so LLVM neither contracts to fused
multiply-adds nor reorders the sums; a dot product keeps four partial sums in a fixed
pattern, the same on any vector width. Same input, same bits, on every x86-64 or ARM
machine.

The result is the :math:`Q` of the QR decomposition with a positive diagonal :math:`R`
(unique), the factor LAPACK's QR gives after the sign fix :math:`Q\,\mathrm{diag}(\mathrm
{sign}\,R_{ii})`: the same distribution (Haar on the Stiefel manifold for a Gaussian
input), other last bits.
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import numba

__all__ = ["orthonormal_rows"]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _dot(a, b):
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    k = 0
    while k + 4 <= n:
        s0 += a[k] * b[k]
        s1 += a[k + 1] * b[k + 1]
        s2 += a[k + 2] * b[k + 2]
        s3 += a[k + 3] * b[k + 3]
        k += 4
    while k < n:
        s0 += a[k] * b[k]
        k += 1
    return (s0 + s1) + (s2 + s3)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _orthonormalise(Q):
    n, m = Q.shape
    for j in range(n):
        v = Q[j]
        for _ in range(2):
            for i in range(j):
                q = Q[i]
                r = _dot(q, v)
                for k in range(m):
                    v[k] = v[k] - r * q[k]
        norm = math.sqrt(_dot(v, v))
        if not norm > 0.0:
            return j  # row j depends on the rows before it
        for k in range(m):
            v[k] = v[k] / norm
    return n


def orthonormal_rows(A) -> np.ndarray:
    """The rows of ``A`` (``n × m``, ``n <= m``) orthonormalised in order.

    Row ``j`` of the result is row ``j`` of ``A`` minus its projections on the rows
    before it, normalised: ``A = L Q`` with ``L`` lower triangular, positive diagonal.

    Examples
    --------
    >>> A = np.random.default_rng(0).standard_normal((3, 5))
    >>> Q = orthonormal_rows(A)
    >>> bool(np.allclose(Q @ Q.T, np.eye(3)))
    True
    >>> bool(np.allclose(np.tril(A @ Q.T), A @ Q.T))  # A = L Q, L lower triangular
    True
    """
    Q = np.array(A, dtype=np.float64, order="C", copy=True)
    if Q.ndim != 2 or Q.shape[0] > Q.shape[1]:
        raise ValueError(f"orthonormal_rows needs n <= m rows of length m, got {Q.shape}.")
    done = _orthonormalise(Q)
    if done != Q.shape[0]:
        raise ValueError(f"Row {done} of the input depends on the rows before it.")
    return Q
