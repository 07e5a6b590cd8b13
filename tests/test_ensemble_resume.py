"""Training that survives failures: retries of a voter's task, a one-line error naming
the voter that failed, and resuming from the voters kept as they finished (issue 35).

Every failure here is real: a :class:`dkrp.testing.faulty.FaultyProjection` that raises
on one row block, or a corrupt chunk of a dataset store; the clusters run in this
process (``processes=False``)."""

from __future__ import annotations

import json
import time

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dkrp
from dkrp.cli import main
from dkrp.ensemble import RandomFeatureVotingClassifier
from dkrp.errors import VoterError
from dkrp.io import ingest
from dkrp.parallel import start_local_cluster
from dkrp.testing.faulty import FaultyProjection, fault_pids


def _data(n=80, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] + X[:, 1] > 0).astype(int)


def _faulty(X, row, state_dir, times=1):
    """A map that raises OSError on the row block starting at ``row`` (``times`` times)."""
    return FaultyProjection(n_components=20, trigger=float(X[row, 0]), times=times,
                            state_dir=str(state_dir))


def _model(projector, **params):
    params = {"strategy": "partition", **params}
    return RandomFeatureVotingClassifier(n_voters=4, method=projector, n_components=None,
                                         random_state=3, **params)


def _arrays(model):
    return [(p[-1].coef_, np.atleast_1d(p[-1].intercept_)) for p in model.estimators_]


def _same_voters(a, b):
    assert len(a.estimators_) == len(b.estimators_)
    for (ca, ia), (cb, ib) in zip(_arrays(a), _arrays(b), strict=True):
        assert ca.tobytes() == cb.tobytes() and ia.tobytes() == ib.tobytes()
    assert [p[0].to_spec() for p in a.estimators_] == [p[0].to_spec() for p in b.estimators_]


@pytest.fixture(scope="module")
def cluster_address():
    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster:
        yield cluster.scheduler_address


# --- retries ---------------------------------------------------------------------------------


def test_a_voter_that_fails_once_is_retried_in_this_process(tmp_path, caplog):
    X, y = _data()
    with caplog.at_level("WARNING", logger="dkrp.ensemble.training"):
        model = _model(_faulty(X, 40, tmp_path / "state")).fit(X, y, retries=1)
    assert len(fault_pids(tmp_path / "state")) == 1  # it did fail, once
    # the log says which voter was retried, which attempt failed and why
    assert [r.getMessage() for r in caplog.records] == [
        "voter 2 failed (attempt 1 of 2), retrying: OSError(5, 'Input/output error "
        "(injected by dkrp.testing.faulty)')"]
    _same_voters(model, _model(_faulty(X, 40, tmp_path / "state")).fit(X, y))


def test_a_voter_that_fails_once_is_retried_on_a_cluster(tmp_path, cluster_address):
    from distributed import Client

    X, y = _data()
    # a client that is not dask's default one (a library holding its own): the voters'
    # futures are gathered on its loop
    seen = []
    with Client(cluster_address, set_as_default=False) as in_process:
        model = _model(_faulty(X, 40, tmp_path / "state")).fit(
            X, y, client=in_process, retries=1,
            progress=lambda done, total: seen.append((done, total)))
    assert len(fault_pids(tmp_path / "state")) == 1
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # a user's callback: done of total
    _same_voters(model, _model(_faulty(X, 40, tmp_path / "state")).fit(X, y))


def test_a_fit_that_keeps_its_voters_retries_them_too(tmp_path):
    # a long job passes both: a transient error is retried, and every voter is kept
    X, y = _data()
    state, kept = tmp_path / "state", tmp_path / "kept"
    model = _model(_faulty(X, 40, state)).fit(X, y, retries=1, checkpoint=kept)
    assert len(fault_pids(state)) == 1  # voter 2 failed once, then trained
    assert sorted(p.name for p in kept.glob("voter-*.npz")) == [f"voter-{i}.npz"
                                                                 for i in range(4)]
    _same_voters(model, _model(_faulty(X, 40, state)).fit(X, y))


