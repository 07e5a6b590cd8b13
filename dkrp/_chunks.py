"""Chunk-level integrity of dkrp's Zarr v3 stores: checksums, presence, checked reads.

Shared by the dataset store (:mod:`dkrp.io.dataset_store`) and the feature store
(:mod:`dkrp.feature_store`):

* :func:`with_checksum`: the codecs of a new array end with zarr's ``crc32c`` codec,
  so every chunk file carries a CRC-32C of its stored bytes, checked by Zarr on read;
* :func:`missing_chunks`: the chunk files of an array that are not on disk (Zarr
  itself reads a missing chunk as the fill value, silently);
* :class:`CheckedArray` and :func:`read_checked`: a dask array over a Zarr array
  whose reads raise :class:`~dkrp.errors.ChunkError` naming the store, the array and
  the chunk when the chunk file is missing or fails its checksum;
* :func:`check_arrays`: read back every chunk of some arrays (on a dask cluster or
  the local scheduler) and list the missing and corrupt ones, for ``dkrp verify``.

Stores written before checksums were added (dkrp 0.1.0) have no ``crc32c`` codec;
they are read as before, and :func:`has_checksums` says so. Only local (or shared
POSIX) file systems are supported, as everywhere in dkrp: a chunk is a file.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import numpy as np

from .errors import ChunkError, CorruptStoreError, Message, Param

__all__ = []

CHECKSUM = "crc32c"


def with_checksum(compressors=()) -> tuple:
    """``compressors`` followed by zarr's ``crc32c`` codec (the last bytes-to-bytes codec)."""
    from zarr.codecs import Crc32cCodec

    return (*tuple(compressors or ()), Crc32cCodec())


def has_checksums(array) -> bool:
    """Whether every chunk of the Zarr v3 ``array`` carries a ``crc32c`` checksum."""
    from zarr.codecs import Crc32cCodec

    codecs = getattr(array.metadata, "codecs", ())
    return any(isinstance(codec, Crc32cCodec) for codec in codecs)


def chunk_grid(array) -> tuple[int, ...]:
    """Number of chunks along each axis (at least one for an empty array's metadata)."""
    return tuple(int(c) for c in array.cdata_shape)


def chunk_key(array, coords) -> str:
    """The chunk's key inside its array directory, e.g. ``c/3/0``."""
    return array.metadata.chunk_key_encoding.encode_chunk_key(tuple(int(c) for c in coords))


def chunk_region(array, coords) -> tuple[slice, ...]:
    """The region of ``array`` that chunk ``coords`` holds (clipped at the array's end)."""
    return tuple(
        slice(c * size, min((c + 1) * size, extent))
        for c, size, extent in zip(coords, array.chunks, array.shape, strict=True)
    )


def write_rows(array_dir, array, row_start, block) -> None:
    """``array[row_start:row_start + len(block)] = block``, for a 2-D Zarr v3 ``array``
    stored in directory ``array_dir``.

    When ``block`` is exactly one chunk of an array stored raw with a checksum
    (:func:`writes_raw_chunks`, :func:`is_one_chunk`), the chunk file is written by
    :class:`ChunkFile`: the
    same bytes Zarr writes, without its two copies of the chunk (the checksum codec
    appends to a new array), which cost more than the disk on a fresh-memory machine
    (``benchmarks/bench_store_encodings.py``). Anything else goes through Zarr.
    """
    if not (_raw_with_checksum(array, block) and block.shape[1:] == tuple(array.shape[1:])
            and is_one_chunk(array, row_start, int(block.shape[0]))):
        array[row_start:row_start + int(block.shape[0])] = block
        return
    with ChunkFile(array_dir, array, row_start) as chunk_file:
        chunk_file.write(block)
        chunk_file.commit()


def writes_raw_chunks(array, dtype) -> bool:
    """Whether :class:`ChunkFile` can write ``array``'s chunks of rows of ``dtype``."""
    return _raw_with_checksum(array, np.empty((0, 0), dtype=dtype))


def is_one_chunk(array, row_start, n_rows) -> bool:
    """Whether rows ``row_start:row_start + n_rows`` (all columns) are exactly the rows of
    one chunk of the 2-D ``array``, whose chunks span all its columns: a whole chunk, or
    the last chunk's rows up to the array's end."""
    chunk_rows = int(array.chunks[0])
    return (array.ndim == 2 and int(array.chunks[1]) == int(array.shape[1])
            and row_start % chunk_rows == 0 and n_rows > 0
            and n_rows == min(chunk_rows, int(array.shape[0]) - row_start))


