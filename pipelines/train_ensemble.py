"""Train a random-feature linear-SVM voting ensemble on a cluster, evaluate it, report.

Submit to a cluster (or run with an embedded LocalCluster)::

    python pipelines/train_ensemble.py TRAIN.zarr --test TEST.zarr --out model \\
        --method rff --n-components 500 --voters 13 --strategy full \\
        --scheduler tls://scheduler:8786

TRAIN.zarr and TEST.zarr are dkrp dataset stores with labels (``dkrp ingest``). The
model is written to ``--out`` (JSON + npz; ``dkrp.load(out)`` or ``dkrp predict``).
Prints the voters' table, the test accuracy and macro-F1 of the ensemble and of each
voter, and a final ``REPORT {json}`` line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def parser():
    from dkrp.methods import method_names

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("train", help="training dataset store (with labels)")
    p.add_argument("--test", help="test dataset store (with labels) to evaluate on")
    p.add_argument("--out", required=True, help="model directory")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--method", choices=method_names(), default="rff")
    p.add_argument("--n-components", type=int, default=500)
    p.add_argument("--gamma", default=None, help="a number or 'scale' (rff default)")
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--voters", type=int, default=13)
    p.add_argument("--strategy", choices=["full", "partition"], default="full")
    p.add_argument("--voting", choices=["hard", "soft"], default="hard")
    p.add_argument("--solver", choices=["auto", "newton", "primal", "dual", "sgd"],
                   default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scheduler", help="Dask scheduler address (tcp:// or tls://); "
                   "default: an embedded LocalCluster on 127.0.0.1")
    p.add_argument("--scheduler-file")
    p.add_argument("--n-workers", type=int)
    p.add_argument("--memory-limit")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv=None):
    from dkrp.ensemble import RandomFeatureVotingClassifier, evaluate, summary_lines
    from dkrp.io import open_dataset
    from dkrp.parallel import connect

    args = parser().parse_args(argv)
    gamma = args.gamma if args.gamma in (None, "scale") else float(args.gamma)
    train = open_dataset(args.train)
    if train.y is None:
        raise SystemExit(f"{args.train} has no labels")
    model = RandomFeatureVotingClassifier(
        n_voters=args.voters, method=args.method, n_components=args.n_components, gamma=gamma,
        C=args.C, estimator=args.solver, voting=args.voting, strategy=args.strategy,
        random_state=args.seed)
    with connect(scheduler=args.scheduler, scheduler_file=args.scheduler_file,
                 n_workers=args.n_workers, memory_limit=args.memory_limit) as client:
        model.fit(train.X, train.y, client=client, progress=not args.quiet)
        model.save(args.out, overwrite=args.overwrite)
        result = None
        if args.test:
            test = open_dataset(args.test)
            result = evaluate(model, test.X, test.y, client=client)
    for line in summary_lines(model, result):
        print(line)
    report = {"train": str(Path(args.train).absolute()), "model": str(Path(args.out).absolute()),
              "n_train": int(train.X.shape[0]), "voters": args.voters,
              "n_components": args.n_components, "strategy": args.strategy,
              "train_seconds": round(model.fit_seconds_, 3),
              "solver": model.voter_info_[0]["solver"]}
    if result is not None and "accuracy" in result:
        report.update(accuracy=result["accuracy"], macro_f1=result["macro_f1"],
                      voter_accuracy_mean=sum(result["voter_accuracy"]) / args.voters,
                      predict_seconds=round(result["seconds"], 3))
    print("REPORT " + json.dumps(report, sort_keys=True))
    return report


if __name__ == "__main__":
    main()
