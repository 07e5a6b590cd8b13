"""Loaders for the benchmark datasets, local files first.

This module owns where dkrp looks for the public benchmark data (``DKRP_DATA_DIR``, default
``../shared/data``), the expected file names inside that folder, and the in-memory loaders
(MNIST, Fashion-MNIST, covertype, w8a, a9a, scikit-learn's digits) with the preprocessing the
KRP paper uses. Nothing is downloaded unless a loader is called with ``download=True``; a missing
file raises :class:`DatasetNotFoundError`, which says which file is expected where.

Expected layout of the data folder (as in ``shared/data/README.md``)::

    mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
    fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
    covtype/kaggle_forest_cover_train.csv
    w8a/w8a.bz2
    a9a/a9a.bz2, a9a/a9a.t.bz2
    avocado/avocado.csv
    wine-quality/WineQT.csv
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .errors import DatasetNotFoundError, InvalidInputError, Message, MissingDependencyError, Param

__all__ = [
    "DatasetNotFoundError",
    "data_dir",
    "dataset_path",
    "load_a9a",
    "load_avocado",
    "load_covtype",
    "load_digits_scaled",
    "load_fashion_mnist",
    "load_mnist",
    "load_w8a",
    "load_wine_quality",
    "max_pool",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the data folder.
DATA_DIR_ENV = "DKRP_DATA_DIR"
#: Default data folder, relative to the current working directory.
DEFAULT_DATA_DIR = "../shared/data"

_IDX_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
# name -> kind -> files relative to the data folder
_FILES: dict[str, dict[str, tuple[str, ...]]] = {
    "mnist": {k: tuple(f"mnist/{f}" for f in v) for k, v in _IDX_FILES.items()},
    "fashion-mnist": {k: tuple(f"fashion-mnist/{f}" for f in v) for k, v in _IDX_FILES.items()},
    "covtype": {"train": ("covtype/kaggle_forest_cover_train.csv",)},
    "w8a": {"train": ("w8a/w8a.bz2",)},
    "a9a": {"train": ("a9a/a9a.bz2",), "test": ("a9a/a9a.t.bz2",)},
    "usps": {"train": ("usps/usps.h5",), "test": ("usps/usps.h5",)},
    "avocado": {"train": ("avocado/avocado.csv",)},
    "wine-quality": {"train": ("wine-quality/WineQT.csv",)},
}
_SCALES = ("[-1,1)", "[-1,1]", "[0,1]", None)


def data_dir() -> Path:
    """The folder holding the benchmark data.

    Returns
    -------
    pathlib.Path
        ``$DKRP_DATA_DIR`` when set. Otherwise the first existing of ``../shared/data``
        relative to the current directory and ``shared/data`` next to the repository root;
        if neither exists, the first (so error messages point at the default).
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    candidates = [
        (Path.cwd() / DEFAULT_DATA_DIR).resolve(),
        (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve(),
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def dataset_path(name: str, kind: str = "train") -> tuple[Path, ...]:
    """Expected local file(s) of a dataset.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist", "covtype", "w8a", "a9a"}
        Dataset name.
    kind : {"train", "test"}, default="train"
        Split. MNIST-style datasets return (images, labels).

    Returns
    -------
    tuple of pathlib.Path
        Absolute paths under :func:`data_dir`; they may not exist.

    Examples
    --------
    >>> [p.name for p in dataset_path("mnist", "test")]
    ['t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz']
    """
    key = name.lower().replace("_", "-")
    if key not in _FILES:
        raise InvalidInputError(f"Unknown dataset {name!r}; known: {sorted(_FILES)}")
    if kind not in _FILES[key]:
        raise InvalidInputError(
            f"Dataset {name!r} has no {kind!r} split; available: {sorted(_FILES[key])}"
        )
    root = data_dir()
    return tuple(root / rel for rel in _FILES[key][kind])


def _require(name: str, kind: str) -> tuple[Path, ...]:
    paths = dataset_path(name, kind)
    for path in paths:
        if not path.is_file():
            raise DatasetNotFoundError(
                f"{name} ({kind}) not found: expected file {path.name!r} in directory "
                f"{str(path.parent)!r}. Put the file there, or set {DATA_DIR_ENV} to the folder "
                f"that contains {path.parent.name + '/'!r} (now {str(data_dir())!r})."
            )
    return paths


def _load_idx_pair(name: str, kind: str, scale):
    if kind not in ("train", "test"):
        raise InvalidInputError(f"kind must be 'train' or 'test', got {kind!r}")
    if scale not in _SCALES:
        raise InvalidInputError(f"scale must be one of {_SCALES}, got {scale!r}")
    from .io import read_idx  # the one IDX parser; imported here to keep this module light

    images_path, labels_path = _require(name, kind)
    images = read_idx(images_path, expected_magic=2051)  # unsigned bytes, 3-D
    labels = read_idx(labels_path, expected_magic=2049)  # unsigned bytes, 1-D
    if images.shape[0] != labels.shape[0]:
        raise InvalidInputError(
            f"{images_path} has {images.shape[0]} images but {labels_path} has "
            f"{labels.shape[0]} labels"
        )
    X = images.reshape(images.shape[0], -1).astype(np.float64)
    if scale in ("[-1,1)", "[-1,1]"):
        X = X / 127.5 - 1.0  # KRP paper's MNIST preprocessing; pixel 255 maps to exactly 1.0
    elif scale == "[0,1]":
        X = X / 255.0
    return X, labels.astype(np.int64)


def load_mnist(kind: str = "train", scale: str | None = "[-1,1)"):
    """MNIST from the local IDX ``.gz`` files.

    Parameters
    ----------
    kind : {"train", "test"}, default="train"
        60,000 training or 10,000 test images.
    scale : {"[-1,1)", "[0,1]", None}, default="[-1,1)"
        ``"[-1,1)"``: ``x / 127.5 - 1``, the KRP paper's preprocessing (the paper's name for
        the range; pixel 255 gives exactly 1.0, so values lie in [-1, 1]). ``"[0,1]"``:
        ``x / 255``. None: raw grey levels 0..255 as float64.

    Returns
    -------
    X : ndarray of shape (n_samples, 784), float64
    y : ndarray of shape (n_samples,), int64
        Digits 0..9.

    Raises
    ------
    DatasetNotFoundError
        A file is missing; the message names it and its directory.
    """
    return _load_idx_pair("mnist", kind, scale)


def load_usps(kind: str = "train"):
    """USPS handwritten digits (7,291 train / 2,007 test, 16×16 grey levels in [0, 1]).

    Read from ``usps/usps.h5`` (groups ``train`` and ``test`` with ``data`` and
    ``target``), the file SRF's review (Table 1) uses; reading it needs ``h5py``
    (``pip install dkrp[data]``).

    Parameters
    ----------
    kind : {"train", "test"}, default="train"

    Returns
    -------
    X : ndarray of shape (n_samples, 256), float64
    y : ndarray of shape (n_samples,), int64
        Digits 0..9.
    """
    (path,) = _require("usps", kind)
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py ships with the test extra
        raise MissingDependencyError(
            "Reading USPS (HDF5) needs h5py: pip install dkrp[data]"
        ) from exc
    with h5py.File(path, "r") as f:
        X = np.asarray(f[f"{kind}/data"][:], dtype=np.float64)
        y = np.asarray(f[f"{kind}/target"][:], dtype=np.int64)
    if X.shape != (len(y), 256):
        raise InvalidInputError(
            f"{path}: {kind}/data has shape {X.shape}, expected ({len(y)}, 256)."
        )
    return X, y


def load_fashion_mnist(kind: str = "train", scale: str | None = "[-1,1)"):
    """Fashion-MNIST from the local IDX ``.gz`` files; same interface as :func:`load_mnist`.

    Returns
    -------
    X : ndarray of shape (n_samples, 784), float64
    y : ndarray of shape (n_samples,), int64
        Classes 0..9.
    """
    return _load_idx_pair("fashion-mnist", kind, scale)


def load_covtype(path=None, *, download: bool = False):
    """Forest covertype: the local Kaggle CSV (15,120 class-balanced rows), else scikit-learn's.

    Parameters
    ----------
    path : str or os.PathLike, optional
        CSV with a header, an ``Id`` column, 54 features and ``Cover_Type``; default
        ``covtype/kaggle_forest_cover_train.csv`` in :func:`data_dir`.
    download : bool, default=False
        When the CSV is absent, let :func:`sklearn.datasets.fetch_covtype` download the full
        581,012-row UCI data. Without it, only scikit-learn's local cache is tried.

    Returns
    -------
    X : ndarray of shape (n_samples, 54), float64
    y : ndarray of shape (n_samples,), int64
        Cover types 1..7.

    Notes
    -----
    The Kaggle file is a class-balanced subset (2,160 rows per class), not the full data.
    """
    if path is None:
        try:
            (path,) = _require("covtype", "train")
        except DatasetNotFoundError as missing:
            return _fetch_covtype(download, missing)
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"covtype CSV {str(path)!r} does not exist")
    import pandas as pd

    frame = pd.read_csv(path)
    expected = {"Id", "Cover_Type"}
    if not expected <= set(frame.columns):
        raise InvalidInputError(
            f"{path}: expected columns 'Id' and 'Cover_Type', found {list(frame.columns)}"
        )
    X = frame.drop(columns=["Id", "Cover_Type"]).to_numpy(dtype=np.float64)
    y = frame["Cover_Type"].to_numpy(dtype=np.int64)
    return X, y


def _fetch_covtype(download: bool, missing: DatasetNotFoundError):
    from sklearn.datasets import fetch_covtype

    try:
        bunch = fetch_covtype(download_if_missing=download)
    except OSError as exc:
        if download:  # scikit-learn tried to download: its reason is the news
            raise DatasetNotFoundError(Message("{} (scikit-learn: {})", missing, exc)) from exc
        # Not downloading, scikit-learn only says so, in its own parameter's name
        # (`download_if_missing` is False). The command line has no download flag: there
        # the hint and scikit-learn's words are left out.
        hint = Message(" Pass {} to let scikit-learn download it. (scikit-learn: {})",
                       Param("download", True), exc, cli="")
        raise DatasetNotFoundError(Message("{}{}", missing, hint)) from exc
    logger.info("covtype: using scikit-learn's copy (%d rows)", bunch.data.shape[0])
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.int64)


