"""Time SignProductEmbedding.transform_bits against transform (issue 13: at most 1.3x),
and check that 10^6 rows of bits go through the cluster into a byte-identical store.

Both run the same blocked GEMM of the 2m projections and the product of its halves;
``transform`` writes n x m floats, ``transform_bits`` compares and packs each block
to n x ceil(m/8) bytes. Times are medians of interleaved rounds in one process.

``--store-rows N`` instead runs the store check: N Gaussian rows (float32, seeded) in a
Zarr dataset store, ``featurize_to_store(..., bits=True)`` (what ``dkrp featurize
--method spe --bits`` runs) on the embedded cluster (2 worker processes x 1 thread),
and the same rows through ``transform_bits`` in this process (all threads, one call):
the two must be equal byte for byte.

Usage::

    python benchmarks/bench_spe_bits.py                      # MNIST shape
    python benchmarks/bench_spe_bits.py --rows 20000 --ms 1024 4096 --repeats 7
    python benchmarks/bench_spe_bits.py --store-rows 1000000 --write-results
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit, interleaved, mnist_train  # noqa: E402

import dkrp  # noqa: E402
from dkrp._threading import num_threads  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--ms", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--store-rows", type=int, default=0,
                   help="run the cluster store check on this many rows instead")
    p.add_argument("--store-features", type=int, default=100,
                   help="store check: input dimension d")
    p.add_argument("--store-m", type=int, default=1024, help="store check: m")
    p.add_argument("--chunk-rows", type=int, default=65536, help="store check: rows per chunk")
    p.add_argument("--write-results", action="store_true",
                   help="store check: replace its section of benchmarks/RESULTS.md")
    args = p.parse_args()
    if args.store_rows:
        title, body = store_check(args)
        emit("bench_spe_bits_store", title, body, command_line("bench_spe_bits.py", p, args),
             args.write_results)
        return
    X, source = mnist_train(args.rows)
    print(f"input: {source}, {X.shape}; threads: {num_threads()}")
    print("| dtype | m | transform s | transform_bits s | ratio | output MB (float / bits) |")
    print("|---|---|---|---|---|---|")
    for dtype in (np.float32, np.float64):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        for m in args.ms:
            spe = dkrp.SignProductEmbedding(n_components=m, random_state=0).fit(Xd)
            spe.transform(Xd[:10])  # build the cached factor matrix outside the timing
            t_float, t_bits = interleaved([partial(spe.transform, Xd),
                                           partial(spe.transform_bits, Xd)], args.repeats)
            a, b = float(np.median(t_float)), float(np.median(t_bits))
            mb = (Xd.shape[0] * m * Xd.itemsize / 1e6, Xd.shape[0] * ((m + 7) // 8) / 1e6)
            print(f"| {np.dtype(dtype).name} | {m} | {a:.3f} | {b:.3f} | {b / a:.2f} | "
                  f"{mb[0]:.0f} / {mb[1]:.1f} |", flush=True)


def store_check(args):
    """(title, body): the 10^6-row bit store against transform_bits in memory."""
    import hashlib
    import shutil
    import tempfile
    import time

    from distributed import Client

    from dkrp.feature_store import open_features
    from dkrp.io import ingest
    from dkrp.parallel import start_local_cluster

    n, d, m = args.store_rows, args.store_features, args.store_m
    X = np.random.default_rng(0).standard_normal((n, d), dtype=np.float32)
    spe = dkrp.SignProductEmbedding(n_components=m, random_state=0)
    work = Path(tempfile.mkdtemp(prefix="dkrp-bench-spe-store-"))
    try:
        np.save(work / "x.npy", X)
        ingest(work / "x.npy", work / "x.zarr", chunk_rows=args.chunk_rows, dtype="float32")
        (work / "x.npy").unlink()
        with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
                Client(cluster) as client:
            t0 = time.perf_counter()
            summary, spe, _ = dkrp.featurize_to_store(work / "x.zarr", work / "bits.zarr", spe,
                                                      client=client, progress=False, bits=True)
            t_store = time.perf_counter() - t0
        stored = np.asarray(open_features(work / "bits.zarr").Z.compute())
        store_bytes = sum(f.stat().st_size for f in (work / "bits.zarr" / "Z").rglob("*")
                          if f.is_file())
        t0 = time.perf_counter()
        memory = spe.transform_bits(X)
        t_memory = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    same = stored.tobytes() == memory.tobytes()
    digests = [hashlib.sha256(a.tobytes()).hexdigest()[:16] for a in (stored, memory)]
    print(f"store {t_store:.1f} s, in memory {t_memory:.1f} s, identical: {same}", flush=True)
    title = (f"SPE bits through the cluster: {n:,} rows × {d} (Gaussian, float32) → m={m} "
             "packed bits, store against in-memory transform_bits")
    body = "\n".join([
        "One run. `featurize_to_store(..., bits=True)` (= `dkrp featurize --method spe "
        "--bits`) from a Zarr dataset store of "
        f"{args.chunk_rows:,}-row chunks on `start_local_cluster(n_workers=2, "
        "threads_per_worker=1)`, against `transform_bits(X)` on the whole array in this "
        "process (all threads).",
        "",
        "| rows | bytes per row | store Z on disk | cluster job s | in-memory s | "
        "byte-identical | sha256 (store / memory) |",
        "|---:|---:|---:|---:|---:|---|---|",
        f"| {n:,} | {stored.shape[1]} | {store_bytes / 1e6:.1f} MB | {t_store:.1f} | "
        f"{t_memory:.1f} | {same} | {digests[0]} / {digests[1]} |",
        "",
        f"- The store holds {stored.nbytes / 1e6:.1f} MB of bits where float32 sketches would "
        f"take {n * m * 4 / 1e6:.0f} MB ({n * m * 4 / stored.nbytes:.0f}× more); "
        f"{summary['n_chunks']} chunks. Cluster job s counts the whole job (planning, the "
        "worker check, the writes) but not the cluster's start.",
    ])
    return title, body


if __name__ == "__main__":
    main()
