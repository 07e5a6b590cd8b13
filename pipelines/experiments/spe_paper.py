"""Submit ``dkrp experiment spe``: the Sign Product Embedding paper's experiments.

Kernels against m, asymmetric train/test at m = 5000, and a9a accuracy against bytes
per stored row.

The experiment lives in ``dkrp/experiments/spe.py``; this script only submits it, with
the options of ``dkrp experiment`` (``--profile quick|full``, ``--repeats``, ``--set
KEY=JSON``, ``--output``, ``--scheduler ADDRESS`` / ``--scheduler-file`` for a remote
cluster, ``--n-workers`` for an embedded one, ``--local`` for none)::

    python pipelines/experiments/spe_paper.py --profile full --scheduler tls://scheduler:8786
    python pipelines/experiments/spe_paper.py --profile quick --local --output /tmp/results

writes OUTPUT/spe/ (OUTPUT/spe-quick/ for --profile quick; runs.csv, summary.md, PNG plots,
experiment.json; an existing result needs --overwrite); data come from
DKRP_DATA_DIR.
"""

from __future__ import annotations

import sys


def main(argv=None):
    from dkrp.cli import main as dkrp

    dkrp(["experiment", "spe", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
