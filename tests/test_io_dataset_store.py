"""Tests for dkrp.io.dataset_store: open_dataset's checks, the lazy CSR blocks, and what
``dkrp info`` says of a store with missing files."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from click.testing import CliRunner

from dkrp.cli import main
from dkrp.io import ingest, open_dataset
from dkrp.io.dataset_store import _read_csr_block, create_csr, write_csr_block
from dkrp.stores import describe_store


def test_corrupt_store_refused(small_store):
    (small_store / "X" / "zarr.json").unlink()
    with pytest.raises(ValueError, match=r"x\.zarr is corrupt: member 'X' is missing"):
        open_dataset(small_store)


def test_missing_chunk_refused(small_store):
    chunk = next(p for p in (small_store / "X").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    with pytest.raises(ValueError, match=r"corrupt: array 'X' has 3 of 4 chunks"):
        open_dataset(small_store)


def test_info_calls_a_store_with_a_deleted_chunk_incomplete(small_store):
    # issue 29, case 8: `dkrp info` said "complete", where a feature store says INCOMPLETE
    before = describe_store(small_store)
    assert before["complete"] and before["n_chunks"] == 4 and before["missing"] == []
    (small_store / "X" / "c" / "2" / "0").unlink()
    after = describe_store(small_store)
    assert not after["complete"] and after["missing"] == ["X/c/2/0"]
    r = CliRunner().invoke(main, ["info", str(small_store)])
    assert r.exit_code == 0, r.output
    assert "chunk_rows 3, INCOMPLETE (1 missing file(s), first X/c/2/0: re-ingest" in r.output
    assert ", complete" not in r.output


def test_describe_names_missing_csr_chunks_labels_and_metadata(sparse_libsvm, tmp_path):
    path, _, _ = sparse_libsvm
    store = tmp_path / "s.zarr"
    ingest(path, store, sparse=True, chunk_rows=50)
    d = open_dataset(store).describe()
    # 5 row blocks in each of X/indptr, X/indices, X/data and y
    assert d["complete"] and d["n_chunks"] == 4 * 5 and d["missing"] == []
    (store / "y" / "c" / "4").unlink()
    (store / "X" / "indices" / "zarr.json").unlink()
    d = describe_store(store)
    assert not d["complete"] and d["missing"] == ["X/indices/zarr.json", "y/c/4"]


def test_not_a_dataset_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="is not a dkrp dataset store"):
        open_dataset(tmp_path / "plain")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    with pytest.raises(ValueError, match="dkrp_format is None"):
        open_dataset(tmp_path / "other.zarr")


def test_incomplete_store_refused(small_store):
    zarr.open_group(str(small_store), mode="r+").attrs["complete"] = False
    with pytest.raises(ValueError, match=r"is incomplete.*overwrite=True.*allow_incomplete=True"):
        open_dataset(small_store)
    assert open_dataset(small_store, allow_incomplete=True).X.shape == (10, 4)


def test_csr_dask_array_stays_lazy_and_sparse(sparse_libsvm, tmp_path):
    path, X, _ = sparse_libsvm
    ingest(path, tmp_path / "l.zarr", sparse=True, chunk_rows=64)
    ds = open_dataset(tmp_path / "l.zarr")
    row_sums = ds.X.map_blocks(
        lambda b: np.asarray(b.sum(axis=1)),
        chunks=(ds.X.chunks[0], (1,)),
        dtype=float,
        meta=np.empty((0, 0)),
    )
    assert isinstance(row_sums, da.Array)
    np.testing.assert_allclose(row_sums.compute().ravel(), np.asarray(X.sum(axis=1)).ravel())


def test_csr_block_codec_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    X = sp.random(7, 9, density=0.3, format="csr", random_state=rng)
    group = zarr.open_group(str(tmp_path / "s"), mode="w", zarr_format=3)
    blocks = [X[0:3], X[3:6], X[6:7]]
    capacity = max(b.nnz for b in blocks)
    xg = create_csr(group, 7, 9, 3, len(blocks), X.nnz, capacity, np.dtype("int32"),
                    np.dtype("float64"))
    for b, block in enumerate(blocks):
        write_csr_block(xg, b, block, 3, "float64")
    assert xg["indptr"][2].tolist() == [0, blocks[2].nnz, blocks[2].nnz, blocks[2].nnz]
    for b, block in enumerate(blocks):
        got = _read_csr_block(str(tmp_path / "s" / "X"), b, block.shape[0], 9)
        assert abs(got - block).max() == 0
