"""Feature-store encodings (dkrp.feature_store.encoding): SPE bit stores, a narrower store
dtype, chunk compressors.

Real Zarr stores on disk; the jobs run through ``dkrp featurize`` (CliRunner) or
:func:`dkrp.featurize_to_store` on a real LocalCluster of two worker processes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from conftest import store_digest

import dkrp
from dkrp.cli import main
from dkrp.feature_store import (
    FeatureStoreError,
    FeatureStoreMismatchError,
    open_features,
    read_features,
    verify_store,
    write_features,
)
from dkrp.feature_store.format import done_chunks
from dkrp.io import ingest, open_dataset

pytestmark = pytest.mark.cluster

N_ROWS, N_FEATURES, CHUNK = 2000, 10, 256  # 8 chunks (the last one short); 256: SPE's row block
M = 300  # not a multiple of 8: 38 bytes per row, the last with 4 padding bits
FIXTURES = Path(__file__).parent / "fixtures" / "v0_1_0"


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as c, Client(c) as client:
        yield c.scheduler_address, client


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A dataset store of float32 rows with labels, and the rows."""
    folder = tmp_path_factory.mktemp("input")
    X = np.random.default_rng(13).standard_normal((N_ROWS, N_FEATURES)).astype(np.float32)
    np.save(folder / "x.npy", X)
    ingest(folder / "x.npy", folder / "x.zarr", chunk_rows=CHUNK, dtype="float32")
    return folder / "x.zarr", X


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _spe(X):
    return dkrp.SignProductEmbedding(n_components=M, random_state=4).fit(X)


@pytest.fixture(scope="module")
def bit_store(tmp_path_factory, dataset, cluster):
    """``dkrp featurize --method spe --bits`` on the cluster: (store, X, its argv)."""
    path, X = dataset
    out = tmp_path_factory.mktemp("bits") / "bits.zarr"
    args = ["featurize", path, out, "--method", "spe", "--n-components", M, "--seed", 4,
            "--bits", "--scheduler", cluster[0], "--quiet"]
    r = _run(*args)
    assert r.exit_code == 0, r.output
    assert f"-> {M} sign bits (packed, 38 bytes per row)" in r.output
    return out, X, args


# -- bit stores -----------------------------------------------------------------------


def test_bit_store_from_the_cluster_equals_transform_bits_byte_for_byte(bit_store):
    out, X, _ = bit_store
    fs = open_features(out)
    assert fs.encoding == "bits" and fs.n_components == M
    assert fs.Z.dtype == np.uint8 and fs.Z.shape == (N_ROWS, 38)
    # in memory, all threads, whole input at once
    assert fs.Z.compute().tobytes() == _spe(X).transform_bits(X).tobytes()
    attrs = fs.attrs
    assert (attrs["format_version"], attrs["dtype"], attrs["compute_dtype"]) == (2, "uint8",
                                                                                 "float32")
    assert attrs["bytes_per_row"] == 38 and attrs["compressor"] == "none"
    # 32x fewer bytes than float32 features (up to the padding of the last byte)
    assert fs.Z.nbytes == N_ROWS * 38 and N_ROWS * M * 4 / fs.Z.nbytes > 31


def test_bit_store_is_not_read_as_features(bit_store, tmp_path):
    out, X, _ = bit_store
    with pytest.raises(FeatureStoreError, match="is a bit store: 300 signs per row packed "
                                                "in 38 uint8 bytes"):
        read_features(out)
    Z, y = read_features(out, unpack=True)
    assert Z.dtype == np.float32 and Z.shape == (N_ROWS, M) and y is None
    assert np.array_equal(Z.compute(), np.where(_spe(X).transform(X) >= 0, 1, -1))
    # export: the packed bytes as .npy, nothing that would read as features
    from dkrp.feature_store.export import export_features

    result = export_features(out, "npy", tmp_path / "bits.npy")
    assert result["encoding"] == "bits" and result["n_components"] == M
    assert np.load(tmp_path / "bits.npy").tobytes() == _spe(X).transform_bits(X).tobytes()
    for fmt in ("parquet", "libsvm"):
        with pytest.raises(ValueError, match="bit store .* exports to npy only"):
            export_features(out, fmt, tmp_path / f"bits.{fmt}")
    # dkrp.stores.open_store gives the same FeatureSet, its encoding exposed
    from dkrp.stores import open_store

    assert open_store(out).encoding == "bits"


