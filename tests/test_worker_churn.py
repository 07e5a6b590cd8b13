"""Jobs that ride out worker churn before their first task (issue 35, item 1).

A job asks every worker for its memory before it starts (:func:`dkrp.jobs.task_budget`).
A worker that dies meanwhile (preempted, killed) used to stop the job with a false
diagnosis ("give workers more memory"). Now only the nannies' memory restarts count
against memory; any other loss is waited for. The faults come from importing
``startup_fault`` on the workers (tests/startup_fault.py), as the job imports the
projector's module there.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import numpy as np
import pytest
from distributed import Client

from dkrp.errors import ClusterError
from dkrp.jobs import task_budget
from dkrp.parallel import start_local_cluster

pytestmark = pytest.mark.cluster


def _cluster(tmp_path, mode, memory_limit="2GiB"):
    env = {"DKRP_STARTUP_FAULT": str(tmp_path), "DKRP_STARTUP_FAULT_MODE": mode}
    return start_local_cluster(n_workers=2, threads_per_worker=1, memory_limit=memory_limit,
                               env=env)


def test_a_worker_lost_before_the_first_task_is_waited_for(tmp_path, caplog):
    with _cluster(tmp_path, "exit") as cluster, Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=120)
        with caplog.at_level(logging.WARNING, logger="dkrp.jobs"):
            budget = task_budget(c, "startup_fault", wait=120)
        assert (tmp_path / "exited").exists(), "no worker died: the test tested nothing"
        # the replacement answered: a budget of the 2 GiB workers, not a memory error
        assert budget is not None and 0 < budget < 0.8 * 2 * 2**30
        assert "stopped answering before running any task (not for memory)" in caplog.text
        assert len(c.scheduler_info(n_workers=-1)["workers"]) == 2


def test_a_lost_worker_not_replaced_in_time_is_a_cluster_error(tmp_path):
    with _cluster(tmp_path, "exit") as cluster, Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=120)
        with pytest.raises(ClusterError, match=r"stopped answering before running any task "
                           r"\(.*\), and after 0 s the cluster has [012] of its 2 workers "
                           r"answering\. Start more workers, or wait longer \(dask config "
                           r"dkrp\.worker-wait"):
            task_budget(c, "startup_fault", wait=0)


def test_workers_restarted_for_memory_again_and_again_are_a_memory_error(tmp_path):
    with _cluster(tmp_path, "memory", memory_limit="300MiB") as cluster, \
            Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=120)
        with pytest.raises(MemoryError, match=r"^Workers were restarted [2-9] times for "
                           r"exceeding their memory limit \(300\.0 MiB\) before running any "
                           r"task .*Give workers more memory"):
            task_budget(c, "startup_fault", wait=120)


def test_a_worker_killed_while_the_hyperplanes_are_checked_is_not_a_mismatch(caplog):
    # the worker is stopped (SIGSTOP) so that it cannot answer, then killed while the
    # check waits for it: the others are checked and the job goes on (its tasks verify
    # the spec's checksum wherever they run)
    from dkrp import PolynomialRandomProjection
    from dkrp.parallel import check_workers

    krp = PolynomialRandomProjection(n_components=10, random_state=0).fit(np.ones((3, 5)))
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=120)
        (victim, pid), (survivor, _) = sorted(c.run(os.getpid).items())
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
        with caplog.at_level(logging.WARNING, logger="dkrp.parallel"):
            checked = check_workers(c, krp)
        assert checked == {survivor: krp.spec_checksum_}
        assert (f"worker(s) {victim} stopped answering while the hyperplanes were checked; "
                "1 other(s) checked") in caplog.text


def test_the_hyperplane_check_waits_for_a_cluster_whose_workers_are_all_gone():
    # a job submitted while every worker is being restarted (killed at start-up,
    # preempted) waits for one instead of failing at once: CI's chaos test failed with
    # "The cluster has no workers to check." when the kills caught that moment
    from dkrp import PolynomialRandomProjection
    from dkrp.parallel import check_workers

    krp = PolynomialRandomProjection(n_components=10, random_state=0).fit(np.ones((3, 5)))
    with start_local_cluster(n_workers=0, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as c:
        with pytest.raises(ClusterError, match=r"^The cluster has no workers to check \(waited "
                                               r"0\.5 s for one\)\. Start workers, or check "):
            check_workers(c, krp, wait=0.5)
        threading.Timer(1.0, cluster.scale, (1,)).start()
        checked = check_workers(c, krp, wait=60)
    assert list(checked.values()) == [krp.spec_checksum_]
