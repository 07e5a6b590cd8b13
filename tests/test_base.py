"""dkrp.base: scikit-learn citizenship, validation, dtype rules, CSR input, dispatch.

Bad input and bad parameters give clear ValueErrors, nothing silently coerced
(R14); float32 in gives float32 out; CSR equals dense and is never densified.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import peak_allocation
from projector_cases import BASELINE_MAPS, CORE, DATA_DEPENDENT, PROJECTORS
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC

import dkrp
from dkrp.baselines import KulisGraumanRP, Nystroem, PCAProjector
from dkrp.features.independent import IndependentPolynomialProjection
from dkrp.features.maclaurin import RandomMaclaurin
from dkrp.features.tensorsketch import TensorSketch

X_OK = np.random.default_rng(0).standard_normal((20, 6))


def _krp(**kw):
    return dkrp.PolynomialRandomProjection(**{"n_components": 8, "n_hyperplanes": 16, **kw})


def _sparse_data(rng, n=25, d=30):
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.2)
    return X


# -- dtype and CSR ------------------------------------------------------------------


@pytest.mark.parametrize("est", CORE, ids=lambda e: type(e).__name__)
def test_float32_preserved_and_close_to_float64(est):
    X = np.random.default_rng(1).standard_normal((30, 6))
    est = est.fit(X)
    Z64 = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32 and Z64.dtype == np.float64
    np.testing.assert_allclose(Z32, Z64, rtol=2e-3, atol=2e-3 * np.abs(Z64).max())


@pytest.mark.parametrize("name", sorted(BASELINE_MAPS))
def test_float32_preserved_and_close_to_float64_baseline_maps(name):
    rng = np.random.default_rng(0)
    X = _sparse_data(rng)
    est = BASELINE_MAPS[name]().fit(X)
    Z64 = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z64.dtype == np.float64 and Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z64, rtol=1e-3, atol=1e-4 * np.abs(Z64).max())


@pytest.mark.parametrize("est", CORE, ids=lambda e: type(e).__name__)
def test_csr_equals_dense(est):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 6)) * (rng.random((40, 6)) < 0.3)
    est = est.fit(X)
    Z_sparse = est.transform(sp.csr_matrix(X))
    np.testing.assert_allclose(Z_sparse, est.transform(X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(BASELINE_MAPS))
def test_csr_equals_dense_baseline_maps(name):
    rng = np.random.default_rng(1)
    X = _sparse_data(rng)
    est = BASELINE_MAPS[name]().fit(X)
    dense = est.transform(X)
    Xs = sp.csr_matrix(X)
    sparse = est.transform(Xs)
    assert isinstance(sparse, np.ndarray)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)
    assert est.transform(Xs.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_float32_preserved_and_csr_equals_dense(name):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((60, 9)) * (rng.random((60, 9)) < 0.5)
    est = DATA_DEPENDENT[name]().fit(X)
    Z = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z.dtype == np.float64 and Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z, rtol=1e-4, atol=1e-4 * np.abs(Z).max())
    Zs = est.transform(sp.csr_matrix(X))
    np.testing.assert_allclose(Zs, Z, rtol=1e-10, atol=1e-10 * np.abs(Z).max())
    # fitting on CSR samples the same rows and learns the same map
    est_sparse = DATA_DEPENDENT[name]().fit(sp.csr_matrix(X))
    np.testing.assert_allclose(est_sparse.transform(X), Z, rtol=1e-9,
                               atol=1e-9 * np.abs(Z).max())


SPARSE_MAPS = {
    "krp": lambda: dkrp.PolynomialRandomProjection(n_components=50, n_hyperplanes=64,
                                                   random_state=0),
    "rff": lambda: dkrp.RandomFourierFeatures(gamma=1.0, n_components=50, random_state=0),
    "independent": lambda: IndependentPolynomialProjection(n_components=16, random_state=0),
    "maclaurin": lambda: RandomMaclaurin(degree=2, n_components=32, random_state=0),
    "tensorsketch": lambda: TensorSketch(degree=2, n_components=50, random_state=0),
}


@pytest.mark.parametrize("name", sorted(SPARSE_MAPS))
def test_sparse_input_is_not_densified(name):
    # 200k columns dense would be 1.6 GB for this 1000-row block; CSR stays small. The
    # peak of memory allocated during transform (numpy reports its buffers to
    # tracemalloc) must stay below a quarter of that: a densified block cannot.

    rng = np.random.default_rng(0)  # 20 non-zeros per row, built directly (sp.random is slow)
    cols = np.sort(rng.integers(0, 200_000, size=(1000, 20)), axis=1)
    X = sp.csr_matrix((rng.standard_normal(cols.size), cols.ravel(), np.arange(0, 20_001, 20)),
                      shape=(1000, 200_000))
    X.sum_duplicates()
    est = SPARSE_MAPS[name]().fit(X[:10])
    dense_bytes = X.shape[0] * X.shape[1] * 8
    Z, peak = peak_allocation(lambda: est.transform(X))
    assert Z.shape == (1000, est.n_components_) and np.isfinite(Z).all()
    assert peak < dense_bytes / 4, (
        f"{name}: transform of a CSR block allocated {peak / 1e6:.0f} MB at peak; the "
        f"block densified is {dense_bytes / 1e6:.0f} MB"
    )


def test_feature_names_and_pipeline():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((80, 5))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    krp = dkrp.PolynomialRandomProjection(n_components=50, n_hyperplanes=100, random_state=0)
    names = krp.fit(X).get_feature_names_out()
    assert list(names[:2]) == ["polynomialrandomprojection0", "polynomialrandomprojection1"]
    pipe = make_pipeline(
        dkrp.PolynomialRandomProjection(n_components=200, n_hyperplanes=200, random_state=0),
        LinearSVC(),
    ).fit(X, y)
    # x0*x1 is linear in φ(x) for g = 2, so the pipeline should beat chance clearly.
    assert pipe.score(X, y) > 0.8


def test_inside_dask_ml_parallel_post_fit():
    import dask.array as da
    from dask_ml.wrappers import ParallelPostFit

    X = np.random.default_rng(4).standard_normal((100, 7))
    est = ParallelPostFit(dkrp.RandomFourierFeatures(n_components=16, random_state=0)).fit(X)
    Xd = da.from_array(X, chunks=(25, 7))
    Z = est.transform(Xd)
    assert isinstance(Z, da.Array)
    np.testing.assert_allclose(Z.compute(scheduler="sync"), est.estimator.transform(X), rtol=1e-12)


def test_dask_tokenize_is_deterministic():
    X = np.random.default_rng(5).standard_normal((50, 12))
    from dask.base import tokenize

    a = PROJECTORS[0]().fit(X)
    b = dkrp.from_spec(a.to_spec())
    assert tokenize(a) == tokenize(b)
    assert tokenize(a) != tokenize(PROJECTORS[1]().fit(X))

# -- bad parameters (one table per family of maps) ------------------------------------


BAD_PARAMS = [
    (_krp(degree=2.5), "degree must be an integer"),
    (_krp(degree=0), "degree must be >= 1"),
    (_krp(degree=True), "degree must be an integer"),
    (_krp(n_components=0), "n_components must be >= 1"),
    (_krp(n_hyperplanes=3, degree=2, n_terms=2), "degree \\* n_terms must not exceed"),
    (_krp(n_terms=0), "n_terms must be >= 1"),
    (_krp(distribution="cauchy"), "distribution must be one of"),
    (_krp(distribution="achlioptas", density=0.0), "density must be > 0"),
    (_krp(distribution="achlioptas", density=1.5), "density must be <= 1"),
    (_krp(distribution="achlioptas", density="sparse"), "density must be 'auto'"),
    (_krp(random_state=-1), "random_state must be a non-negative integer"),
    (_krp(random_state=np.random.default_rng(0)), "random_state must be a non-negative"),
    (dkrp.RandomFourierFeatures(kernel="rbf"), "kernel must be one of"),
    (dkrp.RandomFourierFeatures(gamma=-1.0), "gamma must be > 0"),
    (dkrp.RandomFourierFeatures(gamma="auto"), "gamma must be one of"),
    (dkrp.RandomFourierFeatures(feature_map="sin"), "feature_map must be one of"),
    (dkrp.RandomFourierFeatures(feature_map="cos_sin", n_components=7), "must be even"),
    (dkrp.ExplicitPolynomialProjection(degree=-1), "degree must be >= 1"),
]


@pytest.mark.parametrize("est, match", BAD_PARAMS, ids=[m for _, m in BAD_PARAMS])
def test_bad_parameters(est, match):
    with pytest.raises(ValueError, match=match):
        est.fit(X_OK)


BASELINE_BAD_PARAMS = [
    (IndependentPolynomialProjection, {"degree": 0}, "degree must be >= 1"),
    (IndependentPolynomialProjection, {"degree": 2.5}, "degree must be an integer"),
    (IndependentPolynomialProjection, {"n_terms": 0}, "n_terms must be >= 1"),
    (IndependentPolynomialProjection, {"n_components": 0}, "n_components must be >= 1"),
    (IndependentPolynomialProjection, {"distribution": "uniform"}, "distribution must be"),
    (IndependentPolynomialProjection, {"distribution": "achlioptas", "density": 0.0},
     "density must be > 0"),
    (RandomMaclaurin, {"kernel": "gaussian"}, "kernel must be one of"),
    (RandomMaclaurin, {"kernel": "polynomial", "coef0": -1.0}, "coef0 must be >= 0"),
    (RandomMaclaurin, {"gamma": -0.5}, "gamma must be > 0"),
    (RandomMaclaurin, {"degree": 0}, "degree must be >= 1"),
    (RandomMaclaurin, {"random_state": -3}, "random_state must be a non-negative"),
    (TensorSketch, {"kernel": "laplacian"}, "kernel must be one of"),
    (TensorSketch, {"kernel": "polynomial", "coef0": -2.0}, "coef0 must be >= 0"),
    (TensorSketch, {"n_components": 0}, "n_components must be >= 1"),
    (TensorSketch, {"degree": "2"}, "degree must be an integer"),
]


@pytest.mark.parametrize(
    "cls, params, match", BASELINE_BAD_PARAMS,
    ids=[f"{c.__name__}-{'-'.join(map(str, p.values()))}" for c, p, _ in BASELINE_BAD_PARAMS],
)
def test_bad_params(cls, params, match):
    X = np.random.default_rng(0).standard_normal((10, 4))
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X)


LEARNT_BAD_PARAMS = [
    (Nystroem, {"n_components": 50}, 20, "n_components=50 .* n_samples=20"),
    (KulisGraumanRP, {"n_landmarks": 50, "n_terms": 5}, 20, "n_landmarks=50 .* n_samples=20"),
    (KulisGraumanRP, {"n_landmarks": 10, "n_terms": 11}, 40, "n_terms must not exceed"),
    (KulisGraumanRP, {"n_landmarks": 1, "n_terms": 1}, 40, "n_landmarks must be >= 2"),
    (Nystroem, {"kernel": "rbff"}, 40, "kernel must be one of"),
    (KulisGraumanRP, {"kernel": "sigmoid", "n_landmarks": 10, "n_terms": 2}, 40,
     "kernel must be one of"),
    (Nystroem, {"kernel": "poly", "degree": 2.5, "n_components": 5}, 40,
     "degree must be an integer"),
    (Nystroem, {"kernel": "gaussian", "gamma": -1.0, "n_components": 5}, 40,
     "gamma must be > 0"),
    (Nystroem, {"n_components": 0}, 40, "n_components must be >= 1"),
    (KulisGraumanRP, {"n_components": 5, "n_landmarks": 10, "n_terms": 2,
                      "random_state": 1.5}, 40, "random_state must be"),
    (PCAProjector, {"n_components": 10}, 40, r"n_components=10 must be <= .*n_features=6"),
    (PCAProjector, {"whiten": "yes"}, 40, "whiten must be a bool"),
]


@pytest.mark.parametrize(
    "cls, params, n_samples, match", LEARNT_BAD_PARAMS,
    ids=[f"{c.__name__}-{'-'.join(map(str, p.values()))}" for c, p, _, _ in LEARNT_BAD_PARAMS],
)
def test_bad_input(cls, params, n_samples, match):
    X = np.random.default_rng(0).standard_normal((n_samples, 6))
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X)

# -- bad input -----------------------------------------------------------------------


def _with(value, row=13, col=2):
    X = X_OK.copy()
    X[row, col] = value
    return X


BAD_INPUT = [
    (_with(np.nan), "Input X contains NaN \\(at row 13\\)"),
    (_with(np.inf, row=4), "Input X contains infinity .* \\(at row 4\\)"),
    (sp.csr_matrix(_with(np.nan, row=7)), "Input X contains NaN \\(at row 7\\)"),
    (X_OK[:, :5], "X has 5 features, but PolynomialRandomProjection is expecting 6 features"),
    (X_OK[0], "Expected 2D array, got 1D array"),
    (X_OK[:0], "0 sample\\(s\\)"),
    (np.array([["a"] * 6] * 3), "could not convert|dtype"),
]


@pytest.mark.parametrize("X, match", BAD_INPUT, ids=[m[:30] for _, m in BAD_INPUT])
def test_bad_input_at_transform(X, match):
    est = _krp(random_state=0).fit(X_OK)
    with pytest.raises(ValueError, match=match):
        est.transform(X)


@pytest.mark.parametrize("name", sorted(BASELINE_MAPS))
def test_bad_input_rows(name):
    est = BASELINE_MAPS[name]()
    X = np.random.default_rng(0).standard_normal((10, 4))
    X[7, 2] = np.nan
    with pytest.raises(ValueError, match="row 7"):
        est.fit(X)
    est.fit(np.nan_to_num(X))
    with pytest.raises(ValueError, match="features"):
        est.transform(np.ones((2, 5)))


def test_nan_at_fit_is_refused():
    with pytest.raises(ValueError, match="Input X contains NaN \\(at row 13\\)"):
        _krp().fit(_with(np.nan))


def test_gamma_scale_without_data():
    with pytest.raises(ValueError, match="gamma='scale' is computed from training data"):
        dkrp.RandomFourierFeatures(gamma="scale").fit_n_features(5)


def test_transform_before_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        _krp().transform(X_OK)


def test_fit_n_features_rejects_non_integers():
    with pytest.raises(ValueError, match="n_features must be an integer"):
        _krp().fit_n_features(5.0)


def test_fit_n_features_refused():
    with pytest.raises(ValueError, match="call fit"):
        Nystroem().fit_n_features(10)


def test_empty_columns_allowed_zero_rows_at_block_level():
    est = _krp(random_state=0).fit(X_OK)
    out = est.transform_block(X_OK[:0])
    assert out.shape == (0, 8) and out.dtype == np.float64
