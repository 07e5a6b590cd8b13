"""dkrp.demo: the README's main job, its rows and the data they are trained and scored on."""

import numpy as np
import pytest
from sklearn.metrics import f1_score
from sklearn.svm import LinearSVC

from dkrp.demo import load_demo_dataset, run_demo


def _sklearn_scores(y_true, y_pred):
    from sklearn.metrics import accuracy_score

    return {"accuracy": accuracy_score(y_true, y_pred),
            "f1_macro": f1_score(y_true, y_pred, average="macro")}


def test_the_demo_maps_are_the_ones_its_rows_name():
    # a row says "KRP (poly g=2, p=500, t=5)" or "RFF (gaussian, gamma=scale)": the maps
    # behind them, seeded with the demo's seed, and train_on_features' C for both
    from dkrp.demo import _demo_projectors
    from dkrp.kernels import scale_gamma

    X = np.random.default_rng(0).standard_normal((50, 8))
    (krp_name, krp, krp_C), (rff_name, rff, rff_C) = _demo_projectors("digits", 8, X, seed=3)
    assert krp_name == "KRP (poly g=2, p=500, t=5)"
    assert {k: krp.get_params()[k] for k in ("degree", "n_hyperplanes", "n_terms",
                                             "n_components", "random_state")} == {
        "degree": 2, "n_hyperplanes": 500, "n_terms": 5, "n_components": 1000, "random_state": 3}
    assert rff_name == "RFF (gaussian, gamma=scale)"
    assert (rff.kernel, rff.gamma, rff.n_components, rff.random_state) == (
        "gaussian", scale_gamma(X), 1000, 3)
    assert krp_C == rff_C == 0.01


# -- load_demo_dataset: the rows every demo row is trained and scored on -------------------

DIGITS_NOTE = "scikit-learn digits, pixels / 16, 75/25 stratified split"


def test_demo_digits_are_a_stratified_75_25_split_of_the_scaled_digits():
    from sklearn.datasets import load_digits

    X_all, y_all = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test, note = load_demo_dataset("digits")
    assert note == DIGITS_NOTE
    assert np.array_equal(load_demo_dataset()[0], X_train)  # digits is the default
    assert X_train.shape == (1347, 64) and X_test.shape == (450, 64)  # 1797 rows, 25 % test
    assert X_train.min() == 0.0 and X_train.max() == 1.0  # pixels 0..16 divided by 16
    # every row is a digit of the set with its own label, none in both parts
    both = np.vstack([X_train, X_test]) * 16.0
    assert sorted(map(bytes, both)) == sorted(map(bytes, X_all.astype(np.float64)))
    lookup = {bytes(x): label for x, label in zip(X_all.astype(np.float64), y_all, strict=True)}
    assert [lookup[bytes(x)] for x in both] == list(np.concatenate([y_train, y_test]))
    # stratified: each class's test share is 25 % of it up to rounding
    for c in range(10):
        assert abs(np.sum(y_test == c) - 0.25 * np.sum(y_all == c)) <= 1
    # the seed chooses the split, and the same seed gives the same one
    again = load_demo_dataset("digits", seed=0)
    other = load_demo_dataset("digits", seed=1)
    assert np.array_equal(again[0], X_train) and np.array_equal(again[3], y_test)
    assert not np.array_equal(other[0], X_train)


def test_demo_digits_subsampled_for_speed_say_so():
    X_train, y_train, X_test, y_test, _ = load_demo_dataset("digits")
    sub = load_demo_dataset("digits", max_train=200, max_test=100)
    assert sub[0].shape == (200, 64) and sub[2].shape == (100, 64)
    assert sub[4] == f"{DIGITS_NOTE}; subsampled to 200 train / 100 test rows for speed"
    for X_sub, y_sub, X, y in ((sub[0], sub[1], X_train, y_train),
                               (sub[2], sub[3], X_test, y_test)):
        # rows of the full part, with their labels, in their order
        position = {bytes(x): i for i, x in enumerate(X)}
        rows = [position[bytes(x)] for x in X_sub]
        assert rows == sorted(set(rows)) and np.array_equal(y[rows], y_sub)
    # the same seed gives the same rows
    assert np.array_equal(load_demo_dataset("digits", max_train=200, max_test=100)[0], sub[0])
    # only one part above its cap: only it is cut, and the note says so
    cut = load_demo_dataset("digits", max_train=5000, max_test=449)
    assert cut[0].shape == (1347, 64) and cut[2].shape == (449, 64)
    assert cut[4] == f"{DIGITS_NOTE}; subsampled to 1347 train / 449 test rows for speed"
    cut = load_demo_dataset("digits", max_train=1346)
    assert cut[0].shape == (1346, 64) and cut[2].shape == (450, 64)
    assert cut[4].endswith("; subsampled to 1346 train / 450 test rows for speed")
    # a cap equal to the part's size cuts nothing
    whole = load_demo_dataset("digits", max_train=1347, max_test=450)
    assert whole[4] == DIGITS_NOTE and np.array_equal(whole[0], X_train)


