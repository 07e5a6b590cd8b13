"""How a feature store's chunk files are written (issue 15 part 3).

A whole chunk of an uncompressed store is written by :class:`dkrp._chunks.ChunkFile`
(the bytes then their CRC-32C, renamed into place when complete), block by block, with
``O_DIRECT`` where the file system takes it; a chunk of more than
``tasks.PIPELINE_ROWS`` rows is featurized in steps while the process's writer thread
writes the previous one. Every test compares bytes with what Zarr writes, or with the
in-memory transform of the whole chunk.
"""

from __future__ import annotations

import os
import threading

import dask.array as da
import numpy as np
import pytest
import zarr

from dkrp import PolynomialRandomProjection
from dkrp._names import PROJECTOR_MODULES
from dkrp.feature_store import open_features, write_features


def _krp(seed=3, **params):
    params = {"n_components": 40, "n_hyperplanes": 80, "random_state": seed, **params}
    return PolynomialRandomProjection(**params).fit_n_features(12)


def _step_messages(caplog, store):
    """The DEBUG lines of chunks of ``store`` written in steps (not other tests' stores)."""
    return sorted(r.getMessage() for r in caplog.records
                  if r.getMessage().startswith(f"{store}: chunk"))


@pytest.mark.parametrize("direct", ["1", "0"])
def test_chunks_written_with_o_direct_are_the_bytes_zarr_writes(tmp_path, monkeypatch, direct):
    # chunks of 2,400,000 bytes: two O_DIRECT pieces of 1 MiB, then an unaligned tail
    from dkrp import _chunks

    monkeypatch.setenv("DKRP_DIRECT_IO", direct)
    monkeypatch.setattr(_chunks, "_DIRECT_PIECE", 1 << 20)
    rng = np.random.default_rng(4)
    X = da.from_array(rng.standard_normal((1500, 12)), chunks=(600, 12))  # 2 whole + 1 part
    out = tmp_path / "f.zarr"
    write_features(X, _krp(n_components=500), out, progress=False)
    Z = zarr.open_array(str(out / "Z"), mode="r")
    assert Z.chunks == (600, 500) and Z.dtype == np.float64
    ref = zarr.create_array(str(tmp_path / "ref"), shape=Z.shape, chunks=Z.chunks,
                            dtype=Z.dtype, fill_value=Z.fill_value, serializer=Z.serializer,
                            compressors=Z.compressors, config={"write_empty_chunks": True})
    ref[:] = Z[:]
    for key in ("c/0/0", "c/1/0", "c/2/0"):
        assert (out / "Z" / key).read_bytes() == (tmp_path / "ref" / key).read_bytes(), key
    assert not list(out.rglob("*.partial"))


@pytest.mark.parametrize("name", sorted(PROJECTOR_MODULES))
def test_chunks_featurized_in_steps_are_the_bytes_of_the_whole_chunk(tmp_path, caplog, name):
    # chunks of 4,500 rows are featurized in steps of PIPELINE_ROWS while the previous step
    # is written: every map must give each row the bits it gives in the whole chunk
    import dkrp
    from dkrp.feature_store.tasks import PIPELINE_ROWS

    X = np.random.default_rng(5).uniform(-1, 1, (11500, 12))  # 2 whole chunks, 1 partial
    params = {"n_components": 8 if name == "PCAProjector" else 64, "random_state": 0}
    est = getattr(dkrp, name)(**params).fit(X)
    assert 4500 > 2 * PIPELINE_ROWS
    for dtype, options in ((np.float64, {}), (np.float32, {"store_dtype": "float16"})):
        out = tmp_path / f"{np.dtype(dtype).name}.zarr"
        caplog.clear()
        with caplog.at_level("DEBUG", logger="dkrp.feature_store.tasks"):
            write_features(da.from_array(X.astype(dtype), chunks=(4500, 12)), est, out,
                           progress=False, **options)
        # every chunk went in steps, the last, partial one of 2,500 rows too
        assert _step_messages(caplog, out) == [
            f"{out}: chunk {i}, {n} rows featurized in {steps} steps, each written during the "
            "next" for i, n, steps in ((0, 4500, 3), (1, 4500, 3), (2, 2500, 2))]
        Z = zarr.open_array(str(out / "Z"), mode="r")
        whole = np.vstack([est.transform(X[i:i + 4500].astype(dtype))
                           for i in range(0, 11500, 4500)])
        expected = whole.astype(options.get("store_dtype", dtype))
        assert Z[:].tobytes() == expected.tobytes(), (name, options)
    assert any(t.name.startswith("dkrp-chunk-writer") for t in threading.enumerate())


