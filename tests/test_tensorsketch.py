"""dkrp.features.tensorsketch: TensorSketch (Pham & Pagh 2013)."""

import numpy as np
import pytest
from projector_cases import check_unbiased_over_seeds
from sklearn.kernel_approximation import PolynomialCountSketch

from dkrp.features.tensorsketch import TensorSketch

# (factory(seed), kernel name, kernel params) — each map must be unbiased for its kernel.
UNBIASED_CASES = {
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
    check_unbiased_over_seeds(case, *UNBIASED_CASES[case])


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


@pytest.mark.parametrize("seed", range(5))
def test_hashes_follow_their_law(seed):
    """h_j(i) uniform on [0, D), s_j(i) = ±1 with probability 1/2, pairs (h_j, h_j+1)
    uniform on [0, D)^2 (independent hashes per degree; Pham & Pagh 2013, Lemma 2).

    Each check is a test at level 1e-4 (chi-square for the buckets, exact binomial for
    the signs): 8 checks per seed, so a correct generator fails this test with
    probability below 1e-3 per seed.
    """
    from scipy.stats import binomtest, chisquare

    D, d, alpha = 64, 40_000, 1e-4
    ts = TensorSketch(degree=3, n_components=D, random_state=seed).fit_n_features(d)
    for j in range(3):
        counts = np.bincount(ts.index_hash_[j], minlength=D)
        assert len(counts) == D
        p = chisquare(counts).pvalue
        assert p > alpha, f"h_{j}: buckets not uniform (chi-square p = {p:.2g}): {counts}"
        signs = ts.sign_hash_[j]
        assert set(np.unique(signs)) == {-1.0, 1.0}
        p = binomtest(int((signs > 0).sum()), signs.size, 0.5).pvalue
        assert p > alpha, f"s_{j}: {(signs > 0).mean():.4f} positive (binomial p = {p:.2g})"
    for j in range(2):
        cells = np.bincount(ts.index_hash_[j] * D + ts.index_hash_[j + 1], minlength=D * D)
        p = chisquare(cells).pvalue
        assert p > alpha, f"(h_{j}, h_{j + 1}) not uniform on [0, D)^2 (chi-square p = {p:.2g})"


def test_error_matches_sklearn_statistically():
    """dkrp's and scikit-learn's PolynomialCountSketch draw their own hashes from the
    same law, so over 400 seeds each their squared errors of <z(x), z(y)> have the same
    distribution: a two-sample Kolmogorov-Smirnov test at level 1e-4, and the mean
    errors within 4.5 standard errors of the difference (CLT, false-alarm rate 7e-6).
    A degenerate hash (every coordinate in one bucket) multiplies the error by ~D."""
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(8)
    X = rng.standard_normal((4, 10)) / np.sqrt(10)
    K = (X @ X.T) ** 2
    iu = np.triu_indices(4)
    errors = {"dkrp": [], "sklearn": []}
    for seed in range(400):
        ours = TensorSketch(degree=2, n_components=32, random_state=seed).fit(X).transform(X)
        theirs = PolynomialCountSketch(degree=2, gamma=1.0, coef0=0.0, n_components=32,
                                       random_state=seed).fit(X).transform(X)
        errors["dkrp"].append(np.sum(((ours @ ours.T) - K)[iu] ** 2))
        errors["sklearn"].append(np.sum(((theirs @ theirs.T) - K)[iu] ** 2))
    a, b = np.array(errors["dkrp"]), np.array(errors["sklearn"])
    p = ks_2samp(a, b).pvalue
    assert p > 1e-4, (
        f"squared errors of dkrp (median {np.median(a):.4g}) and scikit-learn (median "
        f"{np.median(b):.4g}) differ in law: Kolmogorov-Smirnov p = {p:.2g}"
    )
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    z = (a.mean() - b.mean()) / se
    assert abs(z) < 4.5, (
        f"mean squared error {a.mean():.4g} (dkrp) vs {b.mean():.4g} (scikit-learn): "
        f"{z:+.2f} standard errors"
    )
