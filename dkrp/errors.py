"""The exception classes of dkrp, in one place.

Every error dkrp raises on purpose is one of these (or a plain ``ValueError`` /
``FileNotFoundError`` with scikit-learn's wording for bad arguments). They are
importable without importing anything heavy, so the CLI can classify errors
cheaply, and they pickle (they may cross process boundaries on a cluster).
"""

from __future__ import annotations

__all__ = [
    "SpecError",
    "StoreError",
    "FeatureStoreError",
    "FeatureStoreMismatchError",
    "PartitionError",
    "PartitionInputError",
    "ChunkError",
    "ClusterError",
]


class SpecError(ValueError):
    """A projector spec is malformed, or rebuilds other hyperplanes than it records."""


class StoreError(RuntimeError):
    """A dkrp store (dataset or features) cannot be written or read as asked."""


class FeatureStoreError(StoreError):
    """A feature store cannot be written or read as asked."""


class FeatureStoreMismatchError(FeatureStoreError, ValueError):
    """An existing store was made by another projector, input, dtype or shape.

    Attributes
    ----------
    problems : tuple of str
        Each difference between the store and this run, as the message names it (empty
        when the message says it otherwise).
    """

    def __init__(self, message, *, problems=()):
        super().__init__(message)
        self.problems = tuple(str(p) for p in problems)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_mismatch_error, (str(self), self.problems))


def _rebuild_mismatch_error(message, problems):
    return FeatureStoreMismatchError(message, problems=problems)


class PartitionInputError(ValueError):
    """One partition (row block) of the input is bad: NaN/inf, the wrong shape, or
    features too large for the store's dtype (``--store-dtype float16``).

    Retrying cannot help; the message names the partition and the global row.

    Attributes
    ----------
    partition : int or None
        Index of the row block.
    """

    def __init__(self, message, *, partition=None):
        super().__init__(message)
        self.partition = None if partition is None else int(partition)

    def __reduce__(self):
        return (_rebuild_partition_input_error, (str(self), self.partition))


def _rebuild_partition_input_error(message, partition):
    return PartitionInputError(message, partition=partition)


class PartitionError(FeatureStoreError):
    """Writing one partition (row block) failed: its task raised, or killed its worker.

    The original exception (e.g. ``OSError``, ``distributed.KilledWorker``) is the
    ``__cause__``; the message names the partition, its rows, the original error and
    the number of attempts. The store is left incomplete with finished chunks intact,
    so running the same job again resumes it.

    Attributes
    ----------
    partition : int
        Index of the row block (and of the output chunk).
    rows : tuple of int
        First and last global row of the partition.
    attempts : int
        How many times the partition's task ran before giving up.
    """

    def __init__(self, message, *, partition, rows, attempts):
        super().__init__(message)
        self.partition = int(partition)
        self.rows = (int(rows[0]), int(rows[1]))
        self.attempts = int(attempts)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_partition_error,
                (str(self), self.partition, self.rows, self.attempts))


def _rebuild_partition_error(message, partition, rows, attempts):
    return PartitionError(message, partition=partition, rows=rows, attempts=attempts)


class ChunkError(StoreError, ValueError):
    """A chunk of a dkrp store is missing or fails its checksum.

    The message names the store, the array, the chunk (and its file) and what to do
    (``dkrp verify STORE --repair`` for a feature store, re-ingesting for a dataset
    store).

    Attributes
    ----------
    store : str
        The store directory.
    array : str
        The array inside the store, e.g. ``"Z"`` or ``"X/data"``.
    chunk : tuple of int
        The chunk's grid coordinates.
    problem : {"missing", "corrupt"}
    """

    def __init__(self, message, *, store, array, chunk, problem):
        super().__init__(message)
        self.store = str(store)
        self.array = str(array)
        self.chunk = tuple(int(c) for c in chunk)
        self.problem = str(problem)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_chunk_error,
                (str(self), self.store, self.array, self.chunk, self.problem))


def _rebuild_chunk_error(message, store, array, chunk, problem):
    return ChunkError(message, store=store, array=array, chunk=chunk, problem=problem)


class ClusterError(RuntimeError):
    """The cluster cannot run the job: its workers are gone and none replaced them."""
