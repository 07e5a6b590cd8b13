"""dkrp.features.fourier: random Fourier features (Rahimi & Recht 2007).

Unbiasedness over seeds (see test_polynomial.py for the band), the lower variance
of the cos/sin pair form, and the kernel-approximation error against its theory.
"""

import numpy as np
import pytest

import dkrp
from dkrp.kernels import kernel_matrix
from dkrp.metrics import kernel_approximation_error
from dkrp.testing import assert_unbiased as _assert_unbiased
from dkrp.testing import estimates_over_seeds


def _pairs_data(d=5, n=4, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * 1.3


def _estimates(make, X, n_seeds):
    return estimates_over_seeds(make, X, n_seeds)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
def test_rff_unbiased(kernel, feature_map):
    X = _pairs_data(d=3)
    gamma = 0.3
    K = kernel_matrix(X, kernel=kernel, gamma=gamma)

    def make(seed):
        return dkrp.RandomFourierFeatures(
            kernel=kernel, gamma=gamma, n_components=20, feature_map=feature_map,
            random_state=seed,
        )

    grams, _ = _estimates(make, X, n_seeds=800)
    _assert_unbiased(grams, K, f"RFF {kernel} {feature_map}")


def test_rff_pair_form_has_lower_variance():
    X = _pairs_data(d=3)
    spread = {}
    for fm in ("cos", "cos_sin"):
        grams, _ = _estimates(
            lambda s, fm=fm: dkrp.RandomFourierFeatures(gamma=0.3, n_components=20,
                                                        feature_map=fm, random_state=s),
            X, n_seeds=600,
        )
        spread[fm] = grams.var(axis=0)[np.triu_indices(len(X), 1)].mean()
    assert spread["cos_sin"] < spread["cos"]


def _theory_relative_frobenius(K, variance):
    """sqrt(E||ZZ^T - K||_F^2) / ||K||_F for an unbiased estimator with these variances."""
    return float(np.sqrt(variance.sum()) / np.linalg.norm(K))


@pytest.mark.parametrize("seed", range(20))
def test_kernel_approximation_error_near_theory_for_every_seed(seed):
    rng = np.random.default_rng(100 + seed)
    X = rng.standard_normal((60, 8)) / np.sqrt(8)
    k = 3000
    # RFF, phase form: Var = (1 + K(2δ)/2 - K(δ)^2) / D, with K(2δ) = K(δ)^4 (Gaussian).
    K = kernel_matrix(X, kernel="gaussian", gamma=0.5)
    theory = _theory_relative_frobenius(K, (1 + K**4 / 2 - K**2) / k)
    rff = dkrp.RandomFourierFeatures(gamma=0.5, n_components=k, random_state=seed).fit(X)
    err = kernel_approximation_error(X, rff.transform(X), "gaussian", gamma=0.5)
    assert 0.5 * theory < err.relative_frobenius < 1.6 * theory
    # A Gaussian RP of φ: Var<f(x), f(y)> = (K(x,x) K(y,y) + K(x,y)^2) / k; KRP's shared
    # pool (p = k here, t = 1) adds an O(1/p) term of the same order (1.5-1.8x measured
    # over 40 seeds), so the band is wider.
    K = kernel_matrix(X, kernel="homogeneous_polynomial", degree=2)
    d = np.diag(K)
    theory = _theory_relative_frobenius(K, (np.outer(d, d) + K**2) / k)
    krp = dkrp.PolynomialRandomProjection(degree=2, n_components=k, n_hyperplanes=k,
                                          random_state=seed).fit(X)
    err = kernel_approximation_error(X, krp.transform(X), "homogeneous_polynomial", degree=2)
    assert 0.8 * theory < err.relative_frobenius < 2.2 * theory


def test_kernel_error_shrinks_with_more_components():
    X = np.random.default_rng(7).standard_normal((60, 8)) / np.sqrt(8)
    errors = []
    for k in (100, 400, 1600):
        e = [
            kernel_approximation_error(
                X,
                dkrp.RandomFourierFeatures(gamma=0.5, n_components=k, random_state=s)
                .fit(X).transform(X),
                "gaussian", gamma=0.5,
            ).mse
            for s in range(10)
        ]
        errors.append(np.mean(e))
    # Monte Carlo: mse ~ 1/k, so each 4x step cuts it by ~4 (allow 2.5).
    assert errors[0] / errors[1] > 2.5 and errors[1] / errors[2] > 2.5
