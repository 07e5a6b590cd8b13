"""Distributed featurization on the embedded Dask cluster (issue 3, "Scale and speed").

Two measurements, each in one run:

* ``covertype``: Covertype at full scale (581,012 × 54). Only the 15,120-row Kaggle
  subset is available locally, so it is **resampled with replacement** (seeded) to
  581,012 rows, standardised (subset mean / std), cast to float32, ingested into a
  Zarr dataset store (:func:`dkrp.io.ingest`, not timed) and featurized with KRP
  (g=2, k=2000, p=976, t=1, float32) on the embedded 2-worker cluster
  (:func:`dkrp.parallel.start_local_cluster`, 1 thread per worker) into a Zarr
  feature store (:func:`dkrp.feature_store.write_features`). Compared with, in the
  same run: the single-process in-memory ``transform`` of the same rows (all cores),
  and featurizing on the cluster without writing (``featurize(X).sum().compute()``),
  which separates featurization from the disk writes. Each figure is the best of
  ``--repeats`` runs; the store is deleted before each write run and at the end.
* ``streaming``: a generated input (dask random, seeded, float32, 54 columns, labels
  from a degree-2 rule of the first four columns) featurized to k=512 float32 (KRP
  g=2, p=976, t=1) and streamed straight into dask-ml ``Incremental(SGDClassifier)``
  without storing features. Reports rows/s, peak worker memory (RSS of each worker
  process sampled every ``--sample-every`` s with ``client.run``) against the worker
  memory limit, bytes written to the temp file system during the run (features: none),
  and the accuracy on a held-out generated block (a sanity check that it trained).
* ``ratio`` (issue 15, "the cluster path at in-memory speed"): cluster featurize
  (``featurize(X).sum().compute()``, X read from a Zarr dataset store, the embedded
  cluster of 2 worker processes × 1 thread) against the in-memory ``transform`` of the
  same rows on as many threads as the cluster has workers (equal cores), on the
  Covertype shape (KRP g=2 k=2000 p=976) and the MNIST shape (60,000 × 784 real MNIST
  images x/127.5 − 1, KRP g=2 k=1500 p=488, the shape of ``bench_transform.py``), both
  float32, at several chunk sizes (given as MiB of output per chunk; the rows are what
  :func:`dkrp.feature_store.plan.choose_chunk_rows` makes of them, as ``dkrp featurize``
  does). All runs of a shape are interleaved in rounds (``_common.interleaved``) and
  reported as medians. Also timed: one process featurizing the chunks one after
  another on one thread (two such processes are the cluster's floor). Profile of one
  chunk size: the task stream (compute time per task, share of the wall time the
  workers were busy, transfers), page faults per chunk in the workers, the workers'
  malloc and thread settings, and a cProfile of a few chunks featurized in a worker
  task and in this process (per-chunk seconds by function).

Usage::

    python benchmarks/bench_distributed.py                       # both, full sizes
    python benchmarks/bench_distributed.py covertype --rows 581012 --repeats 3
    python benchmarks/bench_distributed.py streaming --rows 50000000   # the issue's size
    python benchmarks/bench_distributed.py streaming --rows 4000000 --write-results
    python benchmarks/bench_distributed.py ratio --repeats 5 --write-results
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
from _common import (  # noqa: E402
    MemorySampler,
    command_line,
    disk_floor,
    emit,
    interleaved,
    worker_rss,
)

import dkrp  # noqa: E402
from dkrp.parallel import featurize, spec_json, start_local_cluster  # noqa: E402

COVTYPE_ROWS = 581_012
GiB = 2**30


def _du(path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _free_bytes(path) -> int:
    return shutil.disk_usage(path).free


def _memory_limits(client):
    info = client.scheduler_info()["workers"]
    return {addr: w.get("memory_limit") for addr, w in info.items()}


# -- (a) Covertype at full scale -----------------------------------------------------------


def covertype_input(n_rows, seed):
    from dkrp.datasets import load_covtype

    X, _ = load_covtype()
    mean, std = X.mean(axis=0), X.std(axis=0)
    std[std == 0] = 1.0
    rows = np.random.default_rng(seed).integers(0, X.shape[0], n_rows)
    Xs = ((X[rows] - mean) / std).astype(np.float32)
    return Xs, X.shape[0]


def bench_covertype(args, workdir):
    from distributed import Client

    from dkrp.feature_store import open_features, write_features
    from dkrp.io import ingest, open_dataset

    X, n_source = covertype_input(args.rows, args.seed)
    krp = dkrp.PolynomialRandomProjection(
        degree=2, n_components=args.n_components, n_hyperplanes=args.n_hyperplanes,
        n_terms=args.n_terms, random_state=0,
    ).fit(X[:10])
    out_bytes = X.shape[0] * args.n_components * 4
    free = _free_bytes(workdir)
    print(f"covertype: {X.shape[0]:,} × {X.shape[1]} float32 resampled from {n_source:,} rows; "
          f"features {out_bytes / 1e9:.2f} GB; free on {workdir}: {free / 1e9:.1f} GB", flush=True)
    if free < 2 * out_bytes:
        raise SystemExit(f"not enough free disk in {workdir} for a {out_bytes / 1e9:.1f} GB store")

    # single-process, in-memory (all cores of this process)
    krp.transform(X[:1000])  # compile outside the timings
    mem_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        Z = krp.transform(X)
        mem_times.append(time.perf_counter() - t0)
        del Z
    print(f"  in-memory transform: {' '.join(f'{t:.2f}' for t in mem_times)} s", flush=True)

    npy = Path(workdir) / "covtype_full.npy"
    np.save(npy, X)
    src = Path(workdir) / "covtype_full.zarr"
    t0 = time.perf_counter()
    ingest(npy, src, chunk_rows=args.chunk_rows, dtype="float32", overwrite=True)
    ingest_s = time.perf_counter() - t0
    npy.unlink()
    del X
    ds = open_dataset(src)
    Xd = ds.X
    store = Path(workdir) / "covtype_krp2000.zarr"

    cluster = start_local_cluster(n_workers=2, threads_per_worker=1)
    client = Client(cluster)
    try:
        limits = _memory_limits(client)
        # warm the workers (import, numba compile, projector cache) outside the timings
        featurize(Xd[: args.chunk_rows], krp).sum().compute()
        sum_times, write_times, stats, peak = [], [], None, {}
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            featurize(Xd, krp).sum().compute()
            sum_times.append(time.perf_counter() - t0)
            if store.exists():
                shutil.rmtree(store)
            with MemorySampler(client, args.sample_every) as sampler:
                t0 = time.perf_counter()
                stats = write_features(Xd, krp, store, client=client, progress=False,
                                       source=dict(ds.attrs, path=str(src)))
                write_times.append(time.perf_counter() - t0)
            for a, v in sampler.peak.items():
                peak[a] = max(peak.get(a, 0), v)
            print(f"  cluster sum {sum_times[-1]:.2f} s, write_features {write_times[-1]:.2f} s",
                  flush=True)
        store_bytes = _du(store)
        # the disk's own floor for these bytes, in the same run (issue 15 part 3)
        disk = [disk_floor(store_bytes, workdir) for _ in range(args.repeats)]
        print(f"  disk floor {' '.join(f'{t:.2f}' for t, _ in disk)} s (fsync included)",
              flush=True)
        # spot check: the store equals the in-memory transform on a few chunks
        fs = open_features(store)
        rows = slice(args.rows - 3000, args.rows)
        Xcheck = np.asarray(Xd[rows].compute())
        same = bool(np.allclose(np.asarray(fs.Z[rows].compute()), krp.transform(Xcheck),
                                rtol=1e-5, atol=1e-5))
    finally:
        client.close()
        cluster.close()
        for p in (store, src):
            if p.exists():
                shutil.rmtree(p)
    n = args.rows
    t_mem, t_sum, t_write = min(mem_times), min(sum_times), min(write_times)
    result = dict(
        rows=n, n_source=n_source, chunks=len(Xd.chunks[0]), chunk_rows=args.chunk_rows,
        t_mem=t_mem, t_sum=t_sum, t_write=t_write, ingest_s=ingest_s,
        t_disk=min(t for t, _ in disk), t_disk_cache=min(t for _, t in disk),
        store_bytes=store_bytes, peak=max(peak.values()) if peak else float("nan"),
        limit=min(v for v in limits.values() if v), same=same, stats=stats,
        all_mem=mem_times, all_sum=sum_times, all_write=write_times,
    )
    return result, krp


def covertype_text(r, args):
    """(title, body) of the covertype section."""
    n = r["rows"]
    rate = lambda t: n / t  # noqa: E731
    scale = "at full scale" if n == COVTYPE_ROWS else "resampled"
    title = (
        f"Distributed KRP featurization, Covertype {scale} ({n:,} × 54), g=2, "
        f"k={args.n_components}, p={args.n_hyperplanes}, t={args.n_terms}, float32"
    )
    lines = [
        f"Each figure: the minimum of {args.repeats} runs.",
        "",
        f"Input: only the {r['n_source']:,}-row Kaggle subset of Covertype is available here, so "
        f"it was **resampled with replacement** (seed {args.seed}) to {n:,} rows, standardised "
        "with the subset's mean/std and cast to float32; ingested to a Zarr dataset store "
        f"({r['chunks']} row chunks of {r['chunk_rows']:,}; ingest {r['ingest_s']:.1f} s, not "
        "counted). Cluster: `start_local_cluster(n_workers=2, threads_per_worker=1)`, worker "
        f"memory limit {r['limit'] / GiB:.1f} GiB. Store written: "
        f"{r['store_bytes'] / 1e9:.2f} GB (deleted afterwards); its rows equal the in-memory "
        f"transform: {r['same']}.",
        "",
        "| run | seconds | rows/s | × in-memory |",
        "|---|---:|---:|---:|",
        f"| single process, in-memory `transform` (all cores) | {r['t_mem']:.2f} | "
        f"{rate(r['t_mem']):,.0f} | 1.00 |",
        f"| cluster, featurize only (`featurize(X).sum().compute()`) | {r['t_sum']:.2f} | "
        f"{rate(r['t_sum']):,.0f} | {r['t_mem'] / r['t_sum']:.2f} |",
        f"| cluster, `write_features` to Zarr (featurize + write) | {r['t_write']:.2f} | "
        f"{rate(r['t_write']):,.0f} | {r['t_mem'] / r['t_write']:.2f} |",
        f"| disk floor: plain sequential write of the store's bytes, then fsync | "
        f"{r['t_disk']:.2f} | {rate(r['t_disk']):,.0f} | {r['t_mem'] / r['t_disk']:.2f} |",
        "",
        f"- Floors (issue 15 part 3): compute floor = cluster featurize only "
        f"{r['t_sum']:.2f} s; disk floor = {r['t_disk']:.2f} s "
        f"({r['store_bytes'] / r['t_disk'] / 1e6:,.0f} MB/s; {r['t_disk_cache']:.2f} s before "
        f"the fsync). The binding floor is the "
        f"{'disk' if r['t_disk'] >= r['t_sum'] else 'compute'} floor: write_features runs at "
        f"**{max(r['t_sum'], r['t_disk']) / r['t_write']:.2f}× the binding floor** "
        "(target ≥ 0.9; Zarr does not fsync, so a write may beat a disk floor that the page "
        "cache absorbs).",
        f"- All runs (s): in-memory {' '.join(f'{t:.2f}' for t in r['all_mem'])}; cluster sum "
        f"{' '.join(f'{t:.2f}' for t in r['all_sum'])}; write_features "
        f"{' '.join(f'{t:.2f}' for t in r['all_write'])}.",
        f"- Target (issue 3): distributed ≥ 0.8 × in-memory throughput. write_features reaches "
        f"{r['t_mem'] / r['t_write']:.2f}× → "
        f"{'met' if r['t_mem'] / r['t_write'] >= 0.8 else 'NOT met'}"
        f"; featurize without writing reaches {r['t_mem'] / r['t_sum']:.2f}×.",
        f"- Peak worker RSS during write_features: {r['peak'] / GiB:.2f} GiB.",
    ]
    return title, "\n".join(lines)


# -- (b) larger-than-memory streaming ------------------------------------------------------


def _labels(block):
    return ((block[:, 0] * block[:, 1] + 0.5 * block[:, 2] * block[:, 3]) > 0).astype(np.int8)


def generated_input(n_rows, chunk_rows, seed):
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.standard_normal((n_rows, 54), chunks=(chunk_rows, 54), dtype=np.float32)
    y = X.map_blocks(_labels, drop_axis=1, dtype=np.int8)
    return X, y


def bench_streaming(args, workdir):
    from dask_ml.wrappers import Incremental
    from distributed import Client
    from sklearn.linear_model import SGDClassifier

    n = args.rows
    X, y = generated_input(n, args.chunk_rows, args.seed)
    krp = dkrp.PolynomialRandomProjection(
        degree=2, n_components=args.n_components, n_hyperplanes=args.n_hyperplanes,
        n_terms=args.n_terms, random_state=0,
    ).fit_n_features(54)
    feat_bytes = n * args.n_components * 4
    tmp_free0 = _free_bytes(workdir)
    cluster = start_local_cluster(n_workers=2, threads_per_worker=1,
                                  local_directory=str(workdir))
    client = Client(cluster)
    try:
        limits = _memory_limits(client)
        # warm up: imports, numba compile, projector cache
        featurize(X[: args.chunk_rows], krp).sum().compute()
        base = {a: v for a, v in client.run(worker_rss).items()}
        Z = featurize(X, krp)
        inc = Incremental(SGDClassifier(loss="hinge", alpha=1e-5, random_state=0),
                          scoring="accuracy", shuffle_blocks=False, random_state=0,
                          assume_equal_chunks=True)
        with MemorySampler(client, args.sample_every) as sampler:
            t0 = time.perf_counter()
            inc.fit(Z, y, classes=[0, 1])
            seconds = time.perf_counter() - t0
        tmp_free1 = _free_bytes(workdir)
        spilled = _du(workdir)
        # featurization alone (no training) on the first rows, to show where the time goes
        m = min(n, args.featurize_only_rows)
        m -= m % args.chunk_rows or 0
        m = max(m, min(n, args.chunk_rows))
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            featurize(X[:m], krp).sum().compute()
            times.append(time.perf_counter() - t0)
        feat_only = (m, min(times))
        # held-out block (another seed) to show the model learned
        Xt, yt = generated_input(200_000, 200_000, args.seed + 1)
        Zt = featurize(Xt, krp).compute()
        acc = float((inc.estimator_.predict(Zt) == yt.compute()).mean())
    finally:
        client.close()
        cluster.close()
    return dict(
        rows=n, chunks=len(X.chunks[0]), chunk_rows=args.chunk_rows, seconds=seconds,
        peak=max(sampler.peak.values()) if sampler.peak else float("nan"),
        peak_all=sampler.peak, base=base, limit=min(v for v in limits.values() if v),
        feat_bytes=feat_bytes, disk_delta=tmp_free0 - tmp_free1, local_dir_bytes=spilled,
        accuracy=acc, feat_only=feat_only,
    )


def streaming_text(r, args):
    """(title, body) of the streaming section."""
    n = r["rows"]
    target = 50_000_000
    title = (
        f"Larger-than-memory streaming: generated {n:,} × 54 float32 → KRP k="
        f"{args.n_components} float32 (g=2, p={args.n_hyperplanes}, t={args.n_terms}) → "
        "dask-ml `Incremental(SGDClassifier)`, no feature store"
    )
    feat_rows, feat_s = r["feat_only"]
    speedup = (feat_rows / feat_s) / (n / r["seconds"])
    if speedup > 1:
        limit = (f"featurizing alone runs at {speedup:.1f}× the streaming rate, so the rest of "
                 "the pipeline (the sequential `partial_fit` chain) sets the streaming rate")
    else:
        limit = (f"featurizing alone runs at {speedup:.2f}× the streaming rate: featurization, "
                 "not training, sets the streaming rate")
    lines = [
        "One run.",
        "",
        f"Input: `dask.array.random.default_rng({args.seed}).standard_normal`, {r['chunks']} row "
        f"chunks of {r['chunk_rows']:,}; labels y = [x0·x1 + 0.5·x2·x3 > 0]. Cluster: "
        "`start_local_cluster(n_workers=2, threads_per_worker=1)`. Model: "
        "`SGDClassifier(loss='hinge', alpha=1e-5)`, one pass, blocks in order.",
        "",
        "| rows | features produced | seconds | rows/s | peak worker RSS | worker memory limit | "
        "disk used during run | held-out accuracy |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {n:,} | {r['feat_bytes'] / 1e9:.1f} GB | {r['seconds']:.1f} | "
        f"{n / r['seconds']:,.0f} | {r['peak'] / GiB:.2f} GiB | {r['limit'] / GiB:.1f} GiB | "
        f"{max(r['disk_delta'], 0) / 1e6:.0f} MB (worker dirs {r['local_dir_bytes'] / 1e6:.1f} MB)"
        f" | {r['accuracy']:.3f} |",
        "",
        "- Peak RSS per worker: "
        + ", ".join(f"{v / GiB:.2f} GiB (idle {r['base'].get(a, 0) / GiB:.2f})"
                    for a, v in sorted(r["peak_all"].items()))
        + ".",
        f"- Featurization alone on the same cluster (`featurize(X[:m]).sum().compute()`, first "
        f"{feat_rows:,} rows, no training, best of 2): {feat_s:.1f} s = "
        f"{feat_rows / feat_s:,.0f} rows/s; {limit}.",
        "- Disk used = drop in free space of the temp file system over the run (other "
        "processes' files count too); no features are stored.",
    ]
    if n < target:
        lines.append(
            f"- **The issue's target size ({target:,} rows, "
            f"~{target * args.n_components * 4 / 1e9:.0f} GB of features) was not run** "
            f"here; {n:,} rows were run and "
            "nothing is extrapolated. `--rows 50000000` runs the full size."
        )
    return title, "\n".join(lines)


# -- (c) cluster featurize against in-memory, by chunk size (issue 15) --------------------

#: The shapes of issue 15: (rows, KRP k, KRP p); both g=2, t=1, float32.
RATIO_SHAPES = {"covertype": (COVTYPE_ROWS, 2000, 976), "mnist": (60_000, 1500, 488)}


def ratio_input(shape, seed):
    """(X float32, description) of a ``RATIO_SHAPES`` shape."""
    from _common import mnist_train

    if shape == "covertype":
        X, n_source = covertype_input(RATIO_SHAPES[shape][0], seed)
        return X, f"Covertype resampled with replacement from {n_source:,} rows, standardised"
    X, source = mnist_train(RATIO_SHAPES[shape][0])
    return np.ascontiguousarray(X, dtype=np.float32), source


def _minflt():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _worker_settings():
    return {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS",
                                           "DKRP_NUM_THREADS")}


def _sequential(blocks, text):
    """Featurize ``blocks`` one after another on one thread, summing each (the floor)."""
    from dkrp._blockwise import transform_partition
    from dkrp._threading import limit_threads

    with limit_threads(1):
        total = 0.0
        for i, (start, block) in enumerate(blocks):
            total += float(transform_partition(block, text, "float32", start, i).sum())
    return total


def _profile_chunks(store, text, first, count):
    """cProfile of featurizing chunks ``first .. first+count-1`` of ``store`` on one thread.

    Returns per-chunk seconds spent reading, featurizing and summing, minor page faults
    per chunk, and the functions with the most own time (seconds per chunk).
    """
    import cProfile
    import pstats

    from dkrp._blockwise import row_offsets, transform_partition
    from dkrp._threading import limit_threads
    from dkrp.io import open_dataset

    X = open_dataset(store).X
    offsets = row_offsets(X.chunks[0])
    phases = {"read": 0.0, "featurize": 0.0, "sum": 0.0}
    prof = cProfile.Profile()
    f0 = _minflt()
    with limit_threads(1):
        transform_partition(np.asarray(X.blocks[first].compute(scheduler="sync")), text,
                            "float32", 0, 0)  # warm (this thread's work array, caches)
        f0 = _minflt()
        for i in range(first, first + count):
            t0 = time.perf_counter()
            block = np.asarray(X.blocks[i].compute(scheduler="sync"))
            t1 = time.perf_counter()
            prof.enable()
            Z = transform_partition(block, text, "float32", offsets[i], i)
            prof.disable()
            t2 = time.perf_counter()
            Z.sum()
            t3 = time.perf_counter()
            del Z
            phases["read"] += t1 - t0
            phases["featurize"] += t2 - t1
            phases["sum"] += t3 - t2
    faults = (_minflt() - f0) / count
    stats = pstats.Stats(prof).stats
    own = sorted(((tt / count, pstats.func_std_string(fn)) for fn, (_, _, tt, _, _) in
                  stats.items()), reverse=True)[:5]
    return {k: v / count for k, v in phases.items()}, faults, own


def _task_stream_summary(records, wall):
    """Busy share, per-task compute and transfer time of one run's task stream."""
    busy, compute, transfer = {}, [], 0.0
    for r in records:
        for ss in r["startstops"]:
            span = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                busy[r["worker"]] = busy.get(r["worker"], 0.0) + span
                if span > 1e-3:
                    compute.append(span)
            elif ss["action"] == "transfer":
                transfer += span
    n_workers = max(1, len(busy))
    return {"busy_share": sum(busy.values()) / (n_workers * wall),
            "idle_tail": wall - max(busy.values(), default=0.0),
            "task_median": float(np.median(compute)) if compute else float("nan"),
            "tasks": len(compute), "transfer": transfer}


