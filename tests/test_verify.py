"""Issue 10 case 4: missing and corrupt chunks are errors on read; ``dkrp verify [--repair]``.

Real Zarr stores on disk; the repair runs on a real LocalCluster of worker processes.
Each test reproduces a damaged store the way a user gets one: a chunk file deleted,
one byte of a chunk file flipped.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from click.testing import CliRunner

from dkrp import PolynomialRandomProjection, featurize_to_store
from dkrp.cli import main
from dkrp.feature_store import open_features, write_features
from dkrp.io import ingest, open_dataset

FIXTURES = Path(__file__).parent / "fixtures" / "v0_1_0"
CHUNK = 50  # 230 rows: chunks 0..3 of 50 rows and a short last chunk 4 of 30


def store_digest(path) -> dict:
    """Relative path -> sha256 of every file in a store."""
    path = Path(path)
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


def flip_byte(path, offset=100):
    data = bytearray(Path(path).read_bytes())
    data[offset] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def _krp():
    return PolynomialRandomProjection(n_components=30, n_hyperplanes=40, random_state=2)


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    # not dask's default scheduler: a test that reads without naming the client reads on
    # the local scheduler, whichever cluster test ran before it (and mutmut, which only
    # sees the calls made in the test's own process, sees the reads)
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield cluster, client


@pytest.fixture
def stores(tmp_path):
    """A dataset store and two feature stores of the same job (local scheduler)."""
    X = np.random.default_rng(7).standard_normal((230, 6))
    np.save(tmp_path / "x.npy", X)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=CHUNK)
    for name in ("clean.zarr", "f.zarr"):
        featurize_to_store(tmp_path / "x.zarr", tmp_path / name, _krp(), progress=False)
    assert store_digest(tmp_path / "clean.zarr") == store_digest(tmp_path / "f.zarr")
    return tmp_path


def _damage(store):
    """Delete the last (short) chunk of Z and flip a byte of chunk 1."""
    (store / "Z" / "c" / "4" / "0").unlink()
    flip_byte(store / "Z" / "c" / "1" / "0")


# -- reading a damaged store --------------------------------------------------------------


def test_open_features_refuses_a_deleted_chunk_naming_it(stores):
    # before: opened, and rows 200..229 read as NaN
    _damage(stores / "f.zarr")
    with pytest.raises(ValueError, match=r"array 'Z'.*chunk \(4, 0\).*Z/c/4/0.*rows 200\.\.229"
                                         r".*dkrp verify .*f\.zarr --repair"):
        open_features(stores / "f.zarr")


def test_a_flipped_byte_raises_on_read_naming_the_chunk(stores, cluster):
    # before: the chunk read back as wrong numbers, silently
    _, client = cluster
    flip_byte(stores / "f.zarr" / "Z" / "c" / "1" / "0")
    Z = open_features(stores / "f.zarr").Z
    assert np.array_equal(Z[:50].compute(), open_features(stores / "clean.zarr").Z[:50].compute())
    with pytest.raises(ValueError, match=r"f\.zarr: chunk \(1, 0\) of array 'Z' \(file "
                                         r"Z/c/1/0, rows 50\.\.99\) is corrupt: it fails its "
                                         r"crc32c checksum.*dkrp verify .* --repair") as err:
        Z.compute()
    assert err.value.chunk == (1, 0) and err.value.problem == "corrupt"
    # on the cluster too: the error crosses the process boundary with its fields
    with pytest.raises(ValueError, match=r"chunk \(1, 0\) of array 'Z'") as err:
        client.compute(Z).result()
    assert err.value.array == "Z" and err.value.store == str(stores / "f.zarr")


def test_new_stores_checksum_every_array(stores):
    import zarr

    for path in ("x.zarr/X", "f.zarr/Z", "f.zarr/done"):
        codecs = zarr.open_array(str(stores / path), mode="r").metadata.to_dict()["codecs"]
        assert codecs[-1] == {"name": "crc32c"}, (path, codecs)
    # --compressor zstd: compressed, then checksummed (the compressor is not dropped)
    featurize_to_store(stores / "x.zarr", stores / "z.zarr", _krp(), compressor="zstd",
                       progress=False)
    for path in ("z.zarr/Z", "z.zarr/done"):
        codecs = zarr.open_array(str(stores / path), mode="r").metadata.to_dict()["codecs"]
        assert [c["name"] for c in codecs] == ["bytes", "zstd", "crc32c"], (path, codecs)


def test_rerun_of_featurize_rewrites_a_deleted_chunk(stores):
    # before: the store said complete and the rerun did nothing
    (stores / "f.zarr" / "Z" / "c" / "2" / "0").unlink()
    summary, _, action = featurize_to_store(stores / "x.zarr", stores / "f.zarr", _krp(),
                                            progress=False)
    assert action == "resume" and summary["chunks_written"] == 1
    assert store_digest(stores / "f.zarr") == store_digest(stores / "clean.zarr")


# -- dkrp verify ---------------------------------------------------------------------------


def test_verify_finds_both_and_repair_is_byte_identical_to_a_clean_run(stores, cluster):
    from distributed import get_task_stream

    from dkrp.feature_store import verify_store

    _, client = cluster
    store = stores / "f.zarr"
    _damage(store)
    flip_byte(store / "done" / "c" / "3", offset=3)  # a damaged done marker, too
    with dask.config.set(scheduler="sync"), get_task_stream(client) as stream:
        report = verify_store(store, client=client)  # the chunks are read on the cluster
    assert len(stream.data) >= 1
    assert not report["ok"] and report["checksums"] and report["chunks_checked"] == 10
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [
        ("Z/c/1/0", "corrupt"), ("Z/c/4/0", "missing"), ("done/c/3", "corrupt")]
    assert report["bad_chunks"] == [1, 3, 4] and "--repair" in report["advice"]
    assert store_digest(store) != store_digest(stores / "clean.zarr")

    # the chunks are recomputed on the cluster given, not on dask's default scheduler
    with dask.config.set(scheduler="sync"), get_task_stream(client) as stream:
        repaired = verify_store(store, repair=True, client=client)
    assert repaired["ok"] and repaired["repaired"] == [1, 3, 4]
    assert sum(str(t["key"]).startswith("dkrp-write-") for t in stream.data) == 3
    assert store_digest(store) == store_digest(stores / "clean.zarr")  # every file
    assert verify_store(store) == {**verify_store(stores / "clean.zarr"),
                                   "path": str(store)}


def test_dkrp_verify_command_reports_and_repairs(stores, cluster):
    local, _ = cluster
    store = stores / "f.zarr"
    _damage(store)
    r = CliRunner().invoke(main, ["verify", str(store)])
    assert r.exit_code == 1, r.output
    assert "10 chunks in 2 array(s) checked, crc32c checksums" in r.output
    assert "MISSING Z/c/4/0" in r.output and "CORRUPT Z/c/1/0" in r.output
    assert f"dkrp verify {store} --repair" in r.output
    r = CliRunner().invoke(main, ["verify", str(store), "--repair", "--quiet",
                                  "--scheduler", local.scheduler_address])
    assert r.exit_code == 0, r.output
    assert "repaired 2 chunk(s) (1, 4)" in r.output and r.output.rstrip().endswith("OK")
    assert store_digest(store) == store_digest(stores / "clean.zarr")


def test_repair_refuses_an_input_that_is_not_the_fingerprinted_one(stores):
    from dkrp.feature_store import FeatureStoreMismatchError, verify_store

    store = stores / "f.zarr"
    _damage(store)
    np.save(stores / "x.npy", np.random.default_rng(8).standard_normal((230, 6)))
    ingest(stores / "x.npy", stores / "x.zarr", chunk_rows=CHUNK, overwrite=True)
    before = store_digest(store)
    with pytest.raises(FeatureStoreMismatchError, match="input") as err:
        verify_store(store, repair=True)
    assert store_digest(store) == before  # nothing touched
    # the differences travel with the error, across processes too
    import pickle

    assert err.value.problems and err.value.problems[0].startswith("input edge_rows_sha256")
    copy = pickle.loads(pickle.dumps(err.value))
    assert (str(copy), copy.problems) == (str(err.value), err.value.problems)


def test_repair_refuses_a_store_whose_spec_was_edited(stores):
    """Issue 28 (3): with Nystroem's gamma edited in the store's metadata, repair rewrote
    the missing chunk with the edited map (rows off by up to 5.19) and verify said OK."""
    import zarr

    from dkrp import SpecError
    from dkrp.baselines import Nystroem
    from dkrp.feature_store import verify_store

    store = stores / "ny.zarr"
    featurize_to_store(stores / "x.zarr", store, Nystroem(gamma=0.1, n_components=20,
                                                          random_state=0), progress=False)
    (store / "Z" / "c" / "4" / "0").unlink()
    group = zarr.open_group(str(store), mode="r+")
    spec = dict(group.attrs["spec"])
    spec["params"] = {**spec["params"], "gamma": 0.5}
    group.attrs["spec"] = spec
    before = store_digest(store)
    with pytest.raises(SpecError, match="disagrees with itself.*params_checksum"):
        verify_store(store, repair=True)
    assert store_digest(store) == before  # nothing written with the edited map


def test_verify_of_an_incomplete_store_counts_unwritten_chunks_as_pending(tmp_path):
    from dkrp.feature_store import verify_store

    data = np.random.default_rng(0).standard_normal((300, 12))
    data[213, 2] = np.nan  # partition 2 fails: the run stops incomplete
    krp = PolynomialRandomProjection(n_components=20, n_hyperplanes=30,
                                     random_state=1).fit_n_features(12)
    with pytest.raises(ValueError, match="global row 213"):
        write_features(da.from_array(data, chunks=(100, 12)), krp, tmp_path / "f.zarr",
                       progress=False)
    report = verify_store(tmp_path / "f.zarr")
    assert report["ok"] and not report["complete"] and report["pending"] >= 1
    assert report["problems"] == [] and "featurize command again" in report["advice"]


# -- dataset stores -------------------------------------------------------------------------


def test_dataset_store_deleted_and_corrupt_chunks(stores):
    from dkrp.io import verify_dataset

    ds = stores / "x.zarr"
    flip_byte(ds / "X" / "c" / "2" / "0", offset=20)
    with pytest.raises(ValueError, match=r"x\.zarr: chunk \(2, 0\) of array 'X' \(file "
                                         r"X/c/2/0, rows 100\.\.149\) is corrupt.*re-ingest"):
        open_dataset(ds).X.compute()
    (ds / "X" / "c" / "3" / "0").unlink()
    with pytest.raises(ValueError, match=r"chunk \(3, 0\) of array 'X' \(file X/c/3/0, "
                                         r"rows 150\.\.199\) is missing"):
        open_dataset(ds)
    report = verify_dataset(ds)
    assert not report["ok"] and report["checksums"]
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [
        ("X/c/2/0", "corrupt"), ("X/c/3/0", "missing")]
    assert f"dkrp ingest {stores / 'x.npy'} {ds} --overwrite" in report["advice"]
    r = CliRunner().invoke(main, ["verify", str(ds), "--repair"])
    assert r.exit_code == 1 and "cannot be repaired from itself" in r.output


def test_verify_checks_an_array_with_an_axis_of_one(stores):
    # a dataset of one feature (X is 230 x 1) and a store small enough for one chunk
    # (done holds one marker): every chunk is checked, and each lost file is found
    from dkrp.feature_store import verify_store
    from dkrp.io import verify_dataset

    np.save(stores / "one.npy", np.arange(230.0)[:, None])
    ingest(stores / "one.npy", stores / "one.zarr", chunk_rows=CHUNK)
    assert verify_dataset(stores / "one.zarr")["chunks_checked"] == 5
    (stores / "one.zarr" / "X" / "c" / "2" / "0").unlink()
    report = verify_dataset(stores / "one.zarr")
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("X/c/2/0", "missing")]

    X = da.from_array(np.random.default_rng(5).standard_normal((40, 6)), chunks=(40, 6))
    featurize_to_store(X, stores / "small.zarr", _krp(), progress=False)
    (stores / "small.zarr" / "done" / "c" / "0").unlink()
    report = verify_store(stores / "small.zarr")
    assert report["chunks_checked"] == 2 and report["bad_chunks"] == [0]
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("done/c/0", "missing")]


def test_csr_dataset_store_corrupt_chunk_named(tmp_path, sparse_libsvm):
    path, X, _ = sparse_libsvm
    ingest(path, tmp_path / "s.zarr", fmt="libsvm", sparse=True, chunk_rows=50)
    store = tmp_path / "s.zarr"
    flip_byte(store / "X" / "data" / "c" / "1" / "0", offset=10)
    with pytest.raises(ValueError) as err:
        open_dataset(store).X.compute(scheduler="sync")
    # a member of X has no rows of its own to name; a dataset store is re-ingested
    assert str(err.value) == (
        f"Store {store}: chunk (1, 0) of array 'X/data' (file X/data/c/1/0) is corrupt: it "
        "fails its crc32c checksum (the file changed after it was written). Run `dkrp "
        f"verify {store}` to check every chunk, then re-ingest the store from its source "
        "(`dkrp ingest SOURCE STORE --overwrite`).")
    assert (err.value.array, err.value.chunk, err.value.problem) == ("X/data", (1, 0),
                                                                     "corrupt")


def test_a_chunk_deleted_after_the_store_was_opened_is_named_when_its_rows_are_read(stores):
    # a training job holds the store open (lazily) while its chunk 2 file is deleted:
    # the rows of the other chunks still read, and those of chunk 2 raise naming it,
    # never the fill value
    from dkrp.errors import ChunkError

    store = stores / "f.zarr"
    Z = open_features(store).Z
    clean = open_features(stores / "clean.zarr").Z.compute(scheduler="sync")
    (store / "Z" / "c" / "2" / "0").unlink()
    assert np.array_equal(Z[:100].compute(scheduler="sync"), clean[:100])
    assert np.array_equal(Z[150:].compute(scheduler="sync"), clean[150:])
    with pytest.raises(ChunkError) as err:
        Z[90:110].compute(scheduler="sync")
    assert str(err.value) == (
        f"Store {store}: chunk (2, 0) of array 'Z' (file Z/c/2/0, rows 100..149) is missing: "
        f"its file was deleted after the store was written. Run `dkrp verify {store} "
        "--repair` to recompute the bad chunks from the spec and the input.")
    assert (err.value.store, err.value.array, err.value.chunk, err.value.problem) == (
        str(store), "Z", (2, 0), "missing")


def test_a_chunk_of_a_dataset_store_deleted_after_it_was_opened_is_never_read_as_zeros(stores):
    # the same for a dataset store (a training job reading x.zarr lazily)
    from dkrp.errors import ChunkError

    store = stores / "x.zarr"
    ds = open_dataset(store)
    X = np.load(stores / "x.npy")
    (store / "X" / "c" / "1" / "0").unlink()
    assert np.array_equal(ds.X[:CHUNK].compute(scheduler="sync"), X[:CHUNK])
    with pytest.raises(ChunkError, match=r"^Store .*: chunk \(1, 0\) of array 'X' \(file "
                       r"X/c/1/0, rows 50\.\.99\) is missing: its file was deleted"):
        ds.X.compute(scheduler="sync")


def test_a_region_that_a_dask_fusing_slices_reads_is_checked_in_exactly_its_chunks(stores):
    # dask 2024.8 (the oldest dkrp supports) fuses ``Z[149:151]`` into one read of that
    # region from the checked array (newer dask reads whole chunks and slices them): a
    # region is checked in every chunk it covers, and only in those
    from dkrp._chunks import CheckedArray
    from dkrp.errors import ChunkError

    store = stores / "f.zarr"
    clean = open_features(stores / "clean.zarr").Z.compute(scheduler="sync")
    (store / "Z" / "c" / "2" / "0").unlink()  # rows 100..149
    flip_byte(store / "Z" / "c" / "4" / "0")  # rows 200..229, the short last chunk
    Z = CheckedArray(store, "Z", "features")
    every = slice(0, 30)
    for key, rows in [((slice(90, 100), every), slice(90, 100)),  # ends at the boundary
                      ((slice(150, 200), every), slice(150, 200)),
                      ((slice(0, 100, 7),), slice(0, 100, 7)),  # rows only: every column
                      ((99, slice(3, 9)), (99, slice(3, 9))),
                      ((slice(120, 120), every), slice(120, 120))]:  # no row at all
        assert np.array_equal(Z[key], clean[rows]), key
    for key, coords, problem in [((slice(99, 101), every), (2, 0), "missing"),
                                 ((100, every), (2, 0), "missing"),
                                 ((slice(149, 150),), (2, 0), "missing"),
                                 ((slice(140, 160, 30), every), (2, 0), "missing"),
                                 ((slice(199, 201), every), (4, 0), "corrupt"),
                                 ((229,), (4, 0), "corrupt"),
                                 (slice(140, 150), (2, 0), "missing")]:  # not a tuple
        with pytest.raises(ChunkError) as err:
            Z[key]
        assert (err.value.chunk, err.value.problem) == (coords, problem), key
    # rows only, of a dataset of one feature: its one column is checked too
    np.save(stores / "one.npy", np.arange(230.0)[:, None])
    ingest(stores / "one.npy", stores / "one.zarr", chunk_rows=CHUNK)
    (stores / "one.zarr" / "X" / "c" / "2" / "0").unlink()
    with pytest.raises(ChunkError, match=r"chunk \(2, 0\) of array 'X'"):
        CheckedArray(stores / "one.zarr", "X", "dataset")[120:130]
    # an unfinished store opened for inspection reads a chunk not written as NaN
    partial = CheckedArray(store, "Z", "features", allow_missing=True)
    assert np.isnan(partial[(slice(99, 101), every)][1:]).all()
    assert np.array_equal(partial[(slice(99, 101), every)][:1], clean[99:100])


def test_a_store_read_before_and_after_it_is_overwritten_gives_both_in_one_computation(
        stores):
    # the rows kept in memory before `featurize --overwrite` and the rows read after it
    # are two dask arrays: compared in one computation, they differ
    import zarr

    store = stores / "f.zarr"
    before = open_features(store).Z.persist(scheduler="sync")
    other = PolynomialRandomProjection(n_components=30, n_hyperplanes=40, random_state=3)
    featurize_to_store(stores / "x.zarr", store, other, overwrite=True, progress=False)
    after = open_features(store).Z
    old = open_features(stores / "clean.zarr").Z.compute(scheduler="sync")
    new = zarr.open_array(str(store / "Z"), mode="r")[:]
    assert not np.array_equal(old, new)
    assert np.array_equal((after - before).compute(scheduler="sync"), new - old)


def test_a_store_and_its_copy_read_in_one_computation_are_two_arrays(stores):
    # a backup made with `cp -a` keeps the metadata's time; a chunk rewritten in one of
    # them must show when the two are compared in one computation
    store, copy = stores / "f.zarr", stores / "backup.zarr"
    shutil.copytree(store, copy)  # copies the files' times too
    assert (store / "Z" / "zarr.json").stat().st_mtime_ns == (
        copy / "Z" / "zarr.json").stat().st_mtime_ns
    shutil.copyfile(store / "Z" / "c" / "0" / "0", copy / "Z" / "c" / "1" / "0")
    a, b = open_features(store).Z, open_features(copy).Z
    differ = (a != b).any(axis=1).compute(scheduler="sync")
    assert np.flatnonzero(differ).tolist() == list(range(50, 100))


def test_a_flipped_byte_of_a_label_chunk_is_named_with_its_rows(labelled):
    # the message a user gets reading the labels of a store with a damaged chunk of y:
    # which chunk, which file, which rows, what is wrong and what to do
    from dkrp import read_features
    from dkrp.errors import ChunkError

    store = labelled / "f.zarr"
    chunk = store / "y" / "c" / "4"  # the short last chunk: rows 200..229
    flip_byte(chunk, offset=chunk.stat().st_size // 2)
    with pytest.raises(ChunkError) as err:
        read_features(store)[1].compute(scheduler="sync")
    assert str(err.value) == (
        f"Store {store}: chunk (4,) of array 'y' (file y/c/4, rows 200..229) is corrupt: it "
        "fails its crc32c checksum (the file changed after it was written). Run `dkrp verify "
        f"{store} --repair` to recompute the bad chunks from the spec and the input.")
    assert (err.value.store, err.value.array, err.value.chunk, err.value.problem) == (
        str(store), "y", (4,), "corrupt")


def test_verify_reads_the_chunks_on_disk_in_tasks_of_about_batch_bytes(stores, monkeypatch):
    # a store larger than a worker's memory is checked in read tasks of about batch_bytes
    # of stored chunks each; a chunk whose file is gone is reported, not read
    from dkrp import _chunks

    tasks = []
    read = _chunks.check_chunks

    def check_chunks(array_dir, coords_list):
        tasks.append((Path(array_dir).name, [tuple(c) for c in coords_list]))
        return read(array_dir, coords_list)

    monkeypatch.setattr(_chunks, "check_chunks", check_chunks)
    store = stores / "f.zarr"
    (store / "Z" / "c" / "1" / "0").unlink()
    flip_byte(store / "Z" / "c" / "3" / "0")
    chunk_bytes = 50 * 30 * 8  # a chunk of Z: 50 rows of 30 float64 features
    report = _chunks.check_arrays(store, ["Z", "done"], batch_bytes=2 * chunk_bytes + 1)
    assert sorted(tasks) == [("Z", [(0, 0), (2, 0)]), ("Z", [(3, 0), (4, 0)]),
                             ("done", [(0,), (1,), (2,), (3,), (4,)])]
    assert report["arrays"] == {"Z": {"chunks": 5, "checksums": True},
                                "done": {"chunks": 5, "checksums": True}}
    assert report["chunks_checked"] == 10
    assert [(p["array"], p["chunk"], p["file"], p["problem"], p["detail"])
            for p in report["problems"]] == [
        ("Z", (1, 0), "Z/c/1/0", "missing", "the chunk file is missing"),
        ("Z", (3, 0), "Z/c/3/0", "corrupt",
         "it fails its crc32c checksum (the file changed after it was written)")]


def test_verify_of_a_store_whose_array_metadata_is_gone_says_to_rebuild_it(stores):
    # without Z/zarr.json nothing says how Z is chunked: its chunks cannot be checked
    from dkrp.errors import CorruptStoreError
    from dkrp.feature_store import verify_store

    store = stores / "f.zarr"
    (store / "Z" / "zarr.json").unlink()
    with pytest.raises(CorruptStoreError) as err:
        verify_store(store)
    message = str(err.value)
    assert message.startswith(f"Store {store}: the metadata of array 'Z' (Z/zarr.json) is "
                              "missing or unreadable (ArrayNotFoundError: ")
    assert message.endswith("); its chunks cannot be checked. Rebuild the store (featurize "
                            "or ingest with overwrite=True).")


def test_repair_retries_a_chunk_that_fails_as_it_was_told(tmp_path):
    # `dkrp verify --repair --retries N`: a transient error while a bad chunk is rewritten
    # is retried N times, as in featurize (a store written by a map that fails once on
    # chunk 2's first row, each time its attempt markers are cleared)
    from dkrp.feature_store import PartitionError, verify_features, verify_store
    from dkrp.testing.faulty import FaultyProjection

    X = np.random.default_rng(7).standard_normal((230, 6))
    np.save(tmp_path / "x.npy", X)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=CHUNK)
    state = tmp_path / "faults"
    faulty = FaultyProjection(n_components=30, n_hyperplanes=40, random_state=2,
                              fault="oserror", trigger=float(X[2 * CHUNK, 0]), times=1,
                              state_dir=str(state))
    store = tmp_path / "f.zarr"
    featurize_to_store(tmp_path / "x.zarr", store, faulty, progress=False, retries=1)
    clean = store_digest(store)
    flip_byte(store / "Z" / "c" / "2" / "0")
    for verify in (verify_features, verify_store):  # no retries by default
        shutil.rmtree(state)
        with pytest.raises(PartitionError, match=r"failed after 1 attempt: OSError"):
            verify(store, repair=True)
    shutil.rmtree(state)
    report = verify_store(store, repair=True, retries=1)
    assert report["repaired"] == [2] and store_digest(store) == clean


def _set_block_size(size):
    import dkrp._random

    dkrp._random.BLOCK_SIZE = size  # another stream layout: other hyperplanes


def test_repair_on_a_cluster_checks_the_workers_hyperplanes_before_writing(cluster, tmp_path):
    # a worker that regenerates other hyperplanes (another numpy or dkrp, here another
    # stream layout) is named before any chunk is rewritten, as featurize does
    from dkrp.errors import SpecError
    from dkrp.feature_store import verify_features

    _, client = cluster
    X = np.random.default_rng(7).standard_normal((230, 6))
    np.save(tmp_path / "x.npy", X)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=CHUNK)
    store = tmp_path / "f.zarr"
    featurize_to_store(tmp_path / "x.zarr", store, PolynomialRandomProjection(
        n_components=30, n_hyperplanes=600, random_state=2), progress=False)  # > BLOCK_SIZE
    flip_byte(store / "Z" / "c" / "2" / "0")
    damaged = store_digest(store)
    victim = sorted(client.scheduler_info()["workers"])[0]
    client.run(_set_block_size, 128, workers=[victim])
    try:
        with pytest.raises(SpecError, match=rf"^1 of 2 workers do not regenerate the "
                           rf"hyperplanes .*worker {victim} regenerates"):
            verify_features(store, repair=True, client=client)
    finally:
        client.run(_set_block_size, 256, workers=[victim])
    assert store_digest(store) == damaged


@pytest.mark.parametrize("name", ["Z", "done"])
def test_verify_of_a_store_whose_array_directory_is_gone_changes_nothing(stores, name):
    # a user's store with a whole array deleted: the refusal says which array, zarr's
    # reason and the rebuild (before: the done markers' bare FileNotFoundError), and the
    # check writes nothing (zarr opening for writing creates the missing directory)
    from dkrp.errors import CorruptStoreError
    from dkrp.feature_store import verify_store

    store = stores / "f.zarr"
    shutil.rmtree(store / name)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    with pytest.raises(CorruptStoreError) as err:
        verify_store(store)
    cause = err.value.__cause__
    assert str(err.value) == (
        f"Store {store}: the metadata of array {name!r} ({name}/zarr.json) is missing or "
        f"unreadable ({type(cause).__name__}: {cause}); its chunks cannot be checked. "
        "Rebuild the store (featurize or ingest with overwrite=True).")
    assert str(cause)
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


# -- stores written before checksums (dkrp 0.1.0) -------------------------------------------


def test_verify_of_a_store_without_checksums(tmp_path):
    from dkrp.feature_store import verify_store

    old = tmp_path / "features.zarr"
    shutil.copytree(FIXTURES / "features.zarr", old)
    report = verify_store(old)
    assert report["ok"] and not report["checksums"] and report["chunks_checked"] == 6
    r = CliRunner().invoke(main, ["verify", str(old)])
    assert r.exit_code == 0 and "no checksums (written before dkrp added them)" in r.output
    dataset = verify_store(FIXTURES / "dataset.zarr")
    assert dataset["ok"] and not dataset["checksums"] and dataset["format"] == "dataset"

    (old / "Z" / "c" / "1" / "0").unlink()
    report = verify_store(old)
    assert not report["ok"] and report["bad_chunks"] == [1]
    assert [p["file"] for p in report["problems"]] == ["Z/c/1/0"]
    with pytest.raises(ValueError, match=r"Z/c/1/0"):
        open_features(old)


def test_a_truncated_chunk_of_a_store_without_checksums_is_named_as_undecodable(tmp_path):
    # a store of dkrp 0.1.0 (no crc32c) whose chunk file was cut short (a full disk, a
    # copy stopped half way): no checksum to fail, so the decoder's own error is given
    import zarr

    from dkrp.errors import ChunkError
    from dkrp.feature_store import verify_store

    old = tmp_path / "features.zarr"
    shutil.copytree(FIXTURES / "features.zarr", old)
    chunk = old / "Z" / "c" / "1" / "0"
    chunk.write_bytes(chunk.read_bytes()[:chunk.stat().st_size // 2])
    with pytest.raises(Exception) as raw:  # what zarr itself says of the chunk
        zarr.open_array(str(old / "Z"), mode="r")[16:32]
    assert "checksum" not in str(raw.value).lower()
    decoder = f"{type(raw.value).__name__}: {str(raw.value).rstrip('.')}"
    with pytest.raises(ChunkError) as err:
        open_features(old).Z.compute(scheduler="sync")
    assert str(err.value) == (
        f"Store {old}: chunk (1, 0) of array 'Z' (file Z/c/1/0, rows 16..31) is corrupt: it "
        f"cannot be decoded ({decoder}). Run `dkrp verify {old} --repair` to recompute the "
        "bad chunks from the spec and the input.")
    report = verify_store(old)
    assert report["problems"] == [{"array": "Z", "chunk": (1, 0), "file": "Z/c/1/0",
                                   "problem": "corrupt",
                                   "detail": f"it cannot be decoded ({decoder})"}]


# -- the labels y of a feature store (issue 29, item 2) ---------------------------------------


@pytest.fixture
def labelled(tmp_path):
    """A dataset store with labels (from a CSV) and two feature stores of the same job."""
    rng = np.random.default_rng(11)
    X, y = rng.standard_normal((230, 6)), rng.integers(0, 3, 230)
    rows = [",".join(repr(float(v)) for v in row) + f",{label}"
            for row, label in zip(X, y, strict=True)]
    (tmp_path / "x.csv").write_text("\n".join(["a,b,c,d,e,f,label", *rows]) + "\n")
    ingest(tmp_path / "x.csv", tmp_path / "x.zarr", label_column="label", chunk_rows=CHUNK)
    for name in ("clean.zarr", "f.zarr"):
        featurize_to_store(tmp_path / "x.zarr", tmp_path / name, _krp(), progress=False)
    assert store_digest(tmp_path / "clean.zarr") == store_digest(tmp_path / "f.zarr")
    return tmp_path


def _damage_labels(store):
    """Delete the last (short) chunk of y and flip a byte of chunk 1."""
    (store / "y" / "c" / "4").unlink()
    chunk = store / "y" / "c" / "1"
    flip_byte(chunk, offset=chunk.stat().st_size // 2)


def test_verify_checks_the_labels_and_repair_copies_them_from_the_input(labelled, caplog):
    # before: verify and verify --repair said OK, while read_features refused the store
    # and told the user to run verify --repair (a loop with no exit)
    from dkrp import read_features
    from dkrp.errors import ChunkError
    from dkrp.feature_store import verify_store

    store = labelled / "f.zarr"
    _damage_labels(store)
    with pytest.raises(ChunkError, match=r"array 'y'.*y/c/4.*--repair"):
        read_features(store)
    (store / "Z" / "c" / "3" / "0").unlink()  # and a chunk of Z, repaired beside them
    report = verify_store(store)
    assert not report["ok"] and report["checksums"] and report["chunks_checked"] == 15
    assert report["arrays"]["y"] == {"chunks": 5, "checksums": True}
    assert [(p["array"], p["chunk"], p["file"], p["problem"]) for p in report["problems"]] == [
        ("Z", (3, 0), "Z/c/3/0", "missing"), ("y", (1,), "y/c/1", "corrupt"),
        ("y", (4,), "y/c/4", "missing")]
    assert report["bad_chunks"] == [3] and report["bad_labels"] == [1, 4]
    assert report["advice"] == (
        f"Run `dkrp verify {store} --repair` to recompute the 1 bad chunk(s) of Z from the "
        "spec and the input and copy the 2 bad chunk(s) of the labels y from the input.")

    import logging

    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.verify"):
        repaired = verify_store(store, repair=True)  # dask's local scheduler
    assert repaired["ok"] and repaired["repaired"] == [3]
    assert repaired["repaired_labels"] == [1, 4]
    # what an operator reading the log of a repair is told, and in this order
    assert [r.getMessage() for r in caplog.records if r.name == "dkrp.feature_store.verify"
            ] == [f"{store}: copying chunks [1, 4] of the labels from the input",
                  f"{store}: recomputing chunks [3]"]
    assert store_digest(store) == store_digest(labelled / "clean.zarr")  # every file
    assert verify_store(store) == {**verify_store(labelled / "clean.zarr"),
                                   "path": str(store)}
    Z, y = read_features(store)
    assert np.array_equal(y, open_dataset(labelled / "x.zarr").y.compute())


def test_a_repair_refuses_labels_given_beside_an_input_that_brings_its_own(labelled):
    # the store's y is the dataset store's labels: writing others into its bad chunks
    # would leave a store that no clean run of the job writes, and verify would say OK
    from dkrp.errors import InvalidInputError
    from dkrp.feature_store import verify_store

    store = labelled / "f.zarr"
    _damage_labels(store)
    before = store_digest(store)
    y = open_dataset(labelled / "x.zarr").y.compute()
    with pytest.raises(InvalidInputError) as caught:
        verify_store(store, repair=True, labels=(y + 1) % 3)
    assert str(caught.value) == (
        f"Cannot repair {store}: its input {labelled / 'x.zarr'} brings its own labels, and "
        "labels= gives others. Nothing was changed. Leave out labels= to copy the input's.")
    assert store_digest(store) == before


def test_dkrp_verify_command_reports_and_repairs_a_label_chunk(labelled):
    # only labels to copy: no cluster is started, nothing is recomputed
    store = labelled / "f.zarr"
    _damage_labels(store)
    r = CliRunner().invoke(main, ["verify", str(store)])
    assert r.exit_code == 1, r.output
    assert "15 chunks in 3 array(s) checked, crc32c checksums" in r.output
    assert "CORRUPT y/c/1 (chunk (1,))" in r.output and "MISSING y/c/4 (chunk (4,))" in r.output
    assert f"dkrp verify {store} --repair" in r.output
    r = CliRunner().invoke(main, ["verify", str(store), "--repair", "--quiet"])
    assert r.exit_code == 0, r.output
    assert "repaired 2 label chunk(s) of y (1, 4): copied from the input" in r.output
    assert "chunk(s) (" not in r.output.replace("label chunk(s) of y (", "")
    assert r.output.rstrip().endswith("OK")
    assert store_digest(store) == store_digest(labelled / "clean.zarr")


def test_verify_refuses_a_store_that_lost_its_labels_array(labelled):
    # before: the store said it held labels, verify said OK and read_features refused it
    from dkrp.feature_store import FeatureStoreError, verify_store

    store = labelled / "f.zarr"
    (store / "y" / "zarr.json").unlink()
    with pytest.raises(FeatureStoreError, match=r"labels but has no array y \(y/zarr\.json "
                                                r"is missing\): the store is damaged\. "
                                                r"Featurize the input again\.$"):
        verify_store(store)


def test_repair_of_labels_from_an_in_memory_input_needs_its_labels(tmp_path):
    # a store written from a dask array with labels: the array alone cannot repair y
    from dkrp.feature_store import FeatureStoreError, verify_store

    rng = np.random.default_rng(12)
    X = da.from_array(rng.standard_normal((230, 6)), chunks=(CHUNK, 6))
    y = rng.standard_normal(230)
    for name in ("clean.zarr", "f.zarr"):
        featurize_to_store(X, tmp_path / name, _krp(), labels=y, progress=False)
    store = tmp_path / "f.zarr"
    (store / "y" / "c" / "2").unlink()
    (store / "Z" / "c" / "1" / "0").unlink()
    before = store_digest(store)
    # the store records no path to recompute from, nor the labels; each refusal says what
    # to pass, and changes nothing
    with pytest.raises(FeatureStoreError) as err:
        verify_store(store, repair=True)
    assert str(err.value) == (
        f"Cannot repair {store}: it records no input path (it was written from an in-memory "
        "array). Pass the same input: verify_features(..., input=X).")
    with pytest.raises(FeatureStoreError) as err:
        verify_store(store, repair=True, input=X)
    assert str(err.value) == (f"Cannot repair the labels of {store}: pass the input's labels "
                              "too (verify_features(..., input=X, labels=y)).")
    with pytest.raises(FeatureStoreError) as err:
        verify_store(store, repair=True, input=X, labels=y[:-1])
    assert str(err.value) == (f"Cannot repair the labels of {store}: the input has 229 labels, "
                              "the store 230 rows.")
    assert store_digest(store) == before
    repaired = verify_store(store, repair=True, input=X, labels=y)
    assert (repaired["repaired"], repaired["repaired_labels"]) == ([1], [2])
    assert store_digest(store) == store_digest(tmp_path / "clean.zarr")


def test_repair_of_labels_given_beside_an_unlabelled_input_asks_for_those_labels(stores):
    # featurize_to_store(path, labels=y) of an input without labels stores y beside Z;
    # before: a lost chunk of y was refused with "Pass the dataset store it was made
    # from", which is the input already recorded (a loop with no exit)
    from dkrp.feature_store import FeatureStoreError, verify_store

    y = np.arange(230) % 3
    for name in ("cleany.zarr", "fy.zarr"):
        featurize_to_store(stores / "x.zarr", stores / name, _krp(), labels=y, progress=False)
    store = stores / "fy.zarr"
    (store / "y" / "c" / "2").unlink()
    before = store_digest(store)
    with pytest.raises(FeatureStoreError) as err:
        verify_store(store, repair=True)
    assert str(err.value) == (
        f"Cannot repair the labels of {store}: the input {stores / 'x.zarr'} has no labels. "
        "Pass the labels the store was featurized with (verify_features(..., labels=y)), or "
        "the dataset store they came from (input=PATH).")
    assert store_digest(store) == before
    # labels= beside an input without labels of its own is what the message asks for
    repaired = verify_store(store, repair=True, labels=y)
    assert repaired["ok"] and repaired["repaired_labels"] == [2]
    assert store_digest(store) == store_digest(stores / "cleany.zarr")


def test_a_repair_whose_recorded_input_is_gone_says_to_pass_it_and_changes_nothing(labelled):
    store = labelled / "f.zarr"
    (store / "Z" / "c" / "3" / "0").unlink()
    before = store_digest(store)
    source = labelled / "x.zarr"
    shutil.move(source, labelled / "moved.zarr")
    from dkrp.feature_store import FeatureStoreError, verify_store

    with pytest.raises(FeatureStoreError) as err:
        verify_store(store, repair=True)
    assert str(err.value) == (
        f"Cannot repair {store}: its input {source} is gone (Input {source} does not exist.). "
        "Pass the same input (input=PATH), or featurize it again.")
    assert store_digest(store) == before


def test_a_repair_from_another_in_memory_array_says_the_input_given_is_not_its_own(tmp_path):
    from dkrp.feature_store import FeatureStoreMismatchError, verify_store

    rng = np.random.default_rng(13)
    X = da.from_array(rng.standard_normal((230, 6)), chunks=(CHUNK, 6))
    featurize_to_store(X, tmp_path / "f.zarr", _krp(), progress=False)
    store = tmp_path / "f.zarr"
    (store / "Z" / "c" / "1" / "0").unlink()
    before = store_digest(store)
    for other in (da.from_array(rng.standard_normal((230, 6)), chunks=(CHUNK, 6)),
                  da.from_array(rng.standard_normal((240, 6)), chunks=(CHUNK, 6))):
        with pytest.raises(FeatureStoreMismatchError) as err:
            verify_store(store, repair=True, input=other)
        assert str(err.value) == (
            f"Cannot repair {store}: the input given is not the one it was made from: "
            f"{'; '.join(err.value.problems)}. Nothing was changed. Pass the input the store "
            "was made from (input=PATH), or featurize that input again into a new store.")
    assert len(err.value.problems) > 1  # 240 rows: every difference is named
    assert store_digest(store) == before


def test_a_float32_store_is_repaired_byte_identical_to_a_clean_run(stores):
    # the repair rebuilds the store with the options it was written with (here float32)
    from dkrp.feature_store import verify_store

    for name in ("clean32.zarr", "f32.zarr"):
        featurize_to_store(stores / "x.zarr", stores / name, _krp(), dtype="float32",
                           progress=False)
    store = stores / "f32.zarr"
    (store / "Z" / "c" / "2" / "0").unlink()
    assert verify_store(store, repair=True)["repaired"] == [2]
    assert store_digest(store) == store_digest(stores / "clean32.zarr")


def test_a_store_of_packed_sign_bits_is_repaired_byte_identical_to_a_clean_run(stores):
    # a sign-product store written with --bits holds packed uint8 rows: the repair packs
    # its chunk as the clean run did (the store's options reach the chunk writes)
    from dkrp import SignProductEmbedding
    from dkrp.feature_store import verify_store

    for name in ("cleanbits.zarr", "bits.zarr"):
        featurize_to_store(stores / "x.zarr", stores / name,
                           SignProductEmbedding(n_components=20, random_state=2), bits=True,
                           progress=False)
    store = stores / "bits.zarr"
    (store / "Z" / "c" / "2" / "0").unlink()
    assert verify_store(store, repair=True)["repaired"] == [2]
    assert store_digest(store) == store_digest(stores / "cleanbits.zarr")


def test_a_complete_store_that_lost_a_done_marker_file_is_repaired(stores):
    # a copy of a store that missed one small file (the marker of chunk 2): the chunk is
    # bad, and the repair rewrites it and its marker as a clean run does
    from dkrp.feature_store import verify_store

    store = stores / "f.zarr"
    (store / "done" / "c" / "2").unlink()
    report = verify_store(store)
    assert report["bad_chunks"] == [2]
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("done/c/2", "missing")]
    assert verify_store(store, repair=True)["repaired"] == [2]
    assert store_digest(store) == store_digest(stores / "clean.zarr")


def test_a_temporary_file_left_beside_a_missing_chunk_does_not_hide_it(stores):
    # a repair killed while it rewrote chunk 2: its Z chunk and marker were removed, and
    # the writer's temporary file "0.<uuid>.partial" is all that is left of the new chunk.
    # Zarr reads the missing chunk as the fill value: only its file's name says it is gone
    from dkrp.feature_store import verify_store
    from dkrp.io import verify_dataset

    store = stores / "f.zarr"
    (store / "Z" / "c" / "2" / "0").unlink()
    (store / "done" / "c" / "2").unlink()
    (store / "Z" / "c" / "2" / "0.0123abcd.partial").write_bytes(b"\0" * 64)
    report = verify_store(store)
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [
        ("Z/c/2/0", "missing"), ("done/c/2", "missing")]
    assert verify_store(store, repair=True)["repaired"] == [2]
    assert store_digest(store) == store_digest(stores / "clean.zarr")  # the stray file gone
    # a dataset store has no done markers: its missing chunk must be found by its file alone
    ds = stores / "x.zarr"
    (ds / "X" / "c" / "3" / "0").rename(ds / "X" / "c" / "3" / "0.0123abcd.partial")
    report = verify_dataset(ds)
    assert not report["ok"]
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("X/c/3/0", "missing")]


# -- repairing from a moved or copied input (issue 29, item 3) --------------------------------


def test_repair_from_a_byte_identical_copy_of_the_input(labelled):
    # before: refused ("input source_path ...; input source_sha256 ..."), advising
    # --overwrite, a flag verify does not have
    from dkrp.feature_store import verify_store

    store = labelled / "f.zarr"
    _damage_labels(store)
    _damage(store)
    shutil.copytree(labelled / "x.zarr", labelled / "copy.zarr")
    shutil.rmtree(labelled / "x.zarr")  # the recorded input is gone
    report = verify_store(store, repair=True, input=labelled / "copy.zarr")
    assert report["ok"] and report["repaired"] == [1, 4]
    assert report["repaired_labels"] == [1, 4]
    assert store_digest(store) == store_digest(labelled / "clean.zarr")  # every file


def test_dkrp_verify_refusing_another_input_advises_only_its_own_flags(stores):
    # before: "... or pass overwrite=True (--overwrite) to replace it", which verify lacks
    store = stores / "f.zarr"
    _damage(store)
    np.save(stores / "x.npy", np.random.default_rng(8).standard_normal((230, 6)))
    ingest(stores / "x.npy", stores / "other.zarr", chunk_rows=CHUNK)
    before = store_digest(store)
    r = CliRunner().invoke(main, ["verify", str(store), "--repair", "--input",
                                  str(stores / "other.zarr")])
    assert r.exit_code == 1, r.output
    assert (f"Cannot repair {store}: the input {stores / 'other.zarr'} is not the one it was "
            "made from: input edge_rows_sha256: store ") in r.output
    assert ("Nothing was changed. Pass the input the store was made from (--input PATH), or "
            "featurize that input again into a new store.") in r.output
    assert "overwrite" not in r.output
    assert store_digest(store) == before
    # and the store's own input repairs it (a store without labels, on this process)
    from dkrp.feature_store import verify_store

    report = verify_store(store, repair=True)
    assert report["ok"] and report["repaired"] == [1, 4] and report["repaired_labels"] == []
    assert store_digest(store) == store_digest(stores / "clean.zarr")


# -- bad chunks of an unfinished store, and the recheck after a repair (issue 28, item 6) ----


def _unfinished(tmp_path):
    """A store of 5 chunks whose run was killed before chunk 3 (its Z chunk and done marker
    not written, ``complete`` not yet set): (path, input)."""
    X = da.from_array(np.random.default_rng(7).standard_normal((230, 6)), chunks=(CHUNK, 6))
    featurize_to_store(X, tmp_path / "f.zarr", _krp(), progress=False)
    store = tmp_path / "f.zarr"
    _killed_before_chunk_3(store)
    return store, X


def _killed_before_chunk_3(store):
    """Make ``store`` look as a run killed before chunk 3 leaves it."""
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"]["complete"] = False
    (store / "zarr.json").write_text(json.dumps(meta))
    (store / "Z" / "c" / "3" / "0").unlink()
    (store / "done" / "c" / "3").unlink()


def test_a_corrupt_done_marker_of_an_unfinished_store_is_bad_not_also_pending(tmp_path):
    # before: the chunk was counted twice, as bad and as pending (3 - 1 done = 2 pending)
    from dkrp.feature_store import verify_store

    store, X = _unfinished(tmp_path)
    assert verify_store(store)["pending"] == 1  # chunk 3
    marker = store / "done" / "c" / "0"
    flip_byte(marker, offset=marker.stat().st_size // 2)
    (store / "Z" / "c" / "1" / "0").unlink()  # chunk 1 is marked done: its loss is bad too
    report = verify_store(store)
    assert not report["ok"] and report["bad_chunks"] == [0, 1] and report["pending"] == 1
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [
        ("Z/c/1/0", "missing"), ("done/c/0", "corrupt")]  # not Z/c/3/0: not written yet
    assert report["advice"] == (f"Run `dkrp verify {store} --repair` to recompute the 2 bad "
                                "chunk(s) of Z from the spec and the input.")
    repaired = verify_store(store, repair=True, input=X)
    assert repaired["ok"] and repaired["repaired"] == [0, 1] and repaired["pending"] == 1
    assert repaired["advice"] == ("The store is incomplete: 1 of 5 chunks are not written "
                                  "yet. Run the same featurize command again to finish it.")
    assert verify_store(store)["bad_chunks"] == [] and verify_store(store)["pending"] == 1


def test_a_damaged_label_chunk_of_an_unfinished_store_is_bad_though_its_z_is_pending(labelled):
    # the labels are written whole before the first chunk of Z: a run killed before chunk 3
    # still holds chunk 3 of y, and its damage is not "not written yet" (a rerun of
    # featurize writes Z's chunks, never y's again)
    from dkrp.feature_store import verify_store

    store = labelled / "f.zarr"
    _killed_before_chunk_3(store)
    chunk = store / "y" / "c" / "3"
    flip_byte(chunk, offset=chunk.stat().st_size // 2)
    report = verify_store(store)
    assert not report["ok"] and report["bad_labels"] == [3] and report["bad_chunks"] == []
    assert report["pending"] == 1
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("y/c/3", "corrupt")]
    assert "--repair" in report["advice"]
    repaired = verify_store(store, repair=True)  # from the recorded input's own labels
    assert repaired["repaired_labels"] == [3] and repaired["ok"] and repaired["pending"] == 1
    assert chunk.read_bytes() == (labelled / "clean.zarr" / "y" / "c" / "3").read_bytes()


def test_a_label_chunk_whose_file_is_gone_is_still_bad_on_the_recheck_after_a_repair(labelled):
    # before: the recheck only read the chunks back, and a missing chunk of y reads as the
    # fill value without an error: a repair that did not write a label chunk said OK
    from dkrp.feature_store.verify import _recheck_labels

    store = labelled / "f.zarr"
    assert _recheck_labels(store, [1, 4]) == []
    (store / "y" / "c" / "4").unlink()
    assert _recheck_labels(store, [1, 4]) == [4]
    chunk = store / "y" / "c" / "1"
    flip_byte(chunk, offset=chunk.stat().st_size // 2)
    assert _recheck_labels(store, [4, 1]) == [1, 4]
    assert _recheck_labels(store, [0, 2, 3]) == []
    from dkrp.feature_store import verify_store

    assert verify_store(store)["advice"] == (f"Run `dkrp verify {store} --repair` to copy the 2 "
                                             "bad chunk(s) of the labels y from the input.")


def test_the_check_after_a_repair_names_every_chunk_of_z_still_missing_or_bad(stores):
    # what verify --repair reports when a rewrite did not take: each way a chunk can stay bad
    import zarr

    from dkrp.feature_store.verify import _recheck

    store = stores / "f.zarr"
    assert _recheck(store, [0, 1, 2, 3, 4]) == []
    (store / "Z" / "c" / "4" / "0").unlink()  # Z file gone
    flip_byte(store / "Z" / "c" / "1" / "0")  # Z chunk corrupt
    (store / "done" / "c" / "2").unlink()  # marker gone
    zarr.open_array(str(store / "done"), mode="r+").with_config(
        {"write_empty_chunks": True})[3] = 0  # a marker that says not done
    assert (store / "done" / "c" / "3").is_file()
    assert _recheck(store, [0, 1, 2, 3, 4]) == [1, 2, 3, 4]
    marker = store / "done" / "c" / "0"
    flip_byte(marker, offset=marker.stat().st_size // 2)  # marker corrupt
    assert _recheck(store, [4, 0]) == [4, 0]


def test_verify_of_a_missing_path_or_a_folder_that_is_no_store_says_which(tmp_path):
    import zarr

    from dkrp.feature_store import FeatureStoreError, verify_features, verify_store

    with pytest.raises(FileNotFoundError, match=r"No store at .*nothere\.zarr: the path does "
                                                r"not exist\."):
        verify_store(tmp_path / "nothere.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FeatureStoreError, match=r"empty is not a dkrp dataset or feature store "
                                                r"\(attribute dkrp_format is None\)\."):
        verify_store(tmp_path / "empty")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").attrs["dkrp_format"] = "ensemble"
    with pytest.raises(FeatureStoreError, match=r"other\.zarr is not a dkrp dataset or feature "
                                                r"store \(attribute dkrp_format is 'ensemble'\)"):
        verify_store(tmp_path / "other.zarr")
    with pytest.raises(FeatureStoreError, match=r"other\.zarr is not a dkrp feature store\."):
        verify_features(tmp_path / "other.zarr")
    with pytest.raises(FeatureStoreError, match=r"empty is not a dkrp feature store\."):
        verify_features(tmp_path / "empty")


def test_verify_of_a_dataset_store_reads_on_the_client_given(stores, cluster):
    # a callable client (the CLI's lazy cluster) is not started just to check a dataset
    from distributed import get_task_stream

    from dkrp.feature_store import verify_store

    _, client = cluster
    with dask.config.set(scheduler="sync"):  # not the cluster, unless it is given
        with get_task_stream(client) as stream:
            report = verify_store(stores / "x.zarr", client=client)
        assert report["ok"] and report["format"] == "dataset" and len(stream.data) >= 1

        def lazy():
            raise AssertionError("the cluster was started")

        with get_task_stream(client) as stream:
            assert verify_store(stores / "x.zarr", client=lazy)["ok"]
        assert stream.data == []


def test_a_repair_reports_its_progress_to_a_callback_and_is_quiet_by_default(stores, capfd):
    from dkrp.feature_store import verify_features, verify_store

    store = stores / "f.zarr"
    _damage(store)
    calls = []
    report = verify_store(store, repair=True, progress=lambda done, total: calls.append(
        (done, total)))
    assert report["ok"] and sorted(calls) == [(4, 5), (5, 5)]  # 3 of 5 chunks were fine
    _damage(store)
    capfd.readouterr()
    report = verify_store(store, repair=True)
    assert report["ok"] and report["advice"] is None
    _damage(store)
    assert verify_features(store, repair=True)["ok"]
    assert capfd.readouterr().err == ""  # no progress bar
    assert store_digest(store) == store_digest(stores / "clean.zarr")


def test_the_report_of_a_sound_store_in_full_and_a_repair_of_it_needs_no_input(stores):
    from dkrp.feature_store import verify_store

    store = stores / "f.zarr"
    sound = {
        "format": "features", "path": str(store), "complete": True, "ok": True,
        "checksums": True, "arrays": {"Z": {"chunks": 5, "checksums": True},
                                      "done": {"chunks": 5, "checksums": True}},
        "chunks_checked": 10, "problems": [], "bad_chunks": [], "bad_labels": [],
        "pending": 0, "repaired": [], "repaired_labels": [], "advice": None,
    }
    assert verify_store(store) == sound
    shutil.rmtree(stores / "x.zarr")  # nothing to repair: the input is not opened
    assert verify_store(store, repair=True) == sound
    _damage(store)
    report = verify_store(store)
    assert report["advice"] == (f"Run `dkrp verify {store} --repair` to recompute the 2 bad "
                                "chunk(s) of Z from the spec and the input.")


def test_a_lazy_client_is_started_only_when_there_is_something_to_repair(stores, cluster):
    from dkrp.feature_store import verify_store

    _, client = cluster
    started = []

    def lazy():
        started.append(1)
        return client

    store = stores / "f.zarr"
    assert verify_store(store, client=lazy)["ok"]
    assert verify_store(store, client=lazy, repair=True)["ok"] and started == []
    _damage(store)
    assert verify_store(store, client=lazy, repair=True)["repaired"] == [1, 4]
    assert started == [1]
    assert store_digest(store) == store_digest(stores / "clean.zarr")



def test_verify_features_only_checks_a_damaged_store_unless_asked_to_repair(stores):
    from dkrp.feature_store import verify_features

    store = stores / "f.zarr"
    _damage(store)
    before = store_digest(store)
    report = verify_features(store)
    assert not report["ok"] and report["bad_chunks"] == [1, 4] and report["repaired"] == []
    assert store_digest(store) == before
