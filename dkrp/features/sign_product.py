r"""The Sign Product Embedding (Delogne & Jacques): quadratic sketches and their 1-bit signs.

With Gaussian vectors :math:`a_0, a_1, \dots, a_{2m-1} \sim N(0, I_d)`, the sketch of
:math:`x \in R^d` is

.. math:: B(x)_i = (a_{2i}^\top x)^2 - (a_{2i+1}^\top x)^2, \qquad i = 0, \dots, m-1,

(eq. 1 of the paper: the difference of two rank-one projections, which removes the
bias of a single one), and its 1-bit version is :math:`\psi(x) = \mathrm{sign}(B(x))`.
:class:`SignProductEmbedding` computes :math:`\phi(x) = B(x)` (``transform``) and
:math:`\psi(x)` packed eight signs to a byte (``transform_bits``).

What the inner products estimate
--------------------------------
Write :math:`p_i = (a_{2i} - a_{2i+1})/\sqrt2` and :math:`q_i = (a_{2i} + a_{2i+1})/\sqrt2`:
they are again independent :math:`N(0, I_d)` and

.. math:: B(x)_i = (a_{2i}^\top x - a_{2i+1}^\top x)(a_{2i}^\top x + a_{2i+1}^\top x)
   = 2\,(p_i^\top x)(q_i^\top x),

which is how it is computed (one GEMM for the :math:`2m` projections, one product;
the factored form also avoids the cancellation of :math:`u^2 - v^2`).

* **Sketch · sketch.** :math:`E[B(x)_i B(y)_i] = 4\,E[p^\top x\,p^\top y]\,E[q^\top x\,
  q^\top y] = 4\langle x, y\rangle^2`, so

  .. math:: \langle x, y\rangle^2 \approx \frac{1}{4m}\langle B(x), B(y)\rangle
     \quad\text{(unbiased; } :data:`SKETCH_SCALE` = 1/4\text{)}.

  The paper states no constant for this product; it follows from the above (and
  also shows :math:`E\|B(x)\|^2 = 4m\|x\|^4`: the 1/4 is what makes :math:`B/(2\sqrt m)`
  preserve :math:`\|x\|^4` in expectation, the property the paper's eq. 1 is chosen for).

* **Sketch · sign (the SPE, eq. 2).** Split :math:`x = c\,y + x_\perp` with
  :math:`c = \langle x, y\rangle/\|y\|^2` and :math:`x_\perp \perp y`. For a Gaussian
  :math:`a`, :math:`a^\top x_\perp` is independent of :math:`a^\top y`, so with
  :math:`g = a_{2i}^\top y`, :math:`h = a_{2i+1}^\top y`,
  :math:`E[B(x)_i \mid g, h] = c^2 (g^2 - h^2) + \|x_\perp\|^2 - \|x_\perp\|^2
  = c^2 B(y)_i`. Hence :math:`E[B(x)_i\,\mathrm{sign}(B(y)_i)] = c^2\,E|B(y)_i|`, and

  .. math:: E|B(y)_i| = E|g - h|\;E|g + h| = \Big(\sqrt{2\|y\|^2}\sqrt{2/\pi}\Big)^2
     = \frac{4}{\pi}\|y\|^2,

  since :math:`g - h` and :math:`g + h` are independent :math:`N(0, 2\|y\|^2)` and
  :math:`E|N(0, s^2)| = s\sqrt{2/\pi}`. So :math:`E|B(y)_i| = 4/\pi` for a unit
  :math:`y`, and

  .. math:: \frac{\pi}{4m}\langle B(x), \mathrm{sign}(B(y))\rangle \approx
     \frac{\langle x, y\rangle^2}{\|y\|^2} = \langle x, y/\|y\|\rangle^2

  (unbiased; :data:`ASYMMETRIC_SCALE` = π/4, the paper's κ): exactly
  :math:`\langle x, y\rangle^2` for unit-norm :math:`y`, as the paper requires. The
  sign forgets :math:`\|y\|`; multiply by :math:`\|y\|^2` when it is known.

* **Sign · sign.** :math:`\mathrm{sign}(B(x)_i) = \mathrm{sign}(p_i^\top x)\,
  \mathrm{sign}(q_i^\top x)`, and for a Gaussian :math:`p`,
  :math:`E[\mathrm{sign}(p^\top x)\,\mathrm{sign}(p^\top y)] = 1 - 2\theta/\pi =
  \frac{2}{\pi}\arcsin\rho` (Goemans–Williamson; :math:`\theta` the angle between
  :math:`x` and :math:`y`, :math:`\rho = \cos\theta`). So

  .. math:: \frac1m\langle\psi(x), \psi(y)\rangle \approx
     \Big(1 - \frac{2\theta}{\pi}\Big)^2 = \Big(\frac2\pi\arcsin\rho\Big)^2,

  the *squared sign (arcsine) kernel* :func:`sign_kernel`, not
  :math:`\langle x, y\rangle^2`: it depends on the angle only, equals 1 at
  :math:`\rho = 1`, and :math:`(2/\pi)^2\rho^2\,(1 + O(\rho^2))` near orthogonality
  (hence it classifies much like the quadratic kernel on normalised data). Scaled by
  :math:`\pi^2/4` it is :math:`\arcsin(\rho)^2`, which is what the :math:`\psi`-side
  features of :func:`bit_features` give.

Zeros
-----
:math:`\psi(x)_i = +1` when :math:`B(x)_i \ge 0`: a zero sketch entry (a zero row,
a projection that is exactly 0, or a product that underflows to ±0) counts as +1.
``transform_bits`` and ``transform`` compute :math:`B` by the same blocked GEMM, so
``unpack_bits(transform_bits(X)) == where(transform(X) >= 0, 1, -1)`` bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import draw_rows
from .._threading import run_row_blocks
from .._validation import check_integer
from ..base import BaseProjector
from ..errors import InvalidInputError
from ._pools import matmul_transposed

__all__ = [
    "ASYMMETRIC_SCALE",
    "SKETCH_SCALE",
    "SignProductEmbedding",
    "asymmetric_kernel_estimate",
    "bit_features",
    "bits_kernel_estimate",
    "n_bytes",
    "pack_signs",
    "sign_kernel",
    "sketch_features",
    "sketch_kernel_estimate",
    "unpack_bits",
]

#: :math:`\langle x, y\rangle^2 \approx` SKETCH_SCALE / m · ⟨B(x), B(y)⟩.
SKETCH_SCALE = 0.25
#: :math:`\langle x, y/\|y\|\rangle^2 \approx` ASYMMETRIC_SCALE / m · ⟨B(x), sign B(y)⟩
#: (1 / E|B(y)_i| for a unit y; the paper's κ).
ASYMMETRIC_SCALE = math.pi / 4

#: Rows per GEMM block: the (block × 2m) projections stay in cache while they are
#: multiplied (and, for bits, compared and packed).
ROW_BLOCK = 256


def n_bytes(n_components: int) -> int:
    """Bytes per row of packed bits: ``ceil(n_components / 8)``."""
    return (int(n_components) + 7) // 8


def pack_signs(B) -> np.ndarray:
    """Pack ``B >= 0`` (a zero counts as +1) eight to a byte along the rows.

    ``numpy.packbits`` layout (big bit order): bit ``7 - (i % 8)`` of byte ``i // 8``
    is component ``i``; the unused low bits of the last byte are 0.
    """
    return np.packbits(np.asarray(B) >= 0, axis=-1)


def unpack_bits(bits, n_components, dtype=np.float64) -> np.ndarray:
    """±1 signs from packed bits (the inverse of :meth:`SignProductEmbedding.transform_bits`).

    Parameters
    ----------
    bits : array-like of uint8, shape (n_samples, ceil(n_components / 8))
        ``numpy.packbits`` layout; a set bit is +1 (:math:`B \\ge 0`: a zero sketch
        entry counts as +1), a clear bit −1. Padding bits are ignored.
    n_components : int
        :math:`m`, the number of signs per row.
    dtype : float dtype, default=float64

    Returns
    -------
    signs : ndarray of shape (n_samples, n_components), values in {-1, +1}
    """
    m = check_integer("n_components", n_components, minimum=1)
    bits = _checked_bits(bits, m)
    on = np.unpackbits(bits, axis=-1, count=m)
    out = on.astype(dtype)
    out *= 2
    out -= 1
    return out


def sketch_kernel_estimate(BX, BY) -> np.ndarray:
    r"""``(1/(4m)) B(X) B(Y)^T``: unbiased for :math:`\langle x, y\rangle^2`."""
    BX, BY = np.asarray(BX, dtype=np.float64), np.asarray(BY, dtype=np.float64)
    return SKETCH_SCALE / BX.shape[1] * (BX @ BY.T)


def asymmetric_kernel_estimate(BX, bits_Y) -> np.ndarray:
    r"""``(π/(4m)) B(X) sign(B(Y))^T`` from sketches and packed bits.

    Unbiased for :math:`\langle x, y\rangle^2 / \|y\|^2`, i.e. for
    :math:`\langle x, y\rangle^2` when the rows of ``Y`` have unit norm.
    """
    BX = np.asarray(BX, dtype=np.float64)
    m = BX.shape[1]
    return ASYMMETRIC_SCALE / m * (BX @ unpack_bits(bits_Y, m).T)


def _checked_bits(bits, m: int, name: str = "bits") -> np.ndarray:
    """``bits`` as an array, refused unless uint8 with ``ceil(m/8)`` bytes a row."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint8:
        raise InvalidInputError(f"{name} must be uint8 (numpy.packbits output), got {bits.dtype}.")
    if bits.ndim == 0:
        raise InvalidInputError(f"{name} must be rows of packed bits, got a single value.")
    if bits.shape[-1] != n_bytes(m):
        raise InvalidInputError(
            f"{name} has {bits.shape[-1]} bytes per row, but {m} components take "
            f"ceil({m}/8) = {n_bytes(m)}."
        )
    return bits


