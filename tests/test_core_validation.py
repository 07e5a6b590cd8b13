"""Bad input and bad parameters: clear ValueErrors, nothing silently coerced."""

import numpy as np
import pytest
import scipy.sparse as sp

import dkrp

X_OK = np.random.default_rng(0).standard_normal((20, 6))


def _krp(**kw):
    return dkrp.PolynomialRandomProjection(**{"n_components": 8, "n_hyperplanes": 16, **kw})


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


def test_empty_columns_allowed_zero_rows_at_block_level():
    est = _krp(random_state=0).fit(X_OK)
    out = est.transform_block(X_OK[:0])
    assert out.shape == (0, 8) and out.dtype == np.float64