def bench_ratio_shape(shape, args, workdir, client):
    from distributed import get_task_stream

    from dkrp._threading import limit_threads
    from dkrp.feature_store.plan import TARGET_CHUNK_BYTES, choose_chunk_rows
    from dkrp.io import ingest, open_dataset

    n, k, p = RATIO_SHAPES[shape]
    X, source = ratio_input(shape, args.seed)
    krp = dkrp.PolynomialRandomProjection(degree=2, n_components=k, n_hyperplanes=p,
                                          n_terms=1, random_state=0).fit(X[:10])
    text = spec_json(krp)
    mibs = sorted(set(args.chunk_mib) | {TARGET_CHUNK_BYTES / 2**20})
    rows = {m: choose_chunk_rows(n, k * 4, int(m * 2**20)) for m in mibs}
    npy = Path(workdir) / f"{shape}.npy"
    np.save(npy, X)
    stores = {}
    for m in mibs:
        stores[m] = Path(workdir) / f"{shape}_{rows[m]}.zarr"
        if not stores[m].exists():
            ingest(npy, stores[m], chunk_rows=rows[m], dtype="float32")
    npy.unlink()
    arrays = {m: open_dataset(stores[m]).X for m in mibs}
    n_workers = len(client.scheduler_info()["workers"])
    default = TARGET_CHUNK_BYTES / 2**20
    seq_rows = rows[default]
    seq_blocks = [(s, X[s:s + seq_rows]) for s in range(0, n, seq_rows)]

    krp.transform(X[:1000])  # compile, caches
    for m in mibs:  # warm every worker (imports, numba, projector cache)
        featurize(arrays[m][: rows[m] * n_workers], krp).sum().compute()

    def in_memory():
        with limit_threads(n_workers):  # equal cores
            return krp.transform(X)

    def cluster_sum(m):
        return lambda: featurize(arrays[m], krp).sum().compute()

    # profile at (and the no-read variant of) this chunk size (default: the plan's default)
    pm = args.profile_mib if args.profile_mib is not None else default
    if pm not in rows:
        raise SystemExit(f"--profile-mib {pm} is not one of the chunk sizes {mibs}")
    # the same chunks held in the workers' memory: the cluster path without the Zarr read
    from distributed import wait

    held = arrays[pm].persist()
    wait(held)

    def cluster_held():
        return featurize(held, krp).sum().compute()

    labels = ["mem", "seq", "held", *mibs]
    fns = [in_memory, lambda: _sequential(seq_blocks, text), cluster_held]
    fns += [cluster_sum(m) for m in mibs]
    counts = [args.repeats, max(1, args.repeats // 2), args.repeats] + [args.repeats] * len(mibs)
    # CPU seconds of this process (client, scheduler) and of every worker, per run: on a
    # shared machine they say what a run costs whatever share of the cores it got
    cpu = [[] for _ in fns]
    sampling = [[] for _ in fns]

    def all_cpu():
        return time.process_time() + sum(client.run(time.process_time).values())

    def counted(i):
        def run():
            t0 = time.perf_counter()
            c0 = all_cpu()
            t1 = time.perf_counter()
            fns[i]()
            t2 = time.perf_counter()
            cpu[i].append(all_cpu() - c0)
            sampling[i].append((t1 - t0) + (time.perf_counter() - t2))
        return run

    load0 = os.getloadavg()[0]
    times = interleaved([counted(i) for i in range(len(fns))], counts)
    load1 = os.getloadavg()[0]
    runs = {lab: {"wall": [t - o for t, o in zip(times[i], sampling[i], strict=True)],
                  "cpu": cpu[i]} for i, lab in enumerate(labels)}
    held = None  # release the held chunks
    workers = sorted(client.scheduler_info()["workers"])
    f0 = client.run(_minflt)
    with get_task_stream(client) as ts:
        t0 = time.perf_counter()
        featurize(arrays[pm], krp).sum().compute()
        wall = time.perf_counter() - t0
    f1 = client.run(_minflt)
    n_chunks = len(arrays[pm].chunks[0])
    stream = _task_stream_summary(ts.data, wall)
    stream["faults_per_chunk"] = sum(f1[a] - f0[a] for a in f1) / n_chunks
    settings = client.run(_worker_settings)
    count = min(args.profile_chunks, n_chunks)
    in_worker = client.submit(_profile_chunks, str(stores[pm]), text, 0, count,
                              workers=[workers[0]], pure=False).result()
    in_process = _profile_chunks(str(stores[pm]), text, 0, count)
    return dict(
        shape=shape, n=n, k=k, p=p, d=X.shape[1], source=source, mibs=mibs, rows=rows,
        chunks={m: len(arrays[m].chunks[0]) for m in mibs}, default=default,
        seq_rows=seq_rows, runs=runs, profile_mib=pm, stream=stream, wall=wall, settings=settings,
        profile_count=count, in_worker=in_worker, in_process=in_process,
        n_workers=n_workers, load=(load0, load1),
    )


def bench_ratio(args, workdir):
    from distributed import Client

    cluster = start_local_cluster(n_workers=args.n_workers, threads_per_worker=1)
    client = Client(cluster)
    try:
        return [bench_ratio_shape(shape, args, workdir, client) for shape in args.shapes]
    finally:
        client.close()
        cluster.close()


def _fmt_own(own):
    return "; ".join(f"{name.split('/')[-1]} {t * 1e3:.1f} ms" for t, name in own)


def _ratio_shape_lines(r):
    """The table and profile lines of one shape of the ratio section."""
    runs = r["runs"]

    def med(lab, key="wall"):
        return float(np.median(runs[lab][key]))

    t_mem, c_mem = med("mem"), med("mem", "cpu")

    def row(name, lab, chunk_rows, n_chunks, extra=""):
        wall, cpu = med(lab), med(lab, "cpu")
        return (f"| {name} | {chunk_rows} | {n_chunks} | {wall:.3f} | "
                f"{' '.join(f'{t:.2f}' for t in runs[lab]['wall'])} | {t_mem / wall:.2f}"
                f"{extra} | {cpu:.2f} | {c_mem / cpu:.2f} |")

    pm = r["profile_mib"]
    floor = med("seq") / r["n_workers"]
    lines = [
        "",
        f"**{r['shape']}**: {r['n']:,} × {r['d']} ({r['source']}), k={r['k']}, "
        f"p={r['p']}; load average {r['load'][0]:.2f} before these rounds, "
        f"{r['load'][1]:.2f} after.",
        "",
        "| run | chunk rows (MiB of output) | chunks | median s | all runs (s) | "
        "× in-memory | median CPU s | × in-memory by CPU |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
        row(f"in-memory `transform`, {r['n_workers']} threads", "mem", "–", "–"),
        row("one process, chunks one after another on 1 thread", "seq",
            f"{r['seq_rows']:,}", -(-r["n"] // r["seq_rows"]),
            f" (÷{r['n_workers']} processes: {t_mem / floor:.2f})"),
        row("cluster featurize, input chunks held in worker memory (no Zarr read)",
            "held", f"{r['rows'][pm]:,} ({pm:g})", r["chunks"][pm]),
    ]
    for m in r["mibs"]:
        tag = " (default)" if m == r["default"] else ""
        lines.append(row(f"cluster featurize{tag}", m, f"{r['rows'][m]:,} ({m:g})",
                         r["chunks"][m]))
    st = r["stream"]
    (wph, wflt, wown), (pph, pflt, pown) = r["in_worker"], r["in_process"]
    settings = sorted({tuple(sorted(v.items())) for v in r["settings"].values()})
    lines += [
        "",
        f"Profile at {r['rows'][pm]:,} rows per chunk ({pm:g} MiB), one more run "
        f"({r['wall']:.3f} s): {st['tasks']} chunk tasks, median {st['task_median'] * 1e3:.1f}"
        f" ms each (read + featurize + sum, fused); workers busy {st['busy_share']:.0%} of "
        f"the wall time; last worker idle {st['idle_tail'] * 1e3:.0f} ms at the end; "
        f"transfers {st['transfer'] * 1e3:.0f} ms in all (only partial sums travel); "
        f"{st['faults_per_chunk']:,.0f} minor page faults per chunk in the workers "
        f"(output {r['rows'][pm] * r['k'] * 4 / 2**20:.0f} MiB per chunk). Worker "
        f"settings: {'; '.join(', '.join(f'{k}={v}' for k, v in s) for s in settings)}.",
        "",
        f"Per chunk, {r['profile_count']} chunks on one thread (cProfile on):",
        "",
        "| where | read ms | featurize ms | sum ms | minor faults | most own time "
        "(per chunk) |",
        "|---|---:|---:|---:|---:|---|",
        f"| worker task | {wph['read'] * 1e3:.1f} | {wph['featurize'] * 1e3:.1f} | "
        f"{wph['sum'] * 1e3:.1f} | {wflt:,.0f} | {_fmt_own(wown)} |",
        f"| this process | {pph['read'] * 1e3:.1f} | {pph['featurize'] * 1e3:.1f} | "
        f"{pph['sum'] * 1e3:.1f} | {pflt:,.0f} | {_fmt_own(pown)} |",
    ]
    per_chunk = sum(wph.values())
    best_wall = min(r["mibs"], key=lambda m: med(m))
    best_cpu = min(r["mibs"], key=lambda m: med(m, "cpu"))
    lines += [
        "",
        "Where the time goes (computed from the figures above):",
        "",
        f"- Reading the input chunk from the Zarr store (zstd + crc32c, into fresh memory) is "
        f"{wph['read'] / per_chunk:.0%} of a chunk's time in a worker task; with the chunks "
        f"held in worker memory the cluster reaches {t_mem / med('held'):.2f}× in-memory "
        f"against {t_mem / med(pm):.2f}× reading them (CPU: {c_mem / med('held', 'cpu'):.2f}× "
        f"against {c_mem / med(pm, 'cpu'):.2f}×). The in-memory transform reads nothing.",
        f"- The worker environment: featurize {wph['featurize'] * 1e3:.0f} ms per chunk in a "
        f"worker task against {pph['featurize'] * 1e3:.0f} ms in this process, "
        f"{wflt:,.0f} against {pflt:,.0f} page faults per chunk.",
        f"- The Dask path: workers busy {st['busy_share']:.0%} of the wall time; the last "
        f"worker idle {st['idle_tail'] * 1e3:.0f} ms at the end ({r['chunks'][pm]} chunks over "
        f"{r['n_workers']} workers).",
        f"- Fastest chunk size here: {r['rows'][best_wall]:,} rows ({best_wall:g} MiB) by median "
        f"wall time, {r['rows'][best_cpu]:,} rows ({best_cpu:g} MiB) by median CPU time; "
        f"the plan's default is {r['rows'][r['default']]:,} rows ({r['default']:g} MiB).",
    ]
    return lines


def ratio_text(results, args):
    """(title, body) of the ratio section."""
    title = ("Cluster featurize against in-memory transform at equal cores, by chunk size "
             "(issue 15): Covertype and MNIST shapes, KRP g=2, float32")
    r0 = results[0]
    lines = [
        f"Medians of interleaved rounds (`_common.interleaved`, {args.repeats} rounds; the "
        f"sequential one-thread pass runs in {max(1, args.repeats // 2)} of them). "
        f"Cluster: `start_local_cluster(n_workers={r0['n_workers']}, threads_per_worker=1)`, "
        "X read from a Zarr dataset store whose row chunks are the chunk size (ingested "
        "before, not timed); run: `featurize(X, krp).sum().compute()`. In-memory: "
        f"`krp.transform(X)` on {r0['n_workers']} threads (`limit_threads`), the cluster's "
        "cores. × in-memory = in-memory seconds / run seconds (1.00 = as fast). CPU s: "
        "CPU seconds of this process (client and scheduler) plus every worker process over "
        "the run (sampled with `client.run` around each run; the sampling is not in the wall "
        "times); × in-memory by CPU is the ratio of those, which a shared machine disturbs "
        "less than wall time. The machine is shared with other jobs: see the load averages.",
    ]
    for r in results:
        lines += _ratio_shape_lines(r)
    return title, "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", nargs="?", choices=("covertype", "streaming", "ratio", "all"),
                        default="all")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows (default: 581,012 for covertype, 50,000,000 for streaming)")
    parser.add_argument("--n-components", type=int, default=None,
                        help="k (default 2000 for covertype, 512 for streaming)")
    parser.add_argument("--n-hyperplanes", type=int, default=976,
                        help="covertype, streaming: p (ratio: fixed by its shapes)")
    parser.add_argument("--n-terms", type=int, default=1, help="covertype, streaming: t")
    parser.add_argument("--chunk-rows", type=int, default=None,
                        help="rows per block (default 16,384 covertype, 250,000 streaming)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-every", type=float, default=0.5,
                        help="seconds between worker-memory samples")
    parser.add_argument("--featurize-only-rows", type=int, default=4_000_000,
                        help="streaming: rows of the featurize-only comparison pass")
    parser.add_argument("--chunk-mib", type=float, nargs="+", default=[8, 16, 32, 64, 128],
                        help="ratio: MiB of output per chunk to compare (the plan's default "
                             "is always added)")
    parser.add_argument("--shapes", nargs="+", choices=tuple(RATIO_SHAPES),
                        default=list(RATIO_SHAPES), help="ratio: which shapes")
    parser.add_argument("--n-workers", type=int, default=2,
                        help="ratio: worker processes (1 thread each; in-memory gets as many)")
    parser.add_argument("--profile-mib", type=float, default=None,
                        help="ratio: chunk size (MiB of output) profiled (default: the plan's)")
    parser.add_argument("--profile-chunks", type=int, default=4,
                        help="ratio: chunks featurized under cProfile, in a worker and here")
    parser.add_argument("--workdir", default=None, help="temp folder (default: system temp)")
    parser.add_argument("--write-results", action="store_true",
                        help="replace the section of each benchmark run (covertype, streaming) "
                             "in benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    base = Path(args.workdir or tempfile.gettempdir())
    for which in (("covertype", "streaming", "ratio") if args.which == "all"
                  else (args.which,)):
        a = argparse.Namespace(**vars(args))
        a.which = which
        if which == "ratio":
            a.rows = a.n_components = a.chunk_rows = None  # fixed by the shapes
        elif which == "covertype":
            a.rows = a.rows or COVTYPE_ROWS
            a.n_components = a.n_components or 2000
            a.chunk_rows = a.chunk_rows or 16_384
        else:
            a.rows = a.rows or 50_000_000
            a.n_components = a.n_components or 512
            a.chunk_rows = a.chunk_rows or 250_000
        workdir = Path(tempfile.mkdtemp(prefix=f"dkrp-bench-{which}-", dir=base))
        try:
            if which == "ratio":
                title, body = ratio_text(bench_ratio(a, workdir), a)
            elif which == "covertype":
                r, _ = bench_covertype(a, workdir)
                title, body = covertype_text(r, a)
            else:
                r = bench_streaming(a, workdir)
                title, body = streaming_text(r, a)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        # the command of a section names its own benchmark and its resolved sizes
        emit(f"bench_distributed_{which}", title, body,
             command_line("bench_distributed.py", parser, a), args.write_results)


if __name__ == "__main__":
    main()
