"""Tests of the data-independent baselines: P-RP-style, Random Maclaurin, TensorSketch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import PolynomialCountSketch

from dkrp.base import from_spec, load
from dkrp.features.independent import IndependentPolynomialProjection
from dkrp.features.maclaurin import RandomMaclaurin
from dkrp.features.polynomial import PolynomialRandomProjection
from dkrp.features.tensorsketch import TensorSketch
from dkrp.testing import assert_unbiased


def exact_kernel(kernel, X, Y, *, degree=2, gamma=1.0, coef0=1.0):
    G = X @ Y.T
    if kernel == "homogeneous_polynomial":
        return G**degree
    if kernel == "polynomial":
        return (gamma * G + coef0) ** degree
    if kernel == "exponential":
        return np.exp(gamma * G)
    raise AssertionError(kernel)


# (factory(seed), kernel name, kernel params) — each map must be unbiased for its kernel.
UNBIASED_CASES = {
    "prp-g2-t1": (
        lambda s: IndependentPolynomialProjection(degree=2, n_components=16, random_state=s),
        "homogeneous_polynomial", {"degree": 2},
    ),
    "prp-g3-t3-achlioptas": (
        lambda s: IndependentPolynomialProjection(
            degree=3, n_components=16, n_terms=3, distribution="achlioptas", density=1 / 3,
            random_state=s),
        "homogeneous_polynomial", {"degree": 3},
    ),
    "maclaurin-poly": (
        lambda s: RandomMaclaurin(kernel="polynomial", degree=3, gamma=0.8, coef0=0.5,
                                  n_components=16, random_state=s),
        "polynomial", {"degree": 3, "gamma": 0.8, "coef0": 0.5},
    ),
    "maclaurin-homogeneous": (
        lambda s: RandomMaclaurin(kernel="homogeneous_polynomial", degree=2, n_components=16,
                                  random_state=s),
        "homogeneous_polynomial", {"degree": 2},
    ),
    "maclaurin-exponential": (
        lambda s: RandomMaclaurin(kernel="exponential", gamma=0.5, n_components=16, random_state=s),
        "exponential", {"gamma": 0.5},
    ),
    "tensorsketch-homogeneous": (
        lambda s: TensorSketch(kernel="homogeneous_polynomial", degree=3, n_components=16,
                               random_state=s),
        "homogeneous_polynomial", {"degree": 3},
    ),
    "tensorsketch-poly": (
        lambda s: TensorSketch(kernel="polynomial", degree=2, gamma=0.5, coef0=2.0, n_components=16,
                               random_state=s),
        "polynomial", {"degree": 2, "gamma": 0.5, "coef0": 2.0},
    ),
}


@pytest.mark.parametrize("case", sorted(UNBIASED_CASES))
def test_unbiased_over_seeds(case):
    """Mean of <z(x), z(y)> over 300 seeds is within 4 standard errors of K(x, y)."""
    factory, kernel, params = UNBIASED_CASES[case]
    rng = np.random.default_rng(1234)
    X = rng.standard_normal((3, 4)) / 1.5
    K = exact_kernel(kernel, X, X, **params)
    iu = np.triu_indices(3)  # the diagonal (squared norms) and the distinct pairs
    draws = []
    for seed in range(300):
        Z = factory(seed).fit(X).transform(X)
        draws.append((Z @ Z.T)[iu])
    assert_unbiased(np.array(draws), K[iu], case, z_band=4.0)


def test_prp_equals_krp_with_disjoint_pool():
    """P-RP-style map = KRP with p = g·t·k pool vectors and disjoint index sets."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 7))
    g, t, k = 3, 2, 5
    prp = IndependentPolynomialProjection(degree=g, n_components=k, n_terms=t,
                                          random_state=3).fit(X)
    krp = PolynomialRandomProjection(degree=g, n_components=k, n_terms=t,
                                     n_hyperplanes=g * t * k, random_state=3).fit(X)
    krp.hyperplanes_ = prp.hyperplanes_
    krp.hyperplane_indices_ = np.arange(g * t * k).reshape(k, g * t)
    krp._cache = {}
    np.testing.assert_allclose(prp.transform(X), krp.transform(X), rtol=1e-12, atol=1e-12)


def test_prp_transform_blocks_do_not_change_result(monkeypatch):
    """Component/row blocking is an implementation detail: same features either way."""
    from dkrp.features import independent

    rng = np.random.default_rng(5)
    X = rng.standard_normal((37, 6))
    est = IndependentPolynomialProjection(degree=2, n_components=13, n_terms=3,
                                          random_state=1).fit(X)
    whole = est.transform(X)
    monkeypatch.setattr(independent, "_BLOCK_ENTRIES", 256 * 6)
    np.testing.assert_allclose(est.transform(X), whole, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kernel, coef0", [("homogeneous_polynomial", 0.0),
                                           ("polynomial", 0.7), ("polynomial", 0.0)])
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_tensorsketch_equals_sklearn_with_same_hashes(kernel, coef0, degree):
    rng = np.random.default_rng(degree)
    X = rng.standard_normal((30, 9))
    ts = TensorSketch(kernel=kernel, degree=degree, gamma=0.3, coef0=coef0, n_components=32,
                      random_state=2).fit(X)
    gamma = 0.3 if kernel == "polynomial" else 1.0
    sk = PolynomialCountSketch(degree=degree, gamma=gamma, coef0=coef0 if kernel ==
                               "polynomial" else 0.0, n_components=32).fit(X)
    width = X.shape[1] + (1 if sk.coef0 != 0 else 0)
    sk.indexHash_ = ts.index_hash_[:, :width]
    sk.bitHash_ = ts.sign_hash_[:, :width].astype(np.int64)
    np.testing.assert_allclose(ts.transform(X), sk.transform(X), rtol=1e-10, atol=1e-12)


