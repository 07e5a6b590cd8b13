"""The experiments' datasets, prepared as the papers did (or as close as the files here allow).

Every loader returns a :class:`Split`: training rows (what data-dependent maps and
classifiers fit on), evaluation rows, and ``n_paper``, the training-set size the
paper's ``p = O(sqrt(n))`` grid is computed from; ``note`` says what was used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError

__all__ = ["COVTYPE_CLASS_COUNTS", "DATASETS", "Split", "load_split", "p_grid", "subsample"]


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


#: Rows per cover type (1..7) in the full 581,012-row UCI Covertype data (UCI's summary;
#: they add up to 581,012). LIBSVM's ``covtype.binary`` is type 2 (Lodgepole Pine) against
#: the rest, so its classes are 283,301 / 297,711 rows.
COVTYPE_CLASS_COUNTS = (211840, 283301, 35754, 2747, 9493, 17367, 20510)


def _minmax(X_train, X_test):
    """Columns scaled to [0, 1] by the training rows' min and max (svm-scale ``-l 0 -u 1``)."""
    low, high = X_train.min(axis=0), X_train.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (X_train - low) / span, (X_test - low) / span


def _covtype_binary(y):
    """LIBSVM ``covtype.binary`` labels: +1 for cover type 2, -1 for every other type."""
    return np.where(np.asarray(y) == 2, 1, -1).astype(np.int64)


def _covtype_subset():
    """The Kaggle subset resampled to the full data's class mix, then LIBSVM's binary task.

    The Kaggle file holds 2,160 rows of each of the 7 types, so "type 2 vs the rest" on it
    would be a 1:6 problem (85.7 % majority) instead of the full data's 48.8 : 51.2. Drawing
    from each type as many rows as its share of the full data asks (type 2, the largest
    share, keeps all 2,160) gives 4,429 rows whose class mix is the full data's; within a
    type the Kaggle rows are taken as they are.
    """
    from .. import datasets

    X, y = datasets.load_covtype()
    X = np.asarray(X, dtype=np.float64)
    counts = np.asarray(COVTYPE_CLASS_COUNTS, dtype=np.float64)
    share = counts / counts.sum()
    available = np.array([(y == c).sum() for c in range(1, 8)])
    total = int(np.floor((available / share).min()))
    rng = np.random.default_rng(2018)
    rows = np.sort(np.concatenate([
        rng.choice(np.flatnonzero(y == c), size=int(round(share[c - 1] * total)), replace=False)
        for c in range(1, 8)
    ]))
    X, y = X[rows], _covtype_binary(y[rows])
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=1 / 3, stratify=y, random_state=2018)
    X_train, X_test = _minmax(X_train, X_test)
    return Split(X_train, y_train, X_test, y_test, X_train.shape[0],
                 f"covtype-subset: the 15,120-row Kaggle subset (2,160 rows per type) resampled "
                 f"(seed 2018) to the full data's type mix ({X.shape[0]:,} rows), labelled as "
                 f"LIBSVM covtype.binary (type 2 = +1, the rest -1; {100 * (y == 1).mean():.1f} % "
                 f"positive), columns min-max scaled to [0, 1] on the training part (as "
                 f"covtype.libsvm.binary.scale), fixed stratified 2/3 train / 1/3 test split "
                 f"(seed 2018): {X_train.shape[0]:,} / {X_test.shape[0]:,} rows")


def _covtype_full():
    """The full 581,012-row data from scikit-learn's cache: 10 % train / 20 % test (the paper)."""
    from ..datasets import DatasetNotFoundError

    try:
        from sklearn.datasets import fetch_covtype

        bunch = fetch_covtype(download_if_missing=False)
    except OSError as exc:
        raise DatasetNotFoundError(
            "covtype-full needs the full 581,012-row Covertype in scikit-learn's data cache "
            "(not here: only the Kaggle subset is; use covtype-subset). Fetch it once with "
            "`python -c 'from sklearn.datasets import fetch_covtype; fetch_covtype()'` "
            f"(or set SCIKIT_LEARN_DATA to a folder holding it). scikit-learn said: {exc}"
        ) from exc
    X = np.asarray(bunch.data, dtype=np.float64)
    y = _covtype_binary(bunch.target)
    order = np.random.default_rng(2018).permutation(X.shape[0])
    n_train, n_test = int(0.1 * X.shape[0]), int(0.2 * X.shape[0])
    train, test = order[:n_train], order[n_train:n_train + n_test]
    X_train, X_test = _minmax(X[train], X[test])
    return Split(X_train, y[train], X_test, y[test], n_train,
                 f"covtype-full: scikit-learn's 581,012-row Covertype, LIBSVM covtype.binary "
                 f"labels (type 2 vs rest), min-max scaled, random 10 % train / 20 % test "
                 f"(seed 2018; the paper's sizes {n_train:,} / {n_test:,})")


def _regression(name):
    """A fixed 80/20 split (seed 2018), features min-max scaled on the training part."""
    from sklearn.model_selection import train_test_split

    from .. import datasets

    loader = {"avocado": datasets.load_avocado, "wine-quality": datasets.load_wine_quality}[name]
    X, y = loader()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=2018)
    X_train, X_test = _minmax(X_train, X_test)
    return Split(X_train, y_train, X_test, y_test, X_train.shape[0],
                 f"{name}: {X.shape[1]} features min-max scaled to [0, 1] on the training part, "
                 f"fixed 80/20 split (seed 2018): {X_train.shape[0]:,} / {X_test.shape[0]:,} rows")


def _pooled(fashion):
    """Rost & Zast's images: pixels / 255, then 2x2 max-pooling (28x28 -> 14x14 = 196)."""
    from .. import datasets

    split = _mnist("[0,1]", fashion=fashion)
    return Split(datasets.max_pool(split.X_train), split.y_train,
                 datasets.max_pool(split.X_test), split.y_test, split.n_paper,
                 split.note + ", then 2x2 max-pooling (196 features)")


DATASETS = {
    "mnist": lambda: _mnist("[-1,1)"),
    "mnist-01": lambda: _mnist("[0,1]"),
    "fashion-mnist": lambda: _mnist("[0,1]", fashion=True),
    "mnist-pooled": lambda: _pooled(False),
    "fashion-mnist-pooled": lambda: _pooled(True),
    "w8a": _w8a,
    "a9a": _a9a,
    "covtype": _covtype,
    "covtype-subset": _covtype_subset,
    "covtype-full": _covtype_full,
    "avocado": lambda: _regression("avocado"),
    "wine-quality": lambda: _regression("wine-quality"),
}

_CACHE: dict = {}


def load_split(name) -> Split:
    """The :class:`Split` of dataset ``name`` (cached in this process)."""
    if name not in DATASETS:
        raise InvalidInputError(f"Unknown dataset {name!r}; choose one of {', '.join(DATASETS)}.")
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
