"""What this process may use: CPUs and memory, from a batch job's allocation when inside one.

Inside a SLURM job, the job's allocation is what dkrp may use, not the node: a job with
``--cpus-per-task=4 --mem=16G`` on a 64-core node must not start 64 workers, nor give
them memory limits that add up to the node's. Without cgroups (``TaskPlugin=task/none``,
as on many sites and on ``cluster/slurm/local_slurm.sh``'s cluster) nothing else tells a
process its share: ``os.sched_getaffinity`` and ``/proc/meminfo`` report the whole node.
So the allocation is read from the variables SLURM sets in every job:

* CPUs: ``SLURM_CPUS_PER_TASK``; else, for a job of one task (the batch script of
  ``sbatch`` without ``--ntasks``), ``SLURM_CPUS_ON_NODE``.
* Memory: ``SLURM_MEM_PER_NODE`` (``--mem``), else ``SLURM_MEM_PER_CPU`` (``--mem-per-cpu``)
  times the task's CPUs; both in MiB. ``0`` (``--mem=0``: the whole node) is no limit.

Each is capped by what the operating system says (CPU affinity; the memory limit
distributed reads, which accounts for cgroups and rlimits).
"""

from __future__ import annotations

import os

__all__ = ["available_cpus", "available_memory", "slurm_cpus", "slurm_memory"]


def _positive(environ, name) -> int | None:
    value = environ.get(name, "")
    try:
        number = int(value)
    except ValueError:  # unset, or a form dkrp does not read (e.g. "2(x3)")
        return None
    return number if number > 0 else None


def slurm_cpus(environ=None) -> int | None:
    """CPUs of this task's SLURM allocation, or None outside a job (or when unknown).

    Parameters
    ----------
    environ : mapping, optional
        Default ``os.environ``.

    Returns
    -------
    int or None
    """
    environ = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return None
    per_task = _positive(environ, "SLURM_CPUS_PER_TASK")
    if per_task is not None:
        return per_task
    # SLURM_CPUS_ON_NODE counts every task's CPUs on the node: one task's only when it is
    # the job's only task (SLURM_NTASKS is unset for sbatch without --ntasks)
    if environ.get("SLURM_NTASKS", "1") == "1":
        return _positive(environ, "SLURM_CPUS_ON_NODE")
    return None


def slurm_memory(environ=None) -> int | None:
    """Bytes of this task's SLURM memory allocation, or None outside a job (or no limit).

    Parameters
    ----------
    environ : mapping, optional
        Default ``os.environ``.

    Returns
    -------
    int or None
    """
    environ = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return None
    per_node = _positive(environ, "SLURM_MEM_PER_NODE")
    if per_node is not None:
        return per_node * 2**20
    per_cpu = _positive(environ, "SLURM_MEM_PER_CPU")
    cpus = slurm_cpus(environ)
    if per_cpu is not None and cpus is not None:
        return per_cpu * cpus * 2**20
    return None


def _affinity_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def available_cpus() -> int:
    """CPUs this process may use: its CPU affinity, capped by its SLURM allocation.

    Returns
    -------
    int
        At least 1.
    """
    cpus = _affinity_cpus()
    allocated = slurm_cpus()
    return cpus if allocated is None else max(1, min(cpus, allocated))


def available_memory() -> int | None:
    """Bytes this process may use when something limits it below the machine's memory
    (a SLURM allocation, capped by the cgroup/rlimit limit distributed reads), else None.

    Returns
    -------
    int or None
        None: no allocation; distributed's ``memory_limit="auto"`` sizes workers itself.
    """
    allocated = slurm_memory()
    if allocated is None:
        return None
    from distributed.system import MEMORY_LIMIT

    return min(allocated, MEMORY_LIMIT)
