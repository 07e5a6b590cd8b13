"""Featurize on a SLURM cluster with dask-jobqueue, TLS on.

    pip install "dkrp" dask-jobqueue   # the same numpy on login and compute nodes
    python cluster/slurm.py /shared/covtype.zarr /shared/covtype-krp.zarr --jobs 8

``security=True`` makes dask-jobqueue create temporary TLS certificates, so the
scheduler listens on ``tls://`` and only this client and its workers can talk to it.
The output store must be on a file system every node sees.
"""

from __future__ import annotations

import argparse
import os


def cluster_options(queue: str | None, account: str | None, walltime: str, **overrides) -> dict:
    """Keyword arguments of ``dask_jobqueue.SLURMCluster`` for dkrp jobs (tested).

    One single-threaded worker process per core (DKRP_NUM_THREADS=1 and the BLAS
    pools pinned to one thread, so tasks never oversubscribe a node), TLS on.
    """
    options = dict(
        queue=queue,
        account=account,
        cores=8,                      # threads per job = processes * threads
        processes=8,                  # one single-threaded worker process per core
        memory="32GiB",
        walltime=walltime,
        security=True,                # temporary TLS certificates; tls:// everywhere
        # the certificates must be on a file system the compute nodes see
        shared_temp_directory=os.path.expanduser("~/.dkrp-dask-tls"),
        job_script_prologue=[
            "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1",
            "export DKRP_NUM_THREADS=1",
        ],
        log_directory="dask-logs",
    )
    options.update(overrides)
    return options


def make_cluster(jobs: int, queue: str | None, account: str | None, walltime: str):
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(**cluster_options(queue, account, walltime))
    cluster.scale(jobs=jobs)
    return cluster


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("output")
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--queue")
    p.add_argument("--account")
    p.add_argument("--walltime", default="01:00:00")
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    from distributed import Client

    from dkrp import PolynomialRandomProjection, featurize_to_store

    with make_cluster(args.jobs, args.queue, args.account, args.walltime) as cluster, \
            Client(cluster) as client:
        assert cluster.scheduler_address.startswith("tls://")
        client.wait_for_workers(1)
        krp = PolynomialRandomProjection(n_components=args.n_components, random_state=args.seed)
        # opens the dataset, fits, checks every worker regenerates the same hyperplanes
        # (or stops), then writes the resumable feature store
        result = featurize_to_store(args.dataset, args.output, krp, client=client)
        print(result.summary)


if __name__ == "__main__":
    main()
