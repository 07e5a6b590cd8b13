"""Shared fixtures: the real-data directory and the paper's MNIST test sample."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """``DKRP_DATA_DIR``, else ``../shared/data`` beside the repository."""
    env = os.environ.get("DKRP_DATA_DIR")
    return Path(env) if env else (REPO_ROOT / ".." / "shared" / "data").resolve()


def require_data(*relative: str) -> Path:
    """Path of a file under the data directory, or skip the test saying what is missing."""
    path = data_dir().joinpath(*relative)
    if not path.exists():
        pytest.skip(
            f"needs the real dataset file {path} (set DKRP_DATA_DIR to the folder holding "
            "the shared datasets; see ../shared/data/README.md)"
        )
    return path


def _idx_images(path: Path) -> np.ndarray:
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)


@pytest.fixture(scope="session")
def mnist_test_500():
    """500 random MNIST test digits scaled to [-1, 1) as in the KRP paper (x/127.5 - 1)."""
    X = _idx_images(require_data("mnist", "t10k-images-idx3-ubyte.gz"))
    rows = np.random.default_rng(2018).choice(X.shape[0], 500, replace=False)
    return X[rows] / 127.5 - 1.0