def test_a_full_strategy_voter_that_fails_once_is_retried_on_a_cluster(tmp_path,
                                                                      cluster_address):
    # "full": X and y are sent to the cluster once and every voter trains on all rows
    from distributed import Client

    X, y = _data()
    seen = []

    def model():
        return RandomFeatureVotingClassifier(n_voters=2, method=_faulty(X, 0, tmp_path),
                                             n_components=None, random_state=3)

    with Client(cluster_address, set_as_default=False) as in_process:
        there = model().fit(X, y, client=in_process, retries=1,
                            progress=lambda done, total: seen.append((done, total)))
    assert len(fault_pids(tmp_path)) == 1 and seen == [(1, 2), (2, 2)]
    _same_voters(there, model().fit(X, y))  # as trained here (the fault is used up)


def test_a_full_strategy_voter_that_fails_once_is_retried_in_this_process(tmp_path):
    # without a cluster the voters train here in turn; retries= and the progress total
    # reach them as on a cluster
    X, y = _data()
    seen = []

    def model():
        return RandomFeatureVotingClassifier(n_voters=2, method=_faulty(X, 0, tmp_path / "s"),
                                             n_components=None, random_state=3)

    here = model().fit(X, y, retries=1, progress=lambda done, total: seen.append((done, total)))
    assert len(fault_pids(tmp_path / "s")) == 1 and seen == [(1, 2), (2, 2)]
    _same_voters(here, model().fit(X, y))  # (the fault is used up)


def test_bad_input_is_refused_at_once_whatever_the_retries(caplog):
    # a row block of one class (dask input, found by its voter) cannot train on any
    # attempt: retries=3 must not train it three more times before saying so
    X, y = _data()
    y[40:60] = 1
    Xd, yd = da.from_array(X, chunks=(20, 5)), da.from_array(y, chunks=20)
    with caplog.at_level("WARNING", logger="dkrp.ensemble.training"), \
            pytest.raises(ValueError, match=r"^Voter 2 was given one class only"):
        _model(dkrp.PolynomialRandomProjection(n_components=20)).fit(Xd, yd, retries=3)
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


# --- the final failure, in one line ----------------------------------------------------------


def test_a_voters_final_failure_names_the_voter_its_attempts_and_cause(tmp_path):
    X, y = _data()
    with pytest.raises(VoterError) as info:
        _model(_faulty(X, 40, tmp_path / "state", times=0)).fit(X, y, retries=1)
    assert str(info.value) == (
        "Voter 2 (partition 2, rows 40..59) failed after 2 attempts: OSError: [Errno 5] "
        "Input/output error (injected by dkrp.testing.faulty).")
    assert (info.value.voter, info.value.attempts) == (2, 2)
    assert isinstance(info.value.__cause__, OSError)
    assert len(fault_pids(tmp_path / "state")) == 2


def test_a_full_strategy_voters_failure_names_the_voter_without_rows(tmp_path):
    # every voter of the "full" strategy sees all rows: no partition or rows to name
    X, y = _data()
    model = RandomFeatureVotingClassifier(n_voters=1, method=_faulty(X, 0, tmp_path, times=0),
                                          n_components=None, random_state=3)
    with pytest.raises(VoterError) as info:
        model.fit(X, y)
    assert str(info.value) == (
        "Voter 0 failed after 1 attempt: OSError: [Errno 5] Input/output error (injected by "
        "dkrp.testing.faulty) (or pass retries=N if the error is transient).")


def test_a_voters_final_failure_on_a_cluster_had_the_attempts_asked_for(tmp_path,
                                                                        cluster_address):
    # retries=1 is two attempts in all, made by the cluster (not two in each of its two)
    from distributed import Client

    X, y = _data()
    with Client(cluster_address, set_as_default=False) as in_process, \
            pytest.raises(VoterError) as info:
        _model(_faulty(X, 40, tmp_path / "state", times=0)).fit(X, y, client=in_process,
                                                                   retries=1)
    assert str(info.value) == (
        "Voter 2 (partition 2, rows 40..59) failed after 2 attempts: OSError: [Errno 5] "
        "Input/output error (injected by dkrp.testing.faulty).")
    assert len(fault_pids(tmp_path / "state")) == 2


