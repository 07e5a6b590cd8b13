"""benchmarks/issue30_gaps.py: the review's gradient as written, its Table 1 and the README.

Fast and without data: the objective runs in d = 16 on made-up parameters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import issue30_gaps as bench  # noqa: E402
import srf_review_grid as grid  # noqa: E402

THETA = np.array([0.5, -0.8, 1.5, -0.4])  # sigma = |theta[:2]|, coef = theta[2:]


def test_the_gradient_as_written_lacks_the_sign_of_negative_sigmas():
    value, exact = grid._review_objective(THETA, 16, 3)
    value_w, written = bench._as_written(THETA, 16, 3)
    assert value_w == value
    # theta_0 > 0: the same; theta_1 < 0: the opposite sign; the coefficients: the same
    assert written[0] == pytest.approx(exact[0])
    assert written[1] == pytest.approx(-exact[1])
    assert written[1] != pytest.approx(exact[1])
    np.testing.assert_allclose(written[2:], exact[2:])


def test_the_exact_gradient_is_what_finite_differences_give_where_written_is_not():
    # (rel 1e-2: the analytic gradient holds w_max fixed, the finite difference moves it)
    h = 1e-6
    step = np.zeros_like(THETA)
    step[1] = h
    fd = (grid._review_objective(THETA + step, 16, 3)[0]
          - grid._review_objective(THETA - step, 16, 3)[0]) / (2 * h)
    assert grid._review_objective(THETA, 16, 3)[1][1] == pytest.approx(fd, rel=1e-2)
    assert bench._as_written(THETA, 16, 3)[1][1] == pytest.approx(-fd, rel=1e-2)


def test_review_table1_reads_every_column_of_published_csv():
    srf, exact = bench.review_table1()
    assert {p for p, _ in srf} == set(bench.USPS_DEGREES)
    assert {D for _, D in srf} == set(bench.TABLE_D)
    assert set(exact) == set(bench.USPS_DEGREES)
    assert srf[(3, 512)][0] < exact[3] < srf[(3, 16384)][0]


def test_the_readme_is_made_from_the_rows():
    rows = [
        {"part": "usps", "factor": "split", "method": "exact-svc", "order": "train-first",
         "split_seed": "123", "degree": "3", "D": "", "accuracy": "93.5", "machine": "m"},
        {"part": "usps", "factor": "D", "method": "srf", "order": "train-first",
         "split_seed": "123", "degree": "3", "D": "512", "accuracy": "94.0", "machine": "m"},
        {"part": "usps", "factor": "D", "method": "srf", "order": "train-first",
         "split_seed": "123", "degree": "3", "D": "128", "accuracy": "93.0", "machine": "m"},
        {"part": "mnist", "factor": "seeds", "method": "krp-gaussian", "pixels": "x/127.5-1",
         "seed": "1", "standardize": "True", "C": "0.01", "accuracy": "97.0",
         "converged": "True", "seconds": "30", "cv_scores": "", "machine": "m"},
    ]
    text = bench.readme(rows, "## Conclusion\n\nkept\n")
    # printed D = 512 was run at 128 (mean[j - 8] of D = 2^6 ...); exact: 93.26 - 93.5
    assert ("| 3 | 512 | 128 | 92.98 ± 0.35 | 94.00 (1) | 93.00 (1) | -1.02 | -0.02 | -0.24 | "
            "-0.78 | +0.22 |") in text
    assert "| train-first, 123 | 93.50 |" in text
    assert "| seeds | x/127.5-1 | 1 | True | 0.01 | 97.00 | True | 30 |  |" in text
    assert text.endswith("## Conclusion\n\nkept\n")
