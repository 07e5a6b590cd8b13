"""What a feature-store run asks of its store, as one object: :class:`StoreOptions`.

This module owns :class:`StoreOptions`, the options that decide the bytes a feature
store holds and how they are laid out (the compute dtype, packed bits or a stored
dtype, the chunk compressor, the rows per chunk). It travels as one value from
``dkrp featurize`` through :func:`dkrp.featurize_to_store`,
:func:`dkrp.jobs.size_job` and :func:`~dkrp.feature_store.plan_features`, each of which
still takes the same options one by one as keywords. Its values are checked once, when
it is made, by the checks that existed before it
(:func:`~dkrp.feature_store.encoding.check_store_options`); whether the map has sign
bits is checked when the map is known (:meth:`StoreOptions.check_for`).

``overwrite`` is not a store option: it says what a run may do to a store made by
another run, not what the store holds (the same options with or without it give the
same bytes), and no store's attributes record it.
"""

from __future__ import annotations

import dataclasses

from .._validation import check_float_dtype, check_integer, options_object
from .encoding import check_store_options

__all__ = ["StoreOptions"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoreOptions:
    """What a feature store holds and how it is laid out (``dkrp featurize``'s store flags).

    Values are checked and normalised when the object is made: ``dtype`` and
    ``store_dtype`` become ``numpy.dtype`` (or None), ``bits`` a bool, ``compressor`` a
    name (None is ``"none"``). Two equal objects ask for byte-identical stores of the
    same input and map. :func:`dataclasses.replace` makes a changed copy.

    Parameters
    ----------
    dtype : {None, "float32", "float64"}
        The dtype the map computes in (default: float32 for float32 input, else
        float64), and the store holds unless ``store_dtype`` or ``bits`` say otherwise
        (``--dtype``).
    bits : bool, default=False
        Store the packed sign bits of a :class:`~dkrp.SignProductEmbedding`
        (``transform_bits``: uint8, ``ceil(m/8)`` bytes per row, :func:`dkrp.unpack_bits`
        decodes them) instead of float features (``--bits``). Other maps refuse it,
        when the job knows its map (:meth:`check_for`).
    store_dtype : {None, "float16", "float32", "float64"}
        Store the features in this dtype, computed in ``dtype`` (``--store-dtype``). A
        value that overflows it (``|v| > 65504`` for float16) fails the job, naming its
        row, and leaves the store incomplete. Not with ``bits``.
    compressor : {"none", "zstd", "gzip", "blosc-lz4", "blosc-zstd"} or None, default="none"
        Codec of each stored chunk (``--compressor``). See
        :mod:`dkrp.feature_store.encoding` and the README for measured sizes and times.
    chunk_rows : int, optional
        Rows per output chunk (and task) of a new store (``--chunk-rows``). Default: the
        input's row chunks when their output is at most 64 MiB, else the most whole
        2048-row blocks that fit 64 MiB; smaller still when a task would not fit the
        workers' memory. An existing store keeps its grid.

    Raises
    ------
    InvalidInputError
        A dtype, store dtype or compressor that is not one of the above, ``bits`` with
        a ``store_dtype``, or a ``chunk_rows`` below 1 (the messages of
        :func:`~dkrp.feature_store.encoding.check_store_options`).

    See Also
    --------
    dkrp.featurize_to_store : takes ``store=StoreOptions(...)`` or the same keywords.
    dkrp.preprocessing.ScalingOptions : the scaling a fitted map carries.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.feature_store import StoreOptions
    >>> options = StoreOptions(dtype="float32", store_dtype="float16", compressor="zstd")
    >>> options.store_dtype == np.float16 and options.chunk_rows is None
    True
    >>> StoreOptions(compressor=None) == StoreOptions()
    True
    """

    dtype: object = None
    bits: bool = False
    store_dtype: object = None
    compressor: str | None = "none"
    chunk_rows: int | None = None

    def __post_init__(self):
        checked = check_store_options(None, bits=self.bits, store_dtype=self.store_dtype,
                                      compressor=self.compressor)
        checked["dtype"] = check_float_dtype(self.dtype)
        if self.chunk_rows is not None:
            checked["chunk_rows"] = check_integer("chunk_rows", self.chunk_rows, minimum=1)
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def check_for(self, projector):
        """Refuse options ``projector`` cannot store (``bits`` of a map without them).

        Raises
        ------
        InvalidInputError
            As :func:`~dkrp.feature_store.encoding.check_store_options`.
        """
        # the other values were checked when the object was made
        check_store_options(projector, bits=self.bits)

    def encoding(self) -> dict:
        """``{"bits", "store_dtype", "compressor"}``: how a chunk's values are stored."""
        return {"bits": self.bits, "store_dtype": self.store_dtype,
                "compressor": self.compressor}

    @classmethod
    def given(cls, store=None, *, where, **keywords):
        """``store``, or when it is None the options of ``keywords`` (the same options,
        one by one, as ``where`` took them before ``store=``).

        Keywords other than their defaults beside a ``store`` are refused
        (:class:`~dkrp.errors.InvalidTypeError`): which should win would be a guess.
        """
        if store is not None:
            defaults = {f.name: f.default for f in dataclasses.fields(cls)}
            keywords = {key: value for key, value in keywords.items()
                        if value is not None and not _is_default(value, defaults[key])}
        return options_object(cls, store, "store", keywords, where=where)


def _is_default(value, default) -> bool:
    """``value`` is the non-None ``default`` (``bits=False``, ``compressor="none"``)."""
    if default is None:  # np.dtype("float64") == None holds in numpy 1.x
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError):  # an array, say: not a default
        return False