def test_info_says_it_is_a_bit_store_and_how_to_unpack(bit_store):
    out, X, _ = bit_store
    r = _run("info", out)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == f"bit store {out.absolute()}"
    assert (f"shape ({N_ROWS}, {M}): {M} sign bits per row packed in 38 uint8 bytes "
            f"(numpy.packbits order; Z is ({N_ROWS}, 38)), computed in float32") in lines[1]
    assert "complete (8/8 chunks done)" in lines[1]
    assert f"unpack: dkrp.unpack_bits(Z, {M})" in lines[2]
    assert "compressor none, 38 bytes per row" in r.output
    bits = zarr.open_array(str(out / "Z"), mode="r")[:5]
    assert np.array_equal(dkrp.unpack_bits(bits, M), np.where(_spe(X).transform(X[:5]) >= 0,
                                                              1, -1))


def test_bit_store_resumes_after_a_partial_run_and_verify_repairs_it(bit_store, dataset,
                                                                     cluster, tmp_path):
    reference, X, args = bit_store
    out = tmp_path / "bits.zarr"
    _, client = cluster
    failing = {3, 5}

    def fail_some(block, block_info=None):
        # runs on a worker: partitions 3 and 5 fail, as a run killed half-way leaves them
        if block_info and block_info[0]["chunk-location"][0] in failing:
            raise OSError("planted failure")
        return block

    path, _ = dataset
    ds = open_dataset(path)
    reference_attrs = dict(zarr.open_group(str(reference), mode="r").attrs)
    hooked = ds.X.map_blocks(fail_some, dtype=ds.X.dtype)
    with pytest.raises(FeatureStoreError, match="Partition [35] "):
        write_features(hooked, _spe(X), out, client=client, progress=False, bits=True,
                       fingerprint=reference_attrs["input"])
    attrs = dict(zarr.open_group(str(out), mode="r").attrs)
    assert attrs["complete"] is False
    with pytest.raises(FeatureStoreError, match="incomplete"):
        open_features(out)
    r = _run("info", out)
    assert "INCOMPLETE" in r.output and "bit store" in r.output
    done = int(done_chunks(out, 8).sum())
    assert done <= 6
    # the same command again writes only the missing chunks: the store of a clean run
    r = _run(*[out if a == reference else a for a in args])
    assert r.exit_code == 0, r.output
    assert f"{8 - done} chunks written, {done} already done" in r.output
    assert store_digest(out) == store_digest(reference)

    # dkrp verify checks every chunk's crc32c; --repair recomputes a corrupt one as bits
    chunk = out / "Z" / "c" / "2" / "0"
    data = bytearray(chunk.read_bytes())
    data[7] ^= 0xFF
    chunk.write_bytes(bytes(data))
    report = verify_store(out)
    assert not report["ok"] and report["bad_chunks"] == [2] and report["checksums"]
    report = verify_store(out, repair=True, client=client)
    assert report["ok"] and report["repaired"] == [2]
    assert store_digest(out) == store_digest(reference)


def test_bits_only_from_spe_in_one_line(dataset, tmp_path):
    path, X = dataset
    out = tmp_path / "f.zarr"
    r = _run("featurize", path, out, "--method", "krp", "--bits", "--quiet")
    assert r.exit_code == 1 and not out.exists()
    assert r.output == ("Error: --bits stores the packed sign bits of --method spe; --method "
                        "krp has none: drop --bits, or use --method spe.\n")
    r = _run("featurize", path, out, "--method", "spe", "--bits", "--store-dtype", "float16")
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "drop --store-dtype or --bits" in r.output
    krp = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16).fit(X)
    with pytest.raises(ValueError, match="only SignProductEmbedding"):
        write_features(da.from_array(X, chunks=(CHUNK, N_FEATURES)), krp, out, bits=True,
                       progress=False)
    assert not out.exists()


