r"""
RFF and SRF: kernel approximation error against D
=================================================

Random Fourier features (:class:`dkrp.RandomFourierFeatures`, Rahimi & Recht 2007)
approximate the Gaussian kernel :math:`\exp(-\gamma\|x - y\|^2)`; Spherical Random
Features (:class:`dkrp.SphericalRandomFeatures`, Pennington, Yu & Kumar 2015) approximate
the polynomial kernel :math:`(1 - \|x - y\|^2/a^2)^p` on unit-norm rows. For unit rows
that kernel is :math:`(\gamma\langle x, y\rangle + c_0)^p` with :math:`\gamma = 2/a^2`
and :math:`c_0 = 1 - 2/a^2`, which :func:`dkrp.metrics.kernel_approximation_error`
computes exactly.

The error of :math:`ZZ^T` against the Gram matrix :math:`K` is measured as
:math:`\|ZZ^T - K\|_F / \|K\|_F` on 500 digits, for D features, over 3 seeds. RFF's
features are unbiased for the Gaussian kernel, so its error keeps falling with D. SRF's
features are unbiased for a fitted surrogate :math:`\hat K`, which is close to the
polynomial kernel but not equal to it: at large D its error falls more slowly, towards
the surrogate's own error.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import dkrp
from dkrp.metrics import kernel_approximation_error

X = load_digits().data[:500] / 8.0 - 1.0  # pixels 0..16 to [-1, 1]
X_unit = X / np.linalg.norm(X, axis=1, keepdims=True)  # what SRF sees: it normalises rows

gamma = 0.02  # Gaussian kernel width, about 1 / (d * X.var()) here
degree, scale = 3, 4.0  # SRF's p and a
dims = [64, 128, 256, 512, 1024, 2048, 4096]
seeds = [0, 1, 2]

errors = {"RFF, Gaussian kernel": [], f"SRF, p = {degree}, a = {scale:g}": []}
for n_components in dims:
    rff, srf = [], []
    for seed in seeds:
        Z = dkrp.RandomFourierFeatures(gamma=gamma, n_components=n_components,
                                       random_state=seed).fit_transform(X)
        rff.append(kernel_approximation_error(X, Z, kernel="gaussian",
                                              gamma=gamma).relative_frobenius)
        Z = dkrp.SphericalRandomFeatures(degree=degree, scale=scale, n_components=n_components,
                                         random_state=seed).fit_transform(X)
        srf.append(kernel_approximation_error(
            X_unit, Z, kernel="polynomial", degree=degree, gamma=2 / scale**2,
            coef0=1 - 2 / scale**2).relative_frobenius)
    errors["RFF, Gaussian kernel"].append(rff)
    errors[f"SRF, p = {degree}, a = {scale:g}"].append(srf)

for n_components, rff, srf in zip(dims, *errors.values(), strict=True):
    print(f"D = {n_components:5d}: RFF {np.mean(rff):.4f}, SRF {np.mean(srf):.4f}")

# %%
# The mean over the seeds, with their standard deviation as error bars, and the
# :math:`1/\sqrt{D}` slope of a Monte Carlo estimate for reference:

fig, ax = plt.subplots(figsize=(6.4, 4.2))
for label, values in errors.items():
    values = np.array(values)
    ax.errorbar(dims, values.mean(axis=1), yerr=values.std(axis=1), marker="o", capsize=3,
                label=label)
first = np.mean(errors["RFF, Gaussian kernel"][0])
ax.plot(dims, first * np.sqrt(dims[0] / np.array(dims)), "k:", label=r"$\propto 1/\sqrt{D}$")
ax.set(xscale="log", yscale="log", xlabel="D (number of features)",
       ylabel=r"$\|ZZ^T - K\|_F \;/\; \|K\|_F$", title="Kernel approximation error, 500 digits")
ax.set_xticks(dims, [str(d) for d in dims])
ax.legend()
fig.tight_layout()
plt.show()
