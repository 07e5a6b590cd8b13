"""Featurize Forest Covertype with KRP on a Dask cluster, then train a linear classifier.

    python pipelines/featurize_covertype.py --scheduler tcp://scheduler:8786 --output /shared/out
    python pipelines/featurize_covertype.py                # embedded cluster, local data

Input: the Kaggle ``train.csv`` (``Id``, 54 features, ``Cover_Type``), looked up as
``covtype/kaggle_forest_cover_train.csv`` under ``--data-dir`` (default ``DKRP_DATA_DIR``,
else ``../shared/data``), or given with ``--csv``. Steps: ingest into a Zarr dataset
store (once), standardise columns, KRP (degree 2 by default) into a resumable feature
store, train ``LinearSVC`` (or dask-ml ``Incremental(SGDClassifier)`` with
``--classifier sgd`` for data that does not fit), report accuracy, macro-F1, throughput
and where the features are. Rerunning after a crash resumes the feature store.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, featurize_and_train, ingest_once, print_report  # noqa: E402


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--data-dir", help="folder holding covtype/kaggle_forest_cover_train.csv")
    p.add_argument("--csv", help="the covertype CSV itself (overrides --data-dir)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.csv:
        csv = Path(args.csv)
    else:
        import os

        from dkrp import datasets

        if args.data_dir:
            os.environ[datasets.DATA_DIR_ENV] = args.data_dir
        try:
            (csv,) = datasets._require("covtype", "train")
        except datasets.DatasetNotFoundError as exc:
            sys.exit(f"error: {exc}")
    out = Path(args.output or "covtype-krp")
    out.mkdir(parents=True, exist_ok=True)
    ds = ingest_once(csv, out / "covtype.zarr", label_column="Cover_Type",
                     drop_columns=("Id",), chunk_rows=args.chunk_rows)
    report = featurize_and_train(args, ds, out, standardize=True)
    print_report("covertype", report, t0)
    return report


if __name__ == "__main__":
    main()