#: Avocado's numeric columns (Rost & Zast's 8 features): volumes sold and bags by size
AVOCADO_FEATURES = ("Total Volume", "4046", "4225", "4770", "Total Bags", "Small Bags",
                    "Large Bags", "XLarge Bags")


def _read_table(name, target, features=None, drop=()):
    """Columns ``features`` (default: all but ``target`` and ``drop``) and ``target``."""
    import pandas as pd

    (path,) = _require(name, "train")
    frame = pd.read_csv(path)
    frame.columns = [c.strip() for c in frame.columns]
    wanted = list(features) if features is not None else [
        c for c in frame.columns if c != target and c not in drop]
    missing = [c for c in [*wanted, target] if c not in frame.columns]
    if missing:
        raise InvalidInputError(f"{path}: expected columns {missing} are missing; found "
                                f"{list(frame.columns)}.")
    X = frame[wanted].to_numpy(dtype=np.float64)
    y = frame[target].to_numpy(dtype=np.float64)
    return X, y


def load_avocado():
    """Kaggle "Avocado Prices": the 8 volume columns and ``AveragePrice`` (Rost & Zast 2023).

    Returns
    -------
    X : ndarray of shape (18249, 8), float64
        :data:`AVOCADO_FEATURES`, unscaled (volumes span several orders of magnitude).
    y : ndarray of shape (18249,), float64
        Average price (USD).

    Notes
    -----
    The date, ``type``, ``year`` and ``region`` columns are left out: the thesis's Table
    5.1 gives Avocado 8 features, which are exactly the numeric volume columns.
    """
    return _read_table("avocado", "AveragePrice", features=AVOCADO_FEATURES)


