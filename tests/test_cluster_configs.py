"""The SLURM job script dkrp submits: TLS, one thread per worker process, the environment.

``SLURMCluster(...).job_script()`` needs no SLURM: it starts a scheduler here (bound to
127.0.0.1 in this test) and renders the ``sbatch`` script its workers would run
(tests/test_slurm.py submits such jobs to a real SLURM).
"""

import pytest

pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is the slurm extra")
pytest.importorskip("cryptography", reason="security=True makes temporary TLS certificates")


def test_slurm_job_script_has_tls_one_thread_per_worker_and_the_environment(tmp_path):
    from dask_jobqueue import SLURMCluster

    from dkrp.parallel import slurm_cluster_options

    options = slurm_cluster_options(queue="gpu", account="proj42", walltime="02:00:00",
                                    cores=8, memory="32GiB",
                                    scheduler_options={"host": "127.0.0.1",
                                                       "dashboard_address": "127.0.0.1:0"},
                                    log_directory=str(tmp_path / "logs"),
                                    shared_temp_directory=str(tmp_path))
    with SLURMCluster(**options) as cluster:
        script = cluster.job_script()
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
    assert "#SBATCH -p gpu" in script and "#SBATCH -A proj42" in script
    assert "#SBATCH -t 02:00:00" in script
    # workers speak TLS with the certificates the cluster made
    assert "--tls-ca-file" in script and "--tls-cert" in script and "--tls-key" in script
    assert "tls://127.0.0.1:" in script
    # 8 single-threaded worker processes: --nworkers 8 --nthreads 1
    assert "--nworkers 8" in script and "--nthreads 1" in script
    assert "export DKRP_NUM_THREADS=1" in script
    assert "OMP_NUM_THREADS=1" in script and "OPENBLAS_NUM_THREADS=1" in script