def test_a_float_store_is_not_resumed_as_bits(bit_store, dataset, tmp_path):
    reference, X, _ = bit_store
    out = tmp_path / "f.zarr"
    spe = _spe(X)
    Xd = da.from_array(X, chunks=(CHUNK, N_FEATURES))
    write_features(Xd, spe, out, progress=False)
    with pytest.raises(FeatureStoreMismatchError, match="encoding: store 'float', this run "
                                                        "'bits'"):
        write_features(Xd, spe, out, progress=False, bits=True)
    assert open_features(out).attrs["format_version"] == 1  # dkrp 0.1.0 still reads it


# -- store dtype ----------------------------------------------------------------------


def _by_chunk(projector, X):
    return np.vstack([projector.transform(X[s:s + CHUNK]) for s in range(0, len(X), CHUNK)])


def _krp(X, **params):
    params = {"n_components": 64, "n_hyperplanes": 128, "random_state": 1, **params}
    return dkrp.PolynomialRandomProjection(**params).fit(X)


def test_float16_store_holds_the_float32_features_rounded_once(dataset, cluster, tmp_path):
    path, X = dataset
    out = tmp_path / "f16.zarr"
    krp = _krp(X)
    summary, _, _ = dkrp.featurize_to_store(path, out, krp, client=cluster[1], progress=False,
                                            store_dtype="float16")
    assert summary["dtype"] == "float16"
    fs = open_features(out)
    assert fs.Z.dtype == np.float16
    assert fs.attrs["compute_dtype"] == "float32" and fs.attrs["format_version"] == 1
    # computed in float32, chunk by chunk, cast once
    assert fs.Z.compute().tobytes() == _by_chunk(krp, X).astype(np.float16).tobytes()
    r = _run("info", out)
    assert f"shape ({N_ROWS}, 64) float16 (computed in float32)" in r.output
    assert "128 bytes per row" in r.output
    # a rerun with float32 storage is another store
    with pytest.raises(FeatureStoreMismatchError, match="dtype: store 'float16', this run "
                                                        "'float32'"):
        dkrp.featurize_to_store(path, out, krp, client=cluster[1], progress=False)


def test_float16_overflow_fails_the_job_and_leaves_no_complete_store(dataset, cluster,
                                                                    tmp_path):
    path, X = dataset
    big = X.copy()
    big[1500, :] *= 300.0  # (x·s)^2 of this row exceeds 65504 in some component
    np.save(tmp_path / "big.npy", big)
    out = tmp_path / "f16.zarr"
    r = _run("featurize", tmp_path / "big.npy", out, "--n-components", 64,
             "--n-hyperplanes", 128, "--seed", 1, "--store-dtype", "float16",
             "--chunk-rows", CHUNK, "--scheduler", cluster[0], "--quiet")
    assert r.exit_code == 1, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1, r.output
    assert "Partition 5, row 1500, component" in lines[0]
    assert "does not fit float16 (largest 65504; it would be stored as inf)" in lines[0]
    assert zarr.open_group(str(out), mode="r").attrs["complete"] is False
    with pytest.raises(FeatureStoreError, match="incomplete"):
        open_features(out)
    assert "INCOMPLETE" in _run("info", out).output
    # the same features stored as float32 are fine, and finite
    r = _run("featurize", tmp_path / "big.npy", out, "--n-components", 64,
             "--n-hyperplanes", 128, "--seed", 1, "--chunk-rows", CHUNK, "--overwrite",
             "--scheduler", cluster[0], "--quiet")
    assert r.exit_code == 0, r.output
    Z = open_features(out).Z.compute()
    assert np.isfinite(Z).all() and np.abs(Z[1500]).max() > 65504