def bits_kernel_estimate(bits_X, bits_Y, n_components) -> np.ndarray:
    r"""``(1/m) ψ(X) ψ(Y)^T`` from packed bits (by XOR and popcount).

    Unbiased for :func:`sign_kernel`, :math:`(1 - 2\theta/\pi)^2`. Padding bits are
    ignored, as by :func:`unpack_bits`.
    """
    m = check_integer("n_components", n_components, minimum=1)
    bits_X, bits_Y = _checked_bits(bits_X, m, "bits_X"), _checked_bits(bits_Y, m, "bits_Y")
    if bits_X.ndim != 2 or bits_Y.ndim != 2:
        raise InvalidInputError(
            f"bits_X and bits_Y must be 2D (rows of packed bits), got {bits_X.ndim}D and "
            f"{bits_Y.ndim}D.")
    differ = bits_X[:, None, :] ^ bits_Y[None, :, :]
    differ[..., -1] &= np.uint8((0xFF << (8 * n_bytes(m) - m)) & 0xFF)  # drop padding bits
    hamming = np.bitwise_count(differ).sum(-1, dtype=np.int64)
    return (m - 2 * hamming) / m


def sign_kernel(X, Y=None) -> np.ndarray:
    r"""What :math:`\langle\psi(x), \psi(y)\rangle / m` estimates: :math:`(1 - 2\theta/\pi)^2`.

    :math:`\theta` is the angle between :math:`x` and :math:`y`; equivalently
    :math:`((2/\pi)\arcsin\rho)^2` with :math:`\rho = \cos\theta`. Zero rows have no
    direction and are refused.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    nx, ny = np.linalg.norm(X, axis=1), np.linalg.norm(Y, axis=1)
    if not (nx > 0).all() or not (ny > 0).all():
        raise InvalidInputError("sign_kernel needs non-zero rows (a zero row has no direction).")
    rho = np.clip((X @ Y.T) / np.outer(nx, ny), -1.0, 1.0)
    return (2.0 / np.pi * np.arcsin(rho)) ** 2


def sketch_features(B) -> np.ndarray:
    r""":math:`B(x)/(2\sqrt m)`: inner products of these estimate :math:`\langle x, y\rangle^2`.

    Paired with :func:`bit_features`, :math:`\langle` sketch_features, bit_features
    :math:`\rangle` is the SPE estimate of :math:`\langle x, y/\|y\|\rangle^2`.
    """
    B = np.asarray(B)
    return B * np.asarray(0.5 / math.sqrt(B.shape[1]), dtype=B.dtype)


def bit_features(bits, n_components, dtype=np.float64) -> np.ndarray:
    r""":math:`\pi\,\psi(x)/(2\sqrt m)`, the bits on the scale of :func:`sketch_features`.

    :math:`\langle` sketch_features(x), bit_features(y) :math:`\rangle = \frac{\pi}{4m}
    \langle B(x), \psi(y)\rangle`; and two bit-feature rows have inner product
    :math:`\approx \arcsin(\rho)^2` (:math:`\rho` the cosine of their angle).
    """
    m = int(n_components)
    out = unpack_bits(bits, m, dtype=dtype)
    out *= np.asarray(math.pi / (2.0 * math.sqrt(m)), dtype=out.dtype)
    return out


class SignProductEmbedding(BaseProjector):
    r"""Sign Product Embedding: quadratic ROP sketches and their 1-bit signs.

    Parameters
    ----------
    n_components : int, default=100
        :math:`m`, the number of sketch entries (and of bits); :math:`2m` Gaussian
        vectors are drawn.
    random_state : int or None, default=None

    Attributes
    ----------
    hyperplanes_ : ndarray of shape (2 * n_components, ``n_features_in_``)
        :math:`a_0, \dots, a_{2m-1} \sim N(0, I)`, drawn under the seed contract
        (stream ``"rop"``); rows ``2i`` and ``2i + 1`` make sketch entry ``i``.
    n_components_ : int
    seed_ : int
    n_features_in_ : int
    spec_checksum_ : str

    Notes
    -----
    ``transform(X)`` gives :math:`\phi(x) = B(x)`, unscaled (float; float32 in,
    float32 out). ``transform_bits(X)`` gives :math:`\psi(x) = \mathrm{sign}(B(x))`
    packed to ``ceil(m/8)`` bytes per row (``numpy.packbits`` layout, a zero entry
    counts as +1), 32× smaller than float32 sketches; :func:`unpack_bits` restores
    ±1. The estimators, derived in the module docstring:

    * :math:`\frac{1}{4m}\langle B(x), B(y)\rangle` estimates :math:`\langle x, y\rangle^2`;
    * :math:`\frac{\pi}{4m}\langle B(x), \psi(y)\rangle` estimates
      :math:`\langle x, y\rangle^2` for unit-norm :math:`y` (in general
      :math:`\langle x, y\rangle^2/\|y\|^2`), since :math:`E|B(y)_i| = 4\|y\|^2/\pi`;
    * :math:`\frac1m\langle\psi(x), \psi(y)\rangle` estimates the squared sign kernel
      :math:`(1 - 2\theta/\pi)^2` (:func:`sign_kernel`), a function of the angle only.

    References
    ----------
    .. [1] R. Delogne, L. Jacques, "Quadratic polynomial kernel approximation with
       asymmetric embeddings", UCLouvain.
    .. [2] T. T. Cai, A. Zhang, "ROP: matrix recovery via rank-one projections",
       Annals of Statistics 43(1), 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp import SignProductEmbedding
    >>> from dkrp.features.sign_product import unpack_bits
    >>> X = np.random.default_rng(0).standard_normal((4, 3))
    >>> spe = SignProductEmbedding(n_components=20, random_state=0).fit(X)
    >>> spe.transform_bits(X).shape
    (4, 3)
    >>> signs = unpack_bits(spe.transform_bits(X), 20)
    >>> bool((signs == np.where(spe.transform(X) >= 0, 1, -1)).all())
    True
    """

    #: features (the sketches B(x)) and their packed signs (transform_bits)
    outputs = ("features", "bits")

    def __init__(self, *, n_components=100, random_state=None):
        self.n_components = n_components
        self.random_state = random_state

    def _resolve_params(self, n_features):
        check_integer("n_components", self.n_components, minimum=1)

    def _fit_state(self, X, n_features):
        self.hyperplanes_ = draw_rows(
            self.seed_, "rop", 2 * self.n_components,
            lambda rng, n: rng.standard_normal((n, n_features)),
        )

    def _state_arrays(self):
        return {"hyperplanes": self.hyperplanes_}

    def _factor_matrix(self, dtype):
        """Rows ``a_{2i} - a_{2i+1}`` (first m) then ``a_{2i} + a_{2i+1}``, in ``dtype``."""

        def build(dt):
            a, b = self.hyperplanes_[0::2], self.hyperplanes_[1::2]
            return np.ascontiguousarray(np.vstack([a - b, a + b]), dtype=dt)

        return self._cached("factors", dtype, build)

    def _sketch_blocks(self, X, consume):
        """Compute B block by block and hand each ``(start, stop, B_block)`` to ``consume``."""
        m = self.n_components_
        W = self._factor_matrix(X.dtype)

        def work(start, stop):
            P = matmul_transposed(X[start:stop], W)
            B = P[:, :m]
            B *= P[:, m:]
            consume(start, stop, B)

        run_row_blocks(X.shape[0], ROW_BLOCK, work)

    def _transform_array(self, X):
        out = np.empty((X.shape[0], self.n_components_), dtype=X.dtype)

        def store(start, stop, B):
            out[start:stop] = B

        self._sketch_blocks(X, store)
        return out

    def output_spec(self, output="features", dtype=np.float64):
        if output == "bits":
            self._check_output(output)
            return n_bytes(self.n_components_), np.dtype(np.uint8)
        return super().output_spec(output, dtype)

    def _output_array(self, X, output):
        if output != "bits":
            return super()._output_array(X, output)
        out = np.empty((X.shape[0], n_bytes(self.n_components_)), dtype=np.uint8)

        def pack(start, stop, B):
            out[start:stop] = pack_signs(B)

        self._sketch_blocks(X, pack)
        return out

    def transform_bits(self, X):
        """:math:`\\psi(x) = \\mathrm{sign}(B(x))`, packed eight components to a byte.

        The map's fitted scaling (``preprocessing_``) applies first, as in
        :meth:`transform`, so the bits are the signs of :meth:`transform`'s features.

        Parameters
        ----------
        X : array-like, sparse matrix or dask array of shape (n_samples, n_features)

        Returns
        -------
        bits : ndarray (or dask array) of uint8, shape (n_samples, ceil(n_components / 8))
            ``numpy.packbits`` layout along each row; bit set means
            :math:`B(x)_i \\ge 0` (+1, zero included), clear means −1. Decode with
            :func:`unpack_bits`. A dask array's blocks are computed from the map's spec
            alone, like its features (:func:`dkrp.parallel.featurize`).
        """
        return self._transform_output(X, "bits")
