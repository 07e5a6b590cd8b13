"""A user's path from raw files to features to a model (issue 11, cases 1-3).

Train and test CSV files are ingested with ``dkrp ingest``, featurized on a real
``LocalCluster`` (two worker processes) with ``dkrp featurize``, and read back with
``dkrp.read_features`` or ``dkrp export``: the test set gets the map fitted on the
training set (``--like``, ``--spec``), the features carry their labels, and scaling
learnt on the training rows travels in the spec.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dkrp
from dkrp.cli import main
from dkrp.feature_store import open_features

pytestmark = pytest.mark.cluster

CHUNK = 100


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster.scheduler_address


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _csv(path, X, y):
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame["label"] = y
    frame.to_csv(path, index=False, float_format="%.17g")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Train (400 rows) and test (250 rows) dataset stores ingested from CSV files, with
    pixel-like columns in 0..255 (one of them constant), and their arrays."""
    tmp = tmp_path_factory.mktemp("workflow")
    rng = np.random.default_rng(11)
    out = {}
    for name, n in (("train", 400), ("test", 250)):
        X = rng.uniform(0, 255, (n, 6)).round(3)
        X[:, 2] *= 0.01  # another unit
        X[:, 4] = 17.0  # a constant column
        y = (X[:, 0] > 127).astype(int) + 2 * (X[:, 1] > 127)
        _csv(tmp / f"{name}.csv", X, y)
        r = _run("ingest", tmp / f"{name}.csv", tmp / f"{name}.zarr", "--label-column", "label",
                 "--chunk-rows", CHUNK)
        assert r.exit_code == 0, r.output
        out[name] = (tmp / f"{name}.zarr", X, y)
    out["tmp"] = tmp
    return out


def _per_chunk(est, X):
    """The in-memory transform, one store chunk at a time (as the workers compute it)."""
    return np.vstack([est.transform(X[s : s + CHUNK]) for s in range(0, len(X), CHUNK)])


# -- case 1: apply a fitted map to new data --------------------------------------------------


def test_like_featurizes_test_data_with_the_map_fitted_on_train(data, scheduler_address,
                                                                tmp_path):
    (train, _, _), (test, Xt, _) = data["train"], data["test"]
    cluster = ["--scheduler", scheduler_address]
    r = _run("featurize", train, tmp_path / "train-f.zarr", "--method", "nystroem",
             "--kernel", "gaussian", "--gamma", "1e-4", "--n-components", 30, "--seed", 3,
             *cluster, "--quiet")
    assert r.exit_code == 0, r.output
    r = _run("featurize", train, tmp_path / "train-loud.zarr", "--method", "nystroem",
             "--kernel", "gaussian", "--gamma", "1e-4", "--n-components", 30, "--seed", 3,
             *cluster)
    assert r.exit_code == 0, r.output
    # the fit says on which input, and how to apply the map elsewhere
    assert f"fitted on {train}" in r.output
    assert f"--like {tmp_path / 'train-loud.zarr'}" in r.output

    r = _run("featurize", test, tmp_path / "test-f.zarr", "--like", tmp_path / "train-f.zarr",
             *cluster)
    assert r.exit_code == 0, r.output
    assert "nothing is refitted" in r.output
    train_spec = open_features(tmp_path / "train-f.zarr").spec
    test_store = open_features(tmp_path / "test-f.zarr")
    assert test_store.spec["checksum"] == train_spec["checksum"]  # the same map
    assert test_store.spec["arrays"] == train_spec["arrays"]  # the same landmarks
    fitted = dkrp.from_spec(train_spec)
    Zt = test_store.Z.compute()
    assert Zt.tobytes() == _per_chunk(fitted, Xt).tobytes()
    np.testing.assert_allclose(Zt, fitted.transform(Xt), rtol=1e-12, atol=1e-12)
    # before --like, featurizing the test set refitted the map on the test rows
    refit = dkrp.Nystroem(kernel="gaussian", gamma=1e-4, n_components=30, random_state=3)
    assert refit.fit(Xt).spec_checksum_ != train_spec["checksum"]


