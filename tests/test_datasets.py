"""Tests for dkrp.datasets: where data is looked for, loader shapes and preprocessing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import real_data_root

from dkrp.datasets import (
    DatasetNotFoundError,
    data_dir,
    dataset_path,
    load_a9a,
    load_covtype,
    load_digits_scaled,
    load_fashion_mnist,
    load_mnist,
    load_w8a,
)


@pytest.fixture
def real_data(monkeypatch):
    """Point DKRP_DATA_DIR at the real data folder, or skip when there is none."""
    root = real_data_root()
    monkeypatch.setenv("DKRP_DATA_DIR", str(root))
    return root


def _need(root: Path, *relative: str) -> None:
    for rel in relative:
        if not (root / rel).is_file():
            pytest.skip(f"real data file {rel} not found in {root}")


def test_data_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DKRP_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    assert dataset_path("a9a", "test") == (tmp_path / "a9a" / "a9a.t.bz2",)
    assert [p.name for p in dataset_path("fashion_mnist")] == [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
    ]


def test_data_dir_default_is_relative_to_cwd(monkeypatch, tmp_path):
    monkeypatch.delenv("DKRP_DATA_DIR", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert data_dir() == (tmp_path / "shared" / "data").resolve()


@pytest.mark.parametrize(
    "name, kind, bad",
    [("mnist", "train", None), ("nope", "train", "Unknown dataset"), ("w8a", "test", "no 'test'")],
)
def test_dataset_path_table(monkeypatch, tmp_path, name, kind, bad):
    monkeypatch.setenv("DKRP_DATA_DIR", str(tmp_path))
    if bad is None:
        assert dataset_path(name, kind)[0].parent == tmp_path / "mnist"
    else:
        with pytest.raises(ValueError, match=bad):
            dataset_path(name, kind)


@pytest.mark.parametrize(
    "loader, expected",
    [
        (lambda: load_mnist("test"), "'t10k-images-idx3-ubyte.gz' in directory '{root}/mnist'"),
        (load_w8a, "'w8a.bz2' in directory '{root}/w8a'"),
        (lambda: load_a9a("test"), "'a9a.t.bz2' in directory '{root}/a9a'"),
        (load_covtype, "'kaggle_forest_cover_train.csv' in directory '{root}/covtype'"),
    ],
)
def test_missing_files_say_what_and_where(monkeypatch, tmp_path, loader, expected):
    monkeypatch.setenv("DKRP_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetNotFoundError) as info:
        loader()
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    assert expected.format(root=tmp_path) in message
    assert "DKRP_DATA_DIR" in message


@pytest.mark.parametrize(
    "scale, low, high",
    [("[-1,1)", -1.0, 1.0), ("[0,1]", 0.0, 1.0), (None, 0.0, 255.0)],
)
def test_mnist_test_shapes_and_scaling(real_data, scale, low, high):
    _need(real_data, "mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz")
    X, y = load_mnist("test", scale=scale)
    assert X.shape == (10000, 784) and X.dtype == np.float64
    assert y.shape == (10000,) and y.dtype == np.int64
    assert (X.min(), X.max()) == (low, high)
    assert set(np.unique(y)) == set(range(10))
    raw, _ = load_mnist("test", scale=None)
    if scale == "[-1,1)":
        np.testing.assert_allclose(X, raw / 127.5 - 1)


def test_mnist_train_shapes(real_data):
    _need(real_data, "mnist/train-images-idx3-ubyte.gz", "mnist/train-labels-idx1-ubyte.gz")
    X, y = load_mnist("train")
    assert X.shape == (60000, 784) and y.shape == (60000,)
    assert -1.0 <= X.min() and X.max() <= 1.0


def test_fashion_mnist_test_shapes(real_data):
    _need(real_data, "fashion-mnist/t10k-images-idx3-ubyte.gz")
    X, y = load_fashion_mnist("test", scale="[0,1]")
    assert X.shape == (10000, 784)
    np.testing.assert_array_equal(np.bincount(y), [1000] * 10)


def test_covtype_local(real_data):
    _need(real_data, "covtype/kaggle_forest_cover_train.csv")
    X, y = load_covtype()
    assert X.shape == (15120, 54) and X.dtype == np.float64
    np.testing.assert_array_equal(np.bincount(y)[1:], [2160] * 7)


def test_libsvm_loaders(real_data):
    _need(real_data, "w8a/w8a.bz2", "a9a/a9a.t.bz2")
    X, y = load_w8a()
    assert isinstance(X, sp.csr_matrix)
    assert X.shape == (49749, 300) and X.nnz == 579586
    assert set(np.unique(y)) == {-1, 1}
    Xt, yt = load_a9a("test")
    assert Xt.shape == (16281, 123)
    assert (Xt.data != 0).all()  # the explicit "123:0" of the first line is gone
    np.testing.assert_array_equal(np.unique(yt, return_counts=True)[1], [12435, 3846])
    # liblinear takes them as they are (it refuses 64-bit sparse indices)
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    for A, b in ((X, y), (Xt, yt)):
        assert A.indices.dtype == A.indptr.dtype == np.int32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # only the input is tested
            LinearSVC(C=1.0, dual=False, max_iter=50).fit(A, b)


def test_digits_scaled():
    X, y = load_digits_scaled()
    assert X.shape == (1797, 64) and y.shape == (1797,)
    assert X.min() == 0.0 and X.max() == 1.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale must be one of"):
        load_mnist("test", scale="[0,255]")
    with pytest.raises(ValueError, match="kind must be"):
        load_mnist("valid")


def test_load_usps_has_the_classic_split():
    from conftest import real_data_root

    real_data_root()  # skips, saying why, without the shared data
    from dkrp.datasets import load_usps

    X, y = load_usps("train")
    Xt, yt = load_usps("test")
    assert X.shape == (7291, 256) and Xt.shape == (2007, 256)
    assert 0.0 <= X.min() and X.max() <= 1.0
    assert set(np.unique(y)) == set(range(10)) and len(yt) == 2007
