"""The user's job end to end on real data: ingest, featurize on a cluster, read back.

MNIST from its IDX files and the Kaggle Covertype CSV go through ``dkrp.io.ingest``
and ``dkrp.feature_store.write_features`` on a real LocalCluster of worker
processes; the stored features equal the in-memory transform and a second run is a
no-op.
"""

import numpy as np
import pytest
from conftest import require_data
from distributed import Client

import dkrp
from dkrp.feature_store import open_features, write_features
from dkrp.io import ingest, open_dataset
from dkrp.parallel import start_local_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.data]


@pytest.fixture(scope="module")
def client():
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as c:
        yield c


def test_mnist_idx_to_features_on_the_cluster(tmp_path, client):
    images = require_data("mnist", "t10k-images-idx3-ubyte.gz")
    labels = require_data("mnist", "t10k-labels-idx1-ubyte.gz")
    ingest(images, tmp_path / "mnist.zarr", labels=labels, dtype="float32", chunk_rows=1000)
    ds = open_dataset(tmp_path / "mnist.zarr")
    krp = dkrp.PolynomialRandomProjection(
        degree=2, n_components=500, n_hyperplanes=488, random_state=0
    ).fit_n_features(784)
    first = write_features(ds.X, krp, tmp_path / "feat.zarr", client=client, progress=False,
                           source=str(tmp_path / "mnist.zarr"))
    assert first["chunks_written"] == 10 and first["chunks_skipped"] == 0
    Z = open_features(tmp_path / "feat.zarr").Z.compute()
    expected = np.concatenate(
        [krp.transform(ds.X[i : i + 1000].compute()) for i in range(0, 10000, 1000)]
    )
    assert Z.dtype == np.float32
    assert Z.tobytes() == expected.tobytes()  # same row chunking: byte-identical
    second = write_features(ds.X, krp, tmp_path / "feat.zarr", client=client, progress=False,
                            source=str(tmp_path / "mnist.zarr"))
    assert second["chunks_written"] == 0 and second["chunks_skipped"] == 10


def test_covertype_csv_to_features_on_the_cluster(tmp_path, client):
    csv = require_data("covtype", "kaggle_forest_cover_train.csv")
    ingest(csv, tmp_path / "cov.zarr", label_column="Cover_Type", drop_columns=["Id"],
           chunk_rows=4000)
    ds = open_dataset(tmp_path / "cov.zarr")
    assert ds.X.shape == (15120, 54)
    rff = dkrp.RandomFourierFeatures(gamma=1e-6, n_components=256, random_state=1)
    rff.fit_n_features(54)
    write_features(ds.X, rff, tmp_path / "f.zarr", client=client, progress=False,
                   source=str(tmp_path / "cov.zarr"))
    Z = open_features(tmp_path / "f.zarr").Z.compute()
    np.testing.assert_allclose(Z, rff.transform(ds.X.compute()), rtol=1e-12, atol=1e-12)
    again = write_features(ds.X, rff, tmp_path / "f.zarr", client=client, progress=False,
                           source=str(tmp_path / "cov.zarr"))
    assert again["chunks_written"] == 0