def test_chunks_featurized_in_steps_on_worker_processes_are_the_in_memory_bytes(tmp_path):
    # the writer thread of each worker process writes while the task computes
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    X = np.random.default_rng(6).uniform(-1, 1, (9000, 12)).astype(np.float32)
    est = _krp(n_components=300)
    out = tmp_path / "f.zarr"
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster) as client:
        write_features(da.from_array(X, chunks=(4500, 12)), est, out, client=client,
                       progress=False)
        threads = client.run(lambda: sorted(t.name for t in threading.enumerate()))
    assert any(name.startswith("dkrp-chunk-writer") for names in threads.values()
               for name in names)
    expected = np.vstack([est.transform(X[:4500]), est.transform(X[4500:])])
    assert zarr.open_array(str(out / "Z"), mode="r")[:].tobytes() == expected.tobytes()


def _raw_array(path, rows, cols, dtype=np.float32):
    from dkrp._chunks import with_checksum

    return zarr.create_array(str(path), shape=(2 * rows, cols), chunks=(rows, cols),
                             dtype=dtype, compressors=with_checksum())


@pytest.mark.parametrize(("rows", "cols", "blocks"), [
    (5, 4, [5]),  # 80 bytes: through the page cache
    (256, 1024, [256]),  # 1 MiB, aligned: one O_DIRECT piece
    (700, 1000, [700]),  # 2.8 MB: three pieces, then an unaligned tail
    (768, 1024, [256, 512]),  # block by block, each aligned
    (700, 1000, [512, 188]),  # an aligned block, then one with a tail
    (700, 1000, [100, 600]),  # an unaligned block first: the next starts unaligned
])
def test_chunk_file_writes_the_bytes_zarr_writes(tmp_path, monkeypatch, rows, cols, blocks):
    from dkrp import _chunks

    monkeypatch.setattr(_chunks, "_DIRECT_PIECE", 1 << 20)
    values = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    ours = _raw_array(tmp_path / "ours", rows, cols)
    with _chunks.ChunkFile(tmp_path / "ours", ours, rows) as chunk_file:
        start = 0
        for n in blocks:
            chunk_file.write(values[start:start + n])
            start += n
        chunk_file.commit()
    theirs = _raw_array(tmp_path / "theirs", rows, cols)
    theirs[rows:] = values
    assert (tmp_path / "ours/c/1/0").read_bytes() == (tmp_path / "theirs/c/1/0").read_bytes()
    mode = [os.stat(tmp_path / side / "c/1/0").st_mode & 0o777 for side in ("ours", "theirs")]
    assert mode[0] == mode[1]  # the permissions Zarr gives a chunk file (0o666 less umask)
    assert np.array_equal(ours[rows:], values)  # (zarr checks the crc32c)
    assert not list(tmp_path.rglob("*.partial"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8"])
@pytest.mark.parametrize("blocks", [[700], [512, 188]])
def test_the_last_chunk_file_of_rows_short_of_a_chunk_is_the_one_zarr_writes(
        tmp_path, monkeypatch, dtype, blocks):
    # Zarr writes the array's last chunk at the whole chunk's shape, the rows past the
    # array's end holding the fill value: ChunkFile pads it in pieces of fill rows
    from dkrp import _chunks
    from dkrp._chunks import with_checksum

    monkeypatch.setattr(_chunks, "_FILL_PIECE", 64 * 1000)  # several pieces, one short
    shape, chunks = (1000 + 700, 1000), (1000, 1000)
    values = (np.random.default_rng(7).standard_normal((700, 1000)) * 50).astype(dtype)
    fill = 0 if dtype == "uint8" else np.nan
    sides = {}
    for side in ("ours", "theirs"):
        sides[side] = zarr.create_array(str(tmp_path / side), shape=shape, chunks=chunks,
                                        dtype=dtype, fill_value=fill,
                                        compressors=with_checksum(),
                                        config={"write_empty_chunks": True})
    assert _chunks.is_one_chunk(sides["ours"], 1000, 700)
    assert not _chunks.is_one_chunk(sides["ours"], 1000, 699)
    with _chunks.ChunkFile(tmp_path / "ours", sides["ours"], 1000) as chunk_file:
        start = 0
        for n in blocks:
            chunk_file.write(values[start:start + n])
            start += n
        with pytest.raises(ValueError, match="does not fit"):  # not one row past the end
            chunk_file.write(values[:1])
        chunk_file.commit()
    sides["theirs"][1000:] = values
    assert (tmp_path / "ours/c/1/0").read_bytes() == (tmp_path / "theirs/c/1/0").read_bytes()
    assert np.array_equal(sides["ours"][1000:], values)  # (zarr checks the crc32c)


def test_chunk_file_is_complete_or_absent(tmp_path):
    from dkrp import _chunks

    array = _raw_array(tmp_path / "a", 8, 3)
    values = np.ones((8, 3), dtype=np.float32)
    with pytest.raises(RuntimeError), _chunks.ChunkFile(tmp_path / "a", array, 0) as f:
        f.write(values[:4])
        raise RuntimeError("the task failed between two blocks")
    with _chunks.ChunkFile(tmp_path / "a", array, 0) as f:
        with pytest.raises(ValueError, match="does not fit"):
            f.write(np.ones((9, 3), dtype=np.float32))
        with pytest.raises(ValueError, match="does not fit"):  # same bytes, other rows
            f.write(np.ones((2, 6), dtype=np.float32))
        f.write(values[:4])
        with pytest.raises(ValueError, match="4 of|were written"):
            f.commit()
    assert not list((tmp_path / "a").rglob("c/*/*")) and not list(tmp_path.rglob("*.partial"))


def test_o_direct_writes_where_the_file_system_takes_it(tmp_path, monkeypatch):
    from dkrp import _chunks

    monkeypatch.setattr(_chunks, "_DIRECT_PIECE", 1 << 20)
    data = np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8)
    fd = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"x" * 4096)  # an aligned offset that is not 0
        wrote = _chunks._write_direct(fd, data)
        try:  # the file system's own answer, not ours
            os.close(os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
        except OSError:
            pytest.skip(f"{tmp_path}'s file system refuses O_DIRECT")
        assert wrote == data.nbytes and os.lseek(fd, 0, os.SEEK_CUR) == 4096 + data.nbytes
        os.write(fd, b"end")  # buffered again
    finally:
        os.close(fd)
    assert (tmp_path / "g").read_bytes() == b"x" * 4096 + data.tobytes() + b"end"


def test_write_rows_leaves_arrays_chunked_by_columns_to_zarr(tmp_path):
    # ChunkFile writes whole-row chunks only: here a row block spans two chunk files
    from dkrp._chunks import with_checksum, write_rows

    array = zarr.create_array(str(tmp_path / "a"), shape=(16, 4), chunks=(8, 2),
                              dtype=np.float32, compressors=with_checksum())
    values = np.arange(32, dtype=np.float32).reshape(8, 4)
    write_rows(tmp_path / "a", array, 8, values)
    assert np.array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[8:], values)
    assert {p.name for p in (tmp_path / "a" / "c" / "1").iterdir()} == {"0", "1"}


