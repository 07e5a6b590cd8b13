"""dkrp.features.independent: the P-RP-style map (independent hyperplanes per component)."""

import numpy as np
import pytest
from projector_cases import check_unbiased_over_seeds

from dkrp.features.independent import IndependentPolynomialProjection
from dkrp.features.polynomial import PolynomialRandomProjection

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
}


@pytest.mark.parametrize("case", sorted(UNBIASED_CASES))
def test_unbiased_over_seeds(case):
    """Mean of <z(x), z(y)> over 300 seeds is within 4 standard errors of K(x, y)."""
    check_unbiased_over_seeds(case, *UNBIASED_CASES[case])


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