def test_like_and_spec_refuse_method_options(data, tmp_path):
    test = data["test"][0]
    np.save(tmp_path / "x.npy", np.ones((3, 6)))
    for flags in (["--n-components", 5], ["--method", "rff"], ["--seed", 1],
                  ["--standardize"]):
        r = _run("featurize", test, tmp_path / "o.zarr", "--like", data["train"][0], *flags)
        assert r.exit_code == 2 and "already fitted" in r.output and flags[0] in r.output, \
            r.output
    r = _run("featurize", test, tmp_path / "o.zarr", "--like", data["train"][0])
    assert r.exit_code == 1 and "not a dkrp feature store" in r.output, r.output
    assert not (tmp_path / "o.zarr").exists()


def test_info_spec_exports_the_map_and_spec_applies_it(data, scheduler_address, tmp_path):
    (train, _, _), (test, Xt, _) = data["train"], data["test"]
    cluster = ["--scheduler", scheduler_address, "--quiet"]
    r = _run("featurize", train, tmp_path / "train-f.zarr", "--method", "kg-rp",
             "--kernel", "gaussian", "--gamma", "1e-4", "--n-components", 16,
             "--n-hyperplanes", 40, "--n-terms", 10, "--seed", 4, *cluster)
    assert r.exit_code == 0, r.output
    r = _run("info", "--spec", tmp_path / "train-f.zarr")
    assert r.exit_code == 0, r.output
    spec = json.loads(r.output)  # nothing but the JSON: `> spec.json` works
    assert spec == open_features(tmp_path / "train-f.zarr").spec
    (tmp_path / "spec.json").write_text(r.output)

    r = _run("featurize", test, tmp_path / "by-spec.zarr", "--spec", tmp_path / "spec.json",
             *cluster)
    assert r.exit_code == 0, r.output
    r = _run("featurize", test, tmp_path / "by-like.zarr", "--like", tmp_path / "train-f.zarr",
             *cluster)
    assert r.exit_code == 0, r.output
    by_spec = open_features(tmp_path / "by-spec.zarr")
    assert by_spec.spec["checksum"] == spec["checksum"]
    assert (by_spec.Z.compute().tobytes()
            == open_features(tmp_path / "by-like.zarr").Z.compute().tobytes()
            == _per_chunk(dkrp.from_spec(spec), Xt).tobytes())

    # a projector saved from Python (JSON + .npz) works too
    dkrp.from_spec(spec).save(tmp_path / "saved.json")
    r = _run("featurize", test, tmp_path / "by-saved.zarr", "--spec", tmp_path / "saved.json",
             *cluster)
    assert r.exit_code == 0, r.output
    assert open_features(tmp_path / "by-saved.zarr").spec["checksum"] == spec["checksum"]

    r = _run("info", "--spec", test)  # a dataset store holds no spec
    assert r.exit_code == 1 and "only feature stores hold a spec" in r.output


def test_featurize_to_store_never_refits_a_fitted_projector(data, tmp_path):
    (_, X, _), (test, _, _) = data["train"], data["test"]
    est = dkrp.Nystroem(kernel="gaussian", gamma=1e-4, n_components=25, random_state=0).fit(X)
    landmarks, checksum = est.landmarks_.copy(), est.spec_checksum_
    result = dkrp.featurize_to_store(test, tmp_path / "t.zarr", est, progress=False)
    assert result.projector is est and est.spec_checksum_ == checksum
    assert np.array_equal(est.landmarks_, landmarks)
    assert open_features(tmp_path / "t.zarr").spec["checksum"] == checksum
    with pytest.raises(ValueError, match="never refitted"):
        dkrp.featurize_to_store(test, tmp_path / "u.zarr", est, standardize=True)


# -- case 2: features with their labels ------------------------------------------------------