def test_an_unknown_demo_dataset_is_refused_naming_the_choices():
    with pytest.raises(ValueError) as caught:
        load_demo_dataset("cifar")
    assert str(caught.value) == ("Unknown demo dataset 'cifar'; choose one of digits, mnist, "
                                 "fashion-mnist, covtype, w8a.")


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist", "covtype", "w8a"])
def test_demo_datasets_from_files_have_their_documented_sizes_and_scaling(name):
    import scipy.sparse as sp
    from conftest import real_data_root

    real_data_root()
    X_train, y_train, X_test, y_test, note = load_demo_dataset(name)
    expected = {  # the per-dataset caps that keep the demo short (its notes say them)
        "mnist": ((5000, 784), (2000, 784), "mnist IDX files, pixels / 255"),
        "fashion-mnist": ((5000, 784), (2000, 784), "fashion-mnist IDX files, pixels / 255"),
        "covtype": ((6000, 54), (3780, 54),
                    "covtype (15120 rows), standardised columns, 75/25 split"),
        "w8a": ((8000, 300), (4000, 300),
                "w8a (training file only; split 75/25), sparse binary features"),
    }[name]
    assert (X_train.shape, X_test.shape) == expected[:2]
    assert note == (f"{expected[2]}; subsampled to {expected[0][0]} train / {expected[1][0]} "
                    "test rows for speed")
    assert len(y_train) == X_train.shape[0] and len(y_test) == X_test.shape[0]
    if name == "w8a":
        assert sp.issparse(X_train) and set(np.unique(X_train.data)) == {1.0}
        # a stratified 75/25 split (3 % positives): with caps above its sizes, the test
        # part holds a quarter of the positives, to one row
        _, y_all_train, _, y_all_test, _ = load_demo_dataset(name, max_train=10**9,
                                                              max_test=10**9)
        positives = int((y_all_train == 1).sum() + (y_all_test == 1).sum())
        assert abs(int((y_all_test == 1).sum()) - positives / 4) <= 1
    elif name == "covtype":
        # standardised with the whole file's column means and deviations (a constant
        # column left at 0): undoing that gives back rows of the file, whose values are
        # integers
        from dkrp.datasets import load_covtype

        # a stratified 75/25 split of the balanced file (2,160 rows a class): the test part
        # (kept whole) holds 540 of each class
        assert set(np.unique(y_test, return_counts=True)[1]) == {540}
        raw, _ = load_covtype()
        mean, std = raw.mean(axis=0), raw.std(axis=0)
        for X in (X_train, X_test):
            back = X * np.where(std > 0, std, 1.0) + mean
            assert np.abs(back - np.round(back)).max() < 1e-6
            assert {bytes(r) for r in np.round(back) + 0.0} <= {bytes(r) for r in raw}  # no -0
    else:
        assert X_train.min() == 0.0 and X_train.max() == 1.0  # pixels / 255
        # the digits of the file the name says (the two MNISTs share shape and scaling)
        from dkrp.datasets import load_fashion_mnist, load_mnist

        loader = {"mnist": load_mnist, "fashion-mnist": load_fashion_mnist}[name]
        for X, kind in ((X_train, "train"), (X_test, "test")):
            whole = loader(kind, scale="[0,1]")[0]
            assert {bytes(r) for r in X} <= {bytes(r) for r in whole}
    assert X_train.dtype == X_test.dtype == np.float64  # what the demo's .npy rows hold
    # a cap given by the caller replaces the default
    small = load_demo_dataset(name, max_train=300, max_test=200)
    assert (small[0].shape[0], small[2].shape[0]) == (300, 200)
    # the split and the subsample are the seed's: the same rows each time
    again = load_demo_dataset(name, max_train=300, max_test=200)
    for first, second in zip(small[:4], again[:4], strict=True):
        assert (first != second).nnz == 0 if sp.issparse(first) else np.array_equal(first,
                                                                                    second)


