"""dkrp.kernels: exact kernels against scikit-learn, blockwise and sparse."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import pairwise

from dkrp.kernels import KERNELS, check_kernel_params, kernel_diagonal, kernel_matrix

X = np.random.default_rng(0).standard_normal((30, 4))
Y = np.random.default_rng(1).standard_normal((7, 4))



@pytest.mark.parametrize(
    "kernel, params, reference",
    [
        ("homogeneous_polynomial", {"degree": 3}, lambda A, B: (A @ B.T) ** 3),
        ("polynomial", {"degree": 2, "gamma": 0.5, "coef0": 1.5},
         lambda A, B: pairwise.polynomial_kernel(A, B, degree=2, gamma=0.5, coef0=1.5)),
        ("gaussian", {"gamma": 0.3}, lambda A, B: pairwise.rbf_kernel(A, B, gamma=0.3)),
        ("laplacian", {"gamma": 0.3}, lambda A, B: pairwise.laplacian_kernel(A, B, gamma=0.3)),
    ],
)
def test_kernels_match_references_blockwise_and_sparse(kernel, params, reference):
    expected = reference(X, Y)
    np.testing.assert_allclose(kernel_matrix(X, Y, kernel=kernel, block_size=4, **params), expected)
    np.testing.assert_allclose(
        kernel_matrix(sp.csr_matrix(X), sp.csr_matrix(Y), kernel=kernel, **params), expected
    )
    np.testing.assert_allclose(
        kernel_diagonal(X, kernel=kernel, **params), np.diag(reference(X, X))
    )


def test_kernel_names_and_parameters_are_checked():
    assert set(KERNELS) == {"homogeneous_polynomial", "polynomial", "gaussian", "laplacian"}
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_matrix(X, kernel="rbff")
    with pytest.raises(ValueError, match="unexpected \\['gamma'\\]"):
        kernel_matrix(X, kernel="homogeneous_polynomial", gamma=1.0)
    with pytest.raises(ValueError, match="same number of features. 4 != 3"):
        kernel_matrix(X, Y[:, :3], kernel="gaussian")
    assert check_kernel_params("gaussian", n_features=4)["gamma"] == 0.25
