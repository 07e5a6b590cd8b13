r"""
Structured against i.i.d. hyperplane pools
==========================================

KRP draws a pool of p hyperplanes once; each of its k components multiplies the
projections of the row on ``degree * n_terms`` rows of the pool. With the paper's i.i.d.
pool (``pool="iid"``), components that share pool rows add distortion beyond that of the
explicit :math:`\phi(x)` + random projection (:class:`dkrp.ExplicitPolynomialProjection`).
The leading term of that excess vanishes for a tight frame (:math:`S^T S = pI`), which is
what the other pools are built to be:

* ``"orthogonal"``: blocks of d orthogonal Gaussian directions with chi norms
  (Yu et al. 2016);
* ``"tight_frame"``: the Gaussian pool rescaled so that :math:`S^T S = pI`;
* ``"structured"``: Hadamard blocks :math:`\frac1D H D_1 H D_2 H D_3` with random ±1
  diagonals on the row zero-padded to :math:`D = 2^{\lceil \log_2 d\rceil}`, applied by
  a fast Walsh–Hadamard transform when that is cheaper than the GEMM.

Here on digits (d = 64, so D = 64), degree 2, k = 200 components of t = 30 terms, for
pools of p hyperplanes, over 3 seeds, beside the explicit map's distortion at the same k.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import dkrp
from dkrp.metrics import distance_distortion

X = load_digits().data / 8.0 - 1.0  # pixels 0..16 to [-1, 1]
rows = X[np.random.default_rng(0).permutation(len(X))[:300]]

sizes = [64, 128, 256, 512, 1024]
seeds = [0, 1, 2]
pools = ["iid", "orthogonal", "tight_frame", "structured"]
distortion = {pool: [] for pool in pools}
for pool in pools:
    for p in sizes:
        values = []
        for seed in seeds:
            krp = dkrp.PolynomialRandomProjection(degree=2, n_components=200, n_hyperplanes=p,
                                                  n_terms=30, pool=pool,
                                                  random_state=seed).fit(rows)
            values.append(distance_distortion(rows, krp.transform(rows), degree=2).mean)
        distortion[pool].append(values)
    print(f"{pool:12s}", "  ".join(f"p={p}: {np.mean(v):.3f}"
                                   for p, v in zip(sizes, distortion[pool], strict=True)))

explicit = [distance_distortion(rows, dkrp.ExplicitPolynomialProjection(
    degree=2, n_components=200, random_state=seed).fit_transform(rows), degree=2).mean
    for seed in seeds]
print(f"explicit phi(x) + RP: {np.mean(explicit):.3f}")

# %%
# The mean over the seeds, with their standard deviation as error bars; the band is the
# explicit map's mean ± standard deviation.

fig, ax = plt.subplots(figsize=(6.4, 4.2))
for pool in pools:
    values = np.array(distortion[pool])
    ax.errorbar(sizes, values.mean(axis=1), yerr=values.std(axis=1), marker="o", capsize=3,
                label=f'pool="{pool}"')
ax.axhspan(np.mean(explicit) - np.std(explicit), np.mean(explicit) + np.std(explicit),
           color="grey", alpha=0.3, label=r"explicit $\phi(x)$ + RP")
ax.set(xscale="log", xlabel="p (hyperplanes in the pool)",
       ylabel="mean distance distortion (eq. 18)",
       title="KRP, degree 2, k = 200, t = 30, 300 digits")
ax.set_xticks(sizes, [str(p) for p in sizes])
ax.legend()
fig.tight_layout()
plt.show()
