"""dkrp.baselines._landmarks: landmark sampling and the singular-kernel guard."""

import math

import numpy as np
import pytest

from dkrp.baselines import KulisGraumanRP, Nystroem
from dkrp.baselines._landmarks import sample_landmark_indices
from dkrp.kernels import kernel_matrix


def test_landmark_indices_depend_only_on_seed_and_n():
    a = sample_landmark_indices(7, 1000, 50)
    np.testing.assert_array_equal(a, sample_landmark_indices(7, 1000, 50))
    assert len(np.unique(a)) == 50 and a.min() >= 0 and a.max() < 1000
    assert not np.array_equal(a, sample_landmark_indices(8, 1000, 50))
    assert not np.array_equal(a, sample_landmark_indices(7, 1001, 50))


def test_landmark_sampling_is_uniform():
    """Each row is picked with probability m/n (chi-square-free check over seeds)."""
    counts = np.zeros(20)
    for seed in range(2000):
        counts[sample_landmark_indices(seed, 20, 5)] += 1
    expected = 2000 * 5 / 20
    sd = math.sqrt(2000 * 0.25 * 0.75)
    assert np.all(np.abs(counts - expected) < 4.5 * sd), counts


@pytest.mark.parametrize("cls", [Nystroem, KulisGraumanRP])
@pytest.mark.parametrize("kernel", ["homogeneous_polynomial", "gaussian"])
def test_duplicate_landmarks_stay_finite(cls, kernel):
    """A singular landmark kernel matrix (duplicate rows) never gives NaN features."""
    rng = np.random.default_rng(5)
    X = np.repeat(rng.standard_normal((4, 5)), 10, axis=0)  # 4 distinct rows, 40 in all
    kw = {"n_landmarks": 20, "n_terms": 5} if cls is KulisGraumanRP else {}
    est = cls(kernel=kernel, n_components=20, random_state=0, **kw).fit(X)
    Z = est.transform(X)
    assert np.isfinite(Z).all()
    if cls is Nystroem:  # still exact on the landmarks' span (up to the clipped directions)
        K = kernel_matrix(X, kernel=kernel, **({"gamma": 1 / 5} if kernel == "gaussian" else {}))
        np.testing.assert_allclose(Z @ Z.T, K, rtol=1e-5, atol=1e-5 * np.abs(K).max())
    same = cls(kernel=kernel, n_components=20, random_state=0, **kw).fit(np.ones((40, 5)))
    assert np.isfinite(same.transform(X)).all()
