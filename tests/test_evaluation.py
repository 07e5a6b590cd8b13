"""dkrp.evaluation: the training protocols behind the pipelines' reports and the experiments."""

import dask.array as da
import numpy as np
import pytest
from sklearn.metrics import f1_score
from sklearn.svm import LinearSVC

from dkrp.errors import InvalidInputError
from dkrp.evaluation import (
    cross_validated_linear_svm,
    kernel_ridge_mse,
    kernel_svm_accuracy,
    linear_svm_accuracy,
    ridge_mse,
    select_svm_C,
    stratified_subsample,
    train_on_features,
)


def _imbalanced(n=4000, d=10, seed=0):
    # 10 % positives, separable along the first axis up to label noise
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.1, 1, -1)
    Z = rng.standard_normal((n, d)) + 3.0 * (y == 1)[:, None] * np.eye(d)[0]
    return da.from_array(Z, chunks=(500, d)), da.from_array(y, chunks=500)


def test_sgd_training_is_repeatable_with_its_seed():
    # dask-ml shuffles the order of the 8 row blocks in every pass; unseeded, two runs
    # on the same features train different models and report different scores.
    Z, y = _imbalanced()
    runs = [train_on_features(Z, y, classifier="sgd", seed=s, positive_label=1)
            for s in (0, 0, 1)]
    for run in runs:
        run.pop("train_seconds")
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]  # the seed is used (split, SGD and block order)


@pytest.mark.parametrize("classifier", ["sgd", "linearsvc"])
def test_report_scores_against_the_majority_baseline(classifier):
    Z, y = _imbalanced()
    r = train_on_features(Z, y, classifier=classifier, seed=0, positive_label=1)
    assert 0.85 < r["majority_accuracy"] < 0.95  # "always -1" on ~10 % positives
    # the positive class is visible along one axis: the model beats input-blind
    # predictors (balanced accuracy 1/2) by far more than the chance band
    # sqrt(1/n_pos + 1/n_neg)/4 ~ 0.02 of ~100 positive test rows
    assert r["balanced_accuracy"] > 0.6 and r["f1"] > 0
    assert set(r) >= {"accuracy", "balanced_accuracy", "majority_accuracy", "f1", "n_test"}


def test_the_majority_baseline_is_the_most_frequent_training_label_whatever_it_sorts_as():
    # here the frequent class sorts last: "always +1" on ~90 % of the rows
    Z, y = _imbalanced()
    r = train_on_features(Z, -y, classifier="linearsvc", seed=0, positive_label=1)
    assert 0.85 < r["majority_accuracy"] < 0.95


def test_the_majority_baseline_never_looks_at_the_test_labels():
    # a test split whose balance differs from the training split's (a drift between them):
    # the baseline is what predicting the training rows' most frequent class scores on the
    # test rows, not the best constant on the test rows (that would need their labels)
    from dask_ml.model_selection import train_test_split

    n = 1200
    index = da.from_array(np.arange(n), chunks=300)
    train, test = (np.asarray(part.compute()) for part in train_test_split(
        index, test_size=0.25, random_state=0, shuffle=True, blockwise=True))
    y = np.ones(n, dtype=int)
    y[train[:int(0.6 * len(train))]] = 0  # training rows: 60 % class 0
    y[test[:int(0.3 * len(test))]] = 0  # test rows: 30 % class 0
    Z = da.from_array(np.random.default_rng(0).standard_normal((n, 4)), chunks=(300, 4))
    r = train_on_features(Z, y, classifier="linearsvc", seed=0)
    assert r["n_test"] == len(test) == 300
    assert r["majority_accuracy"] == pytest.approx(0.3)  # "always 0", right on 90 of 300


def _train_by_hand(Z, y, test_size, seed, C, positive_label=None, max_iter=10000):
    """train_on_features' documented LinearSVC protocol, written out: dask-ml's seeded
    blockwise split, then scaled columns and a seeded LinearSVC; the F1 of the named
    label (default the larger) of two, the macro F1 of more."""
    from dask_ml.model_selection import train_test_split
    from sklearn.metrics import accuracy_score, balanced_accuracy_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    parts = train_test_split(Z, da.from_array(y, chunks=(Z.chunks[0],)), test_size=test_size,
                             random_state=seed, shuffle=True, blockwise=True)
    Z_tr, Z_te, y_tr, y_te = da.compute(*parts)
    predicted = make_pipeline(StandardScaler(), LinearSVC(C=C, max_iter=max_iter,
                                                          random_state=seed)).fit(
        Z_tr, y_tr).predict(Z_te)
    out = {"accuracy": accuracy_score(y_te, predicted),
           "balanced_accuracy": balanced_accuracy_score(y_te, predicted),
           "n_train": len(y_tr), "n_test": len(y_te)}
    labels = np.unique(y)
    if len(labels) == 2:
        positive = labels.max() if positive_label is None else positive_label
        out["f1"] = f1_score(y_te, predicted, pos_label=positive)
    else:
        out["f1_macro"] = f1_score(y_te, predicted, average="macro")
    return out