def test_one_attempt_suggests_retries_on_a_cluster(tmp_path, cluster_address):
    from distributed import Client

    X, y = _data()
    with Client(cluster_address) as in_process, pytest.raises(VoterError) as info:
        _model(_faulty(X, 20, tmp_path / "state", times=0)).fit(X, y, client=in_process)
    assert str(info.value) == (
        "Voter 1 (partition 1, rows 20..39) failed after 1 attempt: OSError: [Errno 5] "
        "Input/output error (injected by dkrp.testing.faulty) (or pass retries=N if the "
        "error is transient).")


def test_a_full_strategy_voters_failure_on_a_cluster_names_the_voter_without_rows(
        tmp_path, cluster_address):
    # as in this process: every voter sees all rows, so no partition or rows are named
    from distributed import Client

    X, y = _data()
    model = RandomFeatureVotingClassifier(n_voters=2, method=_faulty(X, 0, tmp_path, times=0),
                                          n_components=None, random_state=3)
    with Client(cluster_address, set_as_default=False) as in_process, \
            pytest.raises(VoterError) as info:
        model.fit(X, y, client=in_process)
    assert str(info.value) == (
        f"Voter {info.value.voter} failed after 1 attempt: OSError: [Errno 5] Input/output "
        "error (injected by dkrp.testing.faulty) (or pass retries=N if the error is "
        "transient).")


def _voter_tasks(dask_scheduler=None):
    return sorted(str(k) for k in dask_scheduler.tasks if str(k).startswith("dkrp-voter-"))


def test_without_a_checkpoint_a_voters_failure_cancels_the_others_on_a_cluster(
        tmp_path, cluster_address):
    # nothing keeps the other voters' work: once one has failed, the cluster stops
    # training them (they sleep 1 s before their map, so they are still running or
    # queued when voter 1 fails) instead of going on for a model that will not be
    from distributed import Client

    X, y = _data()
    faulty = FaultyProjection(n_components=20, trigger=float(X[20, 0]), times=0,
                              state_dir=str(tmp_path / "state"), delay=1.0)
    with Client(cluster_address, set_as_default=False) as in_process:
        # (the module's cluster may still hold voters of an earlier test whose error a
        # traceback keeps: none of this fit's may be left beside them)
        before = set(in_process.run_on_scheduler(_voter_tasks))
        with pytest.raises(VoterError, match="^Voter 1 "):
            _model(faulty).fit(X, y, client=in_process)
        # (the error's traceback, held here, still refers to the voters' futures); the
        # scheduler forgets a cancelled task that is running once its worker hears of it
        left = set(in_process.run_on_scheduler(_voter_tasks)) - before
        for _ in range(50):
            if not left:
                break
            time.sleep(0.1)
            left = set(in_process.run_on_scheduler(_voter_tasks)) - before
        assert not left


# --- resuming --------------------------------------------------------------------------------


