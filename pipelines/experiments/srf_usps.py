"""Submit ``dkrp experiment srf``: the SRF review's Tables 1-2 (USPS).

USPS kernel MSE against D for SRF, Random Maclaurin and TensorSketch; a linear SVM on
SRF features against the exact polynomial-kernel SVC.

The experiment lives in ``dkrp/experiments/srf.py``; this script only submits it, with
the options of ``dkrp experiment`` (``--profile quick|full``, ``--repeats``, ``--set
KEY=JSON``, ``--output``, ``--scheduler ADDRESS`` / ``--scheduler-file`` for a remote
cluster, ``--n-workers`` for an embedded one, ``--local`` for none)::

    python pipelines/experiments/srf_usps.py --profile full --scheduler tls://scheduler:8786
    python pipelines/experiments/srf_usps.py --profile quick --local --output /tmp/results

writes OUTPUT/srf/ (OUTPUT/srf-quick/ for --profile quick; runs.csv, summary.md, PNG plots,
experiment.json; an existing result needs --overwrite); data come from
DKRP_DATA_DIR.
"""

from __future__ import annotations

import sys


def main(argv=None):
    from dkrp.cli import main as dkrp

    dkrp(["experiment", "srf", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
