"""benchmarks/srf_review_grid.py: the review's grid sampler, its cutoff and its fit's gradient.

Fast and without data: a made-up two-Gaussian surrogate in d = 16.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import srf_review_grid as bench  # noqa: E402

D_IN = 16
SIGMA = np.array([0.5, 0.8])
COEF = np.array([1.5, -0.4])


def test_cutoff_is_where_the_density_falls_to_eps_over_c():
    # the largest cutoff belongs to the wider component; its density there is eps/|c|
    w_max = bench.cutoff(SIGMA, COEF, D_IN)
    f = bench._chi_pdfs(np.array([w_max]), SIGMA[1:], D_IN)[0, 0]
    assert f == pytest.approx(bench.EPS / abs(COEF[1]), rel=1e-8)
    mode = math.sqrt(2.0) * SIGMA[1] * math.sqrt(D_IN - 1.0)  # past the mode of sqrt2 s chi_d
    assert w_max > mode


def test_grid_radii_are_nodes_drawn_with_the_node_masses():
    w, mass = bench.grid_law(SIGMA, COEF, D_IN)
    assert w.shape == mass.shape == (bench.EVAL_GRID,)
    assert mass.min() >= 0.0 and mass.sum() == pytest.approx(1.0, abs=1e-12)
    n = 200_000
    radii = bench.grid_radii(w, mass, np.random.default_rng(0).random(n))
    idx = np.searchsorted(w, radii)
    assert np.array_equal(w[idx], radii)  # every radius is a grid node
    counts = np.bincount(idx, minlength=len(w))
    # per node: within 5 binomial standard deviations (+1 for the discreteness)
    band = 5.0 * np.sqrt(n * mass * (1.0 - mass)) + 1.0
    assert np.all(np.abs(counts - n * mass) <= band)
    # and the empirical CDF against the grid CDF: Kolmogorov-Smirnov at 1e-3 level
    ks = np.max(np.abs(np.cumsum(counts) / n - np.cumsum(mass)))
    assert ks < 1.95 / math.sqrt(n)
    # nodes without mass are never drawn (the clipped density's zero at w = 0)
    assert counts[mass == 0].sum() == 0


def test_review_objective_gradient_matches_finite_differences(monkeypatch):
    # the review's gradient holds w_max fixed: compare with w_max frozen
    theta = np.concatenate([SIGMA, COEF])
    frozen = bench.cutoff(SIGMA, COEF, D_IN)
    monkeypatch.setattr(bench, "cutoff", lambda *args, **kwargs: frozen)
    value, grad = bench._review_objective(theta, D_IN, 3, n_grid=200)
    h = 1e-6
    numeric = np.array([
        (bench._review_objective(theta + h * e, D_IN, 3, n_grid=200)[0]
         - bench._review_objective(theta - h * e, D_IN, 3, n_grid=200)[0]) / (2 * h)
        for e in np.eye(len(theta))])
    assert value > 0
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9 * np.abs(grad).max())
