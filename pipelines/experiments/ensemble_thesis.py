"""Submit ``dkrp experiment ensemble``: the thesis' RFF voting ensemble.

Pooled MNIST and Fashion-MNIST (Rost & Zast 2023, section 5.4): accuracy against RFF
per voter, against the number of voters, and against one RFF-SVM of the same size.

The experiment lives in ``dkrp/experiments/ensemble.py``; this script only submits it, with
the options of ``dkrp experiment`` (``--profile quick|full``, ``--repeats``, ``--set
KEY=JSON``, ``--output``, ``--scheduler ADDRESS`` / ``--scheduler-file`` for a remote
cluster, ``--n-workers`` for an embedded one, ``--local`` for none)::

    python pipelines/experiments/ensemble_thesis.py --profile full --scheduler tls://scheduler:8786
    python pipelines/experiments/ensemble_thesis.py --profile quick --local --output /tmp/results

writes OUTPUT/ensemble/ (OUTPUT/ensemble-quick/ for --profile quick; runs.csv,
summary.md, PNG plots, experiment.json; an existing result needs --overwrite); data come
from DKRP_DATA_DIR.
"""

from __future__ import annotations

import sys


def main(argv=None):
    from dkrp.cli import main as dkrp

    dkrp(["experiment", "ensemble", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
