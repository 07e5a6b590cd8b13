r"""
SPE: sign bits against float sketches
=====================================

The Sign Product Embedding (:class:`dkrp.SignProductEmbedding`, Delogne & Jacques)
sketches a row :math:`x` as :math:`B(x)_i = (a_{2i}^\top x)^2 - (a_{2i+1}^\top x)^2`,
:math:`i < m`, with Gaussian :math:`a_j`. Inner products of sketches estimate the
quadratic kernel :math:`\langle x, y\rangle^2` (``sketch_kernel_estimate``). The SPE's
point is the *asymmetric* estimate: a stored row keeps only the signs
:math:`\mathrm{sign}(B(y))`, one bit each (``transform_bits`` packs eight to a byte), and
:math:`\frac{\pi}{4m}\langle B(x), \mathrm{sign}(B(y))\rangle` still estimates
:math:`\langle x, y\rangle^2` for unit-norm :math:`y` (``asymmetric_kernel_estimate``).

Here on unit-norm digits, 100 query rows against 100 stored rows: the error of each
estimate against the exact kernel, against the bytes a stored row takes (float32
sketches: :math:`4m` bytes; bits: :math:`m/8`), over 3 seeds.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

import dkrp
from dkrp.features.sign_product import asymmetric_kernel_estimate, sketch_kernel_estimate

X = load_digits().data[:200] / 8.0 - 1.0
X /= np.linalg.norm(X, axis=1, keepdims=True)  # unit rows: the asymmetric estimate's setting
queries, stored = X[:100], X[100:]
exact = (queries @ stored.T) ** 2


def relative_error(estimate):
    return np.linalg.norm(estimate - exact) / np.linalg.norm(exact)


sizes = [64, 128, 256, 512, 1024, 2048, 4096]
seeds = [0, 1, 2]
floats, bits = [], []
for m in sizes:
    float_errors, bit_errors = [], []
    for seed in seeds:
        spe = dkrp.SignProductEmbedding(n_components=m, random_state=seed).fit(X)
        query_sketches = spe.transform(queries)
        float_errors.append(relative_error(
            sketch_kernel_estimate(query_sketches, spe.transform(stored))))
        packed = spe.transform_bits(stored)  # uint8, ceil(m / 8) bytes per row
        assert packed.shape == (len(stored), (m + 7) // 8)
        bit_errors.append(relative_error(asymmetric_kernel_estimate(query_sketches, packed)))
    floats.append(float_errors)
    bits.append(bit_errors)

for m, f, b in zip(sizes, floats, bits, strict=True):
    print(f"m = {m:4d}: float32 sketches {4 * m:6d} B/row, error {np.mean(f):.3f}; "
          f"sign bits {m // 8:4d} B/row, error {np.mean(b):.3f}")

# %%
# Each point is one m (the label beside it); the error bars are the standard deviation
# over the seeds.

fig, ax = plt.subplots(figsize=(6.4, 4.2))
for label, values, bytes_per_row in [
        ("float32 sketches, both sides", floats, [4 * m for m in sizes]),
        ("sign bits stored, sketch queries (SPE)", bits, [m / 8 for m in sizes])]:
    values = np.array(values)
    ax.errorbar(bytes_per_row, values.mean(axis=1), yerr=values.std(axis=1), marker="o",
                capsize=3, label=label)
    for m, x, y in zip(sizes, bytes_per_row, values.mean(axis=1), strict=True):
        ax.annotate(f"m={m}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
ax.set(xscale="log", yscale="log", xlabel="bytes per stored row",
       ylabel=r"relative error of the $\langle x, y\rangle^2$ estimate",
       title="Sign Product Embedding, 100 × 100 unit-norm digits")
ax.legend()
fig.tight_layout()
plt.show()
