"""
From a CSV file to a linear SVM through Zarr stores
===================================================

The production path, in Python and on a small scale: a CSV file is ingested into a Zarr
*dataset store* (:func:`dkrp.io.ingest`), featurized into a resumable *feature store*
(:func:`dkrp.featurize_to_store`), read back with its labels
(:func:`dkrp.read_features`: a dask array and a numpy array) and fed to scikit-learn's
``LinearSVC``. The test set is featurized with the map fitted on the training set: a
fitted projector is used as it is, never refitted.

With no distributed client running, the job runs on dask's local threaded scheduler, in
a temporary folder. The same calls take a ``client`` for a cluster, and ``dkrp ingest``,
``dkrp featurize --like`` and ``dkrp train`` do the same from the command line.
"""

import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.svm import LinearSVC

import dkrp
from dkrp.io import ingest

X, y = load_digits(return_X_y=True)
X = X / 8.0 - 1.0  # pixels 0..16 to [-1, 1]: KRP wants bounded features
order = np.random.default_rng(0).permutation(len(X))
parts = {"train": order[:1200], "test": order[1200:]}

folder = Path(tempfile.mkdtemp())
for name, rows in parts.items():
    table = pd.DataFrame(X[rows], columns=[f"pixel{i}" for i in range(X.shape[1])])
    table["label"] = y[rows]
    table.to_csv(folder / f"{name}.csv", index=False)
    ingest(folder / f"{name}.csv", folder / f"{name}.zarr", label_column="label")

# %%
# Featurize both stores with one degree-2 KRP map per k, and train a linear SVM on the
# training store's features.

n_components = [100, 400, 1600]
accuracy = {}
for k in n_components:
    krp = dkrp.PolynomialRandomProjection(degree=2, n_components=k, n_hyperplanes=512,
                                          n_terms=8, random_state=0)
    for name in parts:
        result = dkrp.featurize_to_store(folder / f"{name}.zarr",
                                         folder / f"{name}-krp{k}.zarr", krp, progress=False)
        print(f"k = {k}, {name}: {result.action}, {result.summary['rows']} rows x "
              f"{result.summary['n_components']} components")
    Z, labels = dkrp.read_features(folder / f"train-krp{k}.zarr")
    Z_test, labels_test = dkrp.read_features(folder / f"test-krp{k}.zarr")
    model = LinearSVC(C=0.1, random_state=0).fit(Z.compute(), labels)
    accuracy[f"KRP, k = {k}"] = model.score(Z_test.compute(), labels_test)

raw = LinearSVC(C=0.1, random_state=0).fit(X[parts["train"]], y[parts["train"]])
accuracy["raw pixels"] = raw.score(X[parts["test"]], y[parts["test"]])
for name, value in accuracy.items():
    print(f"{name:14s} test accuracy {value:.4f}")
shutil.rmtree(folder)

# %%
# Test accuracy of each linear SVM:

fig, ax = plt.subplots(figsize=(6.4, 4.2))
names = ["raw pixels", *[f"KRP, k = {k}" for k in n_components]]
bars = ax.bar(names, [100 * accuracy[name] for name in names], color="tab:blue")
ax.bar_label(bars, fmt="%.1f")
ax.set(ylabel="test accuracy (%)", ylim=(80, 100),
       title="LinearSVC on digits: raw pixels and KRP feature stores")
fig.tight_layout()
plt.show()
