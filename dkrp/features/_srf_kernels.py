"""The exact functions the SRF fit works with: the kernel, the sphere's characteristic
function and its table in omega, and the Hermite interpolation the table uses.

Split from :mod:`._srf_fit` (which re-exports them): these depend only on (d, p, a) and
the grid, not on the optimiser.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special as sc

from .._jit import numba

__all__ = ["OMEGA_STEP", "omega_table", "polynomial_kernel", "sphere_cf"]


def polynomial_kernel(z, degree, scale):
    r"""The exact kernel :math:`(1 - z^2/a^2)^p` at distances ``z`` (``z`` in [0, 2])."""
    z = np.asarray(z, dtype=np.float64)
    return (1.0 - (z / scale) ** 2) ** degree


def sphere_cf(nu, t):
    r""":math:`\Omega(t) = {}_0F_1(;\nu+1;-t^2/4) = \Gamma(\nu+1)(2/t)^\nu J_\nu(t)`.

    The characteristic function of a uniform direction on :math:`S^{d-1}`
    (:math:`\nu = d/2 - 1`), bounded by 1 in absolute value. Three regimes:

    * power series for :math:`t^2/4 \le (\nu + 1)/4` (terms shrink at least 4-fold
      each, no cancellation);
    * ``scipy.special.jv`` combined in log space with
      :math:`\log\Gamma(\nu+1) + \nu\log(2/t)`, where ``jv`` does not underflow;
    * the Debye expansion of :math:`\log J_\nu(\nu\,\mathrm{sech}\,\alpha)`
      (DLMF 10.19.3, terms up to :math:`\nu^{-3}`) where it does, which happens only
      deep in :math:`t \ll \nu` (there its relative error is below 1e-9).
    """
    t = np.abs(np.asarray(t, dtype=np.float64))
    shape = t.shape
    t = t.ravel()
    out = np.empty_like(t)
    b = nu + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):  # t = 0 is in the series part
        logpref = sc.gammaln(b) + nu * np.log(2.0 / t)
    cand = 0.25 * t * t <= 0.25 * b
    ts = t[cand]
    x = -0.25 * ts * ts
    term = np.ones_like(ts)
    acc = np.ones_like(ts)
    for k in range(1, 200):
        term = term * x / (k * (b + k - 1.0))
        acc += term
        if not np.any(np.abs(term) > 1e-17):
            break
    out[cand] = acc
    rest = ~cand
    if rest.any():
        tr = t[rest]
        lp = logpref[rest]
        j = sc.jv(nu, tr)
        with np.errstate(divide="ignore"):
            lj = np.log(np.abs(j))
        ok = np.isfinite(lj) & (lj > -690.0)
        vals = np.empty_like(tr)
        vals[ok] = np.sign(j[ok]) * np.exp(lp[ok] + lj[ok])
        deb = ~ok
        if deb.any():
            ratio = tr[deb] / nu  # < 1: jv underflows only well before the turning point
            th = np.sqrt(1.0 - ratio * ratio)  # tanh(alpha)
            alpha = np.arccosh(1.0 / ratio)
            p = 1.0 / th
            u1 = (3 * p - 5 * p**3) / 24
            u2 = (81 * p**2 - 462 * p**4 + 385 * p**6) / 1152
            u3 = (30375 * p**3 - 369603 * p**5 + 765765 * p**7 - 425425 * p**9) / 414720
            series_sum = 1 + u1 / nu + u2 / nu**2 + u3 / nu**3
            lj_deb = nu * (th - alpha) - 0.5 * np.log(2 * np.pi * nu * th) + np.log(series_sum)
            vals[deb] = np.exp(lp[deb] + lj_deb)
        out[rest] = vals
    return out.reshape(shape)


#: Step of the Omega_d table; cubic Hermite interpolation with exact derivatives errs
#: by at most step^4 / 384 * E[s^4] <= 3e-7 / (d (d + 2)) (Omega_d has bandwidth 1).
OMEGA_STEP = 0.05


def omega_table(nu, t):
    r""":func:`sphere_cf` at ``t >= 0`` by cubic Hermite interpolation of a table.

    The table holds :math:`\Omega_\nu` and its derivative
    :math:`-t\,\Omega_{\nu+1}(t) / (2(\nu+1))` every ``OMEGA_STEP`` up to
    ``max(t)``: far fewer Bessel evaluations than one per (r, z) pair.
    """
    t = np.asarray(t, dtype=np.float64)
    n = int(math.ceil(float(t.max(initial=0.0)) / OMEGA_STEP)) + 2
    grid = np.arange(n) * OMEGA_STEP
    y = sphere_cf(nu, grid)
    m = -grid * sphere_cf(nu + 1.0, grid) / (2.0 * (nu + 1.0)) * OMEGA_STEP
    out = np.empty(t.shape, dtype=np.float64)
    _hermite(np.ascontiguousarray(t).ravel(), y, m, out.ravel())
    return out


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _hermite(t, y, m, out):
    """Cubic Hermite interpolation of the table (``y``, ``m``) at ``t``, one pass.

    The arithmetic, operation by operation, of the numpy expression it replaced (no
    fused multiply-add: numba does not contract), so the same bits, without the
    temporaries of a (z, r) table of millions of values.
    """
    n = y.shape[0]
    for k in range(t.shape[0]):
        pos = t[k] / OMEGA_STEP
        i = min(np.int64(pos), n - 2)
        u = pos - i
        u2 = u * u
        u3 = u2 * u
        out[k] = ((((2 * u3 - 3 * u2 + 1) * y[i] + (u3 - 2 * u2 + u) * m[i])
                   + (3 * u2 - 2 * u3) * y[i + 1]) + (u3 - u2) * m[i + 1])