def _two_chunks(tmp_path, X):
    """Write ``X`` (9,000 rows) in two chunks of 4,500 rows, each in 3 steps; the refusal."""
    out = tmp_path / "f.zarr"
    with pytest.raises(ValueError) as info:
        write_features(da.from_array(X, chunks=(4500, 12)), _krp(n_components=64), out,
                       progress=False, retries=0, store_dtype="float16")
    assert not (out / "Z" / "c" / "1" / "0").exists()  # (chunk 0 may still be in flight)
    return str(info.value)


def test_a_refusal_in_a_later_step_names_the_row_of_the_partition(tmp_path):
    # NaN at global row 7,500: partition 1, row 3,000 of it, in its second step
    X = np.random.default_rng(7).uniform(-1, 1, (9000, 12)).astype(np.float32)
    X[7500, 3] = np.nan
    assert "partition 1, local row 3000, global row 7500" in _two_chunks(tmp_path, X)
    # a feature beyond float16 at global row 6,600 (partition 1, second step)
    X = np.random.default_rng(7).uniform(-1, 1, (9000, 12)).astype(np.float32)
    X[6600:6610] *= 1000
    assert "Partition 1, row 6600, component" in _two_chunks(tmp_path / "b", X)


def test_a_failing_step_waits_for_the_write_in_flight(tmp_path, monkeypatch):
    # the write of step 1 is slow; step 2 fails: the task must not close the chunk file
    # (and raise) before that write is over
    import time

    from dkrp import _chunks
    from dkrp.errors import PartitionError
    from dkrp.feature_store import tasks

    ended = []
    real_write = _chunks.ChunkFile.write

    def slow_write(self, block):
        time.sleep(0.5)
        real_write(self, block)
        if tmp_path in self.path.parents:  # not a chunk another test left in flight
            ended.append(time.monotonic())

    real_step = tasks.transform_partition

    def failing_step(block, spec_text, dtype, row_offset, *args, **kwargs):
        if row_offset == tasks.PIPELINE_ROWS:  # step 2, after step 1 was sent
            raise ValueError("step 2 failed")
        return real_step(block, spec_text, dtype, row_offset, *args, **kwargs)

    monkeypatch.setattr(_chunks.ChunkFile, "write", slow_write)
    monkeypatch.setattr(tasks, "transform_partition", failing_step)
    X = np.random.default_rng(8).uniform(-1, 1, (4500, 12))
    out = tmp_path / "f.zarr"
    est = _krp(n_components=64)
    with pytest.raises(PartitionError, match="Partition 0 .*ValueError: step 2 failed"):
        write_features(da.from_array(X, chunks=(4500, 12)), est, out, progress=False,
                       retries=0)
    raised = time.monotonic()
    assert len(ended) == 1 and ended[0] <= raised
    assert not list(out.rglob("*.partial"))