def load_wine_quality():
    """Kaggle "Wine Quality" (``WineQT.csv``, red wine): 11 chemistry columns and ``quality``.

    Returns
    -------
    X : ndarray of shape (1143, 11), float64
    y : ndarray of shape (1143,), float64
        Quality scores 3..8.
    """
    return _read_table("wine-quality", "quality", drop=("Id",))


def _load_libsvm(name: str, kind: str, n_features: int):
    from sklearn.datasets import load_svmlight_file

    (path,) = _require(name, kind)
    X, y = load_svmlight_file(str(path), n_features=n_features)
    X = sp.csr_matrix(X)
    # a9a.t carries an explicit "123:0" so readers infer 123 features; drop the stored zero
    X.eliminate_zeros()
    # 32-bit indices, as scipy builds them for arrays this small: liblinear (LinearSVC)
    # refuses int64 ones, which the svmlight reader returns
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, y.astype(np.int64)


def load_w8a():
    """LIBSVM w8a (training file only; no public test file was found).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (49749, 300), float64
    y : ndarray of shape (49749,), int64
        Labels -1 and +1.
    """
    return _load_libsvm("w8a", "train", 300)


def load_a9a(kind: str = "train"):
    """LIBSVM a9a (UCI Adult, binarized).

    Parameters
    ----------
    kind : {"train", "test"}, default="train"
        32,561 training or 16,281 test rows.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, 123), float64
        Explicitly stored zeros are removed.
    y : ndarray of shape (n_samples,), int64
        Labels -1 and +1.
    """
    if kind not in ("train", "test"):
        raise InvalidInputError(f"kind must be 'train' or 'test', got {kind!r}")
    return _load_libsvm("a9a", kind, 123)