def test_train_on_features_defaults_are_the_documented_protocol():
    # a pipeline run without options: "auto" picks LinearSVC (1,200 x 5 features are far
    # below 2 GiB) on scaled columns with C=0.01, on a 75/25 split of every row block
    # seeded 0. dask-ml splits each 300-row block with ShuffleSplit: ceil(0.25 x 300) = 75
    # test rows a block, 300 in all.
    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    got = train_on_features(Z, y)
    expected = _train_by_hand(Z, y, 0.25, 0, 0.01)
    assert got["classifier"] == "linearsvc"
    assert {k: got[k] for k in expected} == pytest.approx(expected)
    assert (got["n_train"], got["n_test"]) == (900, 300)
    # C, the seed and the split's size each move the scores on these rows
    for other in ((0.25, 0, 1.01), (0.25, 1, 0.01)):
        assert _train_by_hand(Z, y, *other)["accuracy"] != expected["accuracy"]
    # test_size is the split's: half of each block is held out
    half = train_on_features(Z, y, test_size=0.5)
    expected = _train_by_hand(Z, y, 0.5, 0, 0.01)
    assert {k: half[k] for k in expected} == pytest.approx(expected)
    assert (half["n_train"], half["n_test"]) == (600, 600)
    # SGD's default is five passes over the blocks
    sgd = [train_on_features(Z, y, classifier="sgd", **kwargs) for kwargs in ({}, {"epochs": 5})]
    for run in sgd:
        run.pop("train_seconds")
    assert sgd[0] == sgd[1]


def test_train_on_features_pairs_labels_chunked_otherwise_than_the_features():
    # a pipeline's labels come from the dataset store (its row chunks), the features from
    # the feature store (featurize's row chunks): each row must keep its own label
    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    expected = train_on_features(Z, y)
    expected.pop("train_seconds")
    for chunks in (400, 200, (500, 100, 600)):
        got = train_on_features(Z, da.from_array(y, chunks=chunks))
        got.pop("train_seconds")
        assert got == expected, chunks
    same = train_on_features(Z, da.from_array(y, chunks=300))
    same.pop("train_seconds")
    assert same == expected
    # as many rows as features: labels in one chunk of 64 rows, as long as the features'
    # one column chunk, beside rows in chunks of 16 (the labels' chunks are the rows')
    X, y, _, _ = _digits(64, 0)
    Z = da.from_array(X, chunks=(16, 64))
    expected = train_on_features(Z, y, C=1.0)
    got = train_on_features(Z, da.from_array(y, chunks=64), C=1.0)
    for result in (expected, got):
        result.pop("train_seconds")
    assert got == expected


def test_train_on_features_reports_the_f1_the_user_names_or_the_macro_f1_of_many_classes():
    # imbalanced binary data: the F1 of the class named positive_label (here the larger
    # class 0, whose F1 is far above the rare class 1's); ten digit classes: the macro F1
    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    got = train_on_features(Z, y, positive_label=0)
    expected = _train_by_hand(Z, y, 0.25, 0, 0.01, positive_label=0)
    assert {k: got[k] for k in expected} == pytest.approx(expected)
    assert got["f1"] > _train_by_hand(Z, y, 0.25, 0, 0.01)["f1"] + 0.1
    X, y, _, _ = _digits(400, 0)
    Z = da.from_array(X, chunks=(100, 64))
    got = train_on_features(Z, y, C=1.0)
    expected = _train_by_hand(Z, y, 0.25, 0, 1.0)
    assert set(got) == {"classifier", "accuracy", "balanced_accuracy", "majority_accuracy",
                        "f1_macro", "n_train", "n_test", "train_seconds"}
    assert {k: got[k] for k in expected} == pytest.approx(expected)