def test_o_direct_is_really_set_and_a_refused_write_falls_back(tmp_path, monkeypatch):
    # a misaligned bounce buffer makes a real O_DIRECT write fail (EINVAL): nothing is
    # reported written and the descriptor is buffered again; the page cache takes it all
    from dkrp import _chunks

    try:
        os.close(os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
    except OSError:
        pytest.skip(f"{tmp_path}'s file system refuses O_DIRECT")
    raw = np.empty((1 << 20) + 2 * _chunks._DIRECT_ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % _chunks._DIRECT_ALIGN + 1  # aligned + 1: misaligned
    monkeypatch.setattr(_chunks, "_bounce_buffer", lambda: raw[start:start + (1 << 20)])
    data = np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8)
    fd = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT)
    try:
        import fcntl

        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        assert _chunks._write_direct(fd, data) == 0
        assert fcntl.fcntl(fd, fcntl.F_GETFL) == flags
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        _chunks._write_all(fd, data)
    finally:
        os.close(fd)
    assert (tmp_path / "g").read_bytes() == data.tobytes()


def test_each_thread_keeps_one_aligned_bounce_buffer():
    from dkrp import _chunks

    first = _chunks._bounce_buffer()
    assert first.nbytes == _chunks._DIRECT_PIECE and first.dtype == np.uint8
    assert first.ctypes.data % _chunks._DIRECT_ALIGN == 0
    assert _chunks._bounce_buffer().ctypes.data == first.ctypes.data  # kept, not renewed
    other = []
    thread = threading.Thread(target=lambda: other.append(_chunks._bounce_buffer().ctypes.data))
    thread.start()
    thread.join()
    assert other[0] != first.ctypes.data  # its own


def test_the_last_chunk_goes_in_steps_when_the_rows_end_with_it(tmp_path, caplog):
    X = np.random.default_rng(9).uniform(-1, 1, (9000, 12))
    out = tmp_path / "f.zarr"
    with caplog.at_level("DEBUG", logger="dkrp.feature_store.tasks"):
        write_features(da.from_array(X, chunks=(4500, 12)), _krp(n_components=64), out,
                       progress=False)
    assert _step_messages(caplog, out) == [
        f"{out}: chunk {i}, 4500 rows featurized in 3 steps, each written during the next"
        for i in (0, 1)]


