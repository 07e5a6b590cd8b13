"""dkrp.features.maclaurin: Random Maclaurin features (Kar & Karnick 2012)."""

import numpy as np
import pytest
from projector_cases import check_unbiased_over_seeds

from dkrp.features.maclaurin import RandomMaclaurin

# (factory(seed), kernel name, kernel params) — each map must be unbiased for its kernel.
UNBIASED_CASES = {
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
}


@pytest.mark.parametrize("case", sorted(UNBIASED_CASES))
def test_unbiased_over_seeds(case):
    """Mean of <z(x), z(y)> over 300 seeds is within 4 standard errors of K(x, y)."""
    check_unbiased_over_seeds(case, *UNBIASED_CASES[case])


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