def test_a_rerun_trains_only_the_missing_voters_and_gives_the_uninterrupted_model(tmp_path):
    X, y = _data()
    state, kept = tmp_path / "state", tmp_path / "kept"
    with pytest.raises(VoterError) as info:
        _model(_faulty(X, 40, state)).fit(X, y, checkpoint=kept)
    assert str(info.value) == (
        "Voter 2 (partition 2, rows 40..59) failed after 1 attempt: OSError: [Errno 5] "
        "Input/output error (injected by dkrp.testing.faulty); 3 finished voter(s) are kept "
        f"in {kept}: fix the cause and fit again with checkpoint='{kept}' to train the "
        "missing ones (or pass retries=N if the error is transient).")
    # the other voters finished, and each was written as it finished (.npz, no pickle)
    names = sorted(p.name for p in kept.iterdir())
    assert names == ["job.json", "voter-0.json", "voter-0.npz", "voter-1.json",
                     "voter-1.npz", "voter-3.json", "voter-3.npz"]
    with np.load(kept / "voter-0.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["classes", "coef", "intercept"]
    stamps = {p.name: p.stat().st_mtime_ns for p in kept.iterdir()}
    done = []
    model = _model(_faulty(X, 40, state)).fit(X, y, checkpoint=kept,
                                              progress=lambda n, total: done.append((n, total)))
    assert done == [(3, 4), (4, 4)]  # three kept, one trained, of four
    assert {p.name: p.stat().st_mtime_ns for p in kept.iterdir() if p.name in stamps} == stamps
    assert (kept / "voter-2.json").is_file()
    # an uninterrupted fit (the fault is used up) gives the same voters, bit for bit; and
    # so do the saved models' arrays
    whole = _model(_faulty(X, 40, state)).fit(X, y)
    _same_voters(model, whole)
    for m, name in ((model, "resumed"), (whole, "whole")):
        m.save(tmp_path / name)
    with np.load(tmp_path / "resumed" / "voters.npz") as a, \
            np.load(tmp_path / "whole" / "voters.npz") as b:
        assert a.files == b.files
        assert all(a[k].tobytes() == b[k].tobytes() and a[k].dtype == b[k].dtype
                   for k in a.files)
    assert np.array_equal(dkrp.load(tmp_path / "resumed").predict(X), whole.predict(X))


def test_a_checkpoint_of_another_job_is_refused_naming_what_differs(tmp_path):
    X, y = _data()
    kept = tmp_path / "kept"
    with pytest.raises(VoterError):
        _model(_faulty(X, 40, tmp_path / "state")).fit(X, y, checkpoint=kept)
    before = sorted(p.name for p in kept.iterdir())
    with pytest.raises(ValueError, match=r"holds the finished voters of another training job "
                                         r"\(C 1\.0 in the checkpoint, 2\.0 now\)"):
        _model(_faulty(X, 40, tmp_path / "state"), C=2.0).fit(X, y, checkpoint=kept)
    with pytest.raises(ValueError, match=r"another training job \(data sha256 '"):
        _model(_faulty(X, 40, tmp_path / "state")).fit(X * 2, y, checkpoint=kept)
    # the same rows with labels corrected: voters of the old labels are not reused
    with pytest.raises(ValueError, match=r"another training job \(data sha256 '"):
        _model(_faulty(X, 40, tmp_path / "state")).fit(X, 1 - y, checkpoint=kept)
    assert sorted(p.name for p in kept.iterdir()) == before


def test_a_checkpoint_refused_for_another_method_or_classes_names_each_difference(tmp_path):
    # the user changed the method, or named more classes, and kept the checkpoint folder:
    # the refusal names each part of the job that differs (the params, the template's own
    # params and class, the labels the voters are trained for)
    X, y = _data()
    kept = tmp_path / "kept"
    params = {"n_voters": 2, "n_components": 10, "gamma": 0.5, "random_state": 3}
    RandomFeatureVotingClassifier(**params).fit(X, y, checkpoint=kept)
    with pytest.raises(ValueError, match=r"another training job \(method 'rff' in the "
                                         r"checkpoint, 'nystroem' now; template .*; "
                                         r"template_class 'RandomFourierFeatures' in the "
                                         r"checkpoint, 'Nystroem' now\): refused"):
        RandomFeatureVotingClassifier(method="nystroem", **params).fit(X, y, checkpoint=kept)
    with pytest.raises(ValueError, match=r"another training job \(classes \[0, 1\] in the "
                                         r"checkpoint, \[0, 1, 2\] now; classes None in the "
                                         r"checkpoint, \[0, 1, 2\] now\): refused"):
        RandomFeatureVotingClassifier(classes=[0, 1, 2], **params).fit(X, y, checkpoint=kept)


def test_kept_voter_files_that_are_not_that_voters_own_are_trained_again(tmp_path, caplog):
    # a checkpoint copied between machines by hand: voter 0's arrays were overwritten by
    # voter 1's (a valid .npz its JSON's SHA-256 does not match) and voter 3's files were
    # copied in under voter 2's name. Neither is taken for that voter: both are trained
    # again (with a warning) and the model is the one an uninterrupted fit gives
    import shutil

    X, y = _data()
    kept = tmp_path / "kept"
    template = dkrp.RandomFourierFeatures(n_components=20, gamma=0.5)
    whole = _model(template).fit(X, y, checkpoint=kept)
    shutil.copyfile(kept / "voter-1.npz", kept / "voter-0.npz")
    for ext in ("npz", "json"):
        shutil.copyfile(kept / f"voter-3.{ext}", kept / f"voter-2.{ext}")
    done = []
    with caplog.at_level("WARNING", logger="dkrp.ensemble.checkpoint"):
        model = _model(template).fit(X, y, checkpoint=kept,
                                     progress=lambda n, total: done.append((n, total)))
    assert done == [(2, 4), (3, 4), (4, 4)]  # two kept, two trained again, of four
    warned = [r.getMessage() for r in caplog.records if "trained again" in r.getMessage()]
    assert [m.split(" in ")[0] for m in sorted(warned)] == ["voter 0", "voter 2"]
    _same_voters(model, whole)


def test_a_checkpoint_of_other_labels_of_the_same_dask_rows_is_refused(tmp_path):
    # dkrp train reads a dataset store (dask arrays): the labels re-ingested corrected (the
    # same rows, the same classes), the same command again must not resume the voters
    # of the old labels, as it does not for numpy input (above)
    X, y = _data()
    kept = tmp_path / "kept"
    params = {"n_voters": 2, "n_components": 10, "gamma": 0.5, "random_state": 3}
    Xd = da.from_array(X, chunks=(20, -1))
    RandomFeatureVotingClassifier(**params).fit(Xd, da.from_array(y, chunks=20),
                                                checkpoint=kept)
    with pytest.raises(ValueError, match=r"another training job \(data labels_sha256 "):
        RandomFeatureVotingClassifier(**params).fit(Xd, da.from_array(1 - y, chunks=20),
                                                    checkpoint=kept)
    # and the same labels resume (numpy labels with dask rows hash as dask labels do)
    done = []
    RandomFeatureVotingClassifier(**params).fit(
        Xd, y, checkpoint=kept, progress=lambda n, total: done.append((n, total)))
    assert done == [(2, 2)]  # both voters kept


def test_a_checkpoint_of_named_classes_resumes_with_the_same_names_only(tmp_path):
    # labels read as strings (object dtype, made afresh by each run's reader): their
    # identity is their text, not where the strings live, so the same names resume and
    # other names are refused
    X, y = _data()
    kept = tmp_path / "kept"
    params = {"n_voters": 2, "n_components": 10, "gamma": 0.5, "random_state": 3}

    def names(labels):
        return np.array(["".join(["class-", str(v)]) for v in labels], dtype=object)

    RandomFeatureVotingClassifier(**params).fit(X, names(y), checkpoint=kept)
    with pytest.raises(ValueError, match=r"another training job \(data sha256 "):
        RandomFeatureVotingClassifier(**params).fit(X, names(1 - y), checkpoint=kept)
    done = []
    resumed = RandomFeatureVotingClassifier(**params).fit(
        X, names(y), checkpoint=kept, progress=lambda n, total: done.append((n, total)))
    assert done == [(2, 2)]  # both voters kept (their arrays hold no pickle)
    fresh = RandomFeatureVotingClassifier(**params).fit(X, names(y))
    assert resumed.classes_.tolist() == fresh.classes_.tolist() == ["class-0", "class-1"]
    assert resumed.predict(X).tolist() == fresh.predict(X).tolist()
    # labels that are neither numbers nor strings are refused before any voter trains
    other = tmp_path / "other"
    with pytest.raises(ValueError, match="cannot be kept in a checkpoint without pickle"):
        RandomFeatureVotingClassifier(**params).fit(
            X, np.array([(v,) for v in y] + [None], dtype=object)[:-1], checkpoint=other)
    assert not other.exists()


def test_a_checkpoint_of_a_linear_model_with_numpy_settings_resumes(tmp_path):
    # a grid search hands the voters' linear model numpy values (np.float32 C, np.int64
    # max_iter): each kept voter's JSON holds them as plain numbers, and a rerun resumes
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    kept = tmp_path / "kept"

    def model():
        return RandomFeatureVotingClassifier(
            n_voters=2, n_components=10, gamma=0.5, random_state=3,
            estimator=LogisticRegression(C=np.float32(0.5), max_iter=np.int64(200)))

    whole = model().fit(X, y, checkpoint=kept)
    meta = json.loads((kept / "voter-0.json").read_text())
    assert (meta["model_params"]["C"], meta["model_params"]["max_iter"]) == (0.5, 200)
    done = []
    resumed = model().fit(X, y, checkpoint=kept,
                          progress=lambda n, total: done.append((n, total)))
    assert done == [(2, 2)]
    assert np.array_equal(resumed.predict(X), whole.predict(X))


@pytest.mark.parametrize("dask_input", [False, True, "csr"])
def test_the_checkpoints_data_identity_is_the_documented_digest(tmp_path, dask_input):
    # what a checkpoint's job.json says of its data, by its definition (shape, dtype and
    # SHA-256 of the rows and labels; of dask input, the edge rows' digest and one of
    # the labels): a checkpoint written by an earlier version of the same job resumes
    import hashlib
    import json

    from dkrp.feature_store.fingerprint import input_fingerprint

    X, y = _data()
    kept = tmp_path / "kept"
    params = {"n_voters": 2, "n_components": 10, "gamma": 0.5, "random_state": 3}
    if dask_input == "csr":  # sparse rows: their CSR arrays in turn, then the labels
        import scipy.sparse as sp

        X[np.abs(X) < 0.8] = 0
        Xd = sp.csr_matrix(X)
    else:
        Xd = da.from_array(X, chunks=(20, -1)) if dask_input else X
    RandomFeatureVotingClassifier(**params).fit(Xd, y, checkpoint=kept)
    data = json.loads((kept / "job.json").read_text())["data"]
    expected = {"shape": [80, 5], "dtype": "float64"}
    if dask_input == "csr":
        expected["sha256"] = hashlib.sha256(
            Xd.indptr.tobytes() + Xd.indices.tobytes() + Xd.data.tobytes() + y.tobytes()
        ).hexdigest()
    elif dask_input:
        expected["edge_rows_sha256"] = input_fingerprint(Xd)["edge_rows_sha256"]
        expected["labels_sha256"] = hashlib.sha256(y.tobytes()).hexdigest()
    else:
        expected["sha256"] = hashlib.sha256(X.tobytes() + y.tobytes()).hexdigest()
    assert data == expected


def test_a_directory_of_other_files_is_not_taken_for_a_checkpoint(tmp_path):
    X, y = _data()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("a user's file")
    with pytest.raises(FileExistsError, match="not a training checkpoint dkrp made"):
        _model(_faulty(X, 40, tmp_path / "state")).fit(X, y, checkpoint=theirs)
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]


