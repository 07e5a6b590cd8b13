r"""SRF on USPS with the review's radial sampler beside the paper's (issue 30, item 2).

The SRF review (Janati 2017, §4) found that the code behind its Table 1 samples the
radius of each frequency from a normalised

.. math:: g(w) = \max\Big(0, \sum_i c_i \frac{1}{\Gamma(d/2)}
          \Big(\frac{w}{2\sigma_i}\Big)^{d-1} e^{-w^2/4\sigma_i^2}\Big)

instead of the radial law of the paper's density :math:`p(w)`. Written with the
normalised radial density :math:`f_i` of :math:`\sqrt 2\sigma_i\chi_d` (dkrp's
parametrisation, ``features/_srf_fit.py``), :math:`g = \sum_i c_i\sigma_i f_i`: each
Gaussian of the mixture is weighted by its width :math:`\sigma_i` on top of its
coefficient. Its features are also scaled by :math:`\sqrt{2/D}`, not
:math:`\sqrt{2M/D}` with the surrogate's mass :math:`M`.

This script fits the same surrogate (dkrp's fit, so only the sampler differs), draws
frequencies both ways and trains the review's classifier (``LinearSVC``, C = 1) on the
review's USPS split (``dkrp.experiments.srf``, ``split="review"``). Columns:

- ``paper``: dkrp's :class:`~dkrp.SphericalRandomFeatures` (the paper's density);
- ``review``: radii from :math:`g`, features scaled by :math:`\sqrt{2/D}`.

The review's inverse-CDF on a 500-point grid, rounding each radius down to a grid
node, is not reproduced (its grid's range is not printed). Writes ``runs.csv`` and
``README.md`` to ``--out``. About ten minutes on two cores.

Run from the repository root::

    python benchmarks/srf_review_sampler.py --out results/srf-review-sampler
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np

#: the review's Table 1 (mean over 10 runs) for the configurations run here
REVIEW = {(3, 512): 92.98, (3, 1024): 94.14, (7, 512): 94.49, (7, 1024): 95.47,
          (10, 512): 94.55, (10, 1024): 95.86, (20, 512): 94.49, (20, 1024): 96.09}


def review_sampler_features(srf, X, seed):
    """Features of unit rows ``X`` with ``srf``'s surrogate but the review's sampler."""
    from dkrp.features import _srf_fit

    d = X.shape[1]
    sur = srf.surrogate_
    sigma, coef = np.asarray(sur["sigma"]), np.asarray(sur["coef"])
    r, _ = _srf_fit.radial_grid(d, sur["degree"], sur["scale"], refine=4)
    q = _srf_fit.radial_density(r, sigma, coef * sigma, d)  # g = sum c_i sigma_i f_i
    log_r = np.log(r)
    cells = 0.5 * (q[1:] * r[1:] + q[:-1] * r[:-1])  # trapezoid in log r, as dkrp's
    cdf = np.concatenate([[0.0], np.cumsum(cells)])
    cdf /= cdf[-1]
    rng = np.random.default_rng(seed)
    D = srf.n_components
    g = rng.standard_normal((D, d))
    radius = np.exp(np.interp(rng.random(D), cdf, log_r))
    W = g * (radius / np.linalg.norm(g, axis=1))[:, None]
    b = rng.uniform(0.0, 2.0 * math.pi, D)
    return math.sqrt(2.0 / D) * np.cos(X @ W.T + b)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/srf-review-sampler"),
                        help="folder for runs.csv and README.md (default: %(default)s)")
    parser.add_argument("--degrees", type=int, nargs="+", default=[3, 7, 20])
    parser.add_argument("--dims", type=int, nargs="+", default=[512, 1024],
                        help="numbers of features D (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per configuration")
    args = parser.parse_args(argv)

    from dkrp import SphericalRandomFeatures
    from dkrp.evaluation import linear_svm_accuracy
    from dkrp.experiments.srf import _normalise, _usps

    X_train, y_train, X_test, y_test = _usps("review")
    X_train, X_test = _normalise(X_train), _normalise(X_test)
    rows = []
    for p in args.degrees:
        for D in args.dims:
            for seed in range(args.seeds):
                srf = SphericalRandomFeatures(degree=p, scale=4.0, n_components=D,
                                              random_state=seed).fit(X_train)
                for sampler in ("paper", "review"):
                    if sampler == "paper":
                        Z_train, Z_test = srf.transform(X_train), srf.transform(X_test)
                    else:
                        Z = review_sampler_features(srf, np.vstack([X_train, X_test]), seed)
                        Z_train, Z_test = Z[:len(X_train)], Z[len(X_train):]
                    fit = linear_svm_accuracy(Z_train, y_train, Z_test, y_test, C=1.0,
                                              max_iter=5000)
                    acc = 100.0 * fit["accuracy"]
                    rows.append({"degree": p, "D": D, "seed": seed, "sampler": sampler,
                                 "accuracy": round(acc, 4), "mass": srf.mass_,
                                 "review_table1": REVIEW.get((p, D), "")})
                    print(f"p={p:2d} D={D:5d} seed={seed} {sampler:6s}: {acc:6.2f} %",
                          flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "runs.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "README.md").write_text(_readme(rows))
    print(f"wrote {args.out / 'runs.csv'} and {args.out / 'README.md'}")


def _readme(rows):
    from dkrp.experiments._outputs import environment

    env = environment()
    lines = [
        "# SRF on USPS: the review's radial sampler beside the paper's",
        "",
        f"Generated by `python benchmarks/srf_review_sampler.py` on {env['machine']} (dkrp "
        f"{env['dkrp']} at {env['git_commit']}). The review's USPS split (6,508 / 2,790), "
        "a = 4, LinearSVC C = 1; test accuracy in %, mean ± std over seeds. `paper`: dkrp's "
        "SRF; `review`: radii from the review's g(w) (each Gaussian weighted by its width), "
        "features scaled by sqrt(2/D). See the script's docstring.",
        "",
        "| p | D | review's Table 1 | paper's sampler (dkrp) | review's sampler |",
        "|---:|---:|---:|---:|---:|",
    ]
    for p, D in sorted({(r["degree"], r["D"]) for r in rows}):
        cells = []
        for sampler in ("paper", "review"):
            acc = np.array([r["accuracy"] for r in rows
                            if (r["degree"], r["D"], r["sampler"]) == (p, D, sampler)])
            cells.append(f"{acc.mean():.2f} ± {acc.std(ddof=1):.2f}" if len(acc) > 1
                         else f"{acc.mean():.2f}")
        lines.append(f"| {p} | {D} | {REVIEW.get((p, D), '-')} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
