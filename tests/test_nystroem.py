"""dkrp.baselines.nystroem: equal to scikit-learn on the same landmarks, exact on their span."""

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem as SklearnNystroem

from dkrp.baselines import Nystroem
from dkrp.kernels import kernel_matrix
from dkrp.metrics import distance_distortion

SKLEARN_KERNELS = {
    # dkrp kernel, params -> scikit-learn kernel name and params
    "homogeneous_polynomial": ({"degree": 3}, "poly", {"degree": 3, "gamma": 1.0,
                                                       "coef0": 0.0}),
    "polynomial": ({"degree": 2, "gamma": 0.3, "coef0": 1.5}, "poly",
                   {"degree": 2, "gamma": 0.3, "coef0": 1.5}),
    "gaussian": ({"gamma": 0.1}, "rbf", {"gamma": 0.1}),
    "laplacian": ({"gamma": 0.2}, "laplacian", {"gamma": 0.2}),
}


@pytest.mark.parametrize("kernel", sorted(SKLEARN_KERNELS))
def test_nystroem_equals_sklearn_on_same_landmarks(kernel):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 10))
    params, sk_kernel, sk_params = SKLEARN_KERNELS[kernel]
    ny = Nystroem(kernel=kernel, n_components=40, random_state=4, **params).fit(X)
    # scikit-learn fitted on exactly our landmarks (it permutes them: component_indices_).
    sk = SklearnNystroem(kernel=sk_kernel, n_components=40, random_state=0,
                         **sk_params).fit(X[ny.landmark_indices_])
    order = sk.component_indices_
    np.testing.assert_array_equal(ny.landmarks_[order], sk.components_)
    np.testing.assert_allclose(ny.transform(X)[:, order], sk.transform(X), rtol=0, atol=1e-8)
    np.testing.assert_allclose(ny.normalization_[np.ix_(order, order)], sk.normalization_,
                               rtol=0, atol=1e-8 * np.abs(sk.normalization_).max())


@pytest.mark.parametrize("kernel", sorted(SKLEARN_KERNELS))
def test_nystroem_exact_on_landmark_span(kernel):
    """<z(l), z(x)> = K(l, x) for every landmark l and any x."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 8))
    params = SKLEARN_KERNELS[kernel][0]
    ny = Nystroem(kernel=kernel, n_components=30, random_state=2, **params).fit(X)
    Xnew = rng.standard_normal((25, 8))
    Z_land = ny.transform(X[ny.landmark_indices_])
    K = kernel_matrix(X[ny.landmark_indices_], Xnew, kernel=kernel, **params)
    np.testing.assert_allclose(Z_land @ ny.transform(Xnew).T, K, rtol=1e-7,
                               atol=1e-7 * np.abs(K).max())


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("k, paper", [(200, 0.372), (1000, 0.187)])
def test_nystroem_mnist_distortion_table3(mnist, k, paper):
    """Nyström, homogeneous polynomial g=3: paper Table 3 gives 0.372 (k=200), 0.187 (k=1000)."""
    train, test = mnist
    values = [
        float(distance_distortion(
            test,
            Nystroem(kernel="homogeneous_polynomial", degree=3, n_components=k,
                     random_state=seed).fit(train).transform(test),
            degree=3))
        for seed in range(2)
    ]
    mean = float(np.mean(values))
    print(f"Nystroem MNIST g=3 k={k}: {mean:.3f} (seeds {np.round(values, 3)}); paper {paper}")
    assert abs(mean - paper) <= 0.25 * paper
