"""Projector instances and exact kernels shared by several test files.

Factories, not instances: each test fits its own copy. Not collected by pytest
(no ``test_`` prefix); test files import it as ``from projector_cases import ...``.
"""

from __future__ import annotations

import numpy as np

import dkrp
from dkrp.baselines import KulisGraumanRP, Nystroem, PCAProjector
from dkrp.features.independent import IndependentPolynomialProjection
from dkrp.features.maclaurin import RandomMaclaurin
from dkrp.features.tensorsketch import TensorSketch
from dkrp.testing import assert_unbiased

#: The core data-independent maps, fitted once per test (sklearn citizenship).
CORE = [
    dkrp.PolynomialRandomProjection(n_components=20, n_hyperplanes=40, random_state=0),
    dkrp.PolynomialRandomProjection(
        degree=3, n_components=15, n_hyperplanes=30, n_terms=2, distribution="achlioptas",
        density=1 / 3, random_state=0,
    ),
    dkrp.RandomFourierFeatures(n_components=20, random_state=0),
    dkrp.RandomFourierFeatures(kernel="laplacian", feature_map="cos_sin", n_components=20,
                               random_state=0),
    dkrp.ExplicitPolynomialProjection(n_components=10, random_state=0),
]

#: The seed contract's projectors (several pool blocks, several component blocks).
PROJECTORS = [
    lambda: dkrp.PolynomialRandomProjection(degree=2, n_components=300, n_hyperplanes=600,
                                            n_terms=3, random_state=11),
    lambda: dkrp.PolynomialRandomProjection(degree=3, n_components=64, n_hyperplanes=300,
                                            distribution="achlioptas", density=1 / 3,
                                            random_state=12),
    lambda: dkrp.RandomFourierFeatures(kernel="laplacian", gamma=0.2, n_components=128,
                                       feature_map="cos_sin", random_state=13),
    lambda: dkrp.ExplicitPolynomialProjection(n_components=32, random_state=14),
]
IDS = ["krp", "krp-achlioptas", "rff", "explicit"]

#: The data-independent maps the paper compares against (P-RP-style, Maclaurin, TensorSketch).
BASELINE_MAPS = {
    "prp": lambda: IndependentPolynomialProjection(degree=2, n_components=12, n_terms=3,
                                                   random_state=11),
    "prp-achlioptas": lambda: IndependentPolynomialProjection(
        degree=3, n_components=12, distribution="achlioptas", density="auto", random_state=11),
    "maclaurin-poly": lambda: RandomMaclaurin(degree=3, n_components=40, random_state=11),
    "maclaurin-exp": lambda: RandomMaclaurin(kernel="exponential", gamma=0.3, n_components=40,
                                             random_state=11),
    "tensorsketch": lambda: TensorSketch(degree=3, n_components=40, random_state=11),
    "tensorsketch-poly": lambda: TensorSketch(kernel="polynomial", degree=2, n_components=40,
                                              random_state=11),
}

#: The data-dependent baselines.
DATA_DEPENDENT = {
    "nystroem": lambda: Nystroem(kernel="gaussian", gamma=0.1, n_components=20,
                                 random_state=5),
    "nystroem-homogeneous": lambda: Nystroem(kernel="homogeneous_polynomial", degree=2,
                                             n_components=20, random_state=5),
    "kg-rp": lambda: KulisGraumanRP(degree=2, n_components=30, n_landmarks=25, n_terms=6,
                                    random_state=5),
    "kg-rp-laplacian": lambda: KulisGraumanRP(kernel="laplacian", n_components=30,
                                              n_landmarks=25, n_terms=6, random_state=5),
    "pca": lambda: PCAProjector(n_components=4, random_state=5),
    "pca-whiten": lambda: PCAProjector(n_components=4, whiten=True, random_state=5),
}


def exact_kernel(kernel, X, Y, *, degree=2, gamma=1.0, coef0=1.0):
    """Dot-product kernels, including the exponential one dkrp.kernels does not offer."""
    G = X @ Y.T
    if kernel == "homogeneous_polynomial":
        return G**degree
    if kernel == "polynomial":
        return (gamma * G + coef0) ** degree
    if kernel == "exponential":
        return np.exp(gamma * G)
    raise AssertionError(kernel)


def check_unbiased_over_seeds(case, factory, kernel, params):
    """Mean of <z(x), z(y)> over 300 seeds is within 4 standard errors of K(x, y)."""
    rng = np.random.default_rng(1234)
    X = rng.standard_normal((3, 4)) / 1.5
    K = exact_kernel(kernel, X, X, **params)
    iu = np.triu_indices(3)  # the diagonal (squared norms) and the distinct pairs
    draws = []
    for seed in range(300):
        Z = factory(seed).fit(X).transform(X)
        draws.append((Z @ Z.T)[iu])
    assert_unbiased(np.array(draws), K[iu], case, z_band=4.0)