# --- the command line ------------------------------------------------------------------------


def _store(tmp_path, X, y, name="train"):
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])]).assign(label=y)
    frame.to_csv(tmp_path / f"{name}.csv", index=False)
    ingest(tmp_path / f"{name}.csv", tmp_path / f"{name}.zarr", label_column="label",
           chunk_rows=20)
    return tmp_path / f"{name}.zarr"


def test_train_resumes_after_a_voter_failed_and_ends_with_the_uninterrupted_model(
        tmp_path, cluster_address):
    X, y = _data()
    store = _store(tmp_path, X, y)
    chunk = store / "X" / "c" / "2" / "0"  # the rows of voter 2
    good = chunk.read_bytes()
    chunk.write_bytes(good[:-3] + b"xyz")  # a damaged chunk: reading it fails
    out = tmp_path / "model"
    train = ["train", str(store), "--out", str(out), "--voters", "4", "--strategy",
             "partition", "--n-components", "30", "--gamma", "0.5", "--seed", "5",
             "--scheduler", cluster_address, "--quiet", "--yes"]
    r = CliRunner().invoke(main, train)
    assert r.exit_code == 1, r.output
    partial = tmp_path / ".model.partial"
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Error: Voter 2 (partition 2, rows 40..59) failed after 1 attempt: ChunkError: ")
    assert lines[0].endswith(
        f"; 3 finished voter(s) are kept in {partial}: fix the cause and run the same "
        "command again to train the missing ones (or pass --retries N if the error is "
        "transient).")
    assert "KilledWorker" not in r.output and "Traceback" not in r.output
    assert not out.exists()
    assert sorted(p.name for p in partial.glob("voter-*.json")) == [
        "voter-0.json", "voter-1.json", "voter-3.json"]
    # other options: refused, naming the difference; the kept voters are untouched
    r = CliRunner().invoke(main, [*train[:-4], "--seed", "6", *train[-4:]])
    assert r.exit_code == 1 and "random_state 5 in the checkpoint, 6 now" in r.output
    chunk.write_bytes(good)
    r = CliRunner().invoke(main, train)
    assert r.exit_code == 0, r.output
    assert not partial.exists()
    r = CliRunner().invoke(main, [*train[:3], str(tmp_path / "whole"), *train[4:]])
    assert r.exit_code == 0, r.output
    resumed, whole = dkrp.load(out), dkrp.load(tmp_path / "whole")
    _same_voters(resumed, whole)
    a, b = (json.loads((d / "dkrp.json").read_text()) for d in (out, tmp_path / "whole"))
    assert [v["projector"] for v in a["voters"]] == [v["projector"] for v in b["voters"]]
    assert a["params"] == b["params"]


