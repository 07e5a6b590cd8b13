"""scikit-learn's API checks over every projector of dkrp (R14).

The instances come from the table of dkrp's maps (:data:`dkrp._names.PROJECTORS`), so
a new map is checked the moment it is listed; ``CHECK_PARAMS`` only makes them small (the
checks' data have 2–10 features and ≥ 20 rows) and covers the variants that take
other code paths.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import dkrp
from dkrp._names import PROJECTORS
from dkrp._spec import registered_projectors

CHECK_PARAMS = {
    "PolynomialRandomProjection": [
        dict(n_components=20, n_hyperplanes=40, random_state=0),
        dict(degree=3, n_components=15, n_hyperplanes=30, n_terms=2, distribution="achlioptas",
             density=1 / 3, random_state=0),
    ],
    "RandomFourierFeatures": [
        dict(n_components=20, random_state=0),
        dict(kernel="laplacian", feature_map="cos_sin", n_components=20, random_state=0),
    ],
    "ExplicitPolynomialProjection": [dict(n_components=10, random_state=0)],
    "IndependentPolynomialProjection": [dict(degree=2, n_components=8, n_terms=2,
                                             random_state=0)],
    "RandomMaclaurin": [
        dict(kernel="polynomial", degree=2, n_components=8, random_state=0),
        dict(kernel="exponential", gamma=0.1, n_components=8, random_state=0),
    ],
    "TensorSketch": [dict(kernel="polynomial", degree=2, n_components=8, random_state=0)],
    "Nystroem": [
        dict(kernel="gaussian", gamma=0.5, n_components=5, random_state=0),
        dict(kernel="homogeneous_polynomial", degree=2, n_components=5, random_state=0),
    ],
    "KulisGraumanRP": [dict(kernel="polynomial", degree=2, n_components=6, n_landmarks=8,
                            n_terms=3, random_state=0)],
    "PCAProjector": [dict(n_components=2, random_state=0)],
    "SphericalRandomFeatures": [dict(n_components=20, random_state=0)],
    "SignProductEmbedding": [dict(n_components=12, random_state=0)],
}


def _instances(variants):
    """The first parameter set of every map (``variants=False``: the fast set) or the
    others, which take other code paths (``variants=True``: the full suite)."""
    out = []
    for name in sorted(PROJECTORS):
        cls = registered_projectors()[name]
        params = CHECK_PARAMS.get(name, [{"random_state": 0}])
        out.extend(cls(**p) for p in (params[1:] if variants else params[:1]))
    return out


def _expected_failures(estimator):
    if type(estimator).__name__ == "SphericalRandomFeatures":
        return {"check_estimators_dtypes": (
            "its integer data has all-zero rows, which have no direction on the sphere: "
            "SRF refuses them with a ValueError naming the row (see test_spherical.py)")}
    if getattr(estimator, "feature_map", None) == "cos_sin":
        reason = (
            "the checks set n_components=1; the cos/sin pair form needs an even number "
            "of components and refuses 1 with a clear ValueError"
        )
        return {"check_dont_overwrite_parameters": reason, "check_fit2d_1sample": reason,
                "check_fit2d_1feature": reason, "check_methods_sample_order_invariance": reason,
                "check_methods_subset_invariance": reason, "check_fit2d_predict1d": reason}
    return {}


@parametrize_with_checks(_instances(variants=False), expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.slow  # the same checks again for the other code paths: the full suite
@parametrize_with_checks(_instances(variants=True), expected_failed_checks=_expected_failures)
def test_sklearn_compatible_variants(estimator, check):
    check(estimator)


def test_every_public_map_is_checked():
    assert set(PROJECTORS) <= set(dkrp.__all__)
    assert set(CHECK_PARAMS) <= set(PROJECTORS)
