"""dkrp.feature_store: resumable, idempotent Zarr v3 output (dask's local scheduler).

The cluster-backed and kill tests are in test_reliability.py.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import store_digest

from dkrp import PolynomialRandomProjection, RandomFourierFeatures
from dkrp.feature_store import (
    FeatureStoreError,
    FeatureStoreMismatchError,
    open_features,
    plan_features,
    write_features,
)


def _krp(seed=3, **params):
    params = {"n_components": 40, "n_hyperplanes": 80, "random_state": seed, **params}
    return PolynomialRandomProjection(**params).fit_n_features(12)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((1000, 12))


def test_write_then_rerun_is_a_noop(tmp_path, data):
    X = da.from_array(data, chunks=(100, 12))
    krp = _krp()
    out = tmp_path / "f.zarr"
    summary = write_features(X, krp, out, progress=False)
    assert summary["chunks_written"] == 10 and summary["chunks_skipped"] == 0
    assert summary["rows"] == 1000 and summary["rows_per_second"] > 0
    assert summary["path"] == str(out.absolute())
    fs = open_features(out)
    assert fs.complete and fs.Z.chunks[0] == (100,) * 10
    assert np.array_equal(fs.Z.compute(), np.vstack(
        [krp.transform(data[s : s + 100]) for s in range(0, 1000, 100)]))
    assert fs.projector().spec_checksum_ == krp.spec_checksum_
    attrs = zarr.open_group(str(out), mode="r").attrs
    assert attrs["spec"]["checksum"] == krp.spec_checksum_
    assert attrs["manifest"]["numpy"] == np.__version__
    assert attrs["input"]["shape"] == [1000, 12]

    before = store_digest(out)
    again = write_features(X, krp, out, progress=False)
    assert again["chunks_written"] == 0 and again["chunks_skipped"] == 10
    assert store_digest(out) == before


def test_same_job_gives_byte_identical_stores(tmp_path, data):
    X = da.from_array(data, chunks=(100, 12))
    write_features(X, _krp(), tmp_path / "a.zarr", progress=False)
    write_features(X, _krp(), tmp_path / "b.zarr", progress=False)
    assert store_digest(tmp_path / "a.zarr") == store_digest(tmp_path / "b.zarr")
    write_features(X, _krp(seed=4), tmp_path / "c.zarr", progress=False)
    assert store_digest(tmp_path / "a.zarr") != store_digest(tmp_path / "c.zarr")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"projector": _krp(seed=4)}, "seed"),
        ({"projector": _krp(n_components=41)}, "n_components"),
        ({"dtype": "float32"}, "dtype"),
        ({"input": "other"}, "input edge_rows_sha256"),
        ({"projector": RandomFourierFeatures(n_components=40, random_state=3)
          .fit_n_features(12)}, "projector class"),
    ],
)
def test_resume_with_another_run_is_refused_and_store_unchanged(tmp_path, data, change, named):
    # R8
    X = da.from_array(data, chunks=(100, 12))
    out = tmp_path / "f.zarr"
    write_features(X, _krp(), out, progress=False)
    before = store_digest(out)
    other = X
    if change.get("input") == "other":
        other = da.from_array(data[::-1].copy(), chunks=(100, 12))
    with pytest.raises(FeatureStoreMismatchError, match=named) as info:
        write_features(other, change.get("projector", _krp()), out, progress=False,
                       dtype=change.get("dtype"))
    assert "Nothing was changed" in str(info.value) and "overwrite" in str(info.value)
    # named once (a map's n_components is also the store's: said once, not twice)
    assert len(re.findall(r"(?<!\w)" + re.escape(named) + r"[^:;]*: store", str(info.value))) == 1
    assert store_digest(out) == before
    # overwrite=True replaces it
    summary = write_features(other, change.get("projector", _krp()), out, progress=False,
                             dtype=change.get("dtype"), overwrite=True)
    assert summary["chunks_written"] == 10


def test_not_a_feature_store_is_never_removed(tmp_path, data):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FeatureStoreError, match="not a dkrp feature store"):
        write_features(da.from_array(data, chunks=(100, 12)), _krp(), out, progress=False)
    assert (out / "keep.txt").read_text() == "mine"


def test_incomplete_store_refused(tmp_path, data):
    # R10: a run that stopped at a NaN leaves an incomplete store, which readers refuse
    bad = data.copy()
    bad[713, 2] = np.nan  # partition 7, local row 13
    out = tmp_path / "f.zarr"
    with pytest.raises(ValueError, match=r"partition 7, local row 13, global row 713"):
        write_features(da.from_array(bad, chunks=(100, 12)), _krp(), out, progress=False)
    assert zarr.open_group(str(out), mode="r").attrs["complete"] is False
    with pytest.raises(FeatureStoreError, match="incomplete.*Run the same featurize command"):
        open_features(out)
    partial = open_features(out, allow_incomplete=True)
    assert not partial.complete
    assert np.isnan(partial.Z[700:800].compute()).all()  # never written: fill value NaN
    # without provenance the fingerprint sees shape, dtype and the edge rows only, so a
    # fixed row inside is a resume: the chunks not done (7 and any after it) are written
    done = np.asarray(zarr.open_array(str(out / "done"), mode="r")[:])
    summary = write_features(da.from_array(data, chunks=(100, 12)), _krp(), out, progress=False)
    assert summary["chunks_written"] == int((done == 0).sum()) >= 1
    assert open_features(out).complete


def test_describe_summarises_complete_and_incomplete_stores(tmp_path, data):
    krp = _krp()
    out = tmp_path / "f.zarr"
    write_features(da.from_array(data, chunks=(100, 12)), krp, out, progress=False)
    d = open_features(out).describe()
    spec = krp.to_spec()
    assert d == {
        "format": "features", "path": str(out.absolute()), "shape": (1000, 40),
        "dtype": "float64", "compute_dtype": "float64", "encoding": "float",
        "bytes_per_row": 320, "compressor": "none", "chunk_rows": 100, "complete": True,
        "chunks_done": 10,
        "n_chunks": 10, "projector": "PolynomialRandomProjection", "seed": spec["seed"],
        "params": spec["params"], "checksum": krp.spec_checksum_,
        "input": zarr.open_group(str(out), mode="r").attrs["input"],
        "manifest": zarr.open_group(str(out), mode="r").attrs["manifest"],
        "has_labels": False, "preprocessing": "none", "missing": [],
    }
    # an interrupted run: the summary counts the chunks still missing
    zarr.open_array(str(out / "done"), mode="r+")[3] = 0
    zarr.open_group(str(out), mode="r+").attrs["complete"] = False
    d = open_features(out, allow_incomplete=True).describe()
    assert not d["complete"] and (d["chunks_done"], d["n_chunks"]) == (9, 10)


def test_info_calls_a_store_with_a_deleted_label_chunk_incomplete(tmp_path, data):
    """`dkrp info` said "complete (10/10 chunks done)" of a store whose label chunk was
    deleted, while read_features and export refused it, and a dataset store with the same
    hole says INCOMPLETE (issue 29, case 8)."""
    from click.testing import CliRunner

    from dkrp.cli import main
    from dkrp.feature_store import write_plan
    from dkrp.stores import describe_store

    out = tmp_path / "f.zarr"
    plan = plan_features(da.from_array(data, chunks=(100, 12)), _krp(), out,
                         labels=np.arange(1000) % 3)
    write_plan(plan, _krp(), progress=False)
    assert describe_store(out)["complete"] and describe_store(out)["missing"] == []
    (out / "y" / "c" / "4").unlink()
    d = describe_store(out)
    assert not d["complete"] and d["missing"] == ["y/c/4"]
    assert (d["chunks_done"], d["n_chunks"]) == (10, 10)  # Z itself is whole
    r = CliRunner().invoke(main, ["info", str(out)])
    assert r.exit_code == 0, r.output
    assert ("chunk_rows 100, INCOMPLETE (10/10 chunks done; 1 missing file(s), first y/c/4: "
            f"dkrp verify {out} --repair copies it from the input)") in r.output


def test_misaligned_blocks_are_rechunked_onto_the_chunk_grid(tmp_path, data):
    # R11: irregular dask blocks would make two tasks share a Zarr chunk
    X = da.from_array(data, chunks=((300, 50, 250, 400), (12,)))
    krp = _krp()
    plan = plan_features(X, krp, tmp_path / "f.zarr")
    assert plan["action"] == "create" and plan["X"].chunks[0] == (400, 400, 200)
    write_features(X, krp, tmp_path / "f.zarr", progress=False)
    Z = open_features(tmp_path / "f.zarr").Z
    assert zarr.open_array(str(tmp_path / "f.zarr" / "Z"), mode="r").chunks == (400, 40)
    assert np.allclose(Z.compute(), krp.transform(data), rtol=1e-12, atol=1e-12)
    # a rerun with yet another chunking follows the store's grid: a no-op
    again = write_features(da.from_array(data, chunks=(128, 12)), krp, tmp_path / "f.zarr",
                           progress=False)
    assert again["chunks_written"] == 0


def test_progress_callback_and_float32(tmp_path, data):
    calls = []
    X = da.from_array(data.astype(np.float32), chunks=(250, 12))
    summary = write_features(X, _krp(), tmp_path / "f.zarr",
                             progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (4, 4) and summary["dtype"] == "float32"
    assert open_features(tmp_path / "f.zarr").Z.dtype == np.float32


def test_open_features_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No feature store"):
        open_features(tmp_path / "missing.zarr")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    with pytest.raises(FeatureStoreError, match="not a dkrp feature store"):
        open_features(tmp_path / "other.zarr")


def _faulty(data, state, times=1, row=300):
    from dkrp.testing.faulty import FaultyProjection

    return FaultyProjection(n_components=40, n_hyperplanes=80, random_state=3, fault="oserror",
                            trigger=float(data[row, 0]), times=times,
                            state_dir=str(state)).fit_n_features(12)


def test_retries_and_failures_naming_the_partition_on_the_local_scheduler(tmp_path, data):
    # R6 on dask's local scheduler (the cluster version is in test_reliability.py)
    import pickle

    from dkrp.feature_store import PartitionError
    from dkrp.testing.faulty import fault_pids

    X = da.from_array(data, chunks=(100, 12))
    write_features(X, _krp(), tmp_path / "ref.zarr", progress=False)
    reference = open_features(tmp_path / "ref.zarr").Z.compute()

    summary = write_features(X, _faulty(data, tmp_path / "a"), tmp_path / "ok.zarr",
                             progress=False, retries=2)
    assert len(fault_pids(tmp_path / "a")) == 1 and summary["chunks_written"] == 10
    assert np.array_equal(open_features(tmp_path / "ok.zarr").Z.compute(), reference)

    with pytest.raises(PartitionError, match=r"^Partition 3 \(rows 300\.\.399\) failed after 1 "
                       r"attempt: OSError: \[Errno 5\].*retries=N") as info:
        write_features(X, _faulty(data, tmp_path / "b"), tmp_path / "bad.zarr", progress=False)
    err = info.value
    assert isinstance(err.__cause__, OSError)
    assert (err.partition, err.rows, err.attempts) == (3, (300, 399), 1)
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.partition, copy.rows, copy.attempts) == (
        str(err), 3, (300, 399), 1)
    assert zarr.open_group(str(tmp_path / "bad.zarr"), mode="r").attrs["complete"] is False

    with pytest.raises(PartitionError, match="failed after 2 attempts: OSError"):
        write_features(X, _faulty(data, tmp_path / "c", times=2), tmp_path / "bad2.zarr",
                       progress=False, retries=1)
    with pytest.raises(ValueError, match="retries must be >= 0"):
        write_features(X, _krp(), tmp_path / "x.zarr", progress=False, retries=-1)


def test_a_failed_run_on_the_local_scheduler_leaves_a_store_that_no_longer_changes(
        tmp_path, data):
    # partition 0 fails at once while partitions 1-3 sleep before their maps: the run
    # raises only once those have written and marked their chunks (dask alone raised
    # first: 8 of 10 failing runs had a done marker appear after the error)
    from dkrp.feature_store import PartitionError
    from dkrp.testing.faulty import FaultyProjection

    faulty = FaultyProjection(n_components=40, n_hyperplanes=80, random_state=3,
                              fault="oserror", trigger=float(data[0, 0]), times=0,
                              state_dir=str(tmp_path / "state"), delay=0.4).fit_n_features(12)
    out = tmp_path / "f.zarr"
    with dask.config.set(scheduler="threads", num_workers=4), \
            pytest.raises(PartitionError, match="^Partition 0 "):
        write_features(da.from_array(data, chunks=(250, 12)), faulty, out, progress=False)
    done = zarr.open_array(str(out / "done"), mode="r")[:].tolist()
    assert done == [0, 1, 1, 1]  # (4 threads: every other partition had started)
    threading.Event().wait(0.6)
    assert zarr.open_array(str(out / "done"), mode="r")[:].tolist() == done


def test_resume_removes_temporary_files_of_killed_writers(tmp_path, data, caplog):
    # zarr writes chunk files via "<chunk>.<uuid>.partial"; a SIGKILL can leave one
    bad = data.copy()
    bad[713, 2] = np.nan
    out = tmp_path / "f.zarr"
    with pytest.raises(ValueError, match="partition 7"):
        write_features(da.from_array(bad, chunks=(100, 12)), _krp(), out, progress=False)
    stray = out / "Z" / "c" / "7" / "0.0123abcd.partial"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"half a chunk")
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.write"):
        write_features(da.from_array(data, chunks=(100, 12)), _krp(), out, progress=False)
    assert not list(out.rglob("*.partial"))
    assert f"removing {stray.absolute()}, left by a writer killed mid-write" in caplog.messages
    clean = tmp_path / "clean.zarr"
    write_features(da.from_array(data, chunks=(100, 12)), _krp(), clean, progress=False)
    assert store_digest(out) == store_digest(clean)


def test_resume_keeps_the_chunk_rows_recorded_in_the_store(tmp_path, data):
    # issue 15: a store begun when the default chunking was another (here 300 rows per
    # chunk, where today's default keeps the input's 1000-row block) resumes on its own
    # grid: the recorded chunk_rows, not the current default
    from dkrp.feature_store import write_plan
    from dkrp.jobs import size_job

    X = da.from_array(data, chunks=(1000, 12))
    krp = _krp()
    assert plan_features(X, krp, tmp_path / "new.zarr")["attrs"]["chunk_rows"] == 1000
    out = tmp_path / "f.zarr"
    write_plan(plan_features(X, krp, out, chunk_rows=300), krp, progress=False)
    chunk_files = lambda: {k: v for k, v in store_digest(out).items()  # noqa: E731
                           if k.startswith("Z/c/")}
    before = chunk_files()
    (out / "Z" / "c" / "2" / "0").unlink()  # as if the run had been killed before chunk 2
    assert size_job(X, krp, out)["chunk_rows"] == 300
    plan = plan_features(X, krp, out)
    assert plan["action"] == "resume" and plan["attrs"]["chunk_rows"] == 300
    summary = write_features(X, krp, out, progress=False)
    assert summary["chunks_written"] == 1 and summary["chunks_skipped"] == 3
    assert chunk_files() == before
    assert open_features(out).Z.compute().tobytes() == np.vstack(
        [krp.transform(data[s:s + 300]) for s in range(0, 1000, 300)]).tobytes()


def test_resume_with_another_explicit_chunk_rows_is_refused_naming_the_grid(tmp_path, data):
    # an explicit chunk_rows that is not the grid a store was started on used to be
    # ignored silently on resume; it is refused, saying the grid and what to do, and the
    # store is left as it was; the same value, or none, resumes as before
    from dkrp.feature_store import write_plan

    X = da.from_array(data, chunks=(1000, 12))
    krp = _krp()
    out = tmp_path / "f.zarr"
    write_plan(plan_features(X, krp, out, chunk_rows=300), krp, progress=False)
    for partial in (False, True):
        if partial:
            (out / "Z" / "c" / "2" / "0").unlink()  # as if killed before chunk 2
        before = store_digest(out)
        with pytest.raises(FeatureStoreMismatchError) as info:
            plan_features(X, krp, out, chunk_rows=200)
        message = str(info.value)
        assert message.startswith(f"The feature store {out.absolute()} was started with 300 "
                                  "rows per chunk, but chunk_rows=200 was given")
        assert "Nothing was changed" in message
        assert "without chunk_rows or with chunk_rows=300" in message
        assert "write to a new path" in message
        assert store_digest(out) == before
        for rows in (None, 300):
            plan = plan_features(X, krp, out, chunk_rows=rows)
            assert plan["attrs"]["chunk_rows"] == 300 and plan["X"].chunks[0][0] == 300
            assert plan["action"] == ("resume" if partial else "noop")
            assert plan["missing"] == int(partial)
    summary = write_plan(plan_features(X, krp, out, chunk_rows=300), krp, progress=False)
    assert summary["chunks_written"] == 1 and summary["chunks_skipped"] == 3
    # another run's store: every difference is named, the grid among them
    with pytest.raises(FeatureStoreMismatchError,
                       match=r"made by another run: seed \(random_state\): store 3, this run "
                             r"4; rows per chunk: store 300, this run 200"):
        plan_features(X, _krp(4), out, chunk_rows=200)
    # overwrite=True builds the replacement on the grid asked for, discarding one that a
    # killed overwrite run left on the old grid
    from dkrp.feature_store.plan import overwrite_sibling

    sibling = overwrite_sibling(out)
    write_plan(plan_features(X, krp, sibling, chunk_rows=300), krp, progress=False)
    plan = plan_features(X, krp, out, chunk_rows=200, overwrite=True)
    assert plan["build_path"] == sibling and plan["replace"] and plan["action"] == "create"
    assert plan["attrs"]["chunk_rows"] == 200 and plan["attrs"]["n_chunks"] == 5
    write_plan(plan, krp, progress=False)
    fs = open_features(out)
    assert fs.attrs["chunk_rows"] == 200 and fs.Z.chunks[0] == (200,) * 5
    assert fs.Z.compute().tobytes() == np.vstack(
        [krp.transform(data[s:s + 200]) for s in range(0, 1000, 200)]).tobytes()


def test_overwrite_through_a_symlink_replaces_the_real_store(tmp_path, data, caplog):
    # the link keeps pointing at the real store, which is what gets replaced; a
    # ".<name>.replaced" left by a run killed between the two renames is removed first
    X = da.from_array(data, chunks=(100, 12))
    real, link = tmp_path / "real.zarr", tmp_path / "link.zarr"
    write_features(X, _krp(3), real, progress=False)
    link.symlink_to(real, target_is_directory=True)
    aside = tmp_path / ".real.zarr.replaced"
    aside.mkdir()
    (aside / "zarr.json").write_text("{}")
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.write"):
        write_features(X, _krp(4), link, overwrite=True, progress=False)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert open_features(real).projector().random_state == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.zarr", "real.zarr"]
    assert (f"removing {aside.absolute()}, a replaced store left by a killed run"
            in caplog.messages)
    assert f"replaced {real.resolve()}" in caplog.messages
    clean = tmp_path / "clean" / "real.zarr"
    write_features(X, _krp(4), clean, progress=False)
    assert store_digest(real) == store_digest(clean)


# -- planning helpers (survivors of the mutation run over plan.py, tests/MUTATION.md) ----


def test_regular_chunk_rows_is_the_grid_or_none():
    from dkrp.feature_store.plan import _regular_chunk_rows

    assert _regular_chunk_rows(()) is None
    assert _regular_chunk_rows((100, 100, 50)) == 100
    assert _regular_chunk_rows((100, 100)) == 100  # a full last chunk
    assert _regular_chunk_rows((1, 1, 1)) == 1
    for chunks in ((100, 50, 100), (100, 50, 50), (100, 150), (0,), (0, 0)):
        assert _regular_chunk_rows(chunks) is None, chunks


def test_choose_chunk_rows_in_whole_row_blocks():
    from dkrp.feature_store.plan import TARGET_CHUNK_BYTES, choose_chunk_rows

    assert TARGET_CHUNK_BYTES == 64 * 2**20
    # 64 MiB / 100 B = 671088 rows, down to a multiple of 2048
    assert choose_chunk_rows(10**6, 100) == 669696
    assert choose_chunk_rows(10**6, 1000, 2_048_000) == 2048
    assert choose_chunk_rows(10**6, 1000, 2_047_000) == 1536  # below 2048: of 512
    assert choose_chunk_rows(10**6, 1000, 1_000_000) == 512
    assert choose_chunk_rows(10**6, 1000, 511_999) == 511  # below 512: as many as fit
    assert choose_chunk_rows(10**6, 1000, 999) == 1  # at least one row
    assert choose_chunk_rows(300, 100) == 300  # never more than the input has
    assert choose_chunk_rows(0, 100) == 1
    assert choose_chunk_rows(10**9, 0, 5000) == 4096  # a zero row size counts as 1 byte


def test_task_memory_and_new_chunk_rows():
    from dkrp.feature_store.plan import new_chunk_rows, task_memory

    # input block and its cast (3 x (8 + 4) B per row), three output blocks (3 x 5 x 4 B)
    assert task_memory(10, 3, 8, 5, 4) == 10 * 3 * 12 + 3 * 10 * 5 * 4
    assert task_memory(10, 3, 8, 5, 4, model_bytes=7) == 967
    X = da.zeros((1000, 12), chunks=(300, 12))
    assert new_chunk_rows(X, 320, chunk_rows=1) == 1
    assert new_chunk_rows(X, 320) is None  # the input's chunks fit: kept
    assert new_chunk_rows(X, 320, max_chunk_bytes=300 * 320) is None
    assert new_chunk_rows(X, 320, max_chunk_bytes=300 * 320 - 1) == 299


def test_output_that_is_inside_or_holds_the_input_is_refused(tmp_path):
    from dkrp.feature_store.plan import check_output_path

    src = tmp_path / "in.zarr"
    src.mkdir()
    for out, what in ((src, "is the input"), (src / "f.zarr", "is inside the input"),
                      (tmp_path, "contains the input")):
        with pytest.raises(FeatureStoreError, match=(
                rf"^The output {out} {what} {src}: featurize never writes over its own "
                r"input\. Nothing was changed; choose another output path\.$")):
            check_output_path(out, input_path=src)
    check_output_path(tmp_path / "beside.zarr", input_path=src)


def test_write_features_passes_its_options_to_the_plan(tmp_path, data):
    X = da.from_array(data, chunks=(500, 12))
    krp = _krp()
    out = tmp_path / "a.zarr"
    write_features(X, krp, out, progress=False, source={"path": "/data/x.npy", "n": 1},
                   store_dtype="float32", compressor="zstd")
    fs = open_features(out)
    assert fs.attrs["input"]["source_path"] == "/data/x.npy"
    assert fs.attrs["compressor"] == "zstd" and fs.Z.dtype == np.float32
    fingerprint = dict(fs.attrs["input"], source_path="/elsewhere/x.npy")
    other = tmp_path / "b.zarr"
    write_features(X, krp, other, progress=False, fingerprint=fingerprint)
    assert open_features(other).attrs["input"] == fingerprint
    # retries are checked before the store is: a bad value is named even here
    with pytest.raises(ValueError, match=r"^retries must be >= 0, got -1\.$"):
        write_features(X, _krp(9), out, progress=False, retries=-1)


def test_write_features_bits_and_progress_bar(tmp_path, capsys):
    from dkrp import SignProductEmbedding

    X = np.random.default_rng(1).standard_normal((300, 6))
    est = SignProductEmbedding(n_components=20, random_state=2).fit(X)
    out = tmp_path / "bits.zarr"
    write_features(da.from_array(X, chunks=(100, 6)), est, out, bits=True)  # progress=True
    assert "featurize" in capsys.readouterr().err  # the tqdm bar, on stderr
    fs = open_features(out)
    assert fs.encoding == "bits" and fs.Z.dtype == np.uint8
    assert np.array_equal(fs.Z.compute(), est.transform_bits(X))


def test_write_features_runs_on_the_client_it_is_given(tmp_path, data):
    from distributed import Client, get_task_stream

    from dkrp.parallel import start_local_cluster

    X = da.from_array(data, chunks=(250, 12))
    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as client:
        with get_task_stream(client) as stream:
            write_features(X, _krp(), tmp_path / "f.zarr", client=client, progress=False)
        assert len(stream.data) >= 4  # the four chunk tasks ran on its worker


def test_write_plan_labels_summary_and_checks(tmp_path, data, capsys, caplog):
    from dkrp import read_features
    from dkrp.feature_store import write_plan
    from dkrp.feature_store.plan import overwrite_sibling

    X = da.from_array(data, chunks=(250, 12))
    krp = _krp()
    out = tmp_path / "f.zarr"
    plan = plan_features(X, krp, out, labels=np.arange(1000) % 7)
    with pytest.raises(ValueError, match=r"^retries must be >= 0, got -1\.$"):
        write_plan(plan, krp, retries=-1)
    plan["seconds"] = 1000.0  # the planning time is counted in the run's
    summary = write_plan(plan, krp)  # progress=True by default: a bar on stderr
    assert "featurize" in capsys.readouterr().err
    assert summary["seconds"] >= 1000.0 and summary["chunks_written"] == 4
    Z, y = read_features(out)
    assert np.array_equal(y, np.arange(1000) % 7) and Z.shape == (1000, 40)
    again = write_plan(plan_features(X, krp, out), krp, progress=False)
    assert again["path"] == str(out.absolute()) and again["chunks_written"] == 0
    # a replacement left by another job is removed (and said so) before the new one
    sibling = overwrite_sibling(out)
    write_plan(plan_features(X, _krp(5), sibling), _krp(5), progress=False)
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.write"):
        write_plan(plan_features(X, _krp(6), out, overwrite=True), _krp(6), progress=False)
    assert (f"removing {sibling}, an unfinished replacement of another job"
            in caplog.messages)
    assert f"{sibling}: 4 of 4 chunks to write" in caplog.messages
    assert open_features(out).projector().random_state == 6 and not sibling.exists()


def test_write_plan_does_not_retry_by_default(tmp_path, data):
    # write_plan's own default retries=0 (write_features passes its own): a partition
    # that fails once is reported after 1 attempt, and the store stays incomplete
    from dkrp.feature_store import PartitionError, write_plan

    X = da.from_array(data, chunks=(100, 12))
    faulty = _faulty(data, tmp_path / "state")
    out = tmp_path / "f.zarr"
    with pytest.raises(PartitionError, match=r"^Partition 3 \(rows 300\.\.399\) failed after 1 "
                       r"attempt: OSError"):
        write_plan(plan_features(X, faulty, out), faulty, progress=False)
    assert zarr.open_group(str(out), mode="r").attrs["complete"] is False


def test_write_plan_summary_is_the_stores_own_numbers(tmp_path, data):
    # every key of the summary, for a float store (stored in another dtype than it is
    # computed in), a bit store and the no-op rerun of a legacy store (version 0.1.0)
    import json
    import shutil
    import time

    import dkrp
    from dkrp import SignProductEmbedding
    from dkrp.feature_store import write_plan
    from dkrp.io import open_dataset

    X = da.from_array(data, chunks=(250, 12))
    out = tmp_path / "f.zarr"
    plan = plan_features(X, _krp(), out, store_dtype="float32")
    plan["seconds"] = 0.0
    before = time.perf_counter()
    summary = write_plan(plan, _krp(), progress=False)
    elapsed = time.perf_counter() - before
    assert 0 < summary["seconds"] <= elapsed  # the run's own seconds, measured once
    assert summary["rows_per_second"] == 1000 / summary["seconds"]
    del summary["seconds"], summary["rows_per_second"]
    assert summary == {"path": str(out.absolute()), "rows": 1000, "n_components": 40,
                       "dtype": "float32", "encoding": "float", "chunks_written": 4,
                       "chunks_skipped": 0, "n_chunks": 4}

    spe = SignProductEmbedding(n_components=20, random_state=2).fit(data)
    bits = write_features(X, spe, tmp_path / "b.zarr", bits=True, progress=False)
    assert (bits["encoding"], bits["dtype"], bits["n_components"]) == ("bits", "uint8", 20)

    fixtures = Path(__file__).parent / "fixtures" / "v0_1_0"
    store = tmp_path / "legacy.zarr"
    shutil.copytree(fixtures / "features.zarr", store)
    krp = dkrp.from_spec(json.loads((fixtures / "krp.spec.json").read_text()))
    plan = plan_features(open_dataset(fixtures / "dataset.zarr").X, krp, store)
    assert plan["action"] == "noop"
    plan["seconds"] = 0.0
    before = time.perf_counter()
    noop = write_plan(plan, krp, progress=False)
    assert 0 < noop["seconds"] <= time.perf_counter() - before
    assert noop["rows_per_second"] == noop["rows"] / noop["seconds"]  # taken: microseconds
    assert (noop["encoding"], noop["chunks_written"], noop["chunks_skipped"]) == (
        "float", 0, noop["n_chunks"])


def test_new_chunk_rows_of_irregular_input_and_align_rows(caplog):
    from dkrp.feature_store.plan import _align_rows, new_chunk_rows

    # irregular blocks: the largest block's output is what must fit
    X = da.zeros((1000, 12), chunks=((100, 400, 300, 200), (12,)))
    assert new_chunk_rows(X, 320, max_chunk_bytes=400 * 320) is None
    assert new_chunk_rows(X, 320, max_chunk_bytes=400 * 320 - 1) == 399
    assert new_chunk_rows(X, 1, max_chunk_bytes=400) is None  # bytes, not rows / bytes

    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.plan"):
        Y, rows = _align_rows(X)  # the largest block's rows, on a regular grid
    assert (rows, Y.chunks) == (400, ((400, 400, 200), (12,)))
    assert caplog.messages == ["rechunking input rows (100, 400, 300, 200) -> 400 to align "
                               "with the output chunks"]
    assert np.array_equal(Y.compute(), X.compute())
    caplog.clear()
    regular = da.zeros((1000, 12), chunks=(300, 12))
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.plan"):
        same, rows = _align_rows(regular)
        assert same is regular and rows == 300  # already on a grid: the same array
        Y, rows = _align_rows(regular, chunk_rows=250)
        assert (rows, Y.chunks[0]) == (250, (250,) * 4)  # no short last chunk
        Y, rows = _align_rows(regular, chunk_rows=0)
        assert (rows, Y.chunks[0]) == (1, (1,) * 1000)  # at least one row
    assert caplog.messages == ["rechunking input rows (300, 300, 300, 100) -> 250 to align "
                               "with the output chunks",
                               "rechunking input rows (300, 300, 300, 100) -> 1 to align "
                               "with the output chunks"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.plan"):
        six = da.zeros((1000, 12), chunks=((100,) * 5 + (50,) * 10, (12,)))
        _align_rows(six)
        empty = da.zeros((0, 12), chunks=(5, 12))
        same, rows = _align_rows(empty)
        assert same is empty and rows == 1  # (0,): the grid of no rows
        one = da.zeros((1, 12), chunks=(5, 12))
        same, rows = _align_rows(one)
        assert same is one and rows == 1
    assert caplog.messages == ["rechunking input rows (100, 100, 100, 100) -> 100 to align "
                               "with the output chunks"]


def test_overwrite_sibling_and_model_bytes(tmp_path, monkeypatch):
    from dkrp.feature_store.plan import model_bytes, overwrite_sibling

    real = tmp_path / "real.zarr"
    real.mkdir()
    (tmp_path / "link.zarr").symlink_to(real)
    assert overwrite_sibling(tmp_path / "link.zarr") == tmp_path / ".real.zarr.overwrite"
    # only a symlink *at* the path is followed: a symlinked parent keeps the user's name
    (tmp_path / "dir").symlink_to(tmp_path, target_is_directory=True)
    assert overwrite_sibling(tmp_path / "dir" / "f.zarr") == tmp_path / "dir" / ".f.zarr.overwrite"
    monkeypatch.chdir(tmp_path)
    assert overwrite_sibling("f.zarr") == tmp_path / ".f.zarr.overwrite"

    krp = _krp()
    arrays = [v for v in vars(krp).values() if isinstance(v, np.ndarray)]
    assert len(arrays) >= 2
    assert model_bytes(krp) == sum(a.nbytes for a in arrays)
    # arrays held in a list or tuple count too (no dkrp projector holds one yet: a plain
    # object with such attributes, as a user's projector might have)
    from types import SimpleNamespace

    held = SimpleNamespace(w=np.zeros(3), parts=[np.zeros(2), "x", np.zeros(5, np.float32)],
                           pair=(np.zeros(4, np.int8),), n=7)
    assert model_bytes(held) == 24 + 16 + 20 + 4


def test_check_output_path_accepts_and_refuses(tmp_path, monkeypatch):
    from dkrp.feature_store.plan import check_output_path

    monkeypatch.chdir(tmp_path)
    check_output_path("missing.zarr")
    (tmp_path / "empty").mkdir()
    check_output_path("empty")
    write_features(da.zeros((10, 12), chunks=(5, 12)), _krp(), tmp_path / "fs.zarr",
                   progress=False)
    check_output_path("fs.zarr")  # a feature store: only overwrite=True replaces it
    check_output_path("fs.zarr", input_path="elsewhere.zarr")

    (tmp_path / "file.npy").write_bytes(b"x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    zarr.open_group(str(tmp_path / "group.zarr"), mode="w")
    zarr.open_group(str(tmp_path / "ds.zarr"), mode="w").attrs["dkrp_format"] = "dataset"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name, kind in (("file.npy", "a file"), ("full", "a directory"),
                       ("group.zarr", "a directory"), ("ds.zarr", "a dkrp dataset store"),
                       ("dangling", "a file")):
        with pytest.raises(FeatureStoreError, match=(
                rf"^{tmp_path / name} exists and is not a dkrp feature store \(it is {kind}\); "
                r"featurize \(even with overwrite=True\) replaces only feature "
                r"stores\. Nothing was changed: choose another output path, or remove it "
                r"yourself\.$")):
            check_output_path(name)
    # relative paths and a symlink to the input are resolved before comparing
    (tmp_path / "in_link").symlink_to(tmp_path / "full", target_is_directory=True)
    with pytest.raises(FeatureStoreError, match=rf"^The output {tmp_path / 'in_link'} is the "
                       rf"input {tmp_path / 'full'}: "):
        check_output_path("in_link", input_path="full")


def test_plan_refuses_an_output_inside_the_input_named_by_source_or_fingerprint(tmp_path, data):
    from dkrp.feature_store.fingerprint import input_fingerprint

    X = da.from_array(data, chunks=(250, 12))
    src = tmp_path / "in.zarr"
    src.mkdir()
    named = rf"^The output {src / 'f.zarr'} is inside the input {src}: "
    with pytest.raises(FeatureStoreError, match=named):
        plan_features(X, _krp(), src / "f.zarr", source={"path": str(src)})
    fingerprint = input_fingerprint(X, source={"path": str(src)})
    assert fingerprint["source_path"] == str(src)
    with pytest.raises(FeatureStoreError, match=named):
        plan_features(X, _krp(), src / "f.zarr", fingerprint=fingerprint)
    assert not (src / "f.zarr").exists()
    # a source without a path, one that is not a dict (any JSON-able provenance is
    # fingerprinted), or none: nothing to compare
    assert plan_features(X, _krp(), src / "f.zarr", source={"name": "x"})["action"] == "create"
    assert plan_features(X, _krp(), src / "f.zarr", source=str(src))["action"] == "create"
    assert plan_features(X, _krp(), src / "f.zarr")["action"] == "create"


def test_plan_checks_one_label_per_row(tmp_path, data):
    X = da.from_array(data, chunks=(250, 12))
    out = tmp_path / "f.zarr"
    for labels, shape in ((np.zeros(999), "(999,)"), (np.zeros((1000, 1)), "(1000, 1)"),
                          ([0] * 1001, "(1001,)")):
        with pytest.raises(ValueError, match=rf"^labels have shape {re.escape(shape)}, but X "
                           r"has 1000 rows: one label per row is needed\.$"):
            plan_features(X, _krp(), out, labels=labels)
    assert not out.exists()
    plan = plan_features(X, _krp(), out, labels=[1] * 1000)  # a list: its length
    assert plan["labels"] == [1] * 1000


def test_plan_sizes_chunks_by_the_stored_row(tmp_path, data):
    # the rows per chunk follow the bytes of a *stored* row (dtype, store_dtype, bits)
    from dkrp import SignProductEmbedding
    from dkrp.feature_store.plan import model_bytes, task_memory

    X32 = da.from_array(data.astype(np.float32), chunks=(250, 12))
    X64 = da.from_array(data, chunks=(250, 12))
    krp = _krp()
    spe = SignProductEmbedding(n_components=40, random_state=2).fit_n_features(12)

    def rows(X, est, max_chunk_bytes, **options):
        plan = plan_features(X, est, tmp_path / "f.zarr", max_chunk_bytes=max_chunk_bytes,
                             **options)
        return plan["attrs"]["chunk_rows"], plan

    # 40 features: 160 B a row in float32, 320 in float64, 5 as bits
    got, plan = rows(X32, krp, 250 * 160)
    assert got == 250
    assert plan["task_memory"] == task_memory(250, 12, 4, 40, 4, model_bytes(krp))
    assert rows(X32, krp, 250 * 160 - 1)[0] < 250
    assert rows(X64, krp, 250 * 160)[0] < 250
    assert rows(X64, krp, 250 * 160, store_dtype="float32")[0] == 250
    assert rows(X64, spe, 250 * 5, bits=True)[0] == 250
    assert rows(X64, spe, 250 * 5 - 1, bits=True)[0] < 250


def test_plan_refusals_are_whole_messages(tmp_path, data):
    # the two refusals of a store started by another run, word for word
    from dkrp.feature_store import write_plan

    X = da.from_array(data, chunks=(1000, 12))
    out = tmp_path / "f.zarr"
    write_plan(plan_features(X, _krp(), out, chunk_rows=300), _krp(), progress=False)
    with pytest.raises(FeatureStoreMismatchError) as info:
        plan_features(X, _krp(), out, chunk_rows=200)
    assert str(info.value) == (
        f"The feature store {out.absolute()} was started with 300 rows per chunk, but "
        "chunk_rows=200 was given; a store keeps the chunk grid it was started with. Nothing "
        "was changed. To resume it, run again without chunk_rows or with chunk_rows=300; for "
        "200 rows per chunk, write to a new path (or pass overwrite=True to build the new "
        "store beside it and replace it once complete).")
    with pytest.raises(FeatureStoreMismatchError) as info:
        plan_features(X, _krp(4), out)
    assert str(info.value) == (
        f"The feature store {out.absolute()} was made by another run: seed (random_state): "
        "store 3, this run 4. Nothing was changed. Use another output path, or pass "
        "overwrite=True to replace it (the new store is built beside it and "
        "replaces it only once complete).")


def test_plan_builds_beside_the_store_only_to_replace_one(tmp_path, data, caplog):
    # overwrite=True builds in the hidden sibling only when there is a store of another
    # run to replace, or a replacement of this job to resume there
    from dkrp.feature_store import write_plan
    from dkrp.feature_store.plan import overwrite_sibling

    X = da.from_array(data, chunks=(250, 12))
    krp = _krp()
    out = tmp_path / "f.zarr"
    sibling = overwrite_sibling(out)
    plan = plan_features(X, krp, out, overwrite=True)  # nothing to replace: built in place
    assert (plan["action"], plan["build_path"], plan["replace"]) == ("create", out, False)
    # a replacement of this job, killed after chunk 0 (chunks 1-3 not marked done)
    write_plan(plan_features(X, krp, sibling), krp, progress=False)
    zarr.open_array(str(sibling / "done"), mode="r+")[1:] = 0
    zarr.open_group(str(sibling), mode="r+").attrs["complete"] = False
    plan = plan_features(X, krp, out)  # without overwrite the sibling is not looked at
    assert (plan["action"], plan["build_path"], plan["replace"]) == ("create", out, False)
    plan = plan_features(X, krp, out, overwrite=True)  # resumed where it stopped
    assert (plan["action"], plan["build_path"], plan["replace"]) == ("resume", sibling, True)
    assert plan["missing"] == 3
    # a complete store of this job is not rebuilt
    write_plan(plan, krp, progress=False)
    assert not sibling.exists()
    plan = plan_features(X, krp, out, overwrite=True)
    assert (plan["action"], plan["build_path"], plan["replace"]) == ("noop", out, False)
    # a sibling of another job is discarded, and said so
    write_plan(plan_features(X, _krp(5), sibling, dtype="float32"), _krp(5), progress=False)
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store.plan"):
        plan = plan_features(X, _krp(6), out, overwrite=True)
    assert (plan["action"], plan["build_path"], plan["replace"]) == ("create", sibling, True)
    assert caplog.messages == [f"discarding {sibling}, a replacement left by another job: "
                               "seed (random_state): store 5, this run 6; dtype: store "
                               "'float32', this run 'float64'; compute_dtype: store "
                               "'float32', this run 'float64'"]
    # a sibling that is not a feature store is never removed
    import shutil

    shutil.rmtree(sibling)
    sibling.mkdir()
    (sibling / "keep.txt").write_text("mine")
    with pytest.raises(FeatureStoreError) as info:
        plan_features(X, _krp(6), out, overwrite=True)
    assert str(info.value) == (f"{sibling} (where overwrite=True builds the new store) exists "
                               "and is not a dkrp feature store. Nothing was changed; remove "
                               "it yourself.")
    assert (sibling / "keep.txt").read_text() == "mine"


def test_plan_of_an_existing_store_and_what_it_returns(tmp_path, data):
    # a store with every chunk but no completion marker is resumed (to mark it), the
    # compressor is expected only of a store that recorded one, and the plan's own keys
    import json
    import shutil
    import time

    import dkrp
    from dkrp.feature_store import write_plan
    from dkrp.io import open_dataset

    X = da.from_array(data, chunks=(250, 12))
    krp = _krp()
    out = tmp_path / "f.zarr"
    before = time.perf_counter()
    plan = plan_features(X, krp, out, labels=np.zeros(1000), store_dtype="float16",
                         compressor="zstd")
    assert 0 <= plan["seconds"] <= time.perf_counter() - before
    assert plan["store"] == {"bits": False, "store_dtype": np.dtype(np.float16)}
    assert plan["attrs"]["has_labels"] is True
    write_plan(plan, krp, progress=False)
    assert open_features(out).describe()["has_labels"] is True
    assert "has_labels" not in plan_features(X, krp, tmp_path / "g.zarr")["attrs"]

    zarr.open_group(str(out), mode="r+").attrs["complete"] = False
    plan = plan_features(X, krp, out, store_dtype="float16", compressor="zstd")
    assert (plan["action"], plan["missing"]) == ("resume", 0)
    assert plan["attrs"]["compressor"] == "zstd"
    write_plan(plan, krp, progress=False)
    assert open_features(out).complete

    fixtures = Path(__file__).parent / "fixtures" / "v0_1_0"
    legacy = tmp_path / "legacy.zarr"
    shutil.copytree(fixtures / "features.zarr", legacy)
    spec = dkrp.from_spec(json.loads((fixtures / "krp.spec.json").read_text()))
    plan = plan_features(open_dataset(fixtures / "dataset.zarr").X, spec, legacy)
    assert plan["action"] == "noop" and "compressor" not in plan["attrs"]


# -- the chunk-write tasks (survivors of the mutation run over tasks.py, tests/MUTATION.md) --


def test_chunk_tasks_compute_in_the_run_dtype_and_store_what_is_asked(tmp_path, data):
    # float32 input is featurized in float32 (not in float64 and cast), a store dtype
    # holds the computed features cast once, and a value it cannot hold is refused,
    # naming the partition and the global row
    from dkrp.feature_store import write_plan

    krp = _krp()
    X32 = data.astype(np.float32)
    write_features(da.from_array(X32, chunks=(250, 12)), krp, tmp_path / "a.zarr",
                   progress=False)
    by_block = np.vstack([krp.transform(X32[s:s + 250]) for s in range(0, 1000, 250)])
    assert by_block.dtype == np.float32
    assert open_features(tmp_path / "a.zarr").Z.compute().tobytes() == by_block.tobytes()
    write_features(da.from_array(X32, chunks=(250, 12)), krp, tmp_path / "h.zarr",
                   progress=False, store_dtype="float16")
    assert open_features(tmp_path / "h.zarr").Z.compute().tobytes() == (
        by_block.astype(np.float16).tobytes())

    big = data.copy()
    big[350] *= 1e4  # partition 3: features of about 1e8, beyond float16's 65504
    out = tmp_path / "big.zarr"
    plan = plan_features(da.from_array(big, chunks=(100, 12)), krp, out, store_dtype="float16")
    with pytest.raises(ValueError, match=r"^Partition 3, row 350, component 0: the feature "
                       r"value \S+ does not fit float16 \(largest 65504; it would be stored "
                       r"as inf\)"):
        write_plan(plan, krp, progress=False)
    assert zarr.open_group(str(out), mode="r").attrs["complete"] is False


def test_retries_are_logged_and_the_final_failure_is_a_whole_message(tmp_path, data, caplog):
    from dkrp.feature_store import PartitionError

    X = da.from_array(data, chunks=(100, 12))
    out = tmp_path / "f.zarr"
    with caplog.at_level(logging.WARNING, logger="dkrp.feature_store.tasks"), \
            pytest.raises(PartitionError) as info:
        write_features(X, _faulty(data, tmp_path / "s", times=2), out, progress=False,
                       retries=1)
    cause = info.value.__cause__
    assert isinstance(cause, OSError)
    assert caplog.messages == [f"partition 3 failed (attempt 1 of 2), retrying: {cause!r}"]
    assert str(info.value) == (
        f"Partition 3 (rows 300..399) failed after 2 attempts: OSError: {cause}; the store "
        f"{out.absolute()} is not marked complete and its finished chunks are kept: fix the "
        "cause and run the same job again to write the missing chunks.")
    out = tmp_path / "g.zarr"
    with pytest.raises(PartitionError) as info:
        write_features(X, _faulty(data, tmp_path / "t"), out, progress=False)
    assert str(info.value) == (
        f"Partition 3 (rows 300..399) failed after 1 attempt: OSError: "
        f"{info.value.__cause__}; the store {out.absolute()} is not marked complete and its "
        "finished chunks are kept: fix the cause and run the same job again to write the "
        "missing chunks (or pass retries=N if the error is transient).")


def test_killed_worker_failures_and_the_store_token(tmp_path):
    # a partition that killed its workers (what a cluster of worker processes reports,
    # tests/test_reliability.py): the message and the attempts counted
    import dask
    from distributed import Client
    from distributed.core import Status
    from distributed.scheduler import KilledWorker, WorkerState

    from dkrp.feature_store.tasks import _partition_failure, _store_token, attempts_allowed
    from dkrp.parallel import start_local_cluster

    worker = WorkerState(address="tcp://127.0.0.1:4321", status=Status.running, pid=1,
                         name="w", nthreads=1, memory_limit=0, local_directory=str(tmp_path),
                         nanny=None, server_id="s")
    exc = KilledWorker("dkrp-write-abc-3", worker, 3)
    error = _partition_failure(exc, 3, (300, 399), tmp_path / "f.zarr", 4)
    assert str(error) == (
        f"Partition 3 (rows 300..399) killed its worker repeatedly (KilledWorker: {exc}); the "
        "scheduler gave it up after distributed.scheduler.allowed-failures worker deaths; the "
        f"store {tmp_path / 'f.zarr'} is not marked complete and its finished chunks are "
        "kept: fix the cause and run the same job again to write the missing chunks.")
    assert (error.partition, error.rows, error.attempts) == (3, (300, 399), 4)
    assert attempts_allowed(OSError(5, "EIO"), 2, None) == 3  # retries + 1
    with dask.config.set({"distributed.scheduler.allowed-failures": 5}):
        assert attempts_allowed(exc, 0, None) == 6  # no scheduler to ask: this process's setting
    with dask.config.set({"distributed.scheduler.allowed-failures": 7}):
        cluster = start_local_cluster(n_workers=1, threads_per_worker=1, processes=False)
    with cluster, Client(cluster, set_as_default=False) as client:
        # the scheduler's own setting, not this process's (3, dask's default, here)
        assert dask.config.get("distributed.scheduler.allowed-failures") == 3
        assert attempts_allowed(exc, 0, client) == 8

    assert _store_token(None) == _store_token({}) == ""
    assert _store_token({"bits": False, "store_dtype": None}) == ""
    assert _store_token({"bits": True, "store_dtype": None}) == "bits"
    assert _store_token({"bits": False, "store_dtype": np.dtype(np.float16)}) == "<f2"
    assert _store_token({"store_dtype": "float32"}) == "<f4"


def test_progress_bar_starts_at_the_chunks_already_written(tmp_path, data, capsys):
    # a resumed run's bar: "featurize", counted in chunks, from the 2 chunks on disk,
    # cleared when done (leave=False: no line left behind)
    X = da.from_array(data, chunks=(250, 12))
    out = tmp_path / "f.zarr"
    write_features(X, _krp(), out, progress=False)
    zarr.open_array(str(out / "done"), mode="r+")[2:] = 0
    zarr.open_group(str(out), mode="r+").attrs["complete"] = False
    capsys.readouterr()
    write_features(X, _krp(), out, progress=True)
    err = capsys.readouterr().err
    assert re.search(r"(^|\r)featurize:  50%\|[^|]*\| 2/4 \[[^]]*chunk/s\]", err), err
    assert not err.endswith("\n")


def test_progress_bar_counts_each_chunk_once(tmp_path):
    # every count the bar shows, with tqdm told to draw each update (its TQDM_* variables,
    # read when tqdm is imported: hence a fresh process): 1/4 .. 4/4, never past the total
    import os
    import subprocess
    import sys

    script = (
        "import dask.array as da, numpy as np\n"
        "from dkrp import PolynomialRandomProjection\n"
        "from dkrp.feature_store import write_features\n"
        "X = da.from_array(np.random.default_rng(0).standard_normal((1000, 12)), "
        "chunks=(250, 12))\n"
        "krp = PolynomialRandomProjection(n_components=40, n_hyperplanes=80, "
        "random_state=3).fit_n_features(12)\n"
        f"write_features(X, krp, {str(tmp_path / 'f.zarr')!r}, progress=True)\n"
    )
    env = {**os.environ, "TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1"}
    err = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stderr
    counts = re.findall(r"featurize:[^|]*\|[^|]*\| (\d+)/4 ", err)
    assert counts[-4:] == ["1", "2", "3", "4"] and set(counts) <= {"0", "1", "2", "3", "4"}, err


def test_chunk_tasks_on_a_client_retry_name_the_partition_and_store_as_asked(tmp_path, data,
                                                                           caplog):
    # the cluster path of the chunk tasks (Client.compute(retries=), as_completed), on an
    # in-process cluster whose worker runs in this process; the default client is used
    # when none is given
    from distributed import Client, get_task_stream

    from dkrp import SignProductEmbedding
    from dkrp.feature_store import PartitionError
    from dkrp.parallel import start_local_cluster
    from dkrp.testing.faulty import fault_pids

    X = da.from_array(data, chunks=(100, 12))
    X32 = da.from_array(data.astype(np.float32), chunks=(250, 12))
    krp = _krp()
    spe = SignProductEmbedding(n_components=20, random_state=2).fit_n_features(12)
    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        with Client(cluster, set_as_default=False) as client:
            write_features(X, _faulty(data, tmp_path / "a"), tmp_path / "ok.zarr",
                           client=client, progress=False, retries=1)
            # the last chunk's task, sent ahead of the others (it reads the input's last
            # row for a new store's fingerprint), is retried as they are
            write_features(X, _faulty(data, tmp_path / "e", row=900), tmp_path / "e.zarr",
                           client=client, progress=False, retries=1)
            with pytest.raises(PartitionError) as info:
                write_features(X, _faulty(data, tmp_path / "b"), tmp_path / "bad.zarr",
                               client=client, progress=False)
            write_features(X32, krp, tmp_path / "h.zarr", client=client, progress=False,
                           store_dtype="float16")
            write_features(X, spe, tmp_path / "b.zarr", client=client, progress=False,
                           bits=True)
        # the default client's own path: its scheduler retries a failed task (no in-task
        # retry, which would log a warning here)
        with Client(cluster) as default, get_task_stream(default) as stream, \
                caplog.at_level(logging.WARNING, logger="dkrp.feature_store.tasks"):
            write_features(X, _faulty(data, tmp_path / "c"), tmp_path / "d.zarr",
                           progress=False, retries=1)
        assert len(stream.data) >= 10  # the ten chunk tasks ran on the default client
        assert len(fault_pids(tmp_path / "c")) == 1
        assert [r for r in caplog.records if r.name == "dkrp.feature_store.tasks"] == []
    assert len(fault_pids(tmp_path / "a")) == 1  # failed once, then retried
    assert len(fault_pids(tmp_path / "e")) == 1
    assert open_features(tmp_path / "e.zarr").Z.compute().tobytes() == (
        krp.transform(data).tobytes())
    assert open_features(tmp_path / "ok.zarr").Z.compute().tobytes() == (
        krp.transform(data).tobytes())
    err = info.value
    assert str(err) == (
        f"Partition 3 (rows 300..399) failed after 1 attempt: OSError: {err.__cause__}; the "
        f"store {(tmp_path / 'bad.zarr').absolute()} is not marked complete and its finished "
        "chunks are kept: fix the cause and run the same job again to write the missing "
        "chunks (or pass retries=N if the error is transient).")
    assert (err.partition, err.rows, err.attempts) == (3, (300, 399), 1)
    assert isinstance(err.__cause__, OSError)
    by_block = np.vstack([krp.transform(data[s:s + 250].astype(np.float32))
                          for s in range(0, 1000, 250)])
    assert open_features(tmp_path / "h.zarr").Z.compute().tobytes() == (
        by_block.astype(np.float16).tobytes())
    assert np.array_equal(open_features(tmp_path / "b.zarr").Z.compute(),
                          spe.transform_bits(data))
    assert open_features(tmp_path / "d.zarr").Z.compute().tobytes() == (
        krp.transform(data).tobytes())


def _held(block, gate):
    """A row block held back until the file ``gate`` exists (module-level: dask pickles
    it, and a worker may import its own copy of this module)."""
    import time

    for _ in range(1200):  # at most a minute
        if block.size == 0 or Path(gate).exists():  # (dask calls it on an empty meta)
            break
        time.sleep(0.05)
    return block


def test_chunk_tasks_of_two_runs_at_once_on_one_client_are_their_own(tmp_path, data):
    # the task keys name the store: two runs of the same job into two stores at the same
    # time on one client share no task (a shared key would leave one store unwritten, and
    # its run waiting for ever: each run has a minute). Both finish at once in one process,
    # which also checks that consolidate() lets no zarr warning through (warnings are errors)
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    gate = tmp_path / "gate"
    X = da.from_array(data, chunks=(250, 12)).map_blocks(_held, str(gate), dtype=data.dtype)
    krp = _krp()
    errors = []

    def run(name):
        try:
            write_features(X, krp, tmp_path / name, client=client, progress=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as client:
        runs = [threading.Thread(target=run, args=(name,), daemon=True)
                for name in ("a.zarr", "b.zarr")]
        for thread in runs:
            thread.start()
        timer = threading.Timer(2.0, gate.touch)
        timer.start()
        for thread in runs:
            thread.join(timeout=60)
        timer.join()
        assert not any(thread.is_alive() for thread in runs), "a run never finished"
    assert errors == []

    assert open_features(tmp_path / "a.zarr").complete
    assert open_features(tmp_path / "b.zarr").complete
    assert store_digest(tmp_path / "a.zarr") == store_digest(tmp_path / "b.zarr")



def _held_inner(block, gate, block_info=None):
    """:func:`_held` for every row block but the first and the last (those the plan reads)."""
    index, count = block_info[0]["chunk-location"][0], block_info[0]["num-chunks"][0]
    return block if index in (0, count - 1) else _held(block, gate)


def test_a_new_store_on_a_client_sends_its_first_and_last_chunks_ahead(tmp_path, data):
    # The tasks of the first and last chunks return the input's edge rows for a new
    # store's fingerprint, so they are sent ahead of the others (priority=1): while the
    # only thread of the worker is held, the scheduler holds every chunk task, and ranks
    # those two before all the others. (Without the priority the two graphs' tasks can
    # share a generation, and the edge chunks then rank by their order in their graph.)
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    gate = tmp_path / "gate"
    X = da.from_array(data, chunks=(100, 12))
    errors = []

    def run():
        try:
            write_features(X, _krp(), tmp_path / "s.zarr", client=client, progress=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    def ranks():
        return {int(str(key).rsplit("-", 1)[1]): ts.priority
                for key, ts in list(cluster.scheduler.tasks.items())
                if str(key).startswith("dkrp-write-")}

    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as client:
        held = client.submit(_held, np.ones(1), str(gate), pure=False)
        writer = threading.Thread(target=run)
        writer.start()
        try:
            for _ in range(1200):  # at most a minute, until all ten chunk tasks are known
                if len(ranks()) == 10:
                    break
                threading.Event().wait(0.05)
            priority = ranks()
        finally:
            gate.touch()
            writer.join(120)
        held.result()
    assert not errors and not writer.is_alive()
    assert sorted(priority) == list(range(10))
    assert max(priority[0], priority[9]) < min(priority[i] for i in range(1, 9)), priority
    assert open_features(tmp_path / "s.zarr").Z.compute().tobytes() == (
        _krp().transform(data).tobytes())


def test_a_failed_run_on_a_client_cancels_its_pending_chunks(tmp_path, data):
    # the failure of one partition ends the run: the chunks not yet written are cancelled,
    # not left to run on the cluster while the caller holds the exception (a notebook
    # keeps the last traceback, and with it the run's futures). Partitions 1-8 are held
    # until partition 0 has failed; a thread for each, so none waits behind another.
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    bad = data.copy()
    bad[5, 0] = np.nan  # partition 0 fails; the plan reads only the first and last rows
    gate = tmp_path / "gate"
    X = da.from_array(bad, chunks=(100, 12)).map_blocks(_held_inner, str(gate),
                                                         dtype=bad.dtype)
    out = tmp_path / "f.zarr"
    with start_local_cluster(n_workers=1, threads_per_worker=10, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(ValueError, match="NaN") as info:
            write_features(X, _krp(), out, client=client, progress=False)
        gate.touch()
        for _ in range(100):  # until the held blocks and whatever follows them are done
            if not any(client.processing().values()):
                break
            threading.Event().wait(0.05)
        threading.Event().wait(0.5)
        written = int(zarr.open_array(str(out / "done"), mode="r")[:].sum())
        assert info.value.__traceback__ is not None  # the run's frames are still held
    assert written <= 1, f"{written} chunks were written after the run failed"


@pytest.mark.parametrize(("dtype", "options"), [
    (np.float64, {}), (np.float32, {}), (np.float32, {"store_dtype": "float16"}),
    (np.float64, {"compressor": "zstd"}), (np.float64, {"bits": True}),
])
def test_chunk_files_are_the_bytes_zarr_writes(tmp_path, data, dtype, options):
    # whole chunks of a raw + crc32c array are written by dkrp (_chunks.write_rows), not
    # by zarr: every chunk file must be the one zarr writes for the same values
    from dkrp import SignProductEmbedding

    X = da.from_array(data.astype(dtype), chunks=(300, 12))  # 3 whole chunks, 1 partial
    est = (SignProductEmbedding(n_components=20, random_state=2).fit_n_features(12)
           if options.get("bits") else _krp())
    out = tmp_path / "f.zarr"
    write_features(X, est, out, progress=False, **options)
    Z = zarr.open_array(str(out / "Z"), mode="r")
    ref = zarr.create_array(str(tmp_path / "ref"), shape=Z.shape, chunks=Z.chunks,
                            dtype=Z.dtype, fill_value=Z.fill_value, serializer=Z.serializer,
                            compressors=Z.compressors, config={"write_empty_chunks": True})
    ref[:] = Z[:]  # (a read checks every chunk's crc32c)
    ours = {p.relative_to(out / "Z"): p.read_bytes() for p in (out / "Z" / "c").rglob("*")
            if p.is_file()}
    theirs = {p.relative_to(tmp_path / "ref"): p.read_bytes()
              for p in (tmp_path / "ref" / "c").rglob("*") if p.is_file()}
    assert len(ours) == 4 and ours.keys() == theirs.keys()
    assert all(ours[k] == theirs[k] for k in ours)
    assert not list(out.rglob("*.partial"))


def test_an_input_without_rows_is_refused_and_nothing_written(tmp_path):
    # issue 29, case 8: it made a "complete" store of 0 rows, "nothing to do" on the first run
    out = tmp_path / "f.zarr"
    empty = da.zeros((0, 12), chunks=(100, 12))
    with pytest.raises(ValueError, match=r"X has no rows \(shape \(0, 12\)\): nothing to "
                                         r"featurize"):
        write_features(empty, _krp(), out, progress=False)
    assert not out.exists()
    with pytest.raises(ValueError, match=r"/z\.npy has no rows"):
        plan_features(empty, _krp(), out, source={"path": str(tmp_path / "z.npy")})
    assert not out.exists()
    # the job refuses it before a data-dependent map is fitted or a cluster is started
    from dkrp import Nystroem, featurize_to_store

    np.save(tmp_path / "z.npy", np.zeros((0, 12)))
    with pytest.raises(ValueError, match=r"/z\.npy has no rows \(shape \(0, 12\)\)"):
        featurize_to_store(tmp_path / "z.npy", out, Nystroem(n_components=4),
                           client=lambda: pytest.fail("a cluster was started"))
    assert not out.exists()
