"""dkrp.metrics: distance distortion (eq. (18) of the KRP paper) and kernel-approximation error."""

import numpy as np
import pytest
from sklearn.metrics import pairwise

from dkrp.metrics import distance_distortion, kernel_approximation_error

X = np.random.default_rng(0).standard_normal((30, 4))



def test_distortion_of_the_exact_feature_map_is_zero():
    phi = np.einsum("ni,nj->nij", X, X).reshape(len(X), -1)
    result = distance_distortion(X, phi, degree=2)
    assert result.mean < 1e-12 and result.n_pairs == 30 * 29 // 2 and result.n_skipped_pairs == 0


def test_distortion_matches_eq_18_by_hand():
    Z = np.random.default_rng(2).standard_normal((30, 5))
    K = (X @ X.T) ** 2
    values = []
    for i in range(30):
        for j in range(i + 1, 30):
            target = K[i, i] + K[j, j] - 2 * K[i, j]
            values.append(abs(np.sum((Z[i] - Z[j]) ** 2) - target) / target)
    assert float(distance_distortion(X, Z, degree=2)) == pytest.approx(np.mean(values), rel=1e-10)


def test_duplicate_rows_are_skipped_and_counted():
    Xd = np.vstack([X[:5], X[:1]])  # row 5 duplicates row 0; and x and -x coincide for g=2
    Xd = np.vstack([Xd, -X[1:2]])
    Z = np.random.default_rng(3).standard_normal((7, 3))
    result = distance_distortion(Xd, Z, degree=2)
    assert result.n_skipped_pairs == 2 and result.n_pairs == 21 - 2


def test_distortion_input_errors():
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="same number of rows. 30 != 29"):
        distance_distortion(X, rng.standard_normal((29, 3)))
    with pytest.raises(ValueError, match="at least 2 rows"):
        distance_distortion(X[:1], rng.standard_normal((1, 3)))


def test_kernel_approximation_error_values():
    K = pairwise.rbf_kernel(X, gamma=0.3)
    w, V = np.linalg.eigh(K)
    Z_exact = V * np.sqrt(np.clip(w, 0, None))
    err = kernel_approximation_error(X, Z_exact, "gaussian", gamma=0.3)
    assert err.mse < 1e-20 and err.relative_frobenius < 1e-9
    err = kernel_approximation_error(X, np.zeros((30, 2)), "gaussian", gamma=0.3)
    assert err.relative_frobenius == pytest.approx(1.0) and err.max_abs == pytest.approx(1.0)