# -- compressors ----------------------------------------------------------------------


@pytest.mark.parametrize("compressor, codec", [
    ("none", None), ("zstd", "zstd"), ("gzip", "gzip"), ("blosc-lz4", "blosc"),
    ("blosc-zstd", "blosc"),
])
def test_each_compressor_stores_the_same_values_with_checksums(dataset, tmp_path, compressor,
                                                               codec):
    _, X = dataset
    krp = _krp(X)
    Xd = da.from_array(X, chunks=(CHUNK, N_FEATURES))
    out = tmp_path / "c.zarr"
    write_features(Xd, krp, out, progress=False, compressor=compressor)
    fs = open_features(out)
    assert fs.attrs["compressor"] == compressor
    assert fs.Z.compute().tobytes() == _by_chunk(krp, X).tobytes()
    meta = json.loads((out / "Z" / "zarr.json").read_text())
    names = [c["name"] for c in meta["codecs"]]
    assert names[-1] == "crc32c"  # the checksum covers the compressed bytes
    assert names[1:-1] == ([] if codec is None else [codec])
    if compressor == "none":
        return
    with pytest.raises(FeatureStoreMismatchError, match=f"compressor: store '{compressor}', "
                                                        "this run 'none'"):
        write_features(Xd, krp, out, progress=False)


def test_legacy_store_reads_as_float_features_and_reruns_as_a_noop(tmp_path):
    store = tmp_path / "features.zarr"
    shutil.copytree(FIXTURES / "features.zarr", store)
    fs = open_features(store)
    assert fs.encoding == "float"
    d = fs.describe()
    assert d["compute_dtype"] == d["dtype"] and d["compressor"] is None
    r = _run("info", store)
    assert r.exit_code == 0 and "compressor not recorded" in r.output
    assert r.output.startswith("feature store ")
    krp = dkrp.from_spec(json.loads((FIXTURES / "krp.spec.json").read_text()))
    ds = open_dataset(FIXTURES / "dataset.zarr")
    assert write_features(ds.X, krp, store, progress=False)["chunks_written"] == 0
    with pytest.raises(FeatureStoreMismatchError, match="this run 'float16'"):
        write_features(ds.X, krp, store, progress=False, store_dtype="float16")


def test_fixture_stores_of_each_encoding_keep_loading_and_rerun_as_noops(tmp_path):
    # written once (tests/fixtures/encodings/MAKE.py.txt); never regenerated
    folder = Path(__file__).parent / "fixtures" / "encodings"
    X = np.load(FIXTURES / "X.npy")
    Xd = da.from_array(X, chunks=(16, 6))
    spe = dkrp.from_spec(json.loads((folder / "spe.spec.json").read_text()))
    fs = open_features(folder / "bits.zarr")
    assert (fs.encoding, fs.attrs["format_version"], fs.Z.shape) == ("bits", 2, (40, 5))
    assert fs.Z.compute().tobytes() == spe.transform_bits(X).tobytes()
    krp = dkrp.from_spec(json.loads((FIXTURES / "krp.spec.json").read_text()))
    fs = open_features(folder / "float16_blosc.zarr")
    assert fs.attrs["compressor"] == "blosc-zstd" and fs.attrs["format_version"] == 1
    assert fs.Z.compute().tobytes() == _by_chunk16(krp, X).astype(np.float16).tobytes()
    for name, options in (("bits.zarr", {"bits": True}),
                          ("float16_blosc.zarr", {"store_dtype": "float16",
                                                  "compressor": "blosc-zstd"})):
        shutil.copytree(folder / name, tmp_path / name)
        est = spe if name == "bits.zarr" else krp
        summary = write_features(Xd, est, tmp_path / name, progress=False, **options)
        assert summary["chunks_written"] == 0


def _by_chunk16(projector, X):
    return np.vstack([projector.transform(X[s:s + 16]) for s in range(0, len(X), 16)])