def test_predict_retries_a_row_blocks_task(tmp_path, cluster_address):
    # a model whose voters' map raises once on the test rows' second block
    X, y = _data()
    Xt, yt = _data(seed=1)
    state = tmp_path / "state"
    model = _model(_faulty(Xt, 20, state), strategy="full").fit(X, y)
    model.save(tmp_path / "model")
    test = _store(tmp_path, Xt, yt, name="test")
    predict = ["predict", str(tmp_path / "model"), str(test), "--scheduler", cluster_address]
    r = CliRunner().invoke(main, predict)
    assert r.exit_code == 1 and "Input/output error" in r.output
    (state / "fault-0").unlink()  # the fault again, once
    r = CliRunner().invoke(main, [*predict, "--retries", "1"])
    assert r.exit_code == 0, r.output
    assert f"accuracy {float((model.predict(Xt) == yt).mean()):.4f}" in r.output
    assert len(fault_pids(state)) == 1


def test_train_and_predict_say_retries():
    for command in ("train", "predict"):
        r = CliRunner().invoke(main, [command, "--help"])
        assert "--retries INTEGER" in r.output, r.output


# --- a voter that kills its workers (worker processes: the full suite) ----------------------


def test_a_voter_that_kills_its_workers_is_named_without_the_raw_killed_worker(tmp_path):
    from distributed import Client
    from distributed.scheduler import KilledWorker

    X, y = _data()
    state, kept = tmp_path / "state", tmp_path / "kept"
    # one task per worker at a time: with the default saturation (1.1) a voter queued
    # behind the faulty one on its worker dies with it, twice with quick restarts, and is
    # blamed first
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}), \
            start_local_cluster(n_workers=2, threads_per_worker=1,
                                preload=["dkrp.testing.faulty"],
                                scheduler_kwargs={"allowed_failures": 1}) as cluster, \
            Client(cluster, set_as_default=False) as in_process, \
            pytest.raises(VoterError) as info:
        _model(FaultyProjection(n_components=20, fault="exit", trigger=float(X[40, 0]),
                                times=0, state_dir=str(state))).fit(
            X, y, client=in_process, checkpoint=kept)
    message = str(info.value)
    assert message.startswith(
        "Voter 2 (partition 2, rows 40..59) killed its worker 2 times (each worker running it "
        "died; distributed.scheduler.allowed-failures); "), message
    assert message.endswith(f"finished voter(s) are kept in {kept}: fix the cause and fit "
                            f"again with checkpoint='{kept}' to train the missing ones.")
    assert "Attempted to run task" not in message
    assert isinstance(info.value.__cause__, KilledWorker)
    assert (info.value.voter, info.value.attempts) == (2, 2) and len(fault_pids(state)) == 2
    assert (kept / "job.json").is_file() and not (kept / "voter-2.json").exists()