def test_labels_are_copied_and_read_features_returns_them(data, scheduler_address, tmp_path):
    train, X, y = data["train"]
    r = _run("featurize", train, tmp_path / "f.zarr", "--method", "rff", "--n-components", 20,
             "--gamma", "1e-4", "--scheduler", scheduler_address, "--quiet")
    assert r.exit_code == 0, r.output
    Z, labels = dkrp.read_features(tmp_path / "f.zarr")
    assert labels.dtype == np.int64 and np.array_equal(labels, y)
    assert Z.shape == (len(X), 20) and Z.chunks[0][0] == CHUNK
    fs = open_features(tmp_path / "f.zarr")
    assert fs.y.chunks == Z.chunks[:1]  # the same row chunks
    assert "labels yes" in _run("info", tmp_path / "f.zarr").output

    # an input without labels gives a valid store without them
    np.save(tmp_path / "x.npy", X)
    dkrp.featurize_to_store(tmp_path / "x.npy", tmp_path / "g.zarr",
                            dkrp.RandomFourierFeatures(n_components=8, random_state=0),
                            progress=False)
    Z, labels = dkrp.read_features(tmp_path / "g.zarr")
    assert labels is None and Z.shape == (len(X), 8)
    # and labels of a dask array input can be given
    import dask.array as da

    dkrp.featurize_to_store(da.from_array(X, chunks=CHUNK), tmp_path / "h.zarr",
                            dkrp.RandomFourierFeatures(n_components=8, random_state=0),
                            labels=y, progress=False)
    assert np.array_equal(dkrp.read_features(tmp_path / "h.zarr")[1], y)


def test_read_features_refuses_an_incomplete_store(data, tmp_path):
    import zarr

    from dkrp.feature_store import FeatureStoreError

    dkrp.featurize_to_store(data["train"][0], tmp_path / "f.zarr",
                            dkrp.RandomFourierFeatures(n_components=4, random_state=0),
                            progress=False)
    zarr.open_group(str(tmp_path / "f.zarr"), mode="r+").attrs["complete"] = False
    with pytest.raises(FeatureStoreError, match="did not finish"):
        dkrp.read_features(tmp_path / "f.zarr")


def test_export_round_trips(data, tmp_path):
    from sklearn.datasets import load_svmlight_file

    train, X, y = data["train"]
    dkrp.featurize_to_store(train, tmp_path / "f.zarr",
                            dkrp.Nystroem(kernel="gaussian", gamma=1e-4, n_components=12,
                                          random_state=0),
                            progress=False)
    Z, labels = dkrp.read_features(tmp_path / "f.zarr")
    Z = Z.compute()

    r = _run("export", tmp_path / "f.zarr", "--to", "npy", tmp_path / "f.npy")
    assert r.exit_code == 0 and "f.y.npy" in r.output, r.output
    assert np.load(tmp_path / "f.npy").tobytes() == Z.tobytes()
    assert np.array_equal(np.load(tmp_path / "f.y.npy"), labels)

    r = _run("export", tmp_path / "f.zarr", "--to", "parquet", tmp_path / "f.parquet")
    assert r.exit_code == 0, r.output
    frame = pd.read_parquet(tmp_path / "f.parquet")
    assert list(frame.columns) == [f"z{j}" for j in range(12)] + ["y"]
    assert frame.drop(columns="y").to_numpy().tobytes() == Z.tobytes()
    assert np.array_equal(frame["y"].to_numpy(), labels)

    r = _run("export", tmp_path / "f.zarr", "--to", "libsvm", tmp_path / "f.svm")
    assert r.exit_code == 0, r.output
    Zs, ys = load_svmlight_file(str(tmp_path / "f.svm"), zero_based=False, n_features=12)
    assert np.array_equal(Zs.toarray(), Z)  # 17 digits: exact
    assert np.array_equal(ys, labels)

    r = _run("export", tmp_path / "f.zarr", "--to", "npy", tmp_path / "f.npy")
    assert r.exit_code == 1 and "--overwrite" in r.output


# -- case 3: scaling learnt on train, carried in the spec -----------------------------------


