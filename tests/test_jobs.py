"""dkrp.featurize_to_store: the whole featurize job on a real LocalCluster and Zarr stores."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dkrp import Nystroem, PolynomialRandomProjection, featurize_to_store
from dkrp.feature_store import FeatureStoreMismatchError, input_fingerprint, open_features
from dkrp.io import ingest

pytestmark = pytest.mark.cluster

CHUNK = 50


@pytest.fixture(scope="module")
def client():
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.fixture
def dataset(tmp_path):
    X = np.random.default_rng(7).standard_normal((230, 6))
    np.save(tmp_path / "x.npy", X)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=CHUNK)
    return tmp_path / "x.zarr", X


def _no_cluster():
    pytest.fail("the job started a cluster it did not need")


def _blockwise(est, X):
    return np.vstack([est.transform(X[s : s + CHUNK]) for s in range(0, X.shape[0], CHUNK)])


def test_dataset_store_to_features_equals_in_memory_transform(dataset, client, tmp_path):
    path, X = dataset
    out = tmp_path / "f.zarr"
    plans = []
    krp = PolynomialRandomProjection(n_components=30, n_hyperplanes=40, random_state=2)
    summary, fitted, action = featurize_to_store(path, out, krp, client=client,
                                                 progress=False, on_plan=plans.append)
    assert fitted is krp and action == "create" and [p["action"] for p in plans] == ["create"]
    assert summary["chunks_written"] == 5 and summary["rows"] == 230
    fs = open_features(out)
    assert fs.Z.compute().tobytes() == _blockwise(krp, X).tobytes()
    assert fs.attrs["input"]["source_path"] == str(path.absolute())

    # a finished store is confirmed without starting a cluster
    again = featurize_to_store(path, out, PolynomialRandomProjection(
        n_components=30, n_hyperplanes=40, random_state=2), client=_no_cluster, progress=False)
    assert again.action == "noop" and again.summary["chunks_written"] == 0
    # a store made by another run is refused before a cluster is started
    with pytest.raises(FeatureStoreMismatchError, match="seed"):
        featurize_to_store(path, out, PolynomialRandomProjection(
            n_components=30, n_hyperplanes=40, random_state=3), client=_no_cluster)


def test_data_dependent_fit_runs_on_the_cluster_started_on_demand(dataset, client, tmp_path):
    path, X = dataset
    started, fits = [], []

    def cluster():
        started.append(True)
        return client

    est = Nystroem(kernel="polynomial", degree=2, n_components=20, random_state=4)
    result = featurize_to_store(path, tmp_path / "n.zarr", est, client=cluster,
                                progress=False, on_fit=lambda p, s: fits.append(s))
    assert started == [True] and fits[0] is None and fits[1] >= 0 and len(fits) == 2
    reference = Nystroem(kernel="polynomial", degree=2, n_components=20, random_state=4).fit(X)
    assert result.projector.spec_checksum_ == reference.spec_checksum_
    Z = open_features(tmp_path / "n.zarr").Z.compute()
    assert np.allclose(Z, reference.transform(X), rtol=1e-10, atol=1e-10)


def test_preprocessed_dask_array_with_its_provenance(dataset, client, tmp_path):
    path, X = dataset
    Xd = (da.from_array(X, chunks=(CHUNK, 6)) - 1.0) / 2.0
    provenance = {"path": str(path), "preprocessing": "shift-scale"}
    krp = PolynomialRandomProjection(n_components=10, n_hyperplanes=10, random_state=0)
    result = featurize_to_store(Xd, tmp_path / "p.zarr", krp, client=client, progress=False,
                                provenance=provenance, dtype="float32")
    fs = open_features(tmp_path / "p.zarr")
    assert fs.attrs["input"] == input_fingerprint(Xd, source=provenance)
    assert fs.Z.dtype == np.float32 and result.summary["dtype"] == "float32"
    # float32 output: the float64 transform up to float32 rounding
    assert np.allclose(fs.Z.compute(), _blockwise(krp, (X - 1.0) / 2.0), rtol=1e-4, atol=1e-5)


def test_inputs_that_cannot_be_opened_are_named(tmp_path):
    krp = PolynomialRandomProjection(n_components=4)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        featurize_to_store(tmp_path / "missing.zarr", tmp_path / "f.zarr", krp)
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match="dkrp ingest"):
        featurize_to_store(tmp_path / "x.csv", tmp_path / "f.zarr", krp)
    with pytest.raises(TypeError, match="dask.array.from_array"):
        featurize_to_store(np.ones((3, 2)), tmp_path / "f.zarr", krp)
    assert not (tmp_path / "f.zarr").exists()