def load_digits_scaled():
    """scikit-learn's 8x8 digits (ships with scikit-learn), scaled to [0, 1] by ``x / 16``.

    Returns
    -------
    X : ndarray of shape (1797, 64), float64
    y : ndarray of shape (1797,), int64

    Examples
    --------
    >>> X, y = load_digits_scaled()
    >>> X.shape, float(X.min()), float(X.max())
    ((1797, 64), 0.0, 1.0)
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return np.asarray(bunch.data, dtype=np.float64) / 16.0, np.asarray(bunch.target, np.int64)


def max_pool(X, size: int = 2, side: int | None = None):
    """``size`` x ``size`` max-pooling of square images stored as rows (as in Rost & Zast 2023).

    Parameters
    ----------
    X : ndarray of shape (n_samples, side * side)
    size : int, default=2
    side : int, optional
        Image side; default ``sqrt(n_features)``. Must be a multiple of ``size``.

    Returns
    -------
    ndarray of shape (n_samples, (side // size) ** 2)

    Examples
    --------
    >>> max_pool(np.arange(16.0).reshape(1, 16)).tolist()
    [[5.0, 7.0, 13.0, 15.0]]
    """
    X = np.asarray(X)
    side = int(round(np.sqrt(X.shape[1]))) if side is None else int(side)
    if side * side != X.shape[1] or side % size:
        raise InvalidInputError(f"max_pool needs square images with a side divisible by {size}; "
                                f"got {X.shape[1]} features.")
    k = side // size
    return X.reshape(-1, k, size, k, size).max(axis=(2, 4)).reshape(-1, k * k)