def test_standardize_learns_train_statistics_and_like_reuses_them(data, scheduler_address,
                                                                  tmp_path):
    (train, X, _), (test, Xt, _) = data["train"], data["test"]
    cluster = ["--scheduler", scheduler_address, "--quiet"]
    r = _run("featurize", train, tmp_path / "train-f.zarr", "--method", "rff",
             "--n-components", 64, "--gamma", "0.1", "--seed", 2, "--standardize", *cluster)
    assert r.exit_code == 0, r.output
    spec = open_features(tmp_path / "train-f.zarr").spec
    stats = spec["fitted"]["preprocessing"]["standardize"]
    scale = X.std(axis=0)
    scale[4] = 1.0  # the constant column is left unscaled
    np.testing.assert_allclose(stats["mean"], X.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(stats["scale"], scale, rtol=1e-12)

    r = _run("featurize", test, tmp_path / "test-f.zarr", "--like", tmp_path / "train-f.zarr",
             *cluster)
    assert r.exit_code == 0, r.output
    test_spec = open_features(tmp_path / "test-f.zarr").spec
    assert test_spec["fitted"]["preprocessing"] == spec["fitted"]["preprocessing"]
    assert test_spec["checksum"] == spec["checksum"]
    # the cluster's features are byte-identical to the in-memory transform of the spec
    fitted = dkrp.from_spec(spec)
    Zt = open_features(tmp_path / "test-f.zarr").Z.compute()
    assert Zt.tobytes() == _per_chunk(fitted, Xt).tobytes()
    # ... and are the map of the test rows standardized with the *train* statistics
    plain = dkrp.RandomFourierFeatures(n_components=64, gamma=0.1, random_state=2)
    plain.fit((X - stats["mean"]) / stats["scale"])
    np.testing.assert_allclose(Zt, plain.transform((Xt - stats["mean"]) / stats["scale"]),
                               rtol=1e-9, atol=1e-9)

    # a rerun asking for another scaling is refused, naming it
    r = _run("featurize", train, tmp_path / "train-f.zarr", "--method", "rff",
             "--n-components", 64, "--gamma", "0.1", "--seed", 2, *cluster)
    assert r.exit_code == 1 and "scaling (--standardize/--scale-rows): store standardize" \
        in r.output, r.output


def test_scale_rows_unit_and_old_specs_unchanged(data, scheduler_address, tmp_path):
    train, X, _ = data["train"]
    r = _run("featurize", train, tmp_path / "f.zarr", "--method", "krp", "--degree", 2,
             "--n-components", 40, "--n-hyperplanes", 64, "--scale-rows", "unit",
             "--scheduler", scheduler_address, "--quiet")
    assert r.exit_code == 0, r.output
    fs = open_features(tmp_path / "f.zarr")
    assert fs.spec["fitted"]["preprocessing"] == {"scale_rows": "unit"}
    fitted = dkrp.from_spec(fs.spec)
    Z = fs.Z.compute()
    assert Z.tobytes() == _per_chunk(fitted, X).tobytes()
    plain = dkrp.PolynomialRandomProjection(degree=2, n_components=40, n_hyperplanes=64,
                                            random_state=0).fit(X)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(Z, plain.transform(unit), rtol=1e-9, atol=1e-12)
    assert np.abs(Z).max() < 10  # bounded, where raw 0..255 pixels gave ~1e5
    # without scaling, the spec is what it always was: no preprocessing, same checksum
    spec = plain.to_spec()
    assert "preprocessing" not in spec["fitted"]
    assert spec["checksum"] != fs.spec["checksum"]
    assert dkrp.from_spec(spec).spec_checksum_ == spec["checksum"]


def test_from_spec_round_trips_scaling_in_memory():
    from dkrp.preprocessing import fit_scaled

    X = np.random.default_rng(0).uniform(0, 255, (60, 5))
    est = fit_scaled(dkrp.SphericalRandomFeatures(degree=2, n_components=16, random_state=0),
                     X, standardize=True, scale_rows="unit")
    spec = json.loads(json.dumps(est.to_spec()))
    same = dkrp.from_spec(spec)
    assert same.to_spec() == est.to_spec()
    assert same.transform(X).tobytes() == est.transform(X).tobytes()
    spec["fitted"]["preprocessing"]["standardize"]["mean"][0] += 1.0  # an edited spec
    with pytest.raises(dkrp.SpecError, match="checksum"):
        dkrp.from_spec(spec)


def test_methods_say_which_scaling_each_map_expects():
    from dkrp.methods import method_names

    r = _run("methods")
    assert r.exit_code == 0, r.output
    assert r.output.count("scaling: ") == len(method_names())
    rff = r.output[r.output.index("\nrff "):]
    assert "--standardize" in rff[: rff.index("\nspe")]