class ChunkFile:
    """One row chunk of a raw + crc32c Zarr array, written block by block.

    The blocks' bytes go to a temporary file (Zarr's ``.partial`` name), followed on
    :meth:`commit` by their CRC-32C, and the file is renamed into place: a chunk file
    is complete or absent. Leaving the ``with`` block without :meth:`commit` removes the
    temporary file. Blocks whose size is a multiple of 4 KiB, at an aligned offset, are
    written with ``O_DIRECT`` where the file system takes it (:func:`_write_direct`).

    The array's last chunk may hold fewer rows than a chunk: its file, as Zarr writes
    it, still has the whole chunk's shape, the rows past the array's end holding the
    fill value. The blocks give the rows up to the end; :meth:`commit` adds the rest.
    """

    def __init__(self, array_dir, array, row_start):
        import uuid

        chunk_rows = int(array.chunks[0])
        first = row_start - row_start % chunk_rows
        self.path = Path(array_dir) / chunk_key(array, (row_start // chunk_rows, 0))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_suffix(f".{uuid.uuid4().hex}.partial")
        self.row_bytes = int(array.chunks[1]) * np.dtype(array.dtype).itemsize
        self.expected = min(chunk_rows, int(array.shape[0]) - first) * self.row_bytes
        self.padding = chunk_rows * self.row_bytes - self.expected
        self.fill_row = np.full(int(array.chunks[1]), array.fill_value,
                                dtype=np.dtype(array.dtype))
        self.written = 0
        self.crc = 0
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        return self

    def write(self, block) -> None:
        """Append ``block``'s rows (C-contiguous, the array's dtype and row length)."""
        import google_crc32c

        block = np.ascontiguousarray(block)
        data = block.reshape(-1).view(np.uint8)
        if (block.ndim != 2 or block.shape[1] * block.itemsize != self.row_bytes
                or self.written + data.nbytes > self.expected):
            raise ValueError(f"a block of {data.nbytes} bytes does not fit the chunk "
                             f"({self.written} of {self.expected} bytes written)")
        self.crc = google_crc32c.extend(self.crc, data)
        n = int(data.nbytes)
        direct = 0
        if (direct_io_enabled() and n >= _DIRECT_MIN_BYTES
                and self.written % _DIRECT_ALIGN == 0):
            direct = _write_direct(self.fd, data[:n - n % _DIRECT_ALIGN])
        _write_all(self.fd, data[direct:])
        self.written += n

    def commit(self) -> None:
        """Pad an edge chunk with the fill value, write the checksum and rename the
        complete file into place."""
        import google_crc32c

        if self.written != self.expected:
            raise ValueError(f"the chunk is {self.expected} bytes, {self.written} were written")
        rows = self.padding // self.row_bytes
        if rows:
            per_piece = max(1, _FILL_PIECE // self.row_bytes)
            fill = np.broadcast_to(self.fill_row, (min(rows, per_piece), self.fill_row.size))
            fill = np.ascontiguousarray(fill).reshape(-1).view(np.uint8)
            for start in range(0, rows, per_piece):
                piece = fill[:min(per_piece, rows - start) * self.row_bytes]
                self.crc = google_crc32c.extend(self.crc, piece)
                _write_all(self.fd, piece)
        _write_all(self.fd, np.array([self.crc], dtype="<u4").tobytes())
        os.close(self.fd)
        self.fd = None
        os.replace(self.tmp, self.path)

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.tmp.unlink(missing_ok=True)
        return False


#: O_DIRECT's alignment of memory, file offsets and lengths (covers 512-byte sectors).
_DIRECT_ALIGN = 4096
#: Bytes copied into the aligned bounce buffer and written per O_DIRECT call.
_DIRECT_PIECE = 8 << 20
#: Blocks smaller than this are written through the page cache.
_DIRECT_MIN_BYTES = 1 << 20
#: Bytes of fill-value rows written per call when :meth:`ChunkFile.commit` pads an edge chunk.
_FILL_PIECE = 1 << 20
_bounce = threading.local()


def direct_io_enabled() -> bool:
    """Whether chunk files are written with ``O_DIRECT`` (``DKRP_DIRECT_IO=0`` turns it off).

    With ``O_DIRECT`` the disk reads a block from a small aligned bounce buffer, so the
    process spends no CPU copying the chunk into the page cache: on a machine whose
    cores are all computing, that copy is what made writing a feature store slower than
    computing it (``benchmarks/bench_store_encodings.py``). The bytes are the same.
    """
    return hasattr(os, "O_DIRECT") and os.environ.get("DKRP_DIRECT_IO", "1") != "0"


def _write_direct(fd, data) -> int:
    """Write ``data`` (a multiple of :data:`_DIRECT_ALIGN` bytes) at ``fd``'s (aligned)
    offset with ``O_DIRECT``; returns the bytes written (0 where the file system refuses
    it), with ``fd`` back in buffered mode and its offset after them."""
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT)
    except OSError:
        return 0
    start = os.lseek(fd, 0, os.SEEK_CUR)
    bounce = _bounce_buffer()
    done = 0
    try:
        while done < data.nbytes:
            piece = min(_DIRECT_PIECE, data.nbytes - done)
            bounce[:piece] = data[done:done + piece]
            wrote = os.write(fd, bounce[:piece])
            done += wrote
            if wrote != piece:  # a short direct write: the rest through the page cache
                break
    except OSError:  # e.g. EINVAL: the file system's alignment is stricter than ours
        pass
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    os.lseek(fd, start + done, os.SEEK_SET)
    return done


def _bounce_buffer() -> np.ndarray:
    """This thread's :data:`_DIRECT_PIECE`-byte buffer, aligned to :data:`_DIRECT_ALIGN`."""
    buf = getattr(_bounce, "buffer", None)
    if buf is None or buf.nbytes != _DIRECT_PIECE:
        raw = np.empty(_DIRECT_PIECE + _DIRECT_ALIGN, dtype=np.uint8)
        start = -raw.ctypes.data % _DIRECT_ALIGN
        buf = _bounce.buffer = raw[start:start + _DIRECT_PIECE]
    return buf


def _write_all(fd, data) -> None:
    view = memoryview(data).cast("B")
    while view.nbytes:
        view = view[os.write(fd, view):]


def _raw_with_checksum(array, block) -> bool:
    """Whether ``array`` stores chunks as little-endian bytes plus a crc32c, and
    ``block`` is C-contiguous in the array's dtype, native little-endian."""
    from zarr.codecs import BytesCodec, Crc32cCodec

    codecs = tuple(getattr(array.metadata, "codecs", ()))
    if len(codecs) != 2 or not isinstance(codecs[1], Crc32cCodec):
        return False
    if not isinstance(codecs[0], BytesCodec):
        return False
    dtype = np.dtype(block.dtype)
    little = dtype.byteorder == "|" or (dtype.isnative and sys.byteorder == "little")
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    return (array.ndim == 2 and dtype == np.dtype(array.dtype) and little
            and (endian in (None, "little") or dtype.itemsize == 1)
            and block.flags.c_contiguous)


def chunk_indices(array):
    if any(s == 0 for s in array.shape):
        return []
    return [tuple(int(i) for i in c) for c in np.ndindex(*chunk_grid(array))]


def missing_chunks(array_dir, array) -> list[tuple[int, ...]]:
    """The chunks of ``array`` (stored in directory ``array_dir``) whose files are absent."""
    array_dir = Path(array_dir)
    present = set()
    for root, _, files in os.walk(array_dir):
        rel = Path(root).relative_to(array_dir)
        for name in files:
            present.add((rel / name).as_posix())
    return [c for c in chunk_indices(array) if chunk_key(array, c) not in present]


def _describe_failure(exc) -> str:
    if isinstance(exc, ValueError) and "checksum" in str(exc).lower():
        return "it fails its crc32c checksum (the file changed after it was written)"
    return f"it cannot be decoded ({type(exc).__name__}: {str(exc).rstrip('.')})"


def chunk_where(name, array, coords) -> str:
    """``chunk (3, 0) of array 'Z' (file Z/c/3/0, rows 300..399)``."""
    coords = tuple(int(c) for c in coords)
    where = f"chunk {coords} of array {name!r} (file {name}/{chunk_key(array, coords)}"
    rows = chunk_region(array, coords)[0]
    return where + (f", rows {rows.start}..{rows.stop - 1})" if name in ("Z", "X", "y")
                    else ")")


def chunk_error(store, name, array, coords, problem, hint, detail=None) -> ChunkError:
    """The :class:`ChunkError` for chunk ``coords`` of array ``name`` in ``store``."""
    coords = tuple(int(c) for c in coords)
    where = chunk_where(name, array, coords)
    if problem == "missing":
        what = "is missing: its file was deleted after the store was written"
    else:
        what = f"is corrupt: {detail or 'it fails its checksum'}"
    return ChunkError(f"Store {store}: {where} {what}. {hint}", store=store, array=name,
                      chunk=coords, problem=problem)


def repair_hint(store, kind) -> str:
    """What to do about a bad chunk of a ``kind`` (``"features"``/``"dataset"``) store."""
    if kind == "features":
        return (f"Run `dkrp verify {store} --repair` to recompute the bad chunks from the "
                "spec and the input.")
    return (f"Run `dkrp verify {store}` to check every chunk, then re-ingest the store "
            "from its source (`dkrp ingest SOURCE STORE --overwrite`).")


class CheckedArray:
    """A Zarr array whose reads refuse missing and corrupt chunks, naming them.

    Wraps ``zarr.open_array(store / name)`` for :func:`dask.array.from_array`: before
    a region is read, the files of the chunks it covers must exist (Zarr would read
    a missing one as the fill value), and a chunk that fails its checksum or cannot
    be decoded raises :class:`ChunkError` with :func:`repair_hint`.
    """

    def __init__(self, store, name, kind, array=None, allow_missing=False):
        import zarr

        self.allow_missing = bool(allow_missing)
        self.store = str(store)
        self.name = str(name)
        self.kind = kind
        self.array = (array if array is not None
                      else zarr.open_array(str(Path(store) / name), mode="r"))
        self.shape = tuple(self.array.shape)
        self.dtype = np.dtype(self.array.dtype)
        self.ndim = len(self.shape)
        self.chunks = tuple(self.array.chunks)

    def _covered(self, key):
        ranges = []
        for k, size, extent in zip(key, self.chunks, self.shape, strict=False):
            start, stop, _ = k.indices(extent) if isinstance(k, slice) else (k, k + 1, 1)
            if stop <= start:
                return []
            ranges.append(range(start // size, (stop - 1) // size + 1))
        for size, extent in zip(self.chunks[len(ranges):], self.shape[len(ranges):],
                                strict=True):
            if extent == 0:
                return []
            ranges.append(range(0, (extent - 1) // size + 1))
        return [tuple(r[i] for r, i in zip(ranges, index, strict=True))
                for index in np.ndindex(*[len(r) for r in ranges])]

    def _error(self, coords, problem, detail=None):
        return chunk_error(self.store, self.name, self.array, coords, problem,
                           repair_hint(self.store, self.kind), detail)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        covered = self._covered(key)
        array_dir = Path(self.store) / self.name
        for coords in [] if self.allow_missing else covered:
            if not (array_dir / chunk_key(self.array, coords)).is_file():
                raise self._error(coords, "missing")
        try:
            return self.array[key]
        except Exception:  # noqa: BLE001 - find the chunk, name it
            for coords in covered:
                try:
                    self.array[chunk_region(self.array, coords)]
                except Exception as inner:  # noqa: BLE001
                    raise self._error(coords, "corrupt", _describe_failure(inner)) from inner
            raise


def read_checked(store, name, kind, array=None, chunks=None, allow_missing=False):
    """A dask array over ``store / name`` read through :class:`CheckedArray`.

    ``allow_missing=True`` reads absent chunks as the fill value (an incomplete store
    opened for inspection); chunks that fail their checksum still raise.
    """
    import dask.array as da
    from dask.base import tokenize

    checked = CheckedArray(store, name, kind, array, allow_missing)
    meta_file = Path(store) / name / "zarr.json"
    token = tokenize(checked.store, checked.name, checked.shape, checked.chunks,
                     checked.dtype.str, checked.allow_missing, os.stat(meta_file).st_mtime_ns)
    return da.from_array(
        checked, chunks=chunks or checked.chunks, name=f"read-{kind}-{token}", asarray=True,
        fancy=False, lock=False, meta=np.empty((0,) * checked.ndim, dtype=checked.dtype),
    )


# -- verification ------------------------------------------------------------------------


def check_chunks(array_dir, coords_list):
    """Read each chunk of ``coords_list`` back; ``[(coords, detail)]`` for those that fail.

    Runs on a worker; a missing file is reported by :func:`check_arrays` beforehand.
    """
    import zarr

    array = zarr.open_array(str(array_dir), mode="r")
    bad = []
    for coords in coords_list:
        try:
            array[chunk_region(array, coords)]
        except Exception as exc:  # noqa: BLE001 - every failure is a corrupt chunk
            bad.append((tuple(coords), _describe_failure(exc)))
    return bad


def open_checked_metadata(store, name):
    """Open array ``name`` of ``store`` read-only, or refuse a store whose array metadata is
    gone or unreadable (nothing says how its chunks are laid out: only a rebuild helps).

    Read-only on purpose: zarr opening for writing creates a missing array's directory,
    and a check must not change the store it checks.

    Raises
    ------
    CorruptStoreError
        Naming the array, zarr's reason, and the rebuild.
    """
    import zarr

    try:
        return zarr.open_array(str(Path(store) / name), mode="r")
    except Exception as exc:  # noqa: BLE001 - no metadata: nothing to check against
        raise CorruptStoreError(Message(
            "Store {}: the metadata of array {!r} ({}/zarr.json) is missing or unreadable "
            "({}: {}); its chunks cannot be checked. Rebuild the store (featurize or ingest "
            "with {}).", store, name, name, type(exc).__name__, exc,
            Param("overwrite", True))
        ) from exc


def check_arrays(store, names, *, client=None, batch_bytes=256 * 2**20) -> dict:
    """Check every chunk of the arrays ``names`` of ``store``: present, and decodable.

    Decoding verifies the ``crc32c`` checksum of arrays that have one; arrays
    without (stores written before dkrp added them) can only be checked for missing
    and undecodable chunks.

    Parameters
    ----------
    store : path
        The store directory.
    names : list of str
        Arrays inside it, e.g. ``["Z", "done"]``.
    client : distributed.Client, optional
        Read the chunks on its workers; default dask's default scheduler.
    batch_bytes : int
        About how many stored bytes one read task checks.

    Returns
    -------
    dict
        ``arrays``: for each name ``{"chunks": n, "checksums": bool}``; ``problems``:
        a list of ``{"array", "chunk", "file", "problem" ("missing"/"corrupt"),
        "detail"}`` sorted by array and chunk; ``chunks_checked``.
    """
    import dask

    store = Path(store)
    arrays, problems, tasks = {}, [], []
    for name in names:
        array_dir = store / name
        array = open_checked_metadata(store, name)
        all_chunks = chunk_indices(array)
        arrays[name] = {"chunks": len(all_chunks), "checksums": has_checksums(array)}
        missing = set(missing_chunks(array_dir, array))
        for coords in sorted(missing):
            problems.append({"array": name, "chunk": coords,
                             "file": f"{name}/{chunk_key(array, coords)}",
                             "problem": "missing",
                             "detail": "the chunk file is missing"})
        present = [c for c in all_chunks if c not in missing]
        chunk_bytes = max(1, int(np.prod(array.chunks)) * np.dtype(array.dtype).itemsize)
        per_task = max(1, batch_bytes // chunk_bytes)
        for start in range(0, len(present), per_task):
            tasks.append((name, array, dask.delayed(check_chunks, pure=True)(
                str(array_dir), present[start : start + per_task])))
    if tasks:
        delayed = [t for _, _, t in tasks]
        results = (client.gather(client.compute(delayed)) if client is not None
                   else dask.compute(*delayed))
        for (name, array, _), bad in zip(tasks, results, strict=True):
            for coords, detail in bad:
                problems.append({"array": name, "chunk": tuple(coords),
                                 "file": f"{name}/{chunk_key(array, coords)}",
                                 "problem": "corrupt", "detail": detail})
    problems.sort(key=lambda p: (p["array"], p["chunk"]))
    return {"arrays": arrays, "problems": problems,
            "chunks_checked": sum(a["chunks"] for a in arrays.values())}
