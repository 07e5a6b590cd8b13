"""Inside a SLURM job dkrp sizes threads and memory from the job's allocation, not the node.

The variables are the ones SLURM sets in a job (``cluster/slurm/local_slurm.sh``'s cluster
printed them for ``sbatch --cpus-per-task=1 --mem=1G``); tests/test_slurm.py checks the
same in a real job.
"""

import pytest

from dkrp import _resources
from dkrp._threading import num_threads

SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_NTASKS",
                   "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "DKRP_NUM_THREADS")


@pytest.fixture
def job(monkeypatch):
    """Set the SLURM variables given (and clear the others), as in a job."""
    for name in SLURM_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def enter(**variables):
        for name, value in variables.items():
            monkeypatch.setenv(name, str(value))

    return enter


@pytest.mark.parametrize("variables, cpus, memory", [
    ({}, None, None),  # not in a job
    # a job's variables without SLURM_JOB_ID are someone else's: not a job
    ({"SLURM_CPUS_PER_TASK": 1, "SLURM_MEM_PER_NODE": 1024}, None, None),
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_PER_TASK": 3, "SLURM_CPUS_ON_NODE": 6,
      "SLURM_MEM_PER_NODE": 1024}, 3, 2**30),
    # sbatch without --cpus-per-task: the batch script's CPUs on the node
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_ON_NODE": 2}, 2, None),
    # several tasks: the node's CPUs are not this task's
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_ON_NODE": 8, "SLURM_NTASKS": 4}, None, None),
    # --mem-per-cpu: times the task's CPUs
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_PER_TASK": 2, "SLURM_MEM_PER_CPU": 500}, 2,
     1000 * 2**20),
    # --mem=0 is the whole node: no limit of the job's own
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_PER_TASK": 2, "SLURM_MEM_PER_NODE": 0}, 2, None),
    ({"SLURM_JOB_ID": 7, "SLURM_CPUS_PER_TASK": "", "SLURM_CPUS_ON_NODE": "2(x3)"}, None,
     None),
])
def test_the_allocation_is_read_from_slurm_variables(job, variables, cpus, memory):
    job(**variables)
    assert _resources.slurm_cpus() == cpus
    assert _resources.slurm_memory() == memory


def test_threads_and_the_embedded_clusters_memory_come_from_the_allocation(job, monkeypatch):
    machine = _resources.available_cpus()
    job(SLURM_JOB_ID=7, SLURM_CPUS_PER_TASK=1, SLURM_MEM_PER_NODE=700)
    assert _resources.available_cpus() == 1
    assert num_threads() == 1
    assert _resources.available_memory() == 700 * 2**20
    # never more than the process may use
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(machine + 5))
    assert _resources.available_cpus() == machine
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")

    from distributed import Client

    from dkrp.parallel import start_local_cluster

    # in-process (the fast set's cluster; a variable named `client` would read as
    # conftest's worker-process fixture); worker processes in a real job: test_slurm.py
    with start_local_cluster(processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        (worker,) = in_process.scheduler_info(n_workers=-1)["workers"].values()
        assert worker["memory_limit"] == 700 * 2**20
        assert worker["nthreads"] == 1