# -- run_demo: the README's main job, in this process (dask's local scheduler) -------------

DEMO_MODELS = ["LinearSVC on raw inputs", "LinearSVC on KRP (poly g=2, p=500, t=5)",
               "LinearSVC on RFF (gaussian, gamma=scale)", "exact SVC, <x,y>^2",
               "exact SVC, RBF (gamma=scale)"]
ROW_KEYS = {"model", "n_features", "accuracy", "f1_macro", "featurize_seconds",
            "train_seconds", "converged", "note"}


def _fit_predict(model, X_train, y_train, X_test):
    """Predictions of ``model`` and whether it converged (no ConvergenceWarning)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        predicted = model.fit(X_train, y_train).predict(X_test)
    return predicted, not any(w.category is ConvergenceWarning for w in caught)


def _documented_maps(X_train, seed):
    """The maps run_demo's docstring names: KRP degree 2, k=1000, p=500, t=5; RFF Gaussian,
    k=1000, gamma="scale" (scikit-learn's 1 / (d Var(X)))."""
    from dkrp.features import PolynomialRandomProjection, RandomFourierFeatures

    gamma = 1.0 / (X_train.shape[1] * X_train.var())
    krp = PolynomialRandomProjection(degree=2, n_components=1000, n_hyperplanes=500,
                                     n_terms=5, random_state=seed).fit(X_train)
    rff = RandomFourierFeatures(kernel="gaussian", gamma=gamma, n_components=1000,
                                random_state=seed).fit(X_train)
    return {"PolynomialRandomProjection": krp, "RandomFourierFeatures": rff}


@pytest.fixture(scope="module")
def demo_in_a_workdir(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    mine = workdir / "digits-train.npy"  # a user's file named like the demo's rows
    np.save(mine, np.arange(3))
    lines = []
    rows = run_demo("digits", workdir=workdir, max_train=120, max_test=60,
                    report=lines.append)
    return workdir, rows, lines


def test_the_demo_rows_are_the_documented_models_on_the_documented_rows(demo_in_a_workdir):
    from sklearn.svm import SVC

    workdir, rows, _ = demo_in_a_workdir
    X_train, y_train, X_test, y_test, note = load_demo_dataset("digits", max_train=120,
                                                               max_test=60)
    assert [r["model"] for r in rows] == DEMO_MODELS
    assert [r["n_features"] for r in rows] == [64, 1000, 1000, None, None]
    for r in rows:
        assert set(r) == ROW_KEYS | ({"store"} if "KRP" in r["model"] or "RFF" in r["model"]
                                     else set())
        assert r["note"] == note and r["train_seconds"] > 0
        assert 0.8 < r["accuracy"] <= 1.0 and 0.8 < r["f1_macro"] <= 1.0  # digits, 60 rows
    assert [r["featurize_seconds"] > 0 for r in rows] == [False, True, True, False, False]
    assert {r["featurize_seconds"] for r in rows[:1] + rows[3:]} == {0.0}
    # the references: LinearSVC's defaults capped at DEMO_MAX_ITER on the raw pixels, and
    # the exact SVMs the docstring names
    raw = _fit_predict(LinearSVC(max_iter=200, random_state=0), X_train, y_train, X_test)
    poly = SVC(kernel="poly", degree=2, gamma=1.0, coef0=0.0).fit(X_train, y_train)
    rbf = SVC(kernel="rbf", gamma="scale").fit(X_train, y_train)
    for row, (predicted, converged) in ((rows[0], raw), (rows[3], (poly.predict(X_test), True)),
                                        (rows[4], (rbf.predict(X_test), True))):
        assert {k: row[k] for k in ("accuracy", "f1_macro")} == _sklearn_scores(y_test,
                                                                                predicted)
        assert row["converged"] is converged
    assert rows[3]["accuracy"] != rows[4]["accuracy"]  # two kernels, two results


def test_the_demo_features_are_the_documented_maps_read_back_from_its_stores(
        demo_in_a_workdir):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from dkrp.feature_store import open_features

    workdir, rows, _ = demo_in_a_workdir
    X_train, y_train, X_test, y_test, _ = load_demo_dataset("digits", max_train=120,
                                                            max_test=60)
    maps = _documented_maps(X_train, seed=0)
    for row, name in ((rows[1], "PolynomialRandomProjection"),
                      (rows[2], "RandomFourierFeatures")):
        assert row["store"] == str(workdir)  # a given workdir is kept, and named
        Z = {}
        for part, X in (("train", X_train), ("test", X_test)):
            stored = open_features(workdir / f"digits-{part}-{name}.zarr")
            assert stored.complete
            Z[part] = stored.Z.compute()
            np.testing.assert_allclose(Z[part], maps[name].transform(X), rtol=1e-10,
                                       atol=1e-12)
        # trained as train_on_features trains: standardised columns, C=0.01
        # (120 rows, 1000 features: liblinear's dual, seeded)
        model = make_pipeline(StandardScaler(), LinearSVC(C=0.01, max_iter=200, random_state=0))
        predicted, converged = _fit_predict(model, Z["train"], y_train, Z["test"])
        assert {k: row[k] for k in ("accuracy", "f1_macro")} == pytest.approx(
            _sklearn_scores(y_test, predicted))
        assert row["converged"] is converged


def test_the_demo_leaves_a_users_files_and_no_rows_of_its_own(demo_in_a_workdir):
    workdir, _, lines = demo_in_a_workdir
    assert np.array_equal(np.load(workdir / "digits-train.npy"), np.arange(3))
    assert not list(workdir.glob(".*.npy"))  # its own rows are removed once ingested
    assert {p.name for p in workdir.iterdir()} == {
        "digits-train.npy", "digits-train.zarr", "digits-test.zarr",
        "digits-train-PolynomialRandomProjection.zarr",
        "digits-test-PolynomialRandomProjection.zarr",
        "digits-train-RandomFourierFeatures.zarr", "digits-test-RandomFourierFeatures.zarr"}
    # every step is announced as it starts
    assert lines == [
        "loading digits",
        "LinearSVC on the raw inputs (120 train / 60 test rows x 64)",
        f"ingesting train and test rows into Zarr dataset stores in {workdir}",
        "featurizing with KRP (poly g=2, p=500, t=5) on the cluster",
        "LinearSVC on KRP (poly g=2, p=500, t=5) (1000 standardised features)",
        "featurizing with RFF (gaussian, gamma=scale) on the cluster",
        "LinearSVC on RFF (gaussian, gamma=scale) (1000 standardised features)",
        "exact-kernel SVC, <x,y>^2",
        "exact-kernel SVC, RBF",
    ]


def test_the_demo_in_a_temporary_directory_removes_it_and_names_no_store(tmp_path,
                                                                         monkeypatch):
    import tempfile

    from dkrp.feature_store import open_features

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}

    def report(line):  # look into the temporary workdir while the demo runs
        if line.startswith("LinearSVC on RFF"):
            (workdir,) = tmp_path.iterdir()
            seen["workdir"] = workdir
            seen["spec"] = open_features(
                workdir / "digits-train-RandomFourierFeatures.zarr").spec

    rows = run_demo("digits", max_train=100, max_test=50, seed=1, exact=False,
                    report=report, max_iter=3)
    assert seen["workdir"].name.startswith("dkrp-demo-")
    assert list(tmp_path.iterdir()) == []  # removed afterwards
    assert [r["model"] for r in rows] == DEMO_MODELS[:3]  # exact=False: no exact SVMs
    assert [r.get("store", "none") for r in rows] == ["none", None, None]
    # the seed reaches the maps and the subsample; max_iter reaches every LinearSVC
    X_train = load_demo_dataset("digits", max_train=100, max_test=50, seed=1)[0]
    expected = _documented_maps(X_train, seed=1)["RandomFourierFeatures"]
    import dkrp

    assert dkrp.from_spec(seen["spec"]).get_params() == expected.get_params()
    assert [r["converged"] for r in rows] == [False, False, False]


def test_the_demo_runs_on_the_given_cluster_quietly_into_a_new_workdir_and_again(tmp_path,
                                                                                 capfd):
    # `dkrp demo --workdir runs/today` on a fresh checkout (neither folder exists yet),
    # then again in the same workdir, as a user re-runs a command
    from distributed import Client

    from dkrp.io import open_dataset
    from dkrp.parallel import start_local_cluster

    workdir = tmp_path / "runs" / "today"
    asked = []
    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as given:

        def connect():
            asked.append(given)
            return given

        rows = run_demo(workdir=workdir, client=connect, max_train=100, max_test=50,
                        exact=False, max_iter=3)
        X_train, y_train, X_test, y_test, note = load_demo_dataset("digits", max_train=100,
                                                                   max_test=50)
        assert asked and set(map(id, asked)) == {id(given)}  # the featurizing went there
        assert {r["note"] for r in rows} == {note}  # digits is the default dataset
        assert [r.get("store", "none") for r in rows] == ["none", str(workdir), str(workdir)]
        # the raw row is LinearSVC with C=1 (on these rows C=2 scores 0.92, C=1 0.90)
        raw, _ = _fit_predict(LinearSVC(C=1.0, max_iter=3, random_state=0), X_train, y_train,
                              X_test)
        assert {k: rows[0][k] for k in ("accuracy", "f1_macro")} == _sklearn_scores(y_test,
                                                                                    raw)
        out, err = capfd.readouterr()
        assert "featurize:" not in out + err  # no progress bars (tqdm's) unless asked for

        # again, on all the digits: the demo replaces its own stores
        again = run_demo(workdir=workdir, client=connect, exact=False, max_iter=3)
    train = open_dataset(workdir / "digits-train.zarr")
    assert train.X.shape == (1347, 64) and len(again) == 3
    # a few row blocks per worker, so that a cluster shares the work: 8 of ceil(1347 / 8)
    assert train.X.chunks[0] == (169,) * 7 + (1347 - 7 * 169,)


def _set_block_size(size):
    import dkrp._random

    dkrp._random.BLOCK_SIZE = size  # another stream layout: other hyperplanes


def test_the_demo_refuses_a_cluster_whose_worker_draws_other_hyperplanes(tmp_path):
    # a worker with another numpy or dkrp (here another stream layout) is named before any
    # features are written, not after the train rows' store looks complete
    from distributed import Client

    from dkrp.errors import SpecError
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=1, threads_per_worker=1) as cluster, \
            Client(cluster, set_as_default=False) as other:
        other.run(_set_block_size, 128)
        with pytest.raises(SpecError, match="do not regenerate the hyperplanes"):
            run_demo(workdir=tmp_path, client=other, max_train=100, max_test=50, exact=False,
                     max_iter=3)
    assert not list(tmp_path.glob("digits-*-*.zarr"))  # no feature store of either part


