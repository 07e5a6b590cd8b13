"""scikit-learn citizenship of the core projectors (R14)."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC

import dkrp

CORE = [
    dkrp.PolynomialRandomProjection(n_components=20, n_hyperplanes=40, random_state=0),
    dkrp.PolynomialRandomProjection(
        degree=3, n_components=15, n_hyperplanes=30, n_terms=2, distribution="achlioptas",
        density=1 / 3, random_state=0,
    ),
    dkrp.RandomFourierFeatures(n_components=20, random_state=0),
    dkrp.RandomFourierFeatures(kernel="laplacian", feature_map="cos_sin", n_components=20,
                               random_state=0),
    dkrp.ExplicitPolynomialProjection(n_components=10, random_state=0),
]


@pytest.mark.parametrize("est", CORE, ids=lambda e: type(e).__name__)
def test_float32_preserved_and_close_to_float64(est):
    X = np.random.default_rng(1).standard_normal((30, 6))
    est = est.fit(X)
    Z64 = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32 and Z64.dtype == np.float64
    np.testing.assert_allclose(Z32, Z64, rtol=2e-3, atol=2e-3 * np.abs(Z64).max())


@pytest.mark.parametrize("est", CORE, ids=lambda e: type(e).__name__)
def test_csr_equals_dense(est):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 6)) * (rng.random((40, 6)) < 0.3)
    est = est.fit(X)
    Z_sparse = est.transform(sp.csr_matrix(X))
    np.testing.assert_allclose(Z_sparse, est.transform(X), rtol=1e-10, atol=1e-10)


def test_sparse_input_is_not_densified():
    # 200k columns dense would be 1.6 GB for this 1000-row block; CSR stays small.
    X = sp.random(1000, 200_000, density=1e-4, format="csr", random_state=0)
    krp = dkrp.PolynomialRandomProjection(n_components=50, n_hyperplanes=64, random_state=0)
    Z = krp.fit(X[:10]).transform(X)
    assert Z.shape == (1000, 50) and np.isfinite(Z).all()


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
