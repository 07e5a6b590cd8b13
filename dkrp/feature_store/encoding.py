"""How a feature store holds its values: float features or packed sign bits, the stored
dtype, and the compressor of its chunks.

This module owns the three store options of ``dkrp featurize`` and
:func:`dkrp.featurize_to_store`, their attributes in the store, and turning one
computed chunk into the bytes that are stored:

``encoding``
    ``"float"`` (features, the default) or ``"bits"``: the signs of a
    :class:`~dkrp.SignProductEmbedding` sketch packed eight to a byte
    (:meth:`~dkrp.SignProductEmbedding.transform_bits`: ``numpy.packbits`` order,
    uint8, ``ceil(m/8)`` bytes per row, 32x fewer bytes than float32), decoded by
    :func:`dkrp.unpack_bits`. A bit store has ``format_version`` 2, so a dkrp that
    predates bit stores refuses it instead of reading the bytes as features.
``store_dtype``
    The dtype the features are stored in, when narrower than the one they are
    computed in (``compute_dtype``): float16 halves a float32 store. A value that
    does not fit it (``|v|`` above 65504 for float16, which would become inf) is refused,
    naming its row: the store is left incomplete, never finished with an inf in it.
``compressor``
    The codec of each chunk before its crc32c checksum (:data:`COMPRESSOR_CODECS`):
    ``none`` (the default: random features are close to incompressible), ``zstd``,
    ``gzip``, ``blosc-lz4`` or ``blosc-zstd`` (Blosc with byte shuffle). All are
    zarr v3 codecs, read back by any zarr v3 reader. A gzip stream's header carries the
    second it was written (RFC 1952's MTIME), so two gzip stores of the same job hold
    equal values in files that differ; the other codecs write the same bytes each time.

Stores written before these options have none of their attributes and read as
``encoding = "float"``, ``compute_dtype = dtype``, compressor unrecorded
(:func:`store_options`).
"""

from __future__ import annotations

import numpy as np

from .._choices import COMPRESSORS, STORE_DTYPE_NAMES
from ..errors import InvalidInputError, Message, Param, PartitionInputError
from ._half import float32_to_float16, nonfinite_half

__all__ = [
    "BITS",
    "COMPRESSORS",
    "FLOAT",
    "STORE_DTYPE_NAMES",
    "check_store_options",
    "compressor_codecs",
    "encode_block",
    "row_bytes",
    "store_options",
]

FLOAT = "float"
BITS = "bits"
#: format_version of a store of each encoding (a bit store is unreadable as features)
ENCODING_VERSIONS = {FLOAT: 1, BITS: 2}


def compressor_codecs(name, itemsize) -> tuple:
    """The zarr v3 bytes-to-bytes codecs of compressor ``name`` (before the checksum).

    Parameters
    ----------
    name : str or None
        One of :data:`COMPRESSORS`; None is ``"none"``.
    itemsize : int
        Bytes per stored value (Blosc shuffles bytes of this size).

    Returns
    -------
    tuple of zarr codecs
    """
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    name = "none" if name is None else name
    if name == "none":
        return ()
    if name == "zstd":
        return (ZstdCodec(level=3),)
    if name == "gzip":
        return (GzipCodec(level=5),)
    if name in ("blosc-lz4", "blosc-zstd"):
        return (BloscCodec(cname=name.split("-")[1], clevel=5, shuffle="shuffle",
                           typesize=int(itemsize)),)
    raise InvalidInputError(f"compressor must be one of {', '.join(COMPRESSORS)}; got {name!r}.")


