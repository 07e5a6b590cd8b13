"""Feature-store encodings against the compute and disk floors (issues 13 and 15 part 3).

One run, on the embedded cluster (2 worker processes × 1 thread) reading MNIST train
(60,000 × 784, x/127.5 − 1, float32) from a Zarr dataset store:

* ``write``: KRP g=2 k=1500 p=488 (bench_transform's shape) computed in float32 and
  written by :func:`dkrp.feature_store.write_features` with each store option:
  float32 with every compressor (``--compressor``), float16 (``--store-dtype``), and
  SPE m=1500 packed bits (``--bits``). For each: the bytes on disk, the seconds of
  ``write_features`` (best of ``--repeats``) and of ``os.sync()`` right after it (the
  store is written without fsync, so its bytes may still be in the page cache), and
  the two floors of the same run: the compute floor (the same map on the same cluster
  and chunks without writing: ``featurize(X).sum().compute()``, for bits
  ``transform_bits(X).sum().compute()``) and the disk floor (plain sequential writes of
  the same number of bytes to one file, then fsync: :func:`_common.disk_floor`).
  ``× binding floor`` = max(compute floor, disk floor) / write seconds: 1.0 means the
  write runs at the slower of the two floors (the write overlapping the compute);
  ``× serial floor`` = (compute + disk) / write: 1.0 means the write costs only the
  disk's own time on top of the compute (a task computes, then writes, on saturated
  cores).
* ``pipeline``: how an uncompressed chunk is written, four ways interleaved in rounds
  (``_common.interleaved``) on one cluster: the whole chunk computed then written
  (``tasks.PIPELINE_ROWS`` set above the chunk) or computed in steps of 2,048 rows
  written meanwhile, each through the page cache (``DKRP_DIRECT_IO=0``) or with
  ``O_DIRECT``; beside the compute floor of the same rounds. Float32 and float16 stores.
* ``accuracy``: the cost of a float16 store: the same KRP map (g=2, k=1500) on the first
  10,000 training rows and the 10,000 test rows, stored as float32 and as float16 by
  :func:`dkrp.featurize_to_store`, read back with :func:`dkrp.read_features`, and
  LinearSVC (columns standardised, C=1) trained on each.

Usage::

    python benchmarks/bench_store_encodings.py                  # both
    python benchmarks/bench_store_encodings.py write --repeats 3 --write-results
    python benchmarks/bench_store_encodings.py pipeline --chunk-rows 10240 --repeats 5
    python benchmarks/bench_store_encodings.py accuracy --write-results
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, disk_floor, emit, interleaved  # noqa: E402

import dkrp  # noqa: E402

#: (label, write_features keyword arguments, projector) of each store option measured
OPTIONS = [
    ("float32, none (default)", {}, "krp"),
    ("float32, zstd", {"compressor": "zstd"}, "krp"),
    ("float32, gzip", {"compressor": "gzip"}, "krp"),
    ("float32, blosc-lz4", {"compressor": "blosc-lz4"}, "krp"),
    ("float32, blosc-zstd", {"compressor": "blosc-zstd"}, "krp"),
    ("float16, none", {"store_dtype": "float16"}, "krp"),
    ("float16, blosc-zstd", {"store_dtype": "float16", "compressor": "blosc-zstd"}, "krp"),
    ("SPE bits, none", {"bits": True}, "spe"),
]


def _du(path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _mnist(kind, n_rows=None):
    from dkrp.datasets import load_mnist

    X, y = load_mnist(kind)
    X, y = X[:n_rows], y[:n_rows]
    return np.ascontiguousarray(X, dtype=np.float32), y


def _dataset(X, y, folder, chunk_rows, name):
    from dkrp.io import ingest

    np.save(folder / f"{name}.npy", X)
    np.save(folder / f"{name}.y.npy", y)
    store = folder / f"{name}.zarr"
    ingest(folder / f"{name}.npy", store, chunk_rows=chunk_rows, dtype="float32",
           overwrite=True)
    return store


def _mnist_store_and_krp(args, workdir):
    """MNIST's training rows as a dataset store in ``--chunk-rows`` chunks, and the KRP map
    the write benchmarks use: ``(X, store path, opened dataset, fitted KRP)``."""
    from dkrp.io import open_dataset

    X, y = _mnist("train", args.rows)
    src = _dataset(X, y, workdir, args.chunk_rows, "mnist")
    krp = dkrp.PolynomialRandomProjection(degree=2, n_components=args.n_components,
                                          n_hyperplanes=args.n_hyperplanes,
                                          random_state=0).fit(X[:10])
    return X, src, open_dataset(src), krp


def bench_write(args, workdir):
    from distributed import Client

    from dkrp.feature_store import write_features
    from dkrp.parallel import featurize, start_local_cluster

    X, src, ds, krp = _mnist_store_and_krp(args, workdir)
    maps = {
        "krp": krp,
        "spe": dkrp.SignProductEmbedding(n_components=args.n_components,
                                         random_state=0).fit(X[:10]),
    }
    results = []
    with start_local_cluster(n_workers=2, threads_per_worker=args.threads_per_worker) \
            as cluster, Client(cluster) as client:
        compute = {}
        for name, est in maps.items():
            work = (lambda e=est: featurize(ds.X, e).sum().compute()) if name == "krp" else \
                (lambda e=est: e.transform_bits(ds.X).sum().compute())
            work()  # warm: imports, numba, projector caches on the workers
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                work()
                times.append(time.perf_counter() - t0)
            compute[name] = min(times)
            print(f"compute floor {name}: {' '.join(f'{t:.2f}' for t in times)} s", flush=True)
        for label, options, name in OPTIONS:
            store = workdir / "features.zarr"
            writes, syncs = [], []
            for _ in range(args.repeats):
                shutil.rmtree(store, ignore_errors=True)
                os.sync()  # start each write with nothing of earlier runs to flush
                t0 = time.perf_counter()
                write_features(ds.X, maps[name], store, client=client, progress=False,
                               source=dict(ds.attrs, path=str(src)), **options)
                writes.append(time.perf_counter() - t0)
                os.sync()
                syncs.append(time.perf_counter() - t0)
            nbytes = _du(store / "Z")
            shutil.rmtree(store)
            floors = [disk_floor(nbytes, workdir) for _ in range(args.repeats)]
            disk = min(f[0] for f in floors)
            results.append(dict(label=label, bytes=nbytes, write=min(writes),
                                synced=min(syncs), compute=compute[name], disk=disk,
                                all_writes=writes))
            print(f"{label}: {nbytes / 1e6:.1f} MB, write {' '.join(f'{t:.2f}' for t in writes)}"
                  f" s, +sync {' '.join(f'{t:.2f}' for t in syncs)} s, disk floor {disk:.2f} s",
                  flush=True)
    return results, X.shape


def write_text(results, shape, args):
    n = shape[0]
    base = results[0]
    title = (f"Feature-store encodings, write path against the compute and disk floors: "
             f"MNIST {n:,} × 784 float32, KRP g=2 k={args.n_components} p={args.n_hyperplanes} "
             f"and SPE m={args.n_components}, 2 workers × {args.threads_per_worker} thread"
             f"{'s' if args.threads_per_worker > 1 else ''}, {args.chunk_rows:,}-row chunks")
    lines = [
        f"Each figure: the minimum of {args.repeats} runs. Input: a Zarr dataset store of "
        f"{args.chunk_rows:,}-row chunks; the store gets the same chunks. `write` is "
        "`write_features` (Zarr writes, no fsync); `+ sync` adds an `os.sync()` right after "
        "it (the whole machine's dirty pages: other jobs' writes count too). Floors of the "
        "same run: compute = the same map on the same cluster without writing; disk = plain "
        "sequential writes of the same number of bytes to one file, then fsync. "
        "× binding floor = max(compute, disk) / write: the floor if writing overlapped the "
        "compute. × serial floor = (compute + disk) / write: the floor when each task "
        "writes its chunk after computing it and every core is computing, so that the "
        "write's CPU work (copying into the page cache, the checksum) cannot run beside "
        "the compute, as here (2 workers × 1 thread on 2 cores). Uncompressed stores: "
        "a chunk of more than 2,048 rows (the array's last, shorter chunk too) is "
        "featurized in steps of 2,048 rows, each step's bytes written (O_DIRECT where the "
        "file system takes it) by the worker's writer thread while the next step computes "
        "(`dkrp.feature_store.tasks`), so only the last step's write of a chunk is not "
        "overlapped. The new store's input fingerprint comes from the tasks of its first "
        "and last chunks, sent first: nothing is read before the run.",
        "",
        "| store | MB on disk | × float32 size | write s | + sync s | rows/s | compute floor s "
        "| disk floor s | × binding floor | × serial floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        binding = max(r["compute"], r["disk"])
        lines.append(
            f"| {r['label']} | {r['bytes'] / 1e6:.1f} | {r['bytes'] / base['bytes']:.3f} | "
            f"{r['write']:.2f} | {r['synced']:.2f} | {n / r['write']:,.0f} | "
            f"{r['compute']:.2f} | {r['disk']:.2f} | {binding / r['write']:.2f} | "
            f"{(r['compute'] + r['disk']) / r['write']:.2f} |")
    ratios = {r["label"]: max(r["compute"], r["disk"]) / r["write"] for r in results}
    above = [label for label, x in ratios.items() if x > 1.05]
    met = [label for label, x in ratios.items() if 0.9 <= x <= 1.05]
    lines += [
        "",
        "- Target ≥ 0.9 of the binding floor: met by "
        + (", ".join(met) if met else "none")
        + "; not met by "
        + (", ".join(k for k, x in ratios.items() if x < 0.9) or "none") + ".",
    ]
    if above:
        lines.append(
            "- Above 1 (" + ", ".join(above) + "): a floor was timed slower than the write "
            "it bounds. The floors are timed once, before the writes, so the load changed "
            "between them: those rows do not settle the target.")
    lines += [
        "- All write runs (s): " + "; ".join(
            f"{r['label']} {' '.join(f'{t:.2f}' for t in r['all_writes'])}" for r in results),
    ]
    return title, "\n".join(lines)


#: (label, whole chunk then write?, O_DIRECT?) of each way of writing a chunk compared
_WRITE_MODES = [
    ("whole chunk, then written through the page cache", False, False),
    ("whole chunk, then written with O_DIRECT", False, True),
    ("steps written meanwhile, through the page cache", True, False),
    ("steps written meanwhile, with O_DIRECT (default)", True, True),
]


def _set_write_mode(steps, direct):
    """On a worker: write chunks in steps (or whole), with O_DIRECT (or not)."""
    from dkrp.feature_store import tasks

    tasks.PIPELINE_ROWS = 2048 if steps else 2**62
    os.environ["DKRP_DIRECT_IO"] = "1" if direct else "0"


def bench_pipeline(args, workdir):
    from distributed import Client

    from dkrp.feature_store import write_features
    from dkrp.parallel import featurize, start_local_cluster

    _, _, ds, est = _mnist_store_and_krp(args, workdir)
    results = {}
    with start_local_cluster(n_workers=2, threads_per_worker=args.threads_per_worker) \
            as cluster, Client(cluster) as client:
        featurize(ds.X, est).sum().compute()  # warm: imports, numba, projector caches
        for store_dtype in ("float32", "float16"):
            options = {} if store_dtype == "float32" else {"store_dtype": store_dtype}

            def write(steps, direct, options=options):
                client.run(_set_write_mode, steps, direct)
                store = workdir / "features.zarr"
                shutil.rmtree(store, ignore_errors=True)
                os.sync()
                t0 = time.perf_counter()
                write_features(ds.X, est, store, client=client, progress=False, **options)
                return time.perf_counter() - t0

            fns = [lambda: featurize(ds.X, est).sum().compute()]
            fns += [lambda s=steps, d=direct: write(s, d) for _, steps, direct in _WRITE_MODES]
            results[store_dtype] = interleaved(fns, args.repeats)
            print(store_dtype, [f"{np.median(t):.3f}" for t in results[store_dtype]],
                  flush=True)
        client.run(_set_write_mode, True, True)
    return results


def pipeline_text(results, args):
    title = (f"Writing a chunk while computing it: MNIST {args.rows:,} × 784 float32, KRP g=2 "
             f"k={args.n_components} p={args.n_hyperplanes}, 2 workers × "
             f"{args.threads_per_worker} thread, {args.chunk_rows:,}-row chunks")
    lines = [
        f"Medians of {args.repeats} interleaved rounds (`_common.interleaved`) on one "
        "cluster; each write starts after an `os.sync()`. Compute floor: "
        "`featurize(X).sum().compute()`, the same map and chunks without writing. "
        "× compute floor = compute floor / write (1.00: writing costs nothing).",
        "",
        "| store | how a chunk is written | median s | × compute floor | all runs (s) |",
        "|---|---|---:|---:|---|",
    ]
    for store_dtype, times in results.items():
        floor = float(np.median(times[0]))
        lines.append(f"| {store_dtype} | compute floor (no write) | {floor:.3f} | 1.00 | "
                     + " ".join(f"{t:.2f}" for t in times[0]) + " |")
        for (label, _, _), t in zip(_WRITE_MODES, times[1:], strict=True):
            lines.append(f"| {store_dtype} | {label} | {np.median(t):.3f} | "
                         f"{floor / np.median(t):.2f} | " + " ".join(f"{x:.2f}" for x in t)
                         + " |")
    return title, "\n".join(lines)


def bench_accuracy(args, workdir):
    from distributed import Client
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    from dkrp.parallel import start_local_cluster

    Xtr, ytr = _mnist("train", args.accuracy_rows)
    Xte, yte = _mnist("test", args.accuracy_rows)
    train = _dataset(Xtr, ytr, workdir, 2048, "train")
    test = _dataset(Xte, yte, workdir, 2048, "test")
    rows = []
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster) as client:
        for store_dtype in (None, "float16"):
            krp = dkrp.PolynomialRandomProjection(degree=2, n_components=args.n_components,
                                                  n_hyperplanes=args.n_hyperplanes,
                                                  random_state=0)
            Z = {}
            for name, src in (("train", train), ("test", test)):
                out = workdir / f"{name}-{store_dtype}.zarr"
                summary, krp, _ = dkrp.featurize_to_store(
                    src, out, krp, client=client, progress=False, store_dtype=store_dtype,
                    labels=ytr if name == "train" else yte)
                Zs, y = dkrp.read_features(out)
                Z[name] = (np.asarray(Zs, dtype=np.float32), y, _du(out / "Z"),
                           summary["seconds"])
            # the primal solver: n_samples > n_features, and the dual one took minutes here;
            # C = 0.01 is what cross-validation picks for these features on MNIST (the
            # classification experiment), and the primal solver converges fast there
            model = make_pipeline(StandardScaler(), LinearSVC(C=args.C, dual=False))
            t0 = time.perf_counter()
            model.fit(Z["train"][0], Z["train"][1])
            train_s = time.perf_counter() - t0
            predicted = model.predict(Z["test"][0])
            accuracy = float((predicted == Z["test"][1]).mean())
            if rows:
                rows[0]["changed"] = int((predicted != rows[0].pop("predicted")).sum())
            rows.append(dict(dtype=store_dtype or "float32", accuracy=accuracy,
                             predicted=predicted,
                             train_s=train_s,
                             bytes=Z["train"][2] + Z["test"][2],
                             seconds=Z["train"][3] + Z["test"][3],
                             max_abs=float(np.abs(Z["train"][0]).max())))
            print({k: v for k, v in rows[-1].items() if k != "predicted"}, flush=True)
    for r in rows:
        r.pop("predicted", None)
    return rows


def accuracy_text(rows, args):
    n = args.accuracy_rows
    title = (f"Accuracy cost of a float16 feature store: MNIST {n:,} train / {n:,} test, KRP "
             f"g=2 k={args.n_components} p={args.n_hyperplanes}, LinearSVC")
    lines = [
        "One run. Features computed in float32 on the embedded cluster (2 workers × 1 thread) "
        "into a store of each dtype (`featurize_to_store(..., store_dtype=)`), read back "
        "with `dkrp.read_features`, cast to float32; `StandardScaler` then "
        f"`LinearSVC(C={args.C:g}, dual=False)`.",
        "",
        "| store dtype | test accuracy | MB on disk (train + test) | featurize + write s "
        "| largest abs feature | LinearSVC fit s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['accuracy']:.4f} | {r['bytes'] / 1e6:.1f} | "
                     f"{r['seconds']:.2f} | {r['max_abs']:.1f} | {r['train_s']:.1f} |")
    if len(rows) == 2:
        diff = rows[1]["accuracy"] - rows[0]["accuracy"]
        acc = rows[0]["accuracy"]
        se = (acc * (1 - acc) / n) ** 0.5
        changed = rows[0].get("changed")
        lines += ["", f"- float16 − float32 accuracy: {diff:+.4f} ({diff * n:+.0f} of {n:,} "
                  f"test rows; one binomial standard error of either accuracy is {se:.4f})"
                  + (f"; the two models predict differently on {changed:,} test rows."
                     if changed is not None else ".")]
    return title, "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", nargs="?", choices=("write", "pipeline", "accuracy", "all"),
                        default="all")
    parser.add_argument("--rows", type=int, default=60000, help="write: MNIST rows")
    parser.add_argument("--n-components", type=int, default=1500)
    parser.add_argument("--n-hyperplanes", type=int, default=488)
    parser.add_argument("--chunk-rows", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads-per-worker", type=int, default=1,
                        help="write: threads of each of the 2 workers")
    parser.add_argument("--accuracy-rows", type=int, default=10000)
    parser.add_argument("--C", type=float, default=0.01, help="accuracy: LinearSVC's C")
    parser.add_argument("--workdir", default=None, help="temp folder (default: system temp)")
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's sections of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    base = Path(args.workdir or tempfile.gettempdir())
    for which in (("write", "accuracy") if args.which == "all" else (args.which,)):
        workdir = Path(tempfile.mkdtemp(prefix=f"dkrp-bench-enc-{which}-", dir=base))
        a = argparse.Namespace(**vars(args))
        a.which = which
        try:
            if which == "write":
                results, shape = bench_write(a, workdir)
                title, body = write_text(results, shape, a)
            elif which == "pipeline":
                title, body = pipeline_text(bench_pipeline(a, workdir), a)
            else:
                title, body = accuracy_text(bench_accuracy(a, workdir), a)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        emit(f"bench_store_encodings_{which}", title, body,
             command_line("bench_store_encodings.py", parser, a), args.write_results)


if __name__ == "__main__":
    main()
