"""dkrp.Nystroem is a drop-in for scikit-learn's: its kernel names, defaults and fitted
attributes, the same features on the same landmarks (issue 11, case 8)."""

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem as SklearnNystroem

import dkrp

SKLEARN_KERNELS = {
    "rbf": {}, "poly": {}, "laplacian": {"gamma": 0.3}, "linear": {}, "cosine": {},
    "sigmoid": {"gamma": 0.01, "coef0": 0.5}, "chi2": {}, "additive_chi2": {},
}


@pytest.mark.parametrize("kernel", sorted(SKLEARN_KERNELS))
def test_same_features_as_sklearn_on_the_same_landmarks(kernel):
    rng = np.random.default_rng(1)
    X = rng.random((120, 6))  # non-negative: the chi2 kernels need it
    params = SKLEARN_KERNELS[kernel]
    ours = dkrp.Nystroem(kernel=kernel, n_components=30, random_state=2, **params).fit(X)
    theirs = SklearnNystroem(kernel=kernel, n_components=30, random_state=0,
                             **params).fit(X[ours.component_indices_])
    order = theirs.component_indices_
    np.testing.assert_array_equal(ours.components_[order], theirs.components_)
    # Both compute W^{-1/2} with eigenvalues floored at 1e-12. Where W is rank-deficient
    # (the linear kernel: rank 6 < 30 landmarks) the floored directions amplify a
    # rounding of W by up to 1/sqrt(1e-12) = 1e6, so the two LAPACK/BLAS call sequences
    # (and another BLAS kernel) may differ by m * 1e6 * eps * max|W| there (2e-9 was seen
    # under OpenBLAS's Sandybridge kernel); elsewhere by a few eps.
    W = ours.components_ @ ours.components_.T if kernel == "linear" else None
    atol = 1e-9 if W is None else 30 * 1e6 * np.finfo(float).eps * np.abs(W).max()
    np.testing.assert_allclose(ours.transform(X)[:, order], theirs.transform(X),
                               rtol=1e-7, atol=atol)


def test_defaults_match_sklearn():
    sk = SklearnNystroem().get_params()
    ours = dkrp.Nystroem().get_params()
    for name in ("kernel", "gamma", "coef0", "degree", "n_components"):
        assert ours[name] == sk[name], name
    X = np.random.default_rng(3).standard_normal((150, 8))
    est = dkrp.Nystroem(n_components=40, random_state=0).fit(X)
    assert est.kernel_params_ == {"gamma": 1 / 8}  # scikit-learn's rbf default
    theirs = SklearnNystroem(n_components=40).fit(X[est.component_indices_])
    np.testing.assert_allclose(est.transform(X)[:, theirs.component_indices_],
                               theirs.transform(X), rtol=1e-7, atol=1e-9)


def test_fitted_attributes_have_sklearn_names():
    X = np.random.default_rng(4).standard_normal((50, 3))
    est = dkrp.Nystroem(n_components=10, random_state=0).fit(X)
    assert est.components_.shape == (10, 3)
    np.testing.assert_array_equal(X[est.component_indices_], est.components_)
    assert est.normalization_.shape == (10, 10)
    same = dkrp.from_spec(est.to_spec())
    np.testing.assert_array_equal(same.component_indices_, est.component_indices_)


def test_unknown_kernel_lists_the_names():
    with pytest.raises(ValueError, match="additive_chi2"):
        dkrp.Nystroem(kernel="rbff").fit(np.ones((5, 2)))
