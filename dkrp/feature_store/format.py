"""The on-disk *features* format: layout, attributes, opening.

This module owns what a feature store *is*: its layout and attributes, creating an
empty store, and
reading one back (:func:`open_features`, :class:`FeatureSet`). The input fingerprint
that ties a store to its input is :mod:`~dkrp.feature_store.fingerprint`. How a
store is planned (and a store made by another run refused,
:mod:`~dkrp.feature_store.resume`) and written is in :mod:`dkrp.feature_store.plan`,
:mod:`~dkrp.feature_store.tasks` and :mod:`~dkrp.feature_store.write`.

Store layout (``dkrp_format = "features"``, ``format_version = 1``; 2 for bit stores)
-----------------------------------------------------------------------------------
A Zarr v3 group::

    <path>/zarr.json   group attributes (below)
    <path>/Z           features, shape (n_samples, n_components), chunks (chunk_rows, k),
                       fill value NaN (an unwritten chunk never reads as features); in a
                       bit store (``encoding: "bits"``) uint8 packed signs of shape
                       (n_samples, ceil(n_components / 8)), fill value 0
    <path>/done        uint8, shape (n_chunks,), one chunk per element: 1 once chunk i of
                       Z is written (the per-chunk done marker)
    <path>/y           the input's labels (int64 or float64), shape (n_samples,), chunks
                       (chunk_rows,); only when the input had labels (attribute
                       ``has_labels: true``). Stores written before labels were copied
                       have neither and open as before (no labels).

Group attributes: ``dkrp_format``, ``format_version``, ``complete``, ``n_samples``,
``n_components``, ``dtype`` (of ``Z`` as stored: ``uint8`` in a bit store),
``compute_dtype`` (the dtype the map ran in), ``encoding`` (``"float"`` or ``"bits"``),
``compressor``, ``chunk_rows``, ``n_chunks``, ``has_labels`` (when there are labels),
``spec`` (the projector's JSON spec, with any scaling learnt on the training input in
its fitted values), ``input`` (the input fingerprint) and ``manifest`` (dkrp, numpy,
zarr and dask versions); a bit store adds ``bytes_per_row`` and ``bit_order``. They
hold no timestamps or host names, so two runs of the same job give byte-identical
stores. Stores written before ``encoding``, ``compute_dtype`` and ``compressor`` existed
lack them and read as float features computed in ``dtype``
(:mod:`dkrp.feature_store.encoding`).

``Z`` and ``done`` carry attributes for readers that do not know dkrp (plain Zarr,
``xarray.open_zarr``), which read a missing chunk as the fill value with no error:
``Z`` names what it holds and how to read and check it (``long_name``,
``dkrp_encoding``, ``comment``; ``units`` for features, CF ``flag_masks`` and
``flag_meanings`` for packed bits; :func:`features_array_attrs`), ``done`` what its
markers mean. Stores written before them have none and read as before.
:func:`open_xarray` is the checked xarray reader.

Both arrays' codecs end with zarr's ``crc32c`` codec: every chunk file carries a
CRC-32C of its bytes, checked on every read. :func:`open_features` refuses a complete
store with a missing chunk file, and reading a chunk that is missing or fails its
checksum raises :class:`~dkrp.errors.ChunkError` naming the store, the array and the
chunk; ``dkrp verify STORE --repair`` (:func:`dkrp.feature_store.verify_features`)
checks every chunk and recomputes the bad ones. Stores written before checksums were
added (dkrp 0.1.0) keep ``format_version = 1`` and open as before (the codecs are in
each array's own metadata, and Zarr decodes both); they are checked for missing
chunks only.

Only local (or shared POSIX) file systems are supported: workers write chunk files
themselves, so the path must be visible to every worker.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._blockwise import spec_json
from .._chunks import read_checked, with_checksum
from .._spec import from_spec
from .._store import check_store, write_attrs
from ..errors import FeatureStoreError, InvalidInputError, Message, MissingDependencyError, Param
from .encoding import BITS, ENCODING_VERSIONS, FLOAT, compressor_codecs, row_bytes
from .fingerprint import input_fingerprint  # noqa: F401 - its home before fingerprint.py

__all__ = [
    "FEATURES_FORMAT",
    "FORMAT_VERSION",
    "FeatureSet",
    "describe_features",
    "open_features",
    "open_xarray",
    "read_features",
]

logger = logging.getLogger(__name__)

FEATURES_FORMAT = "features"
#: The newest layout this dkrp writes and reads. Stores of float features are still
#: written as version 1 (dkrp 0.1.0 reads them, float16 and compressed ones included); a
#: bit store is version 2, so a dkrp that predates bit stores refuses it.
FORMAT_VERSION = 2


@dataclass(frozen=True)
class FeatureSet:
    """A feature store opened lazily.

    Attributes
    ----------
    Z : dask.array.Array of shape (n_samples, n_components)
        Chunked like the store (one dask block per Zarr chunk).
    attrs : dict
        The group attributes (spec, input fingerprint, manifest, completeness).
    path : pathlib.Path
    y : dask.array.Array of shape (n_samples,) or None
        The labels copied from the input (chunked like ``Z``), or None.
    """

    Z: object
    attrs: dict = field(repr=False)
    path: Path
    y: object = field(default=None, repr=False)

    @property
    def complete(self) -> bool:
        return self.attrs.get("complete") is True

    @property
    def spec(self) -> dict:
        return self.attrs["spec"]

    @property
    def encoding(self) -> str:
        """``"float"`` (features) or ``"bits"`` (packed signs: ``dkrp.unpack_bits``)."""
        return self.attrs.get("encoding", FLOAT)

    @property
    def n_components(self) -> int:
        """Features (or, in a bit store, sign bits) per row."""
        return int(self.attrs["n_components"])

    def describe(self) -> dict:
        """The summary that ``dkrp info`` prints for this store.

        Returns
        -------
        dict
            See :func:`describe_features`.
        """
        return describe_features(self.path, self.attrs)

    def projector(self):
        """The projector that made these features, rebuilt from the spec."""
        return from_spec(self.spec)


def describe_features(path, attrs) -> dict:
    """Summarise a feature store from its path and group attributes.

    Reads nothing but the ``done`` markers and the list of chunk files, so it also
    describes an incomplete store; a store whose chunk file was deleted is not
    ``complete`` (finding changed bytes needs :func:`verify_features`).

    Parameters
    ----------
    path : str or os.PathLike
        The store directory.
    attrs : dict
        Its group attributes.

    Returns
    -------
    dict
        ``format`` (``"features"``), ``path``, ``shape`` (n_samples, n_components),
        ``dtype`` (as stored), ``compute_dtype``, ``encoding`` (``"float"``/``"bits"``),
        ``bytes_per_row`` (stored, before compression), ``compressor`` (None when not
        recorded), ``chunk_rows``, ``complete`` (bool), ``chunks_done``, ``n_chunks``,
        ``projector`` (the spec's class name), ``seed``, ``params``, ``checksum``,
        ``input`` (the input fingerprint), ``manifest`` (the versions that wrote it),
        ``has_labels``, ``preprocessing`` (the scaling the spec carries, e.g.
        ``"standardize + unit rows"``, or ``"none"``) and ``missing`` (the files of a
        finished store's missing label chunks, relative to the store).
    """
    from ..preprocessing import describe
    path = Path(path)
    n_chunks = int(attrs.get("n_chunks", 0))
    spec = attrs.get("spec", {})
    written = int(written_chunks(path, n_chunks).sum())  # a deleted chunk is not done
    # the labels of a finished store: a deleted chunk makes it as incomplete as one of Z
    finished = attrs.get("complete") is True
    missing = _missing_label_files(path) if finished and attrs.get("has_labels") else []
    encoding = attrs.get("encoding", FLOAT)
    k, dtype = attrs.get("n_components"), attrs.get("dtype")
    per_row = (None if k is None or dtype is None else
               row_bytes(k, dtype) if encoding == FLOAT else row_bytes(k, dtype, bits=True))
    return {
        "format": FEATURES_FORMAT,
        "path": str(path),
        "shape": (attrs.get("n_samples"), k),
        "dtype": dtype,
        "compute_dtype": attrs.get("compute_dtype", dtype),
        "encoding": encoding,
        "bytes_per_row": per_row,
        "compressor": attrs.get("compressor"),
        "chunk_rows": attrs.get("chunk_rows"),
        "complete": finished and written == n_chunks and not missing,
        "chunks_done": written,
        "n_chunks": n_chunks,
        "projector": spec.get("class"),
        "seed": spec.get("seed"),
        "params": spec.get("params"),
        "checksum": spec.get("checksum"),
        "input": attrs.get("input"),
        "manifest": attrs.get("manifest"),
        "has_labels": attrs.get("has_labels") is True,
        "preprocessing": describe((spec.get("fitted") or {}).get("preprocessing")),
        "missing": missing,
    }


def _missing_label_files(path: Path) -> list[str]:
    """The files of the label chunks (or the labels' metadata) missing from the finished
    store at ``path``, relative to it, as a dataset store's ``describe`` lists them."""
    import zarr

    from .._chunks import chunk_key

    try:
        y = zarr.open_array(str(path / "y"), mode="r")
    except Exception:  # noqa: BLE001 - deleted or unreadable metadata: describe, not fail
        return ["y/zarr.json"]
    keys = (chunk_key(y, (i,)) for i in range(y.nchunks))
    return [f"y/{key}" for key in keys if not (path / "y" / key).is_file()]


# -- attributes ----------------------------------------------------------


def _manifest() -> dict:
    import dask
    import zarr

    from .. import __version__

    return {
        "dkrp": __version__,
        "numpy": np.__version__,
        "zarr": zarr.__version__,
        "dask": dask.__version__,
    }


def expected_attrs(projector, X, dtype, chunk_rows, fingerprint, *, bits=False,
                   store_dtype=None, compressor="none") -> dict:
    spec = json.loads(spec_json(projector))
    n = int(X.shape[0])
    k = int(projector._n_features_out)
    n_chunks = len(X.chunks[0]) if n else 0
    encoding = BITS if bits else FLOAT
    stored = "uint8" if bits else np.dtype(store_dtype or dtype).name
    attrs = {
        "dkrp_format": FEATURES_FORMAT,
        "format_version": ENCODING_VERSIONS[encoding],
        "complete": False,
        "n_samples": n,
        "n_components": k,
        "dtype": stored,
        "compute_dtype": np.dtype(dtype).name,
        "encoding": encoding,
        "compressor": compressor or "none",
        "chunk_rows": int(chunk_rows),
        "n_chunks": n_chunks,
        "spec": spec,
        "input": fingerprint,
        "manifest": _manifest(),
    }
    if bits:
        attrs["bytes_per_row"] = row_bytes(k, dtype, bits=True)
        attrs["bit_order"] = "numpy.packbits (big): bit 7 - i % 8 of byte i // 8 is sign i"
    return attrs


def create_store(path: Path, attrs: dict):
    import zarr
    from zarr.codecs import ZstdCodec

    path.parent.mkdir(parents=True, exist_ok=True)
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    write_attrs(group, attrs)  # complete: false, before the first chunk
    n, k = attrs["n_samples"], attrs["n_components"]
    bits = attrs.get("encoding", FLOAT) == BITS
    width = attrs["bytes_per_row"] if bits else k
    group.create_array(
        "Z",
        shape=(n, width),
        # xarray.open_zarr's dimensions
        dimension_names=("sample", "byte" if bits else "component"),
        chunks=(max(1, attrs["chunk_rows"]), max(1, width)),
        dtype=attrs["dtype"],
        fill_value=0 if bits else np.nan,
        # Random features are incompressible noise to zstd (measured: 94% of raw size
        # at 2.8x the write time for a 16384 x 2000 float32 KRP chunk); stored raw by
        # default (benchmarks/bench_store_encodings.py measures every compressor), always
        # with a crc32c checksum of each chunk (benchmarks/bench_checksum.py)
        compressors=with_checksum(compressor_codecs(
            attrs.get("compressor"), np.dtype(attrs["dtype"]).itemsize)),
        config={"write_empty_chunks": True},
        attributes=features_array_attrs(attrs),
    )
    group.create_array(
        "done",
        shape=(attrs["n_chunks"],),
        dimension_names=("chunk",),
        chunks=(1,),
        dtype="uint8",
        fill_value=0,
        compressors=with_checksum([ZstdCodec(level=0, checksum=False)]),
        config={"write_empty_chunks": True},
        attributes=DONE_ATTRS,
    )
    return group


#: What a plain Zarr or xarray reader is told about a store (the attributes of ``Z``)
_PLAIN_READ = ("A missing chunk reads as the fill value ({fill}) with no error, even when "
               "the group says complete: true. dkrp.read_features(store) and "
               "dkrp.open_xarray(store) refuse an incomplete store or a missing chunk and "
               "check every chunk's checksum; from plain zarr, check that "
               "Z.nchunks_initialized == Z.nchunks and that every element of done is 1.")

#: The attributes of array ``done`` (stores written before them have none)
DONE_ATTRS = {
    "long_name": "per-chunk done markers of Z",
    "comment": "Element i is 1 once row chunk i of Z is written, 0 (the fill value) before.",
}


def features_array_attrs(attrs) -> dict:
    """The attributes of array ``Z`` of a store with group attributes ``attrs``.

    They name, for a plain Zarr or xarray reader, what ``Z`` holds and how to read it
    safely (CF-style ``long_name``, ``units``, ``flag_masks``/``flag_meanings``, which
    xarray shows as the variable's attributes). Fixed text and the store's own values
    only, so two runs of the same job still give byte-identical stores. Stores written
    before them have none and read as before.
    """
    if attrs.get("encoding", FLOAT) == BITS:
        m = int(attrs["n_components"])
        return {
            "long_name": "packed sign bits, not features",
            "dkrp_encoding": BITS,
            "flag_masks": [1 << (7 - i) for i in range(8)],
            "flag_meanings": " ".join(f"sign_8j_plus_{i}" for i in range(8)),
            "comment": (f"{m} signs per row packed 8 to a byte (numpy.packbits, big bit "
                        "order): bit 7 - i % 8 of byte i // 8 is sign i, a set bit +1 and a "
                        "clear one -1; byte j holds signs 8j to 8j + 7. Read with "
                        "dkrp.read_features(store, unpack=True) (+1/-1 float32) or decode with "
                        f"dkrp.unpack_bits(Z, {m}). " + _PLAIN_READ.format(fill="0: all signs "
                                                                         "-1")),
        }
    return {
        "long_name": "random features",
        "dkrp_encoding": FLOAT,
        "units": "1",
        "comment": (f"{attrs['n_components']} features per row of the map in the group's spec. "
                    "Read with dkrp.read_features(store). "
                    + _PLAIN_READ.format(fill="NaN")),
    }


def write_labels(path: Path, labels, chunk_rows: int):
    """Copy ``labels`` (array-like or dask array) into array ``y`` of the store at ``path``.

    Labels are small (8 bytes a row): the client reads them whole and writes them with
    the rows chunked like ``Z``. Rewriting gives the same bytes, so a resumed run
    simply writes them again.
    """
    import zarr
    from zarr.codecs import ZstdCodec

    values = label_values(labels)
    fill = label_fill_value(values.dtype)
    group = zarr.open_group(str(path), mode="r+")
    y = group.create_array(
        "y", shape=values.shape, chunks=(max(1, int(chunk_rows)),), dtype=values.dtype,
        fill_value=fill, compressors=with_checksum([ZstdCodec(level=0, checksum=False)]),
        config={"write_empty_chunks": True}, overwrite=True,
        dimension_names=("sample",),  # xarray.open_zarr's dimensions
        attributes=labels_array_attrs(fill),
    )
    y[:] = values


def label_fill_value(dtype):
    """What a missing chunk of ``y`` reads as in a plain Zarr reader: a value no label has
    in practice (NaN, or the smallest int64), where 0 would read as a class."""
    return np.nan if np.dtype(dtype).kind == "f" else int(np.iinfo(np.int64).min)


def labels_array_attrs(fill) -> dict:
    """The attributes of array ``y``: what it holds, for a plain Zarr or xarray reader."""
    shown = "NaN" if isinstance(fill, float) else str(fill)
    return {"long_name": "labels",
            "comment": (f"The labels of the input's rows, in the rows of Z. A missing chunk "
                        f"reads as the fill value ({shown}) with no error, even when the "
                        "group says complete: true. dkrp.read_features(store) and "
                        "dkrp.open_xarray(store) refuse a missing chunk and check every "
                        "chunk's checksum; from plain zarr, check that "
                        "y.nchunks_initialized == y.nchunks.")}


def label_values(labels) -> np.ndarray:
    """``labels`` (array-like or dask array) read whole, as array ``y`` stores them:
    int64 for integral labels, float64 for real ones."""
    values = np.asarray(labels.compute() if hasattr(labels, "compute") else labels)
    if values.dtype.kind in "biu":
        return values.astype(np.int64)
    if values.dtype.kind == "f":
        return values.astype(np.float64)
    raise InvalidInputError(f"labels must be numeric, got dtype {values.dtype}.")


def write_label_chunks(path: Path, values: np.ndarray, chunks) -> None:
    """Rewrite chunks ``chunks`` (indices) of array ``y`` of the store at ``path`` from
    ``values`` (all the labels, :func:`label_values`); its other chunks are not touched."""
    import zarr

    from .._chunks import chunk_key, chunk_region

    y = zarr.open_array(str(path / "y"), mode="r+").with_config({"write_empty_chunks": True})
    for i in chunks:
        (path / "y" / chunk_key(y, (i,))).unlink(missing_ok=True)  # a corrupt one is not read
        region = chunk_region(y, (i,))
        y[region] = values[region]


def done_chunks(path: Path, n_chunks: int) -> np.ndarray:
    import zarr

    if n_chunks == 0:
        return np.zeros(0, dtype=bool)
    done = zarr.open_array(str(path / "done"), mode="r")
    try:
        return np.asarray(done[:]) == 1
    except Exception:  # noqa: BLE001 - a marker that fails its checksum is "not done"
        marks = np.zeros(n_chunks, dtype=bool)
        for i in range(n_chunks):
            try:
                marks[i] = done[i] == 1
            except Exception as exc:  # noqa: BLE001 - its chunk is redone by a rerun
                logger.warning("%s: the done marker of chunk %d is unreadable (%s); the "
                               "chunk counts as not done", path, i, exc)
        return marks


def written_chunks(path: Path, n_chunks: int) -> np.ndarray:
    """Chunks marked done whose ``Z`` chunk file is on disk (a deleted one is redone)."""
    import zarr

    from .._chunks import missing_chunks

    written = done_chunks(path, n_chunks)
    if n_chunks:
        array = zarr.open_array(str(path / "Z"), mode="r")
        for coords in missing_chunks(path / "Z", array):
            written[coords[0]] = False
    return written


def _check_complete_chunks(path: Path, array):
    """Refuse a complete store whose ``Z`` lacks a chunk file (it would read as NaN)."""
    from ..io.dataset_store import check_chunks_present

    check_chunks_present(array, path, "Z", kind="features")


def open_features(path, *, allow_incomplete=False) -> FeatureSet:
    """Open a feature store as a lazy dask array.

    Parameters
    ----------
    path : str or os.PathLike
    allow_incomplete : bool, default=False
        Open a store whose run has not finished (unwritten chunks read as NaN), or
        a complete store with a missing chunk file (to inspect it; reading that
        chunk still raises).

    Returns
    -------
    FeatureSet

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    FeatureStoreError
        Not a feature store, or incomplete (the message says how many chunks are
        missing and how to finish it).
    ChunkError
        A complete store lacks a chunk file of ``Z`` (naming it). Reading a chunk
        that is missing or fails its checksum raises it too, at compute time; both
        say to run ``dkrp verify STORE --repair``.
    """
    import zarr

    path = Path(path).expanduser().absolute()

    def incomplete(attrs):
        n_chunks = int(attrs.get("n_chunks", 0))
        missing = n_chunks - int(done_chunks(path, n_chunks).sum())
        return Message(
            "its run did not finish ({} of {} chunks missing). Run the same featurize command "
            "again to write the missing chunks{}.", missing, n_chunks,
            Message(", or pass {} to inspect it", Param("allow_incomplete", True),
                    cli=" (dkrp info shows how far it got)"))

    attrs = check_store(path, FEATURES_FORMAT, allow_incomplete=allow_incomplete,
                        error=FeatureStoreError, incomplete_hint=incomplete)
    array = zarr.open_array(str(path / "Z"), mode="r")
    if attrs.get("complete") is True and not allow_incomplete:
        _check_complete_chunks(path, array)
    Z = read_checked(path, "Z", "features", array,
                     allow_missing=attrs.get("complete") is not True)
    y = None
    if attrs.get("has_labels") is True and (path / "y" / "zarr.json").is_file():
        labels = zarr.open_array(str(path / "y"), mode="r")
        if attrs.get("complete") is True and not allow_incomplete:
            from ..io.dataset_store import check_chunks_present

            check_chunks_present(labels, path, "y", kind="features")
        y = read_checked(path, "y", "features", labels,
                         allow_missing=attrs.get("complete") is not True)
    elif attrs.get("has_labels") is True and not allow_incomplete:
        raise FeatureStoreError(f"{path} says it holds labels but has no array y: the "
                                "store is damaged. Featurize the input again.")
    return FeatureSet(Z=Z, attrs=attrs, path=path, y=y)


def read_features(path, *, unpack=False):
    """The features of a feature store and their labels: ``Z, y = dkrp.read_features(path)``.

    The one reader for model training. The store must be complete (every chunk
    written and present); chunks are checked against their checksums as they are
    read.

    Parameters
    ----------
    path : str or os.PathLike
        A feature store made by ``dkrp featurize`` (or :func:`dkrp.featurize_to_store`).
    unpack : bool, default=False
        A bit store (``dkrp featurize --method spe --bits``) is refused unless this is
        True: then its signs are read as ±1 float32 features (:func:`dkrp.unpack_bits`,
        block by block). The packed bytes themselves are ``open_features(path).Z``.
        No effect on a store of float features.

    Returns
    -------
    Z : dask.array.Array of shape (n_samples, n_components)
        Lazy, one block per store chunk; ``Z.compute()`` (or ``np.asarray(Z)``, as
        scikit-learn's estimators do) reads it into memory. In the dtype stored
        (float16 for ``--store-dtype float16``).
    y : numpy.ndarray of shape (n_samples,) or None
        The labels copied from the input dataset store at featurize time (int64 for
        integral labels, else float64), or None when the input had none.

    Raises
    ------
    FileNotFoundError, FeatureStoreError, ChunkError
        As :func:`open_features` (an incomplete store is refused); FeatureStoreError
        too for a bit store without ``unpack=True``.

    Examples
    --------
    >>> import dkrp                                         # doctest: +SKIP
    >>> from sklearn.svm import LinearSVC                   # doctest: +SKIP
    >>> Z, y = dkrp.read_features("train-features.zarr")    # doctest: +SKIP
    >>> Zt, yt = dkrp.read_features("test-features.zarr")   # doctest: +SKIP
    >>> LinearSVC().fit(Z, y).score(Zt, yt)                 # doctest: +SKIP
    """
    features = open_features(path)
    y = None if features.y is None else np.asarray(features.y.compute())
    Z = features.Z
    if features.encoding == BITS:
        m = features.n_components
        if not unpack:
            raise FeatureStoreError(
                f"{features.path} is a bit store: {m} signs per row packed in "
                f"{(m + 7) // 8} uint8 bytes, not features. Pass unpack=True for ±1 float32 "
                "features, or read the packed bytes with dkrp.feature_store.open_features("
                "path).Z (decode with dkrp.unpack_bits(bits, n_components)).")
        from ..features.sign_product import unpack_bits

        Z = Z.map_blocks(unpack_bits, m, np.float32, dtype=np.float32,
                         chunks=(Z.chunks[0], (m,)))
    return Z, y


def open_xarray(path, *, unpack=False):
    """A feature store as an :class:`xarray.Dataset`, checked as :func:`read_features` is.

    ``xarray.open_zarr(path)`` reads a store too, but it cannot know what dkrp
    records: it opens an incomplete store, and a missing chunk reads as NaN (0 in a
    bit store) with no error. This opener refuses what :func:`open_features`
    refuses (an incomplete store, a complete one lacking a chunk file), and its
    arrays read every chunk through the same checks (a chunk deleted or changed
    since raises :class:`~dkrp.errors.ChunkError`).

    Parameters
    ----------
    path : str or os.PathLike
        A feature store.
    unpack : bool, default=False
        As for :func:`read_features`: a bit store is refused unless True, and then
        its signs are the +1/-1 float32 features.

    Returns
    -------
    xarray.Dataset
        ``Z`` (dims ``sample``, ``component``; lazy, one dask block per chunk) and, when
        the store holds labels, ``y`` (dim ``sample``); the store's group attributes
        as ``attrs``, and ``Z``'s own as ``Z.attrs``.

    Raises
    ------
    ImportError
        xarray is not installed (dkrp does not depend on it).
    FileNotFoundError, FeatureStoreError, ChunkError
        As :func:`read_features`.

    Examples
    --------
    >>> import dkrp                                         # doctest: +SKIP
    >>> ds = dkrp.open_xarray("train-features.zarr")        # doctest: +SKIP
    >>> ds["Z"].mean("sample").compute()                    # doctest: +SKIP
    """
    try:
        import xarray as xr
    except ImportError as exc:
        raise MissingDependencyError("dkrp.open_xarray needs xarray (pip install xarray); "
                          "dkrp.read_features reads a store without it.") from exc
    import zarr

    features = open_features(path)
    if features.encoding == BITS:
        Z, _ = read_features(features.path, unpack=unpack)  # refused unless unpack
        z_attrs = {"long_name": "signs (+1/-1) unpacked from packed sign bits", "units": "1"}
    else:
        Z = features.Z
        z_attrs = dict(zarr.open_array(str(features.path / "Z"), mode="r").attrs) or (
            features_array_attrs(features.attrs))
    variables = {"Z": xr.Variable(("sample", "component"), Z, attrs=z_attrs)}
    if features.y is not None:
        variables["y"] = xr.Variable(("sample",), features.y,
                                     attrs={"long_name": "labels of the input"})
    return xr.Dataset(variables, attrs=dict(features.attrs))
