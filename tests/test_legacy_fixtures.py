"""Specs and stores written by dkrp 0.1.0 keep loading and give the same features.

The fixtures in ``tests/fixtures/v0_1_0/`` were written once by dkrp 0.1.0 (before
the structure change) and are never regenerated: a change that stops them loading,
or that changes a single bit of what they produce, breaks users' saved work. Their
state is pinned by its checksum everywhere; their features byte for byte on the BLAS
kernel that wrote them and to a GEMM's rounding on others (``machine.py``).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from machine import assert_same_features

import dkrp
from dkrp.feature_store import open_features, write_features
from dkrp.io import open_dataset

FIXTURES = Path(__file__).parent / "fixtures" / "v0_1_0"


@pytest.fixture(scope="module")
def X():
    return np.load(FIXTURES / "X.npy")


@pytest.mark.parametrize("name", ["krp", "krp_structured", "rff", "rff_scale"])
def test_spec_from_0_1_0_rebuilds_byte_identical_features(X, name):
    spec = json.loads((FIXTURES / f"{name}.spec.json").read_text())
    est = dkrp.from_spec(spec)
    expected = np.load(FIXTURES / f"{name}.Z.npy")
    assert est.to_spec()["checksum"] == spec["checksum"]
    assert_same_features(est.transform(X), expected, FIXTURES)


@pytest.mark.parametrize("name", ["rff_cos", "rff_cos_sin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spec_of_the_first_compiled_cosine_rebuilds_byte_identical_features(X, name, dtype):
    # written once by dkrp at 71dd190 (tests/fixtures/cosine_v1/MAKE.py.txt), whose new
    # fits recorded cosine_ "dkrp": kernel version 1, whose float32 bits version 2 changed
    folder = FIXTURES.parent / "cosine_v1"
    spec = json.loads((folder / f"{name}.spec.json").read_text())
    est = dkrp.from_spec(spec)
    assert est.cosine_ == "dkrp"
    assert est.to_spec()["checksum"] == spec["checksum"]
    expected = np.load(folder / f"{name}.{np.dtype(dtype).name}.Z.npy")
    # bytes on the kernel that wrote the fixture; elsewhere the GEMM before the cosine
    # moves the last bits, and the kernel version a spec selects ("dkrp" is version 1)
    # is checked on every machine by test_fourier.py and test_trig.py
    assert_same_features(est.transform(X.astype(dtype)), expected, folder)


def test_saved_data_dependent_projector_from_0_1_0_loads(X):
    est = dkrp.load(FIXTURES / "nystroem.json")
    assert_same_features(est.transform(X), np.load(FIXTURES / "nystroem.Z.npy"), FIXTURES)


def test_dataset_store_from_0_1_0_opens(X):
    ds = open_dataset(FIXTURES / "dataset.zarr")
    assert ds.X.shape == (40, 6)
    # the CSV held the values printed to 6 decimals
    np.testing.assert_allclose(ds.X.compute(), X, atol=1e-6)
    assert ds.y.compute().tolist() == [i % 3 for i in range(40)]


def test_feature_store_from_0_1_0_opens_and_is_complete_for_a_rerun(tmp_path):
    features = open_features(FIXTURES / "features.zarr")
    krp = dkrp.from_spec(json.loads((FIXTURES / "krp.spec.json").read_text()))
    ds = open_dataset(FIXTURES / "dataset.zarr")
    expected = krp.transform(ds.X.compute())
    assert_same_features(features.Z.compute(), expected, FIXTURES, what="stored features")
    # A rerun of the same job against a copy of the old store finds nothing to do.
    store = tmp_path / "features.zarr"
    shutil.copytree(FIXTURES / "features.zarr", store)
    summary = write_features(ds.X, krp, store, progress=False)
    assert summary["chunks_written"] == 0
