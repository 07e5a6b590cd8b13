"""Shared plumbing of the pipeline scripts: arguments, cluster, ingest-once, report.

Scripts a user submits hold no algorithms: they read config, call dkrp, write one
feature store and print a report.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def base_parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scheduler", help="Dask scheduler address (tcp:// or tls://); "
                   "default: an embedded LocalCluster on 127.0.0.1")
    p.add_argument("--scheduler-file", help="scheduler file (dask-jobqueue / dask scheduler)")
    p.add_argument("--n-workers", type=int, help="embedded cluster worker processes")
    p.add_argument("--memory-limit", help="embedded cluster memory per worker, e.g. 4GiB")
    p.add_argument("--output", default=None, help="output directory (dataset + feature stores)")
    p.add_argument("--degree", type=int, default=2)
    p.add_argument("--n-components", type=int, default=1000)
    p.add_argument("--n-hyperplanes", type=int, default=500)
    p.add_argument("--n-terms", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--classifier", choices=["auto", "linearsvc", "sgd"], default="auto",
                   help="LinearSVC for features that fit in memory, dask-ml "
                        "Incremental(SGDClassifier) for those that do not")
    p.add_argument("--overwrite", action="store_true", help="replace stores of another run")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def ingest_once(source, dest, **options):
    """Ingest ``source`` into ``dest`` unless a complete store of it is already there."""
    from dkrp import io

    dest = Path(dest)
    try:
        ds = io.open_dataset(dest)
        if ds.attrs.get("source_sha256") == io.file_sha256(source):
            return ds
    except (FileNotFoundError, ValueError):
        pass
    io.ingest(source, dest, overwrite=True, **options)
    return io.open_dataset(dest)


def featurize_and_train(args, ds, out_dir, *, standardize, positive_label=None):
    """Fit KRP, write the feature store on the cluster, train, return the report dict."""
    import dask.array as da

    from dkrp import PolynomialRandomProjection, featurize_to_store
    from dkrp.evaluation import train_on_features
    from dkrp.feature_store import open_features
    from dkrp.parallel import connect

    report = {}
    with connect(scheduler=args.scheduler, scheduler_file=args.scheduler_file,
                 n_workers=args.n_workers, memory_limit=args.memory_limit) as client:
        X = ds.X
        source = {"path": str(ds.path), **ds.attrs}
        if standardize:
            # columns on very different scales (metres vs 0/1 indicators): standardise lazily
            mean, std = da.compute(X.mean(axis=0), X.std(axis=0))
            std[std == 0] = 1.0
            X = (X - mean) / std
            source["preprocessing"] = "standardize"
        krp = PolynomialRandomProjection(
            degree=args.degree, n_components=args.n_components,
            n_hyperplanes=args.n_hyperplanes, n_terms=args.n_terms, random_state=args.seed,
        )
        features = out_dir / "features.zarr"
        summary, _, _ = featurize_to_store(
            X, features, krp, client=client, overwrite=args.overwrite,
            progress=not args.quiet, dtype=args.dtype, provenance=source,
        )
        Z = open_features(features).Z
        result = train_on_features(Z, ds.y, classifier=args.classifier, seed=args.seed,
                                   positive_label=positive_label)
    report.update(featurize=summary, train=result, features=str(features.absolute()))
    return report


def print_report(name, report, t0):
    s, r = report["featurize"], report["train"]
    score = (f"F1 {r['f1']:.4f}" if "f1" in r else f"macro-F1 {r['f1_macro']:.4f}")
    print(f"{name}: {s['rows']} rows featurized -> {s['n_components']} {s['dtype']} in "
          f"{s['seconds']:.1f} s ({s['rows_per_second']:,.0f} rows/s; "
          f"{s['chunks_written']} chunks written, {s['chunks_skipped']} already done)")
    print(f"{name}: {r['classifier']} on {r['n_train']} rows: accuracy {r['accuracy']:.4f} "
          f"(majority class {r['majority_accuracy']:.4f}), balanced accuracy "
          f"{r['balanced_accuracy']:.4f}, {score} on {r['n_test']} held-out rows")
    print(f"{name}: features at {report['features']}; total {time.perf_counter() - t0:.1f} s")
    print("REPORT " + json.dumps(report, default=str, sort_keys=True))
