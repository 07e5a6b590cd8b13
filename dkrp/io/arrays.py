"""Binary arrays: ``.npy`` and IDX files into a dataset store, and :func:`read_array`.

This module owns the ``.npy`` reader (memory-mapped, 2-D numeric only) and :func:`from_npy`,
the repository's one IDX parser :func:`read_idx` (MNIST's format; the dataset loaders, tests
and benchmarks all read IDX through it), the two ingesters, and :func:`read_array`, which opens
``.npy``, Parquet or a dataset store as a row-chunked dask array.
"""

from __future__ import annotations

import os
from pathlib import Path

import dask.array as da
import numpy as np
from dask.base import tokenize

from .._npy import NpyLayout, read_layout, read_rows
from ..errors import InvalidInputError, Message, Param
from ._common import array_from_blocks, file_sha256, open_maybe_compressed
from .dataset_store import (
    check_chunk_rows,
    create_dense,
    default_chunk_rows,
    dense_attrs,
    open_dataset,
    row_chunk_sizes,
    stored_label_dtype,
    write_dense_blocks,
)
from .tabular import PARQUET_SUFFIXES, from_parquet

NPY_SUFFIXES = {".npy"}

def open_npy(path) -> NpyLayout:
    """The checked layout of a 2-D numeric ``.npy`` file (its header, read once)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Input file {path} does not exist")
    try:
        layout = read_layout(path)
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not a plain numeric .npy array ({exc})") from exc
    if len(layout.shape) != 2:
        raise InvalidInputError(
            f"{path}: expected a 2-D array (n_samples, n_features), got shape {layout.shape}"
        )
    if layout.dtype.kind not in "biuf":
        raise InvalidInputError(f"{path}: dtype {layout.dtype} is not numeric")
    return layout


def _npy_block(layout, r0, r1):
    return read_rows(layout, r0, r1), None


def ingest_npy(source, tmp, group, *, n_features, chunk_rows, dtype, scheduler):
    layout = open_npy(source)
    n_samples, width = layout.shape
    if n_samples == 0:
        raise InvalidInputError(
            f"{source} holds no rows (shape {layout.shape}): nothing to ingest.")
    if n_features is not None and n_features != width:
        raise InvalidInputError(Message("{}: {} but the array has {} columns", source,
                                        Param("n_features", n_features), width))
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(max(width, 1) * dtype.itemsize, n_samples)
    create_dense(group, "X", n_samples, width, chunk_rows, dtype)
    write_dense_blocks(_npy_block, (layout,), n_samples, chunk_rows, str(tmp),
                       dtype, None, str(source), None, scheduler)
    return dense_attrs(n_samples, width, dtype, chunk_rows)


_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path, expected_magic: int | None = None) -> np.ndarray:
    """Read an IDX file (MNIST's format; ``.gz``, ``.bz2`` or ``.xz`` allowed) into an array.

    An IDX file is a big-endian header, ``0x00 0x00 <dtype code> <ndim>`` then ``ndim``
    32-bit sizes, followed by the values in C order.

    Parameters
    ----------
    path : str or os.PathLike
        The file, for example ``t10k-images-idx3-ubyte.gz``.
    expected_magic : int, optional
        The 32-bit magic number the file must start with, for example ``2051`` for unsigned-byte
        images of three dimensions (``0x00000803``) and ``2049`` for labels (``0x00000801``).
        Any valid IDX header is accepted when None.

    Returns
    -------
    numpy.ndarray
        Read-only array of the shape and dtype the header gives (``uint8`` for MNIST).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        The header is not IDX (magic bytes, dtype code or number of dimensions), the magic
        number is not ``expected_magic``, or the file length does not match the shape. The
        message names the file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny-idx2-ubyte"
    >>> _ = path.write_bytes(bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
    >>> read_idx(path, expected_magic=0x0802)
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint8)
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"IDX file {path} does not exist")
    with open_maybe_compressed(path) as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise InvalidInputError(f"{path}: not an IDX file (bad magic number {raw[:4]!r})")
    magic = int.from_bytes(raw[:4], "big")
    if expected_magic is not None and magic != expected_magic:
        raise InvalidInputError(f"{path}: IDX magic number {magic}, expected {expected_magic}")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise InvalidInputError(
            f"{path}: bad IDX header: {ndim} dimensions need a {header}-byte header, the file "
            f"has {len(raw)} bytes"
        )
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = header + int(np.prod(dims)) * dtype.itemsize
    if len(raw) != expected:
        raise InvalidInputError(
            f"{path}: IDX header says shape {dims} ({expected} bytes) but the file has "
            f"{len(raw)} bytes (truncated or corrupt)"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(dims)


def ingest_idx(source, tmp, group, *, n_features, chunk_rows, dtype, labels):
    images = read_idx(source)
    if images.shape[0] == 0:
        raise InvalidInputError(
            f"{source} holds no rows (shape {images.shape}): nothing to ingest."
        )
    X = images.reshape(images.shape[0], -1)
    n_samples, width = X.shape
    if n_features is not None and n_features != width:
        raise InvalidInputError(Message("{}: {} but each image has {} values", source,
                                        Param("n_features", n_features), width))
    y = None
    if labels is not None:
        y = read_idx(Path(labels).expanduser()).reshape(-1)
        if y.shape[0] != n_samples:
            raise InvalidInputError(
                f"{labels} holds {y.shape[0]} labels but {source} holds {n_samples} images"
            )
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(max(width, 1) * dtype.itemsize, n_samples)
    create_dense(group, "X", n_samples, width, chunk_rows, dtype)
    if y is not None:
        label_dtype = stored_label_dtype(True)
        create_dense(group, "y", n_samples, None, chunk_rows, label_dtype)
    for r0 in range(0, n_samples, chunk_rows):
        r1 = min(n_samples, r0 + chunk_rows)
        group["X"][r0:r1] = X[r0:r1].astype(dtype)
        if y is not None:
            group["y"][r0:r1] = y[r0:r1].astype(label_dtype)
    return dense_attrs(n_samples, width, dtype, chunk_rows,
                       None if y is None else label_dtype,
                       **({"labels_sha256": file_sha256(labels)} if labels is not None else {}))


def from_npy(path, chunk_rows: int | None = None) -> da.Array:
    """A 2-D ``.npy`` file as a row-chunked dask array (memory-mapped, read per block).

    Parameters
    ----------
    path : str or os.PathLike
        A 2-D numeric ``.npy`` file (pickled object arrays are refused).
    chunk_rows : int, optional
        Rows per block; default about 64 MiB per block.

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features)
        Same dtype as the file, known chunks; each task memory-maps the file itself, so the
        graph holds only the path and where its values lie (its header is parsed once, here).
    """
    path = Path(path).expanduser().absolute()
    layout = open_npy(path)
    chunk_rows = check_chunk_rows(chunk_rows) or default_chunk_rows(
        max(layout.shape[1], 1) * layout.dtype.itemsize, layout.shape[0]
    )
    token = tokenize(str(path), os.stat(path).st_mtime_ns, layout.shape, str(layout.dtype),
                     chunk_rows)
    return array_from_blocks(
        "from-npy", read_rows, (layout,),
        row_chunk_sizes(layout.shape[0], chunk_rows),
        layout.shape[1], np.empty((0, layout.shape[1]), dtype=layout.dtype), token,
    )


def read_array(path, *, columns=None, chunk_rows: int | None = None) -> da.Array:
    """Open ``.npy``, Parquet or a dkrp dataset store as a row-chunked dask array.

    Parameters
    ----------
    path : str or os.PathLike
        ``*.npy``, ``*.parquet``/``*.pq``, or a dataset store directory (its ``X``).
    columns : list of str, optional
        Parquet only: columns to read.
    chunk_rows : int, optional
        Rows per block for ``.npy``/Parquet; a store keeps its own chunks.

    Returns
    -------
    dask.array.Array
    """
    path = Path(path).expanduser().absolute()
    suffix = path.suffix.lower()
    if suffix in NPY_SUFFIXES:
        return from_npy(path, chunk_rows=chunk_rows)
    if suffix in PARQUET_SUFFIXES:
        return from_parquet(path, columns=columns, chunk_rows=chunk_rows)
    if path.is_dir():
        return open_dataset(path).X
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    raise InvalidInputError(
        f"{path}: read_array reads .npy, .parquet/.pq or a dataset store directory; "
        "ingest other formats first with dkrp.io.ingest"
    )
