"""When a feature store records its input's fingerprint (issue 15 part 3).

A new store's run on a cluster does not read the input's first and last rows before
its first task: the tasks of the first and last chunks, sent ahead of the others,
return them, and the fingerprint is written as soon as both are in. A store whose run
was stopped before that is started afresh; a run that fails records it on its way out,
so the next run resumes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from dkrp import PolynomialRandomProjection
from dkrp.errors import PartitionError
from dkrp.feature_store import (
    FeatureStoreMismatchError,
    input_fingerprint,
    open_features,
    plan_features,
    write_features,
)


def _krp(seed=3):
    return PolynomialRandomProjection(n_components=40, n_hyperplanes=80,
                                      random_state=seed).fit_n_features(12)


def _attrs(out):
    return zarr.open_group(str(out), mode="r").attrs.asdict()


def test_a_new_store_plans_without_reading_its_input(tmp_path):
    # the plan of a new store leaves the edge rows to the run; an existing one is
    # compared with the whole fingerprint
    X = da.from_array(np.random.default_rng(0).standard_normal((1000, 12)), chunks=(250, 12))
    out = tmp_path / "f.zarr"
    plan = plan_features(X, _krp(), out)
    assert plan["action"] == "create" and plan["attrs"]["input"]["edge_rows_sha256"] is None
    write_features(X, _krp(), out, progress=False)  # dask's local scheduler
    assert _attrs(out)["input"] == input_fingerprint(X)
    assert plan_features(X, _krp(), out)["attrs"]["input"] == input_fingerprint(X)


@pytest.mark.parametrize(("rows", "chunk_rows", "sparse"), [
    (1000, 300, False),  # four chunks, the last one short
    (200, 300, False),  # one chunk: first and last row from the same task
    (1000, 500, False),  # two chunks, both edge chunks: no other task
    (1000, 250, True),
])
def test_a_run_on_a_cluster_records_the_fingerprint_of_its_input(tmp_path, client, rows,
                                                                  chunk_rows, sparse):
    values = np.random.default_rng(rows).standard_normal((rows, 12))
    if sparse:
        values[values < 0.5] = 0
        X = da.from_array(sp.csr_matrix(values), chunks=(chunk_rows, 12),
                          asarray=False, meta=sp.csr_matrix((0, 12)))
    else:
        X = da.from_array(values, chunks=(chunk_rows, 12))
    source = {"path": str(tmp_path / "somewhere"), "name": "x"}
    out = tmp_path / "f.zarr"
    write_features(X, _krp(), out, client=client, progress=False, source=source)
    assert _attrs(out)["input"] == input_fingerprint(X, source=source)
    assert _attrs(out)["complete"] is True
    # and so a run of another input with the same shape is told apart
    other = values.copy()
    other[-1, 0] += 1.0
    X2 = da.from_array(sp.csr_matrix(other) if sparse else other, chunks=(chunk_rows, 12),
                       asarray=False if sparse else None,
                       meta=sp.csr_matrix((0, 12)) if sparse else None)
    with pytest.raises(FeatureStoreMismatchError, match="input edge_rows_sha256"):
        write_features(X2, _krp(), out, client=client, progress=False, source=source)


def _stopped_before_recording(out):
    """Make ``out`` look as a run killed before it recorded its input leaves it."""
    from dkrp._store import write_attrs

    group = zarr.open_group(str(out), mode="r+")
    attrs = group.attrs.asdict()
    attrs["complete"] = False
    attrs["input"]["edge_rows_sha256"] = None
    write_attrs(group, attrs)


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_store_whose_run_stopped_before_recording_its_input_starts_afresh(
        tmp_path, caplog, overwrite):
    # its chunks are of no known input: resuming it with another input of the same shape
    # would mix the two, so every chunk is written again
    from dkrp.feature_store.plan import overwrite_sibling

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1000, 12)), rng.standard_normal((1000, 12))
    out = tmp_path / "f.zarr"
    build = overwrite_sibling(out) if overwrite else out
    if overwrite:
        write_features(da.from_array(a, chunks=(250, 12)), _krp(5), out, progress=False)
    write_features(da.from_array(a, chunks=(250, 12)), _krp(), build, progress=False)
    _stopped_before_recording(build)
    X = da.from_array(b, chunks=(250, 12))
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store"):
        summary = write_features(X, _krp(), out, overwrite=overwrite, progress=False)
    assert summary["chunks_written"] == 4 and summary["chunks_skipped"] == 0
    assert (f"{build}: started afresh, its run was stopped before it recorded its input's "
            "first and last rows") in caplog.messages
    assert f"removing {build}, a store of a run stopped before it recorded its input" \
        in caplog.messages
    fs = open_features(out)
    assert np.array_equal(fs.Z.compute(), _krp().transform(b))
    assert _attrs(out)["input"] == input_fingerprint(X)
    assert not overwrite or not build.exists()


@pytest.mark.parametrize("row", [613, 13])  # partition 6 of 10; the first partition
def test_a_failed_run_on_a_cluster_records_its_fingerprint_so_the_next_resumes(tmp_path,
                                                                               client, row):
    data = np.random.default_rng(2).standard_normal((1000, 12))
    bad = data.copy()
    bad[row, 2] = np.nan
    out = tmp_path / "f.zarr"
    with pytest.raises(ValueError, match=f"global row {row}"):
        write_features(da.from_array(bad, chunks=(100, 12)), _krp(), out, client=client,
                       progress=False)
    X = da.from_array(data, chunks=(100, 12))
    assert _attrs(out)["input"] == input_fingerprint(X)  # the edge rows are the same
    done = np.asarray(zarr.open_array(str(out / "done"), mode="r")[:])
    summary = write_features(X, _krp(), out, client=client, progress=False)
    # resumed, not started afresh: every chunk marked done is kept, and the failed run
    # waited for its cancelled, running writes, so the markers read above are final
    assert summary["chunks_skipped"] == int(done.sum())
    assert summary["chunks_skipped"] + summary["chunks_written"] == 10
    assert np.array_equal(open_features(out).Z.compute(), _krp().transform(data))


def test_a_failed_run_on_a_cluster_leaves_a_store_that_no_longer_changes(tmp_path, client,
                                                                          caplog):
    # the run's cancellation reaches each worker by the scheduler; a write queued there
    # (or about to be sent) when the run raised must not start afterwards. Without the
    # barrier (dkrp._settled._cancellation_barrier) 12 of 200 such runs had a
    # done marker appear after the raise (issue 28's CI failure of 2026-12-02); a loop,
    # because one run catches it about one time in 16
    data = np.random.default_rng(2).standard_normal((1000, 12))
    changed = []
    for trial, row in enumerate(np.random.default_rng(8).integers(100, 1000, size=30)):
        bad = data.copy()
        bad[row, 2] = np.nan
        out = tmp_path / f"f{trial}.zarr"
        with pytest.raises(ValueError, match=f"global row {row}"), \
                caplog.at_level("INFO", logger="dkrp._settled"):
            write_features(da.from_array(bad, chunks=(100, 12)), _krp(), out,
                           client=client, progress=False)
        done = np.asarray(zarr.open_array(str(out / "done"), mode="r")[:])
        time.sleep(0.3)
        later = np.asarray(zarr.open_array(str(out / "done"), mode="r")[:])
        if not np.array_equal(done, later):
            changed.append((int(row), done.tolist(), later.tolist()))
    assert not changed
    # the barrier and the polling worked every time: neither gave up
    assert not [r.getMessage() for r in caplog.records if r.name == "dkrp._settled"]


def test_a_store_of_another_job_stopped_before_recording_its_input_is_not_restarted(tmp_path):
    # only this job's own store is started afresh: another job's is refused without
    # --overwrite, as any other store of another run
    X = da.from_array(np.random.default_rng(3).standard_normal((1000, 12)), chunks=(250, 12))
    out = tmp_path / "f.zarr"
    write_features(X, _krp(seed=5), out, progress=False)
    _stopped_before_recording(out)
    with pytest.raises(FeatureStoreMismatchError, match="seed"):
        write_features(X, _krp(), out, progress=False)
    assert _attrs(out)["spec"]["params"]["random_state"] == 5  # untouched
    write_features(X, _krp(), out, overwrite=True, progress=False)
    assert np.array_equal(open_features(out).Z.compute(), _krp().transform(X.compute()))


@pytest.mark.parametrize("edge", ["", "first", "last", "both"])
def test_a_chunk_task_returns_the_edge_rows_it_is_asked_for(tmp_path, edge):
    # the task of chunk 1 of 3 (rows 250-499), run again in this process: idempotent, and
    # its block's first and/or last input row after (chunk, n_rows)
    from dkrp._blockwise import spec_json
    from dkrp.feature_store.tasks import _write_chunk

    values = np.random.default_rng(4).standard_normal((700, 12))
    out = tmp_path / "f.zarr"
    write_features(da.from_array(values, chunks=(250, 12)), _krp(), out, progress=False)
    before = (out / "Z" / "c" / "1" / "0").read_bytes()
    block = values[250:500]
    result = _write_chunk(block, spec_json(_krp()), np.dtype(np.float64).str, str(out), 1,
                          250, "", edge)
    assert (out / "Z" / "c" / "1" / "0").read_bytes() == before
    if not edge:
        assert result == (1, 250)
        return
    assert result[:2] == (1, 250) and len(result) == 3
    expected = {"first": values[250:251], "last": values[499:500]}
    expected = {k: v for k, v in expected.items() if edge in (k, "both")}
    assert sorted(result[2]) == sorted(expected)
    for k, v in expected.items():
        assert result[2][k].shape == (1, 12) and np.array_equal(result[2][k], v), k


def test_a_complete_store_without_its_edge_rows_is_refused_not_started_afresh(tmp_path):
    # only an unfinished store is started afresh: a complete one (edited by hand) is the
    # user's, compared and refused, its chunks left as they are
    from dkrp._store import write_attrs

    X = da.from_array(np.random.default_rng(6).standard_normal((1000, 12)), chunks=(250, 12))
    out = tmp_path / "f.zarr"
    write_features(X, _krp(), out, progress=False)
    group = zarr.open_group(str(out), mode="r+")
    attrs = group.attrs.asdict()
    attrs["input"]["edge_rows_sha256"] = None
    write_attrs(group, attrs)
    before = (out / "Z" / "c" / "0" / "0").stat().st_mtime_ns
    with pytest.raises(FeatureStoreMismatchError, match="input edge_rows_sha256"):
        write_features(X, _krp(), out, progress=False)
    assert (out / "Z" / "c" / "0" / "0").stat().st_mtime_ns == before
    assert _attrs(out)["complete"] is True


@pytest.mark.parametrize("given", [True, False])  # client=, or the default client
def test_a_new_store_on_a_cluster_reads_nothing_of_its_input_outside_its_tasks(tmp_path,
                                                                               client, given):
    # no compute in this process (counted by the scheduler dask would use here): neither
    # the plan nor the run reads the edge rows before the tasks, which return them
    import contextlib

    import dask
    import dask.threaded
    from distributed import Client

    calls = []

    def counting_get(dsk, keys, **kwargs):
        calls.append(keys)
        return dask.threaded.get(dsk, keys, **kwargs)

    values = np.random.default_rng(8).standard_normal((1000, 12))
    X = da.from_array(values, chunks=(300, 12))
    out = tmp_path / "f.zarr"
    default = contextlib.nullcontext() if given else Client(client.scheduler.address)
    with default, dask.config.set(scheduler=counting_get):
        write_features(X, _krp(), out, client=client if given else None, progress=False)
    assert calls == []
    assert _attrs(out)["input"] == input_fingerprint(X) and _attrs(out)["complete"] is True
    with dask.config.set(scheduler=counting_get):  # (the scheduler dask uses without one)
        write_features(X, _krp(), tmp_path / "g.zarr", progress=False)
    assert calls


def test_a_failed_run_whose_input_cannot_be_read_raises_its_own_error(tmp_path, client,
                                                                      caplog):
    # every block of the input fails to read: the run's error is raised, not the second
    # read's on the way out; the fingerprint stays pending, so the next run starts afresh
    values = np.random.default_rng(3).standard_normal((1000, 12))

    def unreadable(block):
        raise OSError("the disk went away")

    bad = da.from_array(values, chunks=(250, 12)).map_blocks(unreadable, dtype=float)
    out = tmp_path / "f.zarr"
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store"), \
            pytest.raises(PartitionError, match=r"Partition \d.*the disk went away"):
        write_features(bad, _krp(), out, client=client, progress=False)
    assert f"{out}: the input's first and last rows could not be read" in caplog.messages
    # with the read's own error and traceback
    [record] = [r for r in caplog.records
                if r.getMessage() == f"{out}: the input's first and last rows could not be read"]
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)
    assert str(record.exc_info[1]) == "the disk went away"
    assert _attrs(out)["input"]["edge_rows_sha256"] is None and not _attrs(out)["complete"]
    X = da.from_array(values, chunks=(250, 12))
    summary = write_features(X, _krp(), out, client=client, progress=False)
    assert summary["chunks_written"] == 4 and _attrs(out)["input"] == input_fingerprint(X)


def test_input_fingerprint_fields_dense_sparse_and_empty():
    # the edge rows hashed as float64 bytes (a float32 input too); the storage named; no
    # rows hash nothing
    import hashlib

    values = np.random.default_rng(9).standard_normal((30, 4)).astype(np.float32)
    values[values < 0] = 0
    edges = hashlib.sha256(values[:1].astype(np.float64).tobytes()
                           + values[-1:].astype(np.float64).tobytes()).hexdigest()
    dense = input_fingerprint(da.from_array(values, chunks=(10, 4)))
    assert dense == {"shape": [30, 4], "dtype": "float32", "storage": "dense",
                     "edge_rows_sha256": edges, "source_sha256": None}
    sparse = input_fingerprint(da.from_array(sp.csr_matrix(values), chunks=(10, 4),
                                             asarray=False, meta=sp.csr_matrix((0, 4),
                                                                               dtype=np.float32)))
    assert sparse == {**dense, "storage": "csr"}
    empty = input_fingerprint(da.from_array(values[:0], chunks=(10, 4)), edge_rows=False)
    assert empty["edge_rows_sha256"] == hashlib.sha256().hexdigest() and empty["shape"] == [0, 4]
    pending = input_fingerprint(da.from_array(values, chunks=(10, 4)), edge_rows=False)
    assert pending == {**dense, "edge_rows_sha256": None}
    source = {"path": Path("/data/x.zarr"), "name": "x", "rows": 30, "when": Path("/a")}
    text = '{"name": "x", "rows": 30, "when": "/a"}'  # sorted keys, str(), no path
    assert input_fingerprint(da.from_array(values, chunks=(10, 4)), source=source) == {
        **dense, "source_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "source_path": "/data/x.zarr"}
    named = input_fingerprint(da.from_array(values, chunks=(10, 4)), source="/data/path.csv")
    assert named == {**dense, "source_sha256": hashlib.sha256(b'"/data/path.csv"').hexdigest()}



# -- an input is what it holds, not where it is (issue 29, item 3) ----------------------------


def _npy_store(tmp_path, seed=10):
    """A .npy input and a complete feature store of it, with its Z chunk 2 deleted."""
    from dkrp import featurize_to_store

    np.save(tmp_path / "x.npy", np.random.default_rng(seed).standard_normal((1000, 12)))
    out = tmp_path / "f.zarr"
    featurize_to_store(tmp_path / "x.npy", out, _krp(), chunk_rows=250, progress=False)
    clean = (out / "Z" / "c" / "2" / "0").read_bytes()
    (out / "Z" / "c" / "2" / "0").unlink()
    return out, clean


def test_a_moved_input_resumes_its_store_and_a_changed_one_at_the_same_path_does_not(
        tmp_path, caplog):
    # before: a byte-identical copy was "input source_sha256: store ..., this run ...",
    # refused, because the path was hashed with the rest
    import shutil

    from dkrp import featurize_to_store

    out, clean = _npy_store(tmp_path)
    shutil.move(tmp_path / "x.npy", tmp_path / "moved.npy")
    with caplog.at_level(logging.INFO, logger="dkrp.feature_store"):
        summary, _, action = featurize_to_store(tmp_path / "moved.npy", out, _krp(),
                                                progress=False)
    assert action == "resume" and summary["chunks_written"] == 1
    assert (out / "Z" / "c" / "2" / "0").read_bytes() == clean
    assert (f"{out}: its input, made from {tmp_path / 'x.npy'}, is read from "
            f"{tmp_path / 'moved.npy'} (the same content)") in caplog.messages
    assert _attrs(out)["input"]["source_path"] == str(tmp_path / "moved.npy")  # the hint

    # other content at the store's own path: refused, naming the content's hash
    (out / "Z" / "c" / "2" / "0").unlink()
    data = np.load(tmp_path / "moved.npy")
    data[500, 3] += 1.0  # not an edge row: only the file's hash tells it apart
    np.save(tmp_path / "moved.npy", data)
    before = _attrs(out)
    with pytest.raises(FeatureStoreMismatchError, match="input source_sha256") as info:
        featurize_to_store(tmp_path / "moved.npy", out, _krp(), progress=False)
    assert "source_path" not in str(info.value) and _attrs(out) == before


def _legacy_fingerprint(out):
    """Rewrite ``out``'s input fingerprint as dkrp wrote it before inputs were identified
    by content: the provenance hashed with its path. Returns that provenance."""
    import hashlib
    import json

    from dkrp._store import write_attrs
    from dkrp.jobs import open_input

    group = zarr.open_group(str(out), mode="r+")
    attrs = group.attrs.asdict()
    _, provenance = open_input(attrs["input"]["source_path"])
    text = json.dumps(provenance, sort_keys=True, default=str)
    attrs["input"]["source_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    write_attrs(group, attrs)
    return provenance


def test_a_store_with_an_earlier_fingerprint_resumes_from_its_input_or_a_copy(tmp_path):
    import shutil

    from dkrp import featurize_to_store
    from dkrp.jobs import open_input

    out, clean = _npy_store(tmp_path)
    _legacy_fingerprint(out)
    legacy = _attrs(out)["input"]
    shutil.copy(tmp_path / "x.npy", tmp_path / "copy.npy")
    X, provenance = open_input(tmp_path / "copy.npy")
    plan = plan_features(X, _krp(), out, source=provenance)
    assert (plan["action"], plan["missing"]) == ("resume", 1)
    summary, _, action = featurize_to_store(tmp_path / "x.npy", out, _krp(), progress=False)
    assert action == "resume" and (out / "Z" / "c" / "2" / "0").read_bytes() == clean
    # the finished store records today's fingerprint: the same but for the hash
    now = _attrs(out)["input"]
    assert now["source_sha256"] != legacy["source_sha256"]
    assert now == {**legacy, "source_sha256": now["source_sha256"]}

    # an earlier fingerprint of other content is refused, though the shape, dtype and
    # edge rows are the same: only the hash of the file tells them apart
    data = np.load(tmp_path / "x.npy")
    data[500, 3] += 1.0
    (tmp_path / "b").mkdir()
    np.save(tmp_path / "b" / "x.npy", data)
    other = tmp_path / "b" / "f.zarr"
    featurize_to_store(tmp_path / "b" / "x.npy", other, _krp(), chunk_rows=250,
                       progress=False)
    _legacy_fingerprint(other)
    with pytest.raises(FeatureStoreMismatchError, match="input source_sha256"):
        featurize_to_store(tmp_path / "copy.npy", other, _krp(), progress=False)


def test_a_run_interrupted_before_its_edge_rows_arrived_still_resumes(tmp_path):
    # Ctrl-C (KeyboardInterrupt in the client) right after the first chunk's result came
    # back: at most one edge chunk's rows are in, so the fingerprint was still pending
    # and the next run threw the finished chunks away (seen in CI: 6 done, then "40
    # chunks written, 0 already done"). The interrupted run records it on the way out.
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    X = da.from_array(np.random.default_rng(6).standard_normal((800, 12)), chunks=(100, 12))
    out = tmp_path / "f.zarr"

    def interrupt(done, total):
        raise KeyboardInterrupt

    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as inproc:
        with pytest.raises(KeyboardInterrupt):
            write_features(X, _krp(), out, client=inproc, progress=interrupt)
        assert _attrs(out)["input"] == input_fingerprint(X)
        finished = int(np.asarray(zarr.open_array(str(out / "done"), mode="r")[:]).sum())
        summary = write_features(X, _krp(), out, client=inproc, progress=False)
    # a chunk still in flight when the client was interrupted may land after `finished`
    # was read (seen on one CPU): the next run keeps it too
    assert finished >= 1 and summary["chunks_skipped"] >= finished
    assert np.array_equal(open_features(out).Z.compute(), _krp().transform(X.compute()))