def check_store_options(projector, *, bits=False, store_dtype=None, compressor=None):
    """Check the store options for ``projector`` before anything runs.

    Parameters
    ----------
    projector : BaseProjector or None
        Fitted or not; None when it is not known yet (as
        :class:`~dkrp.feature_store.StoreOptions` checks its values): the check of
        ``bits`` against the map is left for when it is.
    bits : bool, default=False
        Store packed sign bits: only projectors with ``transform_bits``
        (:class:`~dkrp.SignProductEmbedding`) have them.
    store_dtype : {None, "float16", "float32", "float64"}
        Store the features in this dtype (None: the compute dtype).
    compressor : {None, "none", "zstd", "gzip", "blosc-lz4", "blosc-zstd"}

    Returns
    -------
    dict
        ``bits`` (bool), ``store_dtype`` (numpy.dtype or None), ``compressor`` (str).

    Raises
    ------
    ValueError
        Bits from a map without them, bits with a store dtype, or an unknown dtype or
        compressor; the message says what to pass instead.
    """
    bits = bool(bits)
    if bits and projector is not None and "bits" not in getattr(projector, "outputs", ()):
        spe = Param("method", "spe")  # from Python, the projector is passed
        raise InvalidInputError(Message(
            "{} stores packed sign bits, which only SignProductEmbedding{} makes, not {}: "
            "drop {}, or use {}.", Param("bits", True), Message(" ({})", spe, python=""),
            type(projector).__name__, Param("bits"),
            Message("{}", spe, python="a SignProductEmbedding")))
    if store_dtype is not None:
        if bits:
            raise InvalidInputError(Message("A bit store holds packed uint8 signs: drop {} or {}.",
                                            Param("store_dtype"), Param("bits")))
        if str(np.dtype(store_dtype)) not in STORE_DTYPE_NAMES:
            raise InvalidInputError(f"store_dtype must be one of "
                                    f"{', '.join(STORE_DTYPE_NAMES)}; got {store_dtype!r}.")
        store_dtype = np.dtype(store_dtype)
    compressor = "none" if compressor is None else str(compressor)
    if compressor not in COMPRESSORS:
        raise InvalidInputError(f"compressor must be one of {', '.join(COMPRESSORS)}; got "
                                f"{compressor!r}.")
    return {"bits": bits, "store_dtype": store_dtype, "compressor": compressor}


def row_bytes(n_components, compute_dtype, *, bits=False, store_dtype=None) -> int:
    """Stored bytes of one row (before compression)."""
    if bits:
        return (int(n_components) + 7) // 8
    return int(n_components) * np.dtype(store_dtype or compute_dtype).itemsize


def store_options(attrs) -> dict:
    """The options a store was written with, from its attributes (legacy defaults).

    Returns
    -------
    dict
        ``dtype`` (the compute dtype), ``bits``, ``store_dtype`` (None when the store
        holds the compute dtype) and ``compressor`` (None when not recorded): the
        keyword arguments of :func:`dkrp.feature_store.plan_features` that rebuild
        the same store.
    """
    stored = attrs.get("dtype")
    compute = attrs.get("compute_dtype", stored)
    bits = attrs.get("encoding", FLOAT) == BITS
    return {"dtype": compute, "bits": bits,
            "store_dtype": None if bits or stored == compute else stored,
            "compressor": attrs.get("compressor")}


def encode_block(Z, store_dtype, partition, row_offset):
    """``Z`` cast to ``store_dtype``, refusing values that do not fit (they would be inf).

    Parameters
    ----------
    Z : ndarray of shape (n_rows, n_components)
        A computed chunk (finite).
    store_dtype : numpy.dtype
    partition, row_offset : int
        Named in the error.

    Raises
    ------
    PartitionInputError
        A value overflows ``store_dtype`` (naming the global row, component, value and
        the largest value the dtype holds).
    """
    if store_dtype == np.float16 and Z.dtype == np.float32:
        out = float32_to_float16(Z)  # numpy's cast bit for bit, 6x faster
        bad = nonfinite_half(out)
    else:
        with np.errstate(over="ignore"):  # an overflow is refused below, naming the value
            out = Z.astype(store_dtype)
        bad = nonfinite_half(out) if out.dtype == np.float16 else ~np.isfinite(out)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        largest = float(np.finfo(store_dtype).max)
        raise PartitionInputError(Message(
            "Partition {}, row {}, component {}: the feature value {:.6g} does not fit {} "
            "(largest {:.6g}; it would be stored as inf) and the store was left incomplete. "
            "Store a wider dtype (drop {}), or scale the input down (e.g. {}).", partition,
            row_offset + row, col, float(Z[row, col]), np.dtype(store_dtype).name, largest,
            Param("store_dtype"), Param("scale_rows", "unit")),
            partition=partition)
    return out
