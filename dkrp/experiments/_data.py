"""The experiments' datasets, prepared as the papers did (or as close as the files here allow).

Every loader returns a :class:`Split`: training rows (what data-dependent maps and
classifiers fit on), evaluation rows, and ``n_paper``, the training-set size the
paper's ``p = O(sqrt(n))`` grid is computed from; ``note`` says what was used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DATASETS", "Split", "load_split", "p_grid", "subsample"]


@dataclass
class Split:
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    n_paper: int
    note: str


def _mnist(scale, fashion=False):
    from .. import datasets

    loader = datasets.load_fashion_mnist if fashion else datasets.load_mnist
    X_train, y_train = loader("train", scale=scale)
    X_test, y_test = loader("test", scale=scale)
    name = "Fashion-MNIST" if fashion else "MNIST"
    how = "x/127.5 - 1 (the KRP paper's scaling)" if scale == "[-1,1)" else "x/255"
    return Split(X_train, y_train, X_test, y_test, 60000,
                 f"{name} IDX files, 60,000/10,000 split, pixels {how}")


def _held_out(X, y, n_paper, note, seed=2018, fraction=0.2):
    """A fixed stratified 80/20 split (seed 2018, the same for every run)."""
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=fraction, stratify=y, random_state=seed)
    return Split(X_train, y_train, X_test, y_test, n_paper, note)


def _w8a():
    from .. import datasets

    X, y = datasets.load_w8a()
    return _held_out(X, y, 49749,
                     "w8a: only the LIBSVM training file (49,749 rows) is here; a fixed "
                     "stratified 80/20 split of it (seed 2018) gives the training and "
                     "held-out parts, evaluation rows come from the held-out part")


def _a9a():
    from .. import datasets

    X_train, y_train = datasets.load_a9a("train")
    X_test, y_test = datasets.load_a9a("test")
    return Split(X_train, y_train, X_test, y_test, X_train.shape[0],
                 "a9a (LIBSVM train/test files) in place of Webspam, which is not here")


def _covtype():
    from .. import datasets

    X, y = datasets.load_covtype()
    X = np.asarray(X, dtype=np.float64)
    std = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return _held_out(X, y, X.shape[0],
                     f"Covertype: the {X.shape[0]:,}-row Kaggle subset here (not the "
                     "581,012-row set), standardised columns, fixed stratified 80/20 split "
                     "(seed 2018)")


DATASETS = {
    "mnist": lambda: _mnist("[-1,1)"),
    "mnist-01": lambda: _mnist("[0,1]"),
    "fashion-mnist": lambda: _mnist("[0,1]", fashion=True),
    "w8a": _w8a,
    "a9a": _a9a,
    "covtype": _covtype,
}

_CACHE: dict = {}


def load_split(name) -> Split:
    """The :class:`Split` of dataset ``name`` (cached in this process)."""
    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {', '.join(DATASETS)}.")
    if name not in _CACHE:
        _CACHE[name] = DATASETS[name]()
    return _CACHE[name]


def subsample(X, y, n, seed):
    """``n`` rows drawn without replacement by ``seed`` (all rows when ``n`` is None or larger)."""
    if n is None or X.shape[0] <= n:
        return X, y
    rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=int(n), replace=False))
    return X[rows], y[rows]


def p_grid(n, factors):
    """The KRP paper's ``p`` values: ``factor * floor(sqrt(n))`` (MNIST: 122, 244, 488, 976)."""
    base = math.isqrt(int(n))
    return [max(1, int(f * base)) for f in factors]