def test_the_demo_on_w8a_featurizes_its_sparse_rows(tmp_path):
    # w8a is the one demo dataset held as CSR: its rows reach the dataset stores dense
    from conftest import real_data_root

    import dkrp
    from dkrp.feature_store import open_features

    real_data_root()
    rows = run_demo("w8a", workdir=tmp_path, max_train=300, max_test=200, exact=False,
                    max_iter=50)
    X_train = load_demo_dataset("w8a", max_train=300, max_test=200)[0]
    assert [r["n_features"] for r in rows] == [300, 1000, 1000]
    stored = open_features(tmp_path / "w8a-train-RandomFourierFeatures.zarr")
    np.testing.assert_allclose(stored.Z.compute(),
                               dkrp.from_spec(stored.spec).transform(X_train.toarray()),
                               rtol=1e-10, atol=1e-12)


def test_the_demo_names_moved_out_of_evaluation_are_still_found_there_with_a_warning():
    # code written against 0.2.0 imported the demo from dkrp.evaluation
    import dkrp.demo
    import dkrp.evaluation

    for name in ("DEMO_DATASETS", "DEMO_MAX_ITER", "load_demo_dataset", "run_demo"):
        # the whole message: it says where to import the name from now
        with pytest.warns(FutureWarning, match=rf"^dkrp\.evaluation\.{name} moved to "
                          rf"dkrp\.demo\.{name}; import it from there\.$") as record:
            assert getattr(dkrp.evaluation, name) is getattr(dkrp.demo, name)
        # and it points at the line that looked the name up (the user's, not dkrp's)
        assert [w.filename for w in record] == [__file__]
    # any other name is Python's usual missing attribute (hasattr and getattr's default
    # rely on the AttributeError)
    with pytest.raises(AttributeError, match=r"^module 'dkrp\.evaluation' has no attribute "
                       r"'demo_rows'$"):
        dkrp.evaluation.demo_rows  # noqa: B018 - the lookup is the test
    assert not hasattr(dkrp.evaluation, "demo_rows")