def test_train_on_features_sgd_scales_the_columns_with_the_training_rows_only():
    # the streamed path's scaler, like LinearSVC's, learns its means and deviations from
    # the training rows alone: the held-out rows must not shape the model they score.
    # By hand: dask-ml's seeded split, dask-ml's scaler fitted on the training part, then
    # the seeded Incremental SGD's five passes (a scaler fitted on every row changes 14 of
    # the 300 test predictions here)
    from dask_ml.model_selection import train_test_split
    from dask_ml.preprocessing import StandardScaler
    from dask_ml.wrappers import Incremental
    from sklearn.linear_model import SGDClassifier
    from sklearn.metrics import accuracy_score, balanced_accuracy_score

    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    got = train_on_features(Z, y, classifier="sgd")
    Z_tr, Z_te, y_tr, y_te = train_test_split(Z, da.from_array(y, chunks=300), test_size=0.25,
                                              random_state=0, shuffle=True, blockwise=True)
    scaler = StandardScaler().fit(Z_tr)
    model = Incremental(SGDClassifier(loss="hinge", alpha=1e-4, random_state=0),
                        random_state=np.random.RandomState(0))
    for _ in range(5):
        model.partial_fit(scaler.transform(Z_tr), y_tr, classes=np.array([0, 1]))
    predicted, y_te = da.compute(model.predict(scaler.transform(Z_te)), y_te)
    assert got["n_test"] == len(y_te) == 300
    assert (got["accuracy"], got["balanced_accuracy"], got["f1"]) == pytest.approx(
        (accuracy_score(y_te, predicted), balanced_accuracy_score(y_te, predicted),
         f1_score(y_te, predicted, pos_label=1)))


def test_train_on_features_auto_gathers_training_features_of_at_most_max_in_memory_bytes():
    # a pipeline on a small machine caps what LinearSVC may gather: the 900 training rows
    # of 5 float64 features take 36,000 bytes; one byte less streams them to SGD instead
    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    assert train_on_features(Z, y, max_in_memory_bytes=36000)["classifier"] == "linearsvc"
    assert train_on_features(Z, y, max_in_memory_bytes=35999)["classifier"] == "sgd"
    # float32 features take half as many bytes
    Z = Z.astype(np.float32)
    assert train_on_features(Z, y, max_in_memory_bytes=18000)["classifier"] == "linearsvc"


def test_train_on_features_sgd_makes_as_many_passes_as_asked_and_at_least_one():
    # one pass over data too large to gather takes half the time of two: epochs=1 is one
    X, y = _imbalanced_binary()
    Z = da.from_array(X, chunks=(300, 5))
    runs = [train_on_features(Z, y, classifier="sgd", epochs=e) for e in (0, 1, 2)]
    for run in runs:
        run.pop("train_seconds")
    assert runs[0] == runs[1] != runs[2]


def test_train_on_features_refuses_an_unknown_classifier_naming_the_choices():
    X, y = _imbalanced_binary(400)
    with pytest.raises(InvalidInputError, match=r"^classifier must be 'auto', 'linearsvc' or "
                       r"'sgd'; got 'svm'$"):
        train_on_features(da.from_array(X, chunks=(100, 5)), y, classifier="svm")


