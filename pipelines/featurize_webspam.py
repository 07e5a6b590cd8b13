"""Featurize Webspam (LIBSVM) with KRP on a Dask cluster, then train a linear classifier.

    python pipelines/featurize_webspam.py webspam_wc_normalized_unigram.svm.bz2 \
        --scheduler tcp://scheduler:8786 --output /shared/webspam-krp

Webspam is not shipped with dkrp and no copy is available offline: download the
unigram file (350,000 x 254, ``webspam_wc_normalized_unigram.svm.bz2``) from the
LIBSVM data sets page (https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html)
and pass its path. Any binary LIBSVM file works the same way (the tests use w8a as a
stand-in). The rows are ingested as sparse CSR blocks and featurized without
densifying the input; the classifier defaults to dask-ml
``Incremental(SGDClassifier)`` (``--classifier linearsvc`` for data that fits), and
the report gives accuracy and F1 of the positive (spam, +1) class, the data being
imbalanced.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, featurize_and_train, ingest_once, print_report  # noqa: E402


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("libsvm", help="LIBSVM/svmlight file (.bz2/.gz/.xz fine), e.g. the Webspam "
                                  "unigram file; see the module docstring for where to get it")
    p.add_argument("--n-features", type=int, default=None, help="feature count (254 for "
                   "Webspam unigram; default: the largest index in the file)")
    p.set_defaults(classifier="sgd")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    source = Path(args.libsvm)
    if not source.is_file():
        sys.exit(f"error: {source} does not exist. Webspam is not available offline: download "
                 "webspam_wc_normalized_unigram.svm.bz2 from the LIBSVM binary data sets page "
                 "and pass its path (see --help).")
    out = Path(args.output or (source.name.split(".")[0] + "-krp"))
    out.mkdir(parents=True, exist_ok=True)
    ds = ingest_once(source, out / "dataset.zarr", fmt="libsvm", n_features=args.n_features,
                     chunk_rows=args.chunk_rows, sparse=True)
    report = featurize_and_train(args, ds, out, standardize=False, positive_label=1)
    print_report(source.name, report, t0)
    return report


if __name__ == "__main__":
    main()
