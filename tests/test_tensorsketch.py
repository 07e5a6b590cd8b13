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
