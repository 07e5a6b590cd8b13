"""Tests for dkrp.io.arrays: .npy round trip and readers, read_idx (the one IDX parser)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from dkrp.io import from_npy, ingest, open_dataset, read_array, read_idx


def test_npy_round_trip_and_reader(tmp_path):
    rng = np.random.default_rng(2)
    values = rng.normal(size=(30, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", values)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=7, dtype="float32")
    ds = open_dataset(tmp_path / "x.zarr")
    assert ds.y is None
    assert ds.X.dtype == np.float32
    assert ds.X.chunks == ((7, 7, 7, 7, 2), (5,))
    np.testing.assert_array_equal(ds.X.compute(), values)

    arr = from_npy(tmp_path / "x.npy", chunk_rows=8)
    assert arr.chunks == ((8, 8, 8, 6), (5,))
    np.testing.assert_array_equal(arr.compute(), values)
    assert arr.name == from_npy(tmp_path / "x.npy", chunk_rows=8).name  # deterministic keys
    assert read_array(tmp_path / "x.npy").shape == (30, 5)
    assert read_array(tmp_path / "x.zarr").chunks == ds.X.chunks


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_npy_blocks_are_read_in_tasks_without_parsing_a_header(tmp_path, monkeypatch, order,
                                                               version):
    """A block task memory-maps by the layout read once: no ``ast`` in a worker thread.

    numpy parses a .npy header with ast.literal_eval, which on CPython <= 3.11.7 fails now and
    then when two threads parse at once (gh-106905): CI failed so ingesting on threads.
    """
    import ast
    import threading

    values = np.arange(60.0, dtype="<f4").reshape(12, 5)
    with open(tmp_path / "x.npy", "wb") as fh:
        np.lib.format.write_array(fh, np.asarray(values, order=order), version=version)
    assert np.load(tmp_path / "x.npy", mmap_mode="r").flags.f_contiguous == (order == "F")
    parsed_in = []
    literal_eval = ast.literal_eval

    def recording(text):
        parsed_in.append(threading.current_thread() is threading.main_thread())
        return literal_eval(text)

    monkeypatch.setattr(ast, "literal_eval", recording)
    arr = from_npy(tmp_path / "x.npy", chunk_rows=2)
    np.testing.assert_array_equal(arr.compute(scheduler="threads", num_workers=4), values)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=2, dtype="float32")
    np.testing.assert_array_equal(open_dataset(tmp_path / "x.zarr").X.compute(), values)
    assert parsed_in and all(parsed_in), "a header was parsed off the main thread"


def test_npy_rewritten_after_its_graph_was_built_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((10, 3)))
    arr = from_npy(tmp_path / "x.npy", chunk_rows=5)
    np.save(tmp_path / "x.npy", np.zeros((20, 3)))
    with pytest.raises(ValueError, match="changed while it was being read"):
        arr.compute(scheduler="sync")


def test_idx_ingest_of_real_mnist_test_images(tmp_path):
    from conftest import require_data

    images = require_data("mnist", "t10k-images-idx3-ubyte.gz")
    labels = require_data("mnist", "t10k-labels-idx1-ubyte.gz")
    from dkrp.io import ingest, open_dataset, read_idx

    ingest(images, tmp_path / "mnist.zarr", labels=labels, dtype="float32", chunk_rows=2500)
    ds = open_dataset(tmp_path / "mnist.zarr")
    raw = read_idx(images).reshape(10000, 784)
    assert ds.X.shape == (10000, 784) and ds.X.chunks[0] == (2500,) * 4
    np.testing.assert_array_equal(ds.X.compute(), raw.astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), read_idx(labels))
    assert ds.attrs["source_format"] == "idx"


def test_idx_errors_name_the_file(tmp_path):
    import gzip

    from dkrp.io import ingest, read_idx

    bad = tmp_path / "bad-idx3-ubyte.gz"
    with gzip.open(bad, "wb") as f:
        f.write(
            b"\x00\x00\x08\x03" + (5).to_bytes(4, "big") + (2).to_bytes(4, "big") * 2
            + b"\x01" * 7
        )
    with pytest.raises(ValueError, match="bad-idx3-ubyte.gz: IDX header says shape \\(5, 2, 2\\)"):
        read_idx(bad)
    with pytest.raises(ValueError, match="bad-idx3-ubyte.gz"):
        ingest(bad, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()


def _idx_bytes(dtype_code: int, dims, payload: bytes) -> bytes:
    header = bytes([0, 0, dtype_code, len(dims)])
    return header + b"".join(int(d).to_bytes(4, "big") for d in dims) + payload


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_read_idx_dtypes_shapes_and_magic(tmp_path, suffix):
    values = np.arange(-3, 3, dtype=">i4").reshape(2, 3)
    path = tmp_path / f"v-idx2-int{suffix}"
    opener = gzip.open if suffix else open
    with opener(path, "wb") as f:
        f.write(_idx_bytes(0x0C, values.shape, values.tobytes()))
    got = read_idx(path, expected_magic=0x0C02)
    np.testing.assert_array_equal(got, values)
    assert got.dtype == np.dtype(">i4") and not got.flags.writeable
    np.testing.assert_array_equal(read_idx(path), values)
    with pytest.raises(ValueError, match=r"v-idx2-int.*: IDX magic number 3074, expected 2051"):
        read_idx(path, expected_magic=2051)


@pytest.mark.parametrize(
    "raw, match",
    [
        (b"\x01\x00\x08\x01" + (1).to_bytes(4, "big") + b"\x00", "not an IDX file"),
        (_idx_bytes(0x0A, (1,), b"\x00"), "not an IDX file"),  # 0x0A is no IDX dtype
        (b"\x00\x00", "not an IDX file"),
        (_idx_bytes(0x08, (), b""), "0 dimensions"),
        (b"\x00\x00\x08\x03" + (5).to_bytes(4, "big"), "3 dimensions need a 16-byte header"),
        (_idx_bytes(0x08, (2, 2), b"\x00" * 5), r"IDX header says shape \(2, 2\) \(16 bytes\)"),
    ],
    ids=["magic", "dtype-code", "short", "ndim-0", "short-header", "length"],
)
def test_read_idx_header_checks(tmp_path, raw, match):
    path = tmp_path / "bad.idx"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=match) as info:
        read_idx(path)
    assert str(path) in str(info.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_idx(tmp_path / "missing.idx")
