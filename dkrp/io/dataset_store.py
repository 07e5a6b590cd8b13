r"""The dataset store: dkrp's on-disk *dataset* format, and :func:`open_dataset`.

This module owns the store layout below, its constants (:data:`DATASET_FORMAT`,
:data:`FORMAT_VERSION`, :data:`TARGET_CHUNK_BYTES`), the row-block arithmetic, the CSR block
codec (how one row block of a sparse ``X`` is written and read back), the writer of dense row
blocks, the :class:`Dataset` record and :func:`open_dataset`, which checks a store before
serving it. Everything downstream (featurizers, pipelines, the CLI) reads data through
:func:`open_dataset`; the format readers of :mod:`dkrp.io` write through the helpers here.

Store layout (``dkrp_format = "dataset"``, ``format_version = 1``)
------------------------------------------------------------------
A store is a Zarr v3 group::

    <dest>/zarr.json     group attributes (see below)
    <dest>/X             the samples, dense or CSR (see below)
    <dest>/y             optional labels, shape (n_samples,), chunks (chunk_rows,)

Dense ``X`` is one array of shape ``(n_samples, n_features)`` chunked by rows,
``(chunk_rows, n_features)``: all columns sit in one chunk, so row block ``b`` (rows
``b * chunk_rows`` up to ``(b + 1) * chunk_rows``) is exactly one chunk.

CSR ``X`` is a group with attributes ``format="csr"``, ``shape``, ``chunk_rows``,
``n_blocks`` and ``nnz`` holding three 2-D arrays, one row (= one Zarr chunk) per row block::

    X/indptr   int64   (n_blocks, chunk_rows + 1)  block-local indptr: starts at 0, ends at the
                                                   block's nnz; padded with that nnz past the
                                                   block's last row (only the last block is short)
    X/indices  int32   (n_blocks, capacity)        column indices of block b in [b, :nnz_b]
    X/data     dtype   (n_blocks, capacity)        values of block b in [b, :nnz_b]

``capacity`` is the largest block nnz (at least 1) and the padding is zeros, which compress to
almost nothing. Block ``b`` is read on its own: ``p = indptr[b, :rows_b + 1]``, then
``data[b, :p[-1]]`` and ``indices[b, :p[-1]]``. Each block is owned by one chunk of each array,
so blocks are written by independent tasks without overlapping writes (Zarr has no locks).

Group attributes: ``dkrp_format``, ``format_version``, ``complete``, ``n_samples``,
``n_features``, ``storage`` (``"dense"`` or ``"csr"``), ``dtype``, ``chunk_rows``, ``nnz`` (CSR
only), ``has_labels``, ``label_dtype``, ``source`` (absolute path), ``source_format``,
``source_bytes``, ``source_sha256`` and ``ingest`` (the parameters as requested).

A store is published only once it is whole (see :mod:`dkrp.io.ingestion`): the ``complete``
attribute is written ``false`` first and ``true`` last, and every chunk is written even when it
is all zeros (``write_empty_chunks=True``), so :func:`open_dataset` can detect deleted chunk
files instead of silently reading fill values.

Every array's codecs end with zarr's ``crc32c`` codec (after ``zstd``): each chunk file
carries a CRC-32C of its stored bytes, checked on every read. A missing chunk file or a
checksum mismatch raises :class:`dkrp.errors.ChunkError` naming the store, the array and the
chunk; :func:`verify_dataset` (``dkrp verify STORE``) checks every chunk. Stores written
before (dkrp 0.1.0, no ``crc32c``) keep the same ``format_version`` and open as before: the
codecs are recorded in each array's own metadata, and any Zarr v3 reader decodes both.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
import zarr
from dask.base import tokenize

from .._chunks import (
    CheckedArray,
    check_arrays,
    chunk_indices,
    chunk_key,
    chunk_where,
    missing_chunks,
    read_checked,
)
from .._chunks import repair_hint as _repair_hint
from .._chunks import with_checksum as _with_checksum
from .._settled import compute_settled
from .._store import check_store, write_attrs
from ..errors import (
    ChunkError,
    CorruptStoreError,
    InvalidInputError,
    InvalidTypeError,
    Message,
    Param,
)
from ._common import check_finite_block

#: Target size of one uncompressed chunk of ``X`` when ``chunk_rows`` is not given.
TARGET_CHUNK_BYTES = 64 * 2**20

#: Small data are split into at least this many chunks per CPU of the ingesting machine
#: (when chunks stay at least :data:`MIN_DEFAULT_CHUNK_ROWS` rows), so that every worker of a
#: cluster has a chunk to featurize; at most :data:`TARGET_CHUNK_BYTES` per chunk otherwise.
CHUNKS_PER_CPU = 2
MIN_DEFAULT_CHUNK_ROWS = 512

#: Value of the ``dkrp_format`` attribute that marks a dataset store.
DATASET_FORMAT = "dataset"
#: Version of the layout described above, recorded as ``format_version``.
FORMAT_VERSION = 1
# every chunk is written, even all-zero ones, so that missing chunk files can be detected
_ZARR_CONFIG = {"write_empty_chunks": True}


def _compressors():
    """zstd (zarr's default) then a crc32c checksum of every chunk, checked on read."""
    from zarr.codecs import ZstdCodec

    return _with_checksum([ZstdCodec(level=0, checksum=False)])


@dataclass(frozen=True, eq=False)
class Dataset:
    """A dataset store opened lazily.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Row-chunked like the store, with known chunk sizes. For CSR stores each block is a
        ``scipy.sparse.csr_matrix`` and ``X._meta`` is one too.
    y : dask.array.Array of shape (n_samples,) or None
        Labels, chunked like ``X``; None when the store has none.
    attrs : dict
        The store's group attributes (provenance, shape, storage).
    path : pathlib.Path
        Absolute path of the store.
    """

    X: da.Array
    y: da.Array | None
    attrs: dict = field(repr=False)
    path: Path

    @property
    def is_sparse(self) -> bool:
        """Whether ``X`` is stored (and served) as CSR blocks."""
        return self.attrs.get("storage") == "csr"

    def describe(self) -> dict:
        """The summary that ``dkrp info`` prints for this store (see :func:`describe_dataset`)."""
        return describe_dataset(self.path, self.attrs)


def describe_dataset(path, attrs) -> dict:
    """Summarise a dataset store from its path and group attributes (reads no data).

    Lists the chunk files too, so that a complete store one of whose chunk files was deleted
    is not reported ``complete`` (finding changed bytes needs :func:`verify_dataset`).

    Returns
    -------
    dict
        ``format`` (``"dataset"``), ``path``, ``shape``, ``dtype``, ``storage``,
        ``chunk_rows``, ``complete`` (the attribute is true and no chunk file is missing),
        ``n_chunks`` (of every array), ``missing`` (the files of the missing chunks and
        arrays, relative to the store), ``has_labels``, ``label_dtype``, ``source``,
        ``source_format``, ``source_sha256`` and ``ingest`` (the parameters as asked).
    """
    n_chunks, missing = _chunk_files(Path(path), attrs)
    return {
        "format": DATASET_FORMAT,
        "path": str(path),
        "shape": (attrs.get("n_samples"), attrs.get("n_features")),
        "dtype": attrs.get("dtype"),
        "storage": attrs.get("storage"),
        "chunk_rows": attrs.get("chunk_rows"),
        "complete": attrs.get("complete") is True and not missing,
        "n_chunks": n_chunks,
        "missing": missing,
        "has_labels": attrs.get("has_labels"),
        "label_dtype": attrs.get("label_dtype"),
        "source": attrs.get("source"),
        "source_format": attrs.get("source_format"),
        "source_sha256": attrs.get("source_sha256"),
        "ingest": attrs.get("ingest"),
    }


def _chunk_files(path: Path, attrs) -> tuple[int, list[str]]:
    """(chunks of the store's arrays, the files of those missing): an unreadable array
    counts as its ``zarr.json``, missing."""
    total, missing = 0, []
    for name in _dataset_arrays(path, attrs):
        try:
            array = zarr.open_array(str(path / name), mode="r")
        except Exception:  # noqa: BLE001 - deleted or unreadable metadata: describe, not fail
            missing.append(f"{name}/zarr.json")
            continue
        total += len(chunk_indices(array))
        missing += [f"{name}/{chunk_key(array, c)}" for c in missing_chunks(path / name, array)]
    return total, missing


def dense_attrs(n_samples, n_features, dtype, chunk_rows, label_dtype=None, **extra) -> dict:
    """The group attributes every ingester of a dense ``X`` (and optional ``y``) records."""
    return {
        "n_samples": int(n_samples),
        "n_features": int(n_features),
        "storage": "dense",
        "dtype": np.dtype(dtype).name,
        "chunk_rows": chunk_rows,
        "has_labels": label_dtype is not None,
        "label_dtype": None if label_dtype is None else np.dtype(label_dtype).name,
        **extra,
    }


def default_chunk_rows(bytes_per_row: float, n_samples: int) -> int:
    """Rows per chunk when ``chunk_rows`` is not given: at most :data:`TARGET_CHUNK_BYTES`
    a chunk, and for small data (``n_samples`` known, > 0) at least ``CHUNKS_PER_CPU`` chunks
    per CPU, in whole 512- or 2048-row blocks of at least :data:`MIN_DEFAULT_CHUNK_ROWS`."""
    rows = max(1, int(TARGET_CHUNK_BYTES // max(bytes_per_row, 1.0)))
    if n_samples <= 0:
        return rows
    from ..parallel import available_cpus

    share = -(-int(n_samples) // (CHUNKS_PER_CPU * available_cpus()))
    align = 2048 if share >= 2048 else 512
    share = max(MIN_DEFAULT_CHUNK_ROWS, -(-share // align) * align)
    return max(1, min(rows, share, n_samples))


def check_chunk_rows(chunk_rows) -> int | None:
    if chunk_rows is None:
        return None
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
        raise InvalidTypeError(f"chunk_rows must be a positive int or None, got {chunk_rows!r}")
    if chunk_rows <= 0:
        raise InvalidInputError(f"chunk_rows must be positive, got {chunk_rows}")
    return int(chunk_rows)


def row_chunk_sizes(n_samples: int, chunk_rows: int) -> tuple[int, ...]:
    if n_samples == 0:
        return (0,)
    full, rest = divmod(n_samples, chunk_rows)
    return (chunk_rows,) * full + ((rest,) if rest else ())


def create_dense(group, name, n_rows, n_cols, chunk_rows, dtype):
    if n_cols is None:
        shape, chunks, dims = (n_rows,), (chunk_rows,), ("sample",)
    else:
        shape, chunks = (n_rows, n_cols), (chunk_rows, max(n_cols, 1))
        dims = ("sample", "feature")
    return group.create_array(
        name,
        shape=shape,
        dimension_names=dims,  # xarray.open_zarr reads these as the dimensions
        dtype=np.dtype(dtype),
        chunks=chunks,
        fill_value=0,
        compressors=_compressors(),
        config=_ZARR_CONFIG,
    )


def stored_label_dtype(labels_integral: bool) -> np.dtype:
    return np.dtype("int64") if labels_integral else np.dtype("float64")


def is_dkrp_store(path: Path) -> bool:
    meta = path / "zarr.json"
    if not meta.is_file():
        return False
    try:
        attrs = json.loads(meta.read_text()).get("attributes", {})
    except (OSError, ValueError):
        return False
    return isinstance(attrs, dict) and attrs.get("dkrp_format") == DATASET_FORMAT


# --------------------------------------------------------------------------------------------
# dense row blocks


def _copy_block(reader, reader_args, r0, r1, store, dtype, label_dtype, display, columns):
    values, labels = reader(*reader_args, r0, r1)
    values = np.asarray(values, dtype=dtype)
    check_finite_block(values, labels, display, r0, columns)
    group = zarr.open_group(store, mode="r+")
    group["X"][r0:r1] = values
    if labels is not None:
        group["y"][r0:r1] = labels.astype(label_dtype)


def write_dense_blocks(reader, reader_args, n_samples, chunk_rows, store, dtype, label_dtype,
                       display, columns, scheduler):
    copy = dask.delayed(_copy_block, pure=True)
    tasks = [
        copy(reader, reader_args, r0, min(r0 + chunk_rows, n_samples), store, dtype.name,
             label_dtype, display, columns)
        for r0 in range(0, n_samples, chunk_rows)
    ]
    compute_settled(*tasks, scheduler=scheduler)


# --------------------------------------------------------------------------------------------
# CSR block codec


def create_csr(group, n_samples, n_features, chunk_rows, n_blocks, nnz, capacity, index_dtype,
               dtype):
    """Create the CSR ``X`` group of the layout above, with room for ``capacity`` nnz per block.

    Parameters
    ----------
    group : zarr.Group
        The store being written.
    n_samples, n_features : int
        Shape of ``X``.
    chunk_rows : int
        Rows per block.
    n_blocks : int
        Number of row blocks, ``ceil(n_samples / chunk_rows)``.
    nnz : int
        Stored values in all of ``X``.
    capacity : int
        Width of ``X/indices`` and ``X/data``: the largest block nnz, at least 1.
    index_dtype, dtype : numpy.dtype
        dtypes of ``X/indices`` and ``X/data``.

    Returns
    -------
    zarr.Group
        The new ``X`` group.
    """
    xg = group.create_group("X")
    write_attrs(
        xg,
        {
            "format": "csr",
            "shape": [n_samples, n_features],
            "chunk_rows": chunk_rows,
            "n_blocks": n_blocks,
            "nnz": nnz,
            "layout": "one row per row block; indptr is block-local (see dkrp.io)",
        }
    )
    for name, width, arr_dtype in (
        ("indptr", chunk_rows + 1, np.dtype("int64")),
        ("indices", capacity, index_dtype),
        ("data", capacity, dtype),
    ):
        xg.create_array(
            name, shape=(n_blocks, width), dtype=arr_dtype, chunks=(1, width),
            dimension_names=("block", f"{name}_slot"),
            fill_value=0, compressors=_compressors(), config=_ZARR_CONFIG,
        )
    return xg


def write_csr_block(xg, block, X, chunk_rows, dtype):
    """Write row block ``block`` (a CSR matrix of at most ``chunk_rows`` rows) into ``xg``.

    The block-local ``indptr`` is padded with the block's nnz past its last row, and ``data``
    and ``indices`` with zeros up to the group's capacity; each array gets one whole chunk.
    """
    capacity = xg["data"].shape[1]
    n_rows = X.shape[0]
    indptr = np.full(chunk_rows + 1, X.nnz, dtype=np.int64)
    indptr[: n_rows + 1] = X.indptr
    data = np.zeros(capacity, dtype=dtype)
    data[: X.nnz] = X.data
    idx = np.zeros(capacity, dtype=xg["indices"].dtype)
    idx[: X.nnz] = X.indices
    xg["indptr"][block] = indptr
    xg["data"][block] = data
    xg["indices"][block] = idx


def _read_csr_block(xpath, block, rows, n_features, r0=None, r1=None):
    store = Path(xpath).parent
    group = zarr.open_group(xpath, mode="r", use_consolidated=False)
    # read through CheckedArray: a missing or corrupt chunk raises naming it
    member = {name: CheckedArray(store, f"X/{name}", "dataset", group[name])
              for name in ("indptr", "data", "indices")}
    indptr = np.asarray(member["indptr"][block, : rows + 1])
    nnz = int(indptr[-1])
    capacity = member["data"].shape[1]
    if indptr[0] != 0 or nnz > capacity or np.any(np.diff(indptr) < 0):
        raise CorruptStoreError(f"Dataset store {xpath} is corrupt: block {block} has a bad indptr")
    data = np.asarray(member["data"][block, :nnz])
    indices = np.asarray(member["indices"][block, :nnz])
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise CorruptStoreError(f"Dataset store {xpath} is corrupt: block {block} has bad indices")
    return sp.csr_matrix((data, indices, indptr), shape=(rows, n_features))


# --------------------------------------------------------------------------------------------
# opening a store


def _corrupt(path, what) -> CorruptStoreError:
    return CorruptStoreError(
        f"Dataset store {path} is corrupt: {what}. Re-create it with "
        "dkrp.io.ingest(..., overwrite=True)."
    )


def _member(group, name, path):
    try:
        return group[name]
    except Exception as exc:  # zarr raises KeyError or metadata errors
        raise _corrupt(path, f"member {name!r} is missing or unreadable ({exc!r})") from exc


def check_chunks_present(array, path, name, kind="dataset"):
    """Raise :class:`~dkrp.errors.ChunkError` naming the first missing chunk of ``array``.

    Shared with the feature store: Zarr reads a missing chunk as its fill value, so a
    complete store's chunks are checked for presence when it is opened (and again,
    chunk by chunk, when they are read).
    """
    missing = missing_chunks(Path(path) / name, array)
    if missing:
        first = tuple(missing[0])
        total = array.nchunks
        raise ChunkError(
            f"{'Feature' if kind == 'features' else 'Dataset'} store {path} is corrupt: "
            f"array {name!r} has {total - len(missing)} of {total} chunks on disk; "
            f"{chunk_where(name, array, first)} is missing. {_repair_hint(path, kind)}",
            store=path, array=name, chunk=first, problem="missing")


def open_dataset(path, *, allow_incomplete: bool = False) -> Dataset:
    """Open a dataset store made by :func:`dkrp.io.ingest` as lazy dask arrays.

    Parameters
    ----------
    path : str or os.PathLike
        Store directory.
    allow_incomplete : bool, default=False
        Open a store whose ``complete`` flag is not true (for inspection only: its contents
        may be partial).

    Returns
    -------
    Dataset
        ``X`` (dense or CSR blocks, chunked like the store), ``y`` (or None), ``attrs``,
        ``path``.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not a dkrp dataset store, is corrupt (missing metadata or chunk files,
        inconsistent shapes) or is incomplete.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> from dkrp.io import ingest
    >>> np.save(tmp / "x.npy", np.eye(3))
    >>> _ = ingest(tmp / "x.npy", tmp / "x.zarr")
    >>> bool((open_dataset(tmp / "x.zarr").X.compute() == np.eye(3)).all())
    True
    """
    path = Path(path).expanduser().absolute()
    attrs = check_store(
        path, DATASET_FORMAT, allow_incomplete=allow_incomplete,
        missing_hint=f" Create one with dkrp.io.ingest(source, {str(path)!r}).",
        incomplete_hint=Message(
            "its ingest did not finish (attribute 'complete' is not true). Ingest cannot "
            "resume; re-run it with {} to rebuild the store{}.",
            Param("overwrite", True, command="ingest"),
            Message(", or pass {} to open it anyway", Param("allow_incomplete", True),
                    cli=" (dkrp info shows how far it got)")),
    )
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)
    required = ("n_samples", "n_features", "storage", "chunk_rows", "has_labels")
    missing = [k for k in required if k not in attrs]
    if missing:
        raise _corrupt(path, f"attributes {missing} are missing")
    n_samples, n_features = int(attrs["n_samples"]), int(attrs["n_features"])
    chunk_rows = int(attrs["chunk_rows"])
    row_chunks = row_chunk_sizes(n_samples, chunk_rows)
    x_member = _member(group, "X", path)
    if attrs["storage"] == "dense":
        X = _open_dense(path, x_member, n_samples, n_features, chunk_rows)
    elif attrs["storage"] == "csr":
        X = _open_csr(path, attrs, x_member, n_samples, n_features, chunk_rows, row_chunks)
    else:
        raise _corrupt(path, f"unknown storage {attrs['storage']!r}")

    y = None
    if attrs["has_labels"]:
        y_member = _member(group, "y", path)
        if not isinstance(y_member, zarr.Array) or y_member.shape != (n_samples,):
            raise _corrupt(path, f"y should be an array of shape {(n_samples,)}")
        check_chunks_present(y_member, path, "y")
        y = read_checked(path, "y", "dataset", y_member, chunks=(chunk_rows,))
    return Dataset(X=X, y=y, attrs=attrs, path=path)


def _open_dense(path, x_member, n_samples, n_features, chunk_rows):
    """``X`` of a dense store, its shape, grid and chunk files checked first."""
    if not isinstance(x_member, zarr.Array):
        raise _corrupt(path, "'X' should be an array for dense storage")
    if x_member.shape != (n_samples, n_features):
        raise _corrupt(
            path, f"X has shape {x_member.shape}, attributes say {(n_samples, n_features)}"
        )
    if x_member.chunks[0] != chunk_rows:
        raise _corrupt(path, f"X has row chunks {x_member.chunks[0]}, expected {chunk_rows}")
    check_chunks_present(x_member, path, "X")
    return read_checked(path, "X", "dataset", x_member, chunks=(chunk_rows, max(n_features, 1)))


def _open_csr(path, attrs, x_member, n_samples, n_features, chunk_rows, row_chunks):
    """``X`` of a CSR store: one CSR block per row chunk, read lazily from its three
    block arrays (``indptr``, ``indices``, ``data``), their shapes and files checked first."""
    if not isinstance(x_member, zarr.Group) or x_member.attrs.get("format") != "csr":
        raise _corrupt(path, "'X' should be a group with attribute format='csr'")
    n_blocks = len(row_chunks) if n_samples else 0
    arrays = {}
    for name, width in (("indptr", chunk_rows + 1), ("indices", None), ("data", None)):
        arr = _member(x_member, name, path / "X")
        if not isinstance(arr, zarr.Array) or arr.ndim != 2 or arr.shape[0] != n_blocks:
            raise _corrupt(path, f"X/{name} should be a 2-D array with {n_blocks} rows")
        if width is not None and arr.shape[1] != width:
            raise _corrupt(path, f"X/{name} has width {arr.shape[1]}, expected {width}")
        check_chunks_present(arr, path, f"X/{name}")
        arrays[name] = arr
    if arrays["data"].shape != arrays["indices"].shape:
        raise _corrupt(path, "X/data and X/indices have different shapes")
    dtype = arrays["data"].dtype
    xpath = str(path / "X")
    meta = sp.csr_matrix((0, n_features), dtype=dtype)
    token = tokenize(str(path), attrs.get("source_sha256"), n_samples, n_features,
                     chunk_rows, os.stat(path / "X" / "zarr.json").st_mtime_ns)
    name = f"open-csr-{token}"
    graph = {}
    if n_blocks:
        for b, rows in enumerate(row_chunks):
            graph[(name, b, 0)] = (_read_csr_block, xpath, b, rows, n_features)
    else:
        graph[(name, 0, 0)] = (sp.csr_matrix, (0, n_features))
    return da.Array(graph, name, chunks=(row_chunks, (n_features,)), meta=meta, dtype=dtype)


def _dataset_arrays(path, attrs) -> list[str]:
    names = ["X/indptr", "X/indices", "X/data"] if attrs.get("storage") == "csr" else ["X"]
    return names + (["y"] if attrs.get("has_labels") else [])


def verify_dataset(path, *, client=None) -> dict:
    """Check every chunk of a dataset store: present, and matching its checksum.

    A dataset store cannot be repaired from itself: a bad store is re-ingested from
    its source (whose path and SHA-256 are in its attributes).

    Parameters
    ----------
    path : str or os.PathLike
        A dataset store made by :func:`dkrp.io.ingest`.
    client : distributed.Client, optional
        Read the chunks on its workers; default dask's default scheduler.

    Returns
    -------
    dict
        ``format`` (``"dataset"``), ``path``, ``complete``, ``ok`` (no bad chunk),
        ``checksums`` (``True`` when every array has crc32c checksums; ``False`` for
        stores written before dkrp added them: then only missing and undecodable
        chunks are found, not changed bytes), ``arrays``, ``chunks_checked``,
        ``problems`` (see :func:`dkrp.verify_store`), ``repaired`` (always ``[]``)
        and ``advice`` (what to do when something is wrong).

    Raises
    ------
    FileNotFoundError, ValueError
        Nothing at ``path``, or not a dataset store.
    """
    path = Path(path).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No dataset store at {path}: the path does not exist.")
    try:
        attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    except Exception as exc:
        raise InvalidInputError(f"{path} is not a readable Zarr v3 group ({exc!r})") from exc
    if attrs.get("dkrp_format") != DATASET_FORMAT:
        raise InvalidInputError(f"{path} is not a dkrp dataset store (dkrp_format is "
                                f"{attrs.get('dkrp_format')!r})")
    report = check_arrays(path, _dataset_arrays(path, attrs), client=client)
    ok = not report["problems"]
    advice = None
    if not ok:
        advice = (f"A dataset store cannot be repaired from itself: re-ingest it from its "
                  f"source {attrs.get('source')} (sha256 {attrs.get('source_sha256')}, "
                  f"ingest options {json.dumps(attrs.get('ingest'), sort_keys=True)}): "
                  f"dkrp ingest {attrs.get('source')} {path} --overwrite (with the same "
                  "options).")
    return {
        "format": DATASET_FORMAT,
        "path": str(path),
        "complete": attrs.get("complete") is True,
        "ok": ok,
        "checksums": all(a["checksums"] for a in report["arrays"].values()),
        "arrays": report["arrays"],
        "chunks_checked": report["chunks_checked"],
        "problems": report["problems"],
        "repaired": [],
        "advice": advice,
    }