@pytest.mark.parametrize("setting", ["1", "0"])
def test_dkrp_direct_io_0_turns_o_direct_off(tmp_path, monkeypatch, setting):
    from dkrp import _chunks

    calls = []
    real = _chunks._write_direct
    monkeypatch.setattr(_chunks, "_write_direct",
                        lambda fd, data: calls.append(data.nbytes) or real(fd, data))
    monkeypatch.setenv("DKRP_DIRECT_IO", setting)
    array = _raw_array(tmp_path / "a", 512, 1024)  # 2 MiB chunks
    values = np.ones((512, 1024), dtype=np.float32)
    with _chunks.ChunkFile(tmp_path / "a", array, 0) as chunk_file:
        chunk_file.write(values)
        chunk_file.commit()
    assert calls == ([values.nbytes] if setting == "1" else [])


def test_is_one_chunk_at_the_end_of_the_array(tmp_path):
    # a last chunk of one row is one chunk; no rows past the end are none
    from dkrp._chunks import is_one_chunk, with_checksum

    array = zarr.create_array(str(tmp_path / "a"), shape=(2001, 4), chunks=(1000, 4),
                              dtype=np.float32, compressors=with_checksum())
    assert is_one_chunk(array, 2000, 1) and is_one_chunk(array, 1000, 1000)
    assert not is_one_chunk(array, 2000, 0) and not is_one_chunk(array, 2001, 0)
    even = zarr.create_array(str(tmp_path / "b"), shape=(2000, 4), chunks=(1000, 4),
                             dtype=np.float32, compressors=with_checksum())
    assert not is_one_chunk(even, 2000, 0) and not is_one_chunk(even, 1000, 0)


@pytest.mark.parametrize(("fill_piece", "pieces"), [
    (1, [20, 20, 20]),  # less than one row: one row per piece
    (45, [40, 20]),  # two rows per piece, the last piece short
])
def test_the_last_chunk_is_padded_in_pieces_from_any_of_its_rows(tmp_path, monkeypatch,
                                                                  fill_piece, pieces):
    # rows of 20 bytes, a last chunk of 7 rows of 10: 3 rows of fill value, written in
    # pieces of at most _FILL_PIECE bytes (whole rows, at least one); the chunk is named
    # by any of its rows
    from dkrp import _chunks
    from dkrp._chunks import with_checksum

    writes = []
    real = _chunks._write_all
    monkeypatch.setattr(_chunks, "_write_all",
                        lambda fd, data: writes.append(memoryview(data).nbytes) or real(fd, data))
    monkeypatch.setattr(_chunks, "_FILL_PIECE", fill_piece)
    values = np.arange(35, dtype=np.float32).reshape(7, 5)
    sides = {side: zarr.create_array(str(tmp_path / side), shape=(17, 5), chunks=(10, 5),
                                     dtype=np.float32, fill_value=-1.5,
                                     compressors=with_checksum(),
                                     config={"write_empty_chunks": True})
             for side in ("ours", "theirs")}
    with _chunks.ChunkFile(tmp_path / "ours", sides["ours"], 13) as chunk_file:
        assert chunk_file.path == tmp_path / "ours" / "c" / "1" / "0"
        chunk_file.write(values)
        chunk_file.commit()
    assert writes == [values.nbytes, *pieces, 4]
    sides["theirs"][10:] = values
    assert (tmp_path / "ours/c/1/0").read_bytes() == (tmp_path / "theirs/c/1/0").read_bytes()
    assert np.array_equal(sides["ours"][10:], values)


def test_chunks_of_at_most_pipeline_rows_go_whole(tmp_path, caplog):
    # a chunk of PIPELINE_ROWS rows or fewer is featurized at once, not in one step
    from dkrp.feature_store.tasks import PIPELINE_ROWS

    X = np.random.default_rng(10).uniform(-1, 1, (2 * PIPELINE_ROWS + 100, 12))
    out = tmp_path / "f.zarr"
    with caplog.at_level("DEBUG", logger="dkrp.feature_store.tasks"):
        write_features(da.from_array(X, chunks=(PIPELINE_ROWS, 12)), _krp(n_components=64),
                       out, progress=False)
    assert _step_messages(caplog, out) == []
    assert zarr.open_array(str(out / "Z"), mode="r").chunks[0] == PIPELINE_ROWS
    assert np.array_equal(open_features(out).Z.compute(), _krp(n_components=64).transform(X))