def _imbalanced_binary(n=1200, seed=0):
    """Two Gaussian classes 0 / 1, 15 % of class 1, partly overlapping."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.15).astype(int)
    X = rng.standard_normal((n, 5))
    X[:, 0] += 2.0 * y
    return X, y


@pytest.mark.parametrize("seed", range(10))
def test_stratified_subsample_keeps_the_class_proportions(seed):
    X, y = _imbalanced_binary(2000, seed=seed)
    X_sub, y_sub = stratified_subsample(X, y, 200, seed)
    # stratified: each class gets its share up to rounding (a plain random draw of 200
    # rows misses the 15 % class's 30 by more than 1 row about 3 times in 4)
    assert abs(int(y_sub.sum()) - 200 * y.mean()) <= 1
    assert X_sub.shape == (200, 5)
    rows = np.flatnonzero((X[:, None, :] == X_sub[None, :, :]).all(axis=2).any(axis=1))
    assert np.array_equal(y[rows], y_sub)  # rows keep their labels and their order


def test_stratified_subsample_of_as_many_rows_as_there_are_is_every_row():
    # select_svm_C(max_rows=len(Z)) cross-validates on the whole training set
    X, y = _imbalanced_binary(200, seed=0)
    for n in (200, 201, None):
        X_sub, y_sub = stratified_subsample(X, y, n, 0)
        assert X_sub is X and y_sub is y


@pytest.mark.parametrize("positive", [None, 1])
def test_select_svm_c_is_the_best_cross_validated_c(positive):
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _imbalanced_binary()
    grid = [1.0, 1e-4, 1e-2]
    choice = select_svm_C(X, y, grid, folds=3, max_rows=600, seed=3, positive_label=positive)
    # the same protocol by hand: a stratified 600-row subsample, shuffled stratified folds,
    # scaler refitted per fold, scored by accuracy or by the F1 of the named class
    X_cv, y_cv = stratified_subsample(X, y, 600, 3)
    scoring = "accuracy" if positive is None else make_scorer(f1_score, pos_label=positive)
    expected = {
        C: cross_val_score(make_pipeline(StandardScaler(), LinearSVC(C=C, dual=False)), X_cv,
                           y_cv, cv=StratifiedKFold(3, shuffle=True, random_state=3),
                           scoring=scoring).mean()
        for C in grid
    }
    assert len(set(expected.values())) == 3  # the grid's scores differ: the choice matters
    assert choice["scores"] == pytest.approx(expected)
    assert choice["C"] == max(expected, key=expected.get)
    assert choice["n_rows"] == 600


def test_linear_svm_f1_is_the_named_class():
    X, y = _imbalanced_binary()
    X_train, y_train, X_test, y_test = X[:800], y[:800], X[800:], y[800:]
    predicted = LinearSVC(C=1.0, dual=False).fit(X_train, y_train).predict(X_test)
    for positive in (0, 1):  # class 0 (85 %) has a much higher F1 than class 1
        result = linear_svm_accuracy(X_train, y_train, X_test, y_test, C=1.0, dual=False,
                                     positive_label=positive)
        assert result["f1"] == pytest.approx(f1_score(y_test, predicted, pos_label=positive))
    assert "f1" not in linear_svm_accuracy(X_train, y_train, X_test, y_test, dual=False)


# -- linear_svm_accuracy and kernel_svm_accuracy: the scores a report shows -----------------


def _digits(n_train=300, n_test=150):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    return X[:n_train], y[:n_train], X[n_train:n_train + n_test], y[n_train:n_train + n_test]


def _sklearn_scores(y_true, y_pred):
    from sklearn.metrics import accuracy_score

    return {"accuracy": accuracy_score(y_true, y_pred),
            "f1_macro": f1_score(y_true, y_pred, average="macro")}


def test_linear_svm_accuracy_is_linearsvc_scored_on_the_test_rows():
    # a user comparing feature maps reads accuracy and macro F1 of ten digit classes
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_train, y_train, X_test, y_test = _digits()
    plain = linear_svm_accuracy(X_train, y_train, X_test, y_test, C=0.05, dual=False,
                                tol=1e-2)
    scaled = linear_svm_accuracy(X_train, y_train, X_test, y_test, C=0.05, dual=False,
                                 tol=1e-2, standardize=True)
    expect_plain = LinearSVC(C=0.05, dual=False, tol=1e-2).fit(X_train, y_train)
    expect_scaled = make_pipeline(StandardScaler(),
                                  LinearSVC(C=0.05, dual=False, tol=1e-2)).fit(X_train, y_train)
    for got, model in ((plain, expect_plain), (scaled, expect_scaled)):
        assert set(got) == {"accuracy", "f1_macro", "train_seconds", "converged"}
        assert {k: got[k] for k in ("accuracy", "f1_macro")} == pytest.approx(
            _sklearn_scores(y_test, model.predict(X_test)))
        assert got["converged"] is True and got["train_seconds"] > 0
    # the scaling is applied: the two models predict differently on these rows
    assert plain["accuracy"] != scaled["accuracy"]
    # and so is tol: liblinear's default 1e-4 stops elsewhere
    at_default_tol = LinearSVC(C=0.05, dual=False).fit(X_train, y_train).predict(X_test)
    assert plain["accuracy"] != _sklearn_scores(y_test, at_default_tol)["accuracy"]
    # defaults: C=1 (LinearSVC's), liblinear
    default = linear_svm_accuracy(X_train, y_train, X_test, y_test)
    expect = LinearSVC(C=1.0).fit(X_train, y_train).predict(X_test)
    assert default["accuracy"] == pytest.approx(_sklearn_scores(y_test, expect)["accuracy"])
    assert default["accuracy"] != plain["accuracy"]  # C matters here


def test_linear_svm_accuracy_says_when_a_solver_stopped_at_max_iter():
    # the demo marks a row whose solver hit its cap: converged must be False exactly then
    X_train, y_train, X_test, y_test = _digits()
    for solver in ("liblinear", "primal-newton"):
        stopped = linear_svm_accuracy(X_train, y_train, X_test, y_test, max_iter=1,
                                      dual=False, solver=solver)
        assert stopped["converged"] is False, solver
        done = linear_svm_accuracy(X_train, y_train, X_test, y_test, dual=False, solver=solver)
        assert done["converged"] is True, solver


def test_linear_svm_accuracy_primal_newton_solves_with_the_given_parameters():
    from dkrp.linear_svm import PrimalLinearSVC

    X_train, y_train, X_test, y_test = _digits()
    got = linear_svm_accuracy(X_train, y_train, X_test, y_test, C=0.05, tol=1e-2, max_iter=7,
                              solver="primal-newton")
    model = PrimalLinearSVC(C=0.05, tol=1e-2, max_iter=7).fit(X_train, y_train)
    assert {k: got[k] for k in ("accuracy", "f1_macro")} == _sklearn_scores(
        y_test, model.predict(X_test))
    with pytest.raises(ValueError, match=r"^solver must be one of 'liblinear', "
                       r"'primal-newton'; got 'newton'\.$"):
        linear_svm_accuracy(X_train, y_train, X_test, y_test, solver="newton")


def test_kernel_svm_accuracy_is_an_exact_kernel_svc_with_its_parameters():
    from sklearn.svm import SVC

    X, y = _imbalanced_binary(500, seed=2)
    X_train, y_train, X_test, y_test = X[:350], y[:350], X[350:], y[350:]
    got = kernel_svm_accuracy(X_train, y_train, X_test, y_test, kernel="poly", C=0.05,
                              degree=2, gamma=1.0, coef0=0.0, positive_label=1)
    model = SVC(kernel="poly", C=0.05, degree=2, gamma=1.0, coef0=0.0).fit(X_train, y_train)
    predicted = model.predict(X_test)
    at_c1 = SVC(kernel="poly", C=1.0, degree=2, gamma=1.0, coef0=0.0).fit(X_train, y_train)
    assert not np.array_equal(at_c1.predict(X_test), predicted)  # C matters here
    assert set(got) == {"accuracy", "f1_macro", "f1", "train_seconds", "predict_seconds"}
    assert {k: got[k] for k in ("accuracy", "f1_macro")} == _sklearn_scores(y_test, predicted)
    assert got["f1"] == f1_score(y_test, predicted, pos_label=1)
    assert got["train_seconds"] > 0 and got["predict_seconds"] > 0
    # defaults: SVC's polynomial kernel (degree 3, gamma "scale") with C=1, and no "f1"
    default = kernel_svm_accuracy(X_train, y_train, X_test, y_test)
    assert "f1" not in default
    expect = SVC(kernel="poly", C=1.0).fit(X_train, y_train).predict(X_test)
    assert default["accuracy"] == _sklearn_scores(y_test, expect)["accuracy"]
    others = [SVC(kernel=k, C=c).fit(X_train, y_train).predict(X_test)
              for k, c in (("rbf", 1.0), ("poly", 2.0))]
    assert all(not np.array_equal(p, expect) for p in others)  # kernel and C matter here


# -- ridge_mse and kernel_ridge_mse: the regression protocol of the RFF experiment ---------


def _regression(n=120, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X[:80], y[:80] - y[:80].mean(), X[80:], y[80:] - y[:80].mean()


def test_ridge_mse_is_the_test_error_of_the_closed_form_ridge_without_intercept():
    Z_train, y_train, Z_test, y_test = _regression()
    for alpha, kwargs in ((1.0, {}), (7.5, {"alpha": 7.5})):
        # w = (Z^T Z + alpha I)^{-1} Z^T y: no intercept (the docstring: centre y first)
        w = np.linalg.solve(Z_train.T @ Z_train + alpha * np.eye(Z_train.shape[1]),
                            Z_train.T @ y_train)
        got = ridge_mse(Z_train, y_train, Z_test, list(y_test), **kwargs)
        assert set(got) == {"mse", "train_seconds"}
        assert got["mse"] == pytest.approx(np.mean((Z_test @ w - y_test) ** 2), rel=1e-10)
        assert got["train_seconds"] > 0


def test_kernel_ridge_mse_is_the_test_error_of_exact_rbf_kernel_ridge():
    X_train, y_train, X_test, y_test = _regression()

    def rbf(A, B, gamma):
        return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))

    for gamma, alpha, kwargs in ((0.3, 1.0, {}), (0.05, 0.2, {"alpha": 0.2})):
        # dual coefficients (K + alpha I)^{-1} y; predictions K(test, train) a
        a = np.linalg.solve(rbf(X_train, X_train, gamma) + alpha * np.eye(len(y_train)), y_train)
        expected = np.mean((rbf(X_test, X_train, gamma) @ a - y_test) ** 2)
        got = kernel_ridge_mse(X_train, y_train, X_test, list(y_test), gamma=gamma, **kwargs)
        assert set(got) == {"mse", "train_seconds"}
        assert got["mse"] == pytest.approx(expected, rel=1e-8)
        assert got["train_seconds"] > 0


# -- cross_validated_linear_svm: the KRP paper's protocol (footnote 9, Section 4.4) --------


def _three_classes(n=150, d=5, seed=0, spread=1.0):
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.repeat([0, 1, 2], n // 3))
    X = spread * rng.standard_normal((n, d)) + np.eye(3, d)[y] * 1.5
    X = np.hstack([X, np.full((n, 1), 3.0)])  # a constant column: deviation 0
    return X[: 2 * n // 3], y[: 2 * n // 3], X[2 * n // 3:], y[2 * n // 3:]


def _protocol_by_hand(Z_train, y_train, Z_test, y_test, Cs, n_folds, seed, model):
    from sklearn.model_selection import StratifiedKFold

    mean, std = Z_train.mean(axis=0), Z_train.std(axis=0)
    std[std == 0] = 1.0
    A, B = (Z_train - mean) / std, (Z_test - mean) / std
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(A, y_train)
    folds = list(folds)
    scores = {C: np.mean([np.mean(model(C).fit(A[f], y_train[f]).predict(A[h]) == y_train[h])
                          for f, h in folds]) for C in Cs}
    best = max(sorted(scores), key=lambda c: scores[c])  # the smallest C of the best score
    return scores, best, np.mean(model(best).fit(A, y_train).predict(B) == y_test)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("path", ["gram", "gram at its limit", "liblinear", "liblinear's dual"])
def test_cross_validated_linear_svm_is_the_papers_protocol(path):
    from sklearn.svm import SVC

    Z_train, y_train, Z_test, y_test = _three_classes(spread=1.0)
    Cs = [10.0, 1e-3, 0.05]
    if path.startswith("gram"):  # the dual on the linear Gram matrix: SVC, linear kernel
        def model(C):
            return SVC(kernel="linear", C=C)
        kwargs = {} if path == "gram" else {"gram_limit": Z_train.shape[0]}
    elif path == "liblinear":  # beyond gram_limit rows: liblinear on the standardised
        # features, seeded, and stopped at max_iter (1 iteration: the cap shows in the scores)
        def model(C):
            return LinearSVC(C=C, max_iter=1, random_state=2)
        kwargs = {"gram_limit": Z_train.shape[0] - 1, "max_iter": 1}
    else:  # random features wider than the training rows: liblinear's dual coordinate
        # descent, which two passes over the rows leave far from its optimum, in the folds
        # and in the refit that gives the test accuracy alike
        X_train, y_train, X_test, y_test = _digits(60, 200)
        Z_train, Z_test = X_train, X_test

        def model(C):
            return LinearSVC(C=C, max_iter=2, random_state=2)
        kwargs = {"gram_limit": 0, "max_iter": 2}
    got = cross_validated_linear_svm(Z_train, list(y_train), Z_test, list(y_test), Cs=Cs,
                                     n_folds=4, seed=2, **kwargs)
    scores, best, accuracy = _protocol_by_hand(Z_train, y_train, Z_test, y_test, Cs, 4, 2,
                                               model)
    assert len(set(scores.values())) >= 2  # the grid's scores differ: the choice matters
    assert set(got) == {"cv_accuracy", "accuracy", "C", "cv_scores", "train_seconds"}
    assert got["cv_scores"] == pytest.approx(scores)
    assert got["C"] == best and got["cv_accuracy"] == pytest.approx(scores[best])
    assert got["accuracy"] == pytest.approx(accuracy)
    assert got["train_seconds"] > 0


def test_cross_validated_linear_svm_beyond_gram_limit_never_builds_the_gram_matrix():
    # gram_limit exists so that a large training set is not squared: 3000 rows would
    # make a 72 MB Gram matrix
    from conftest import peak_allocation

    rng = np.random.default_rng(0)
    # and by default beyond 6,000 rows: 6,001 would make a 288 MB Gram matrix
    for n, kwargs in ((3000, {"gram_limit": 2999}), (6001, {})):
        y = np.arange(n) % 2
        Z = rng.standard_normal((n, 5)) + y[:, None]
        result, peak = peak_allocation(lambda: cross_validated_linear_svm(
            Z, y, Z[:100], y[:100], Cs=[1.0], n_folds=2, **kwargs))  # noqa: B023
        assert result["accuracy"] > 0.7
        assert peak < 10 * 2**20, n


def test_cross_validated_linear_svm_defaults_and_ties():
    from sklearn.svm import SVC

    # defaults: 5 folds shuffled by seed 0, the Gram path for a small training set
    Z_train, y_train, Z_test, y_test = _three_classes(spread=1.2, seed=4)
    Cs = [1e-3, 0.05]
    got = cross_validated_linear_svm(Z_train, y_train, Z_test, y_test, Cs=Cs)
    scores, best, accuracy = _protocol_by_hand(Z_train, y_train, Z_test, y_test, Cs, 5, 0,
                                               lambda C: SVC(kernel="linear", C=C))
    assert got["cv_scores"] == pytest.approx(scores) and got["C"] == best
    assert got["accuracy"] == pytest.approx(accuracy)
    # separable classes: every C of the grid scores 1.0, and the smaller C (the stronger
    # regularisation) is chosen, whatever the grid's order
    Z_train, y_train, Z_test, y_test = _three_classes(spread=0.05)
    for grid in ([100.0, 10.0], [10.0, 100.0]):
        got = cross_validated_linear_svm(Z_train, y_train, Z_test, y_test, Cs=grid)
        assert got["cv_scores"] == {10.0: 1.0, 100.0: 1.0}
        assert got["C"] == 10.0 and got["accuracy"] == 1.0
    with pytest.raises(ValueError, match=r"^Cs must hold at least one value of C\.$"):
        cross_validated_linear_svm(Z_train, y_train, Z_test, y_test, Cs=[])


# -- the same inputs give the same scores, whatever else the process drew before ----------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_liblinear_in_its_dual_gives_the_same_scores_on_every_run():
    # fewer rows than features: LinearSVC solves the dual by coordinate descent over the
    # rows in a random order. Unseeded, liblinear took its seed from numpy's global
    # generator, so `dkrp demo --max-train 300` (300 rows, 1000 features) printed other
    # accuracies and other "converged" flags from one run to the next.
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test = X[:40] / 16, y[:40], X[40:240] / 16, y[40:240]
    # 60 rows of 64 features for train_on_features: ~40 training rows, liblinear's dual
    Z_few = da.from_array(X[:60] / 16, chunks=(20, 64))
    runs = []
    for state in range(4):
        np.random.seed(state)  # whatever the process drew before
        one = linear_svm_accuracy(X_train, y_train, X_test, y_test, max_iter=10)
        two = select_svm_C(X_train, y_train, [0.1, 1.0], folds=2, dual=True, max_iter=10)
        three = cross_validated_linear_svm(X_train, y_train, X_test, y_test, Cs=[0.1, 1.0],
                                           n_folds=2, gram_limit=0, max_iter=2)
        four = train_on_features(Z_few, y[:60], classifier="linearsvc", test_size=0.34, C=1.0)
        for result in (one, two, three, four):
            result.pop("train_seconds", None), result.pop("seconds", None)
        runs.append((one, two, three, four))
    assert all(run == runs[0] for run in runs[1:])
    # a seed given by the caller is the one liblinear uses
    for seed in (3, 4):
        got = linear_svm_accuracy(X_train, y_train, X_test, y_test, max_iter=10,
                                  random_state=seed)
        predicted = LinearSVC(max_iter=10, random_state=seed).fit(X_train, y_train).predict(X_test)
        assert got["accuracy"] == _sklearn_scores(y_test, predicted)["accuracy"]
    assert got["accuracy"] != runs[0][0]["accuracy"]  # seeds 0 and 4 differ here


# -- select_svm_C: defaults, ties and folds that cannot train -------------------------------


def _select_by_hand(X, y, grid, folds, seed, dual, max_iter, scoring="accuracy"):
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {C: cross_val_score(
        make_pipeline(StandardScaler(), LinearSVC(C=C, dual=dual, max_iter=max_iter,
                                                  random_state=seed)),
        X, y, cv=StratifiedKFold(folds, shuffle=True, random_state=seed), scoring=scoring).mean()
        for C in grid}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_select_svm_c_defaults_are_three_seeded_folds_of_the_primal_on_every_row():
    X, y = _imbalanced_binary(300, seed=1)
    grid = [1e-4, 1e-2, 1.0]
    # max_iter=3 stops liblinear early, so the solver the scores come from shows
    got = select_svm_C(X, y, grid, max_iter=3)
    expected = _select_by_hand(X, y, grid, 3, 0, False, 3)
    assert got["scores"] == pytest.approx(expected) and got["n_rows"] == 300
    assert got["seconds"] > 0
    assert expected != pytest.approx(_select_by_hand(X, y, grid, 3, 0, True, 3))
    # dual=True is the caller's to choose; the seed shuffles the folds and seeds liblinear
    got = select_svm_C(X, y, grid, max_iter=3, dual=True, seed=5)
    assert got["scores"] == pytest.approx(_select_by_hand(X, y, grid, 3, 5, True, 3))


def test_select_svm_c_takes_the_smaller_c_on_a_tie_and_refuses_an_empty_grid():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 60)
    X = rng.standard_normal((120, 3)) + 20.0 * y[:, None]  # separable: every C scores 1
    for grid in ([10.0, 1.0], [1.0, 10.0]):
        got = select_svm_C(X, y, grid)
        assert got["scores"] == {1.0: 1.0, 10.0: 1.0} and got["C"] == 1.0
    with pytest.raises(ValueError, match=r"^grid must hold at least one value of C\.$"):
        select_svm_C(X, y, [])


def test_select_svm_c_scores_the_f1_of_the_named_class_even_when_it_is_class_0():
    from sklearn.metrics import make_scorer

    X, y = _imbalanced_binary(600, seed=3)
    grid = [1e-3, 1e-2, 1.0]
    got = select_svm_C(X, y, grid, positive_label=0)
    expected = _select_by_hand(X, y, grid, 3, 0, False, 10000,
                               scoring=make_scorer(f1_score, pos_label=0))
    assert got["scores"] == pytest.approx(expected)
    assert expected != pytest.approx(_select_by_hand(X, y, grid, 3, 0, False, 10000,
                                                     scoring=make_scorer(f1_score)))


@pytest.mark.filterwarnings("ignore:The least populated class:UserWarning")
def test_select_svm_c_raises_when_a_fold_cannot_train_rather_than_scoring_it_nan():
    # one row of the positive class: the fold holding it out trains on one class only
    X, _ = _imbalanced_binary(90, seed=0)
    y = np.zeros(90, dtype=int)
    y[5] = 1
    with pytest.raises(ValueError, match="1 class|one class|2 classes"):
        select_svm_C(X, y, [1.0])


def test_select_svm_c_scores_folds_stopped_at_max_iter_without_a_warning():
    import warnings

    X, y = _imbalanced_binary(300, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the final fit reports convergence, not the folds
        got = select_svm_C(X, y, [1.0], max_iter=1)
    assert 0.5 < got["scores"][1.0] <= 1.0


def test_select_svm_c_passes_on_the_folds_warnings_other_than_convergence():
    # a class with fewer rows than folds: scikit-learn warns that the folds cannot all
    # hold it (their scores are then noisy). Only the folds' ConvergenceWarning is quiet.
    X, _ = _imbalanced_binary(90, seed=0)
    y = np.zeros(90, dtype=int)
    y[[5, 50]] = 1
    with pytest.warns(UserWarning, match="The least populated class in y has only 2 members"):
        got = select_svm_C(X, y, [1.0])
    assert 0.5 < got["scores"][1.0] <= 1.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_liblinear_stopped_at_its_default_cap_is_linearsvc_with_max_iter_10000():
    # a user reproducing a protocol's scores with scikit-learn. 32 features of a 2-d input
    # (linear in it: rank 2) on 30 rows, so liblinear picks its dual (fewer rows than
    # features); the classes overlap entirely (random labels), so at a large C its
    # coordinate descent does not converge and every pass over the rows still moves the
    # model: the documented cap of 10,000 passes decides the predictions (a 10,001st moves
    # hundreds of these 2,000 test rows)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2030, 2))
    Z, labels = np.hstack([X, X @ rng.standard_normal((2, 30))]), rng.integers(0, 2, 2030)
    Z, y, Z_test, y_test = Z[:30], labels[:30], Z[30:], labels[30:]

    def liblinear(max_iter):
        return LinearSVC(C=1e4, max_iter=max_iter, random_state=0)

    at_cap = liblinear(10000).fit(Z, y)
    assert at_cap.n_iter_ == 10000
    accuracy = np.mean(at_cap.predict(Z_test) == y_test)
    assert accuracy != np.mean(liblinear(10001).fit(Z, y).predict(Z_test) == y_test)
    got = linear_svm_accuracy(Z, y, Z_test, y_test, C=1e4)
    assert got["accuracy"] == accuracy and got["converged"] is False
    # cross_validated_linear_svm's liblinear path, in its folds and its refit
    got = cross_validated_linear_svm(Z, y, Z_test, y_test, Cs=[1e4], n_folds=2, gram_limit=0)
    for max_iter, same in ((10000, True), (10001, False)):
        scores, _, accuracy = _protocol_by_hand(Z, y, Z_test, y_test, [1e4], 2, 0,
                                                lambda C: liblinear(max_iter))  # noqa: B023
        assert (got["cv_scores"] == pytest.approx(scores)
                and got["accuracy"] == pytest.approx(accuracy)) is same
    # train_on_features' LinearSVC (scaled columns) on the same 30 training rows: one
    # block, of which ceil(0.985 x 2,030) = 2,000 rows are held out
    Z_all = da.from_array(np.vstack([Z, Z_test]), chunks=(2030, 32))
    got = train_on_features(Z_all, labels, test_size=0.985, C=1e4)
    expected = _train_by_hand(Z_all, labels, 0.985, 0, 1e4)
    assert expected["n_train"] == 30
    assert got["accuracy"] == expected["accuracy"]
    assert got["accuracy"] != _train_by_hand(Z_all, labels, 0.985, 0, 1e4, max_iter=10001)[
        "accuracy"]
    # and select_svm_C's folds (scaled columns), with its dual=True: on 60 rows of the
    # 2-d input, whose three folds hold out 20 rows each
    X, y = X[:60], labels[:60]
    got = select_svm_C(X, y, [1e4], dual=True)
    assert got["scores"] == pytest.approx(_select_by_hand(X, y, [1e4], 3, 0, True, 10000))
    assert got["scores"] != pytest.approx(_select_by_hand(X, y, [1e4], 3, 0, True, 10001))