def test_maclaurin_orders_follow_the_support():
    """Polynomial kernels never waste features on orders with a_n = 0."""
    X = np.zeros((1, 5))
    hom = RandomMaclaurin(kernel="homogeneous_polynomial", degree=3, n_components=500,
                          random_state=0).fit(X)
    assert set(hom.orders_) == {3}
    poly = RandomMaclaurin(kernel="polynomial", degree=2, coef0=0.0, gamma=1.0, n_components=500,
                           random_state=0).fit(X)
    assert set(poly.orders_) == {2}
    poly = RandomMaclaurin(kernel="polynomial", degree=2, n_components=2000, random_state=0).fit(X)
    assert set(poly.orders_) == {0, 1, 2}
    # q_n ∝ 2^-(n+1) on {0, 1, 2}: 4/7, 2/7, 1/7.
    freq = np.bincount(poly.orders_, minlength=3) / 2000
    np.testing.assert_allclose(freq, [4 / 7, 2 / 7, 1 / 7], atol=0.04)
    expo = RandomMaclaurin(kernel="exponential", n_components=4000, random_state=0).fit(X)
    assert expo.orders_.min() == 0 and 0.45 < np.mean(expo.orders_ == 0) < 0.55


ALL = {
    "prp": lambda: IndependentPolynomialProjection(degree=2, n_components=12, n_terms=3,
                                                   random_state=11),
    "prp-achlioptas": lambda: IndependentPolynomialProjection(
        degree=3, n_components=12, distribution="achlioptas", density="auto", random_state=11),
    "maclaurin-poly": lambda: RandomMaclaurin(degree=3, n_components=40, random_state=11),
    "maclaurin-exp": lambda: RandomMaclaurin(kernel="exponential", gamma=0.3, n_components=40,
                                             random_state=11),
    "tensorsketch": lambda: TensorSketch(degree=3, n_components=40, random_state=11),
    "tensorsketch-poly": lambda: TensorSketch(kernel="polynomial", degree=2, n_components=40,
                                              random_state=11),
}


def _sparse_data(rng, n=25, d=30):
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.2)
    return X


@pytest.mark.parametrize("name", sorted(ALL))
def test_float32_preserved_and_close_to_float64(name):
    rng = np.random.default_rng(0)
    X = _sparse_data(rng)
    est = ALL[name]().fit(X)
    Z64 = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z64.dtype == np.float64 and Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z64, rtol=1e-3, atol=1e-4 * np.abs(Z64).max())


@pytest.mark.parametrize("name", sorted(ALL))
def test_csr_equals_dense(name):
    rng = np.random.default_rng(1)
    X = _sparse_data(rng)
    est = ALL[name]().fit(X)
    dense = est.transform(X)
    Xs = sp.csr_matrix(X)
    sparse = est.transform(Xs)
    assert isinstance(sparse, np.ndarray)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)
    assert est.transform(Xs.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("name", sorted(ALL))
def test_spec_round_trip_and_save_load(name, tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((15, 8))
    est = ALL[name]().fit(X)
    Z = est.transform(X)
    spec = json.loads(json.dumps(est.to_spec()))
    assert spec["arrays"] is None  # data-independent: the seed is the model
    rebuilt = from_spec(spec)
    assert rebuilt.transform(X).tobytes() == Z.tobytes()
    est.save(tmp_path / "model.json")
    assert not (tmp_path / "model.npz").exists()
    assert load(tmp_path / "model.json").transform(X).tobytes() == Z.tobytes()
    # fit needs only n_features: fit_n_features gives the same map.
    alone = type(est)(**est.get_params()).fit_n_features(X.shape[1])
    assert alone.transform(X).tobytes() == Z.tobytes()


@pytest.mark.parametrize("name", sorted(ALL))
def test_seed_changes_features(name):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5, 8))
    a = ALL[name]().fit(X)
    b = ALL[name]().set_params(random_state=12).fit(X)
    assert a.spec_checksum_ != b.spec_checksum_
    assert not np.allclose(a.transform(X), b.transform(X))


BAD_PARAMS = [
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
    "cls, params, match", BAD_PARAMS,
    ids=[f"{c.__name__}-{'-'.join(map(str, p.values()))}" for c, p, _ in BAD_PARAMS],
)
def test_bad_params(cls, params, match):
    X = np.random.default_rng(0).standard_normal((10, 4))
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X)


@pytest.mark.parametrize("name", sorted(ALL))
def test_bad_input_rows(name):
    est = ALL[name]()
    X = np.random.default_rng(0).standard_normal((10, 4))
    X[7, 2] = np.nan
    with pytest.raises(ValueError, match="row 7"):
        est.fit(X)
    est.fit(np.nan_to_num(X))
    with pytest.raises(ValueError, match="features"):
        est.transform(np.ones((2, 5)))
