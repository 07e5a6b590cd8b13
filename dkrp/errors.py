"""The exception classes of dkrp, in one place.

Every error dkrp raises on purpose is a :class:`DkrpError`, so one ``except DkrpError``
catches them all, and anything else escaping dkrp is a bug. Each class also keeps the
builtin base it had before :class:`DkrpError` existed, so code that catches
``ValueError``, ``RuntimeError``, ``FileNotFoundError`` or ``MemoryError`` keeps working
(scikit-learn's convention: a bad value is a ``ValueError``). The classes are
importable without importing anything heavy, so the CLI can classify errors cheaply,
and they pickle (they may cross process boundaries on a cluster).

The hierarchy (builtin bases in parentheses)::

    DkrpError (Exception)
    ├── InvalidInputError (ValueError)          bad data, bad parameter value, bad file
    │   ├── PartitionInputError                 ... in one partition of a dask input
    │   └── InputChangedError (RuntimeError)    an input file changed while it was read
    ├── InvalidTypeError (TypeError)            an argument of the wrong type
    ├── SpecError (ValueError)                  a malformed or edited projector spec
    ├── StoreError (RuntimeError)               a store cannot be written or read as asked
    │   ├── FeatureStoreError
    │   │   ├── FeatureStoreMismatchError (ValueError)
    │   │   └── PartitionError                  writing one partition failed
    │   ├── ChunkError (ValueError)             a chunk is missing or fails its checksum
    │   └── CorruptStoreError (ValueError)      a dataset store's layout is corrupt
    ├── CapacityError (MemoryError)             memory or disk cannot hold the job
    ├── MissingDependencyError (ImportError)    an optional package is not installed
    ├── DatasetNotFoundError (FileNotFoundError)
    ├── ClusterError (RuntimeError)             the cluster lost its workers
    └── VoterError (RuntimeError)               training one ensemble voter failed

Errors dkrp does not raise on purpose stay builtin: internal consistency checks of
states that cannot happen (``RuntimeError``, ``NotImplementedError``), and errors of
the operating system (``OSError`` and its subclasses: a missing file, a full disk)
that dkrp lets through with their file name.

A message that tells the reader to pass a parameter is a :class:`Message` naming it
with a :class:`Param`: as a string it says the Python spelling (``chunk_rows=512``),
and the command line renders the same message with the command's flags
(``--chunk-rows 512``), so neither shows the other's names.

Examples
--------
>>> import dkrp
>>> try:
...     dkrp.RandomFourierFeatures(n_components=0).fit_n_features(3)
... except dkrp.DkrpError as exc:
...     print(type(exc).__name__, isinstance(exc, ValueError))
InvalidInputError True
"""

from __future__ import annotations

__all__ = [
    "Message",
    "Param",
    "DkrpError",
    "InvalidInputError",
    "InvalidTypeError",
    "InputChangedError",
    "CapacityError",
    "MissingDependencyError",
    "DatasetNotFoundError",
    "CorruptStoreError",
    "SpecError",
    "StoreError",
    "FeatureStoreError",
    "FeatureStoreMismatchError",
    "PartitionError",
    "PartitionInputError",
    "ChunkError",
    "ClusterError",
    "VoterError",
]


class Param:
    """A parameter named in a :class:`Message`.

    Parameters
    ----------
    name : str
        The Python parameter, e.g. ``"chunk_rows"``.
    value : object, optional
        The value to pass; omitted, the message names the parameter alone.
    metavar : str, optional
        A placeholder shown instead of a value: ``retries=N`` (``--retries N``).
    command : str, optional
        The command whose flag it is, when not the one running: an incomplete dataset
        store says ``dkrp ingest``'s ``--overwrite`` to whichever command opened it.

    Examples
    --------
    >>> Param("chunk_rows", 512).python()
    'chunk_rows=512'
    >>> Param("scale_rows", "unit").python()
    "scale_rows='unit'"
    """

    _NAME_ONLY = object()

    def __init__(self, name, value=_NAME_ONLY, *, metavar=None, command=None):
        self.name = str(name)
        self.value = value
        self.metavar = metavar
        self.command = command

    @property
    def has_value(self) -> bool:
        """Whether the message gives a value (or a placeholder), not the name alone."""
        return self.metavar is not None or self.value is not Param._NAME_ONLY

    def python(self) -> str:
        """The Python spelling: ``name``, ``name=value`` (its repr) or ``name=METAVAR``."""
        if self.metavar is not None:
            return f"{self.name}={self.metavar}"
        return self.name if not self.has_value else f"{self.name}={self.value!r}"

    def __reduce__(self):
        value = self.value if self.value is not Param._NAME_ONLY else None
        return (_rebuild_param, (self.name, self.has_value, value, self.metavar, self.command))

    def __repr__(self):
        return f"Param({self.python()})"


def _rebuild_param(name, has_value, value, metavar, command):
    if has_value and metavar is None:
        return Param(name, value, command=command)
    return Param(name, metavar=metavar, command=command)


class Message(str):
    """A message that names parameters: the Python wording, with its parts kept.

    The string is the message as the Python API says it, each :class:`Param`
    spelled ``name=value``. The command line renders the same parts with
    :meth:`render`, spelling each parameter as the command's flag. A nested message
    is a clause: where one of its parameters has no flag on the command, the clause
    says ``cli`` instead (``""``: it is left out), so advice about a Python-only
    parameter (``allow_incomplete=True``) is not shown to the command line.

    Parameters
    ----------
    template : str
        A :meth:`str.format` template with positional fields (``{}``, ``{:.3g}``).
    *args
        The fields: :class:`Param`, :class:`Message`, or any value (formatted as
        :meth:`str.format` would).
    cli : str, optional
        What a clause says on a command line that lacks one of its parameters
        (default: the enclosing message decides; at the top, the Python spelling
        is kept).
    python : str, optional
        What the clause says from Python instead, where its parameter is the command
        line's alone (``--method spe``; from Python, a class is passed).

    Examples
    --------
    >>> m = Message("pass {} to replace it", Param("overwrite", True))
    >>> m
    'pass overwrite=True to replace it'
    >>> m.render(lambda p: "--overwrite")
    'pass --overwrite to replace it'
    """

    def __new__(cls, template, *args, cli=None, python=None, _sep=None):
        parts = tuple(args)
        if python is not None:
            text = python
        elif _sep is None:
            text = template.format(*(_python(a) for a in parts))
        else:
            text = _sep.join(str(_python(a)) for a in parts)
        self = super().__new__(cls, text)
        self.template, self.parts, self.cli, self._sep = template, parts, cli, _sep
        self._python = python
        return self

    @classmethod
    def join(cls, sep, parts):
        """``sep.join(parts)``, keeping the parts; on a command line, parts that name a
        parameter it lacks are left out.

        Examples
        --------
        >>> Message.join(", ", [Param("degree"), Param("random_state")])
        'degree, random_state'
        """
        return cls(None, *parts, _sep=str(sep))

    def params(self):
        """Every :class:`Param` the message names, nested clauses included."""
        for part in self.parts:
            if isinstance(part, Param):
                yield part
            elif isinstance(part, Message):
                yield from part.params()

    def render(self, flag) -> str:
        """The message with each parameter spelled by ``flag``.

        Parameters
        ----------
        flag : callable
            ``flag(param)`` returns the spelling of a :class:`Param` (a command's
            flag), or None when there is no such flag.

        Returns
        -------
        str
            Clauses naming a parameter without a flag say their ``cli`` text; such a
            parameter outside any clause keeps its Python spelling.
        """
        return self._render(flag, top=True)

    def _render(self, flag, top=False):
        rendered = []
        for part in self.parts:
            if isinstance(part, Param):
                text = flag(part)
            elif isinstance(part, Message):
                text = part._render(flag)
            else:
                rendered.append(part)
                continue
            if text is None:
                if self._sep is not None:
                    continue
                if not top:
                    return self.cli
                text = _python(part)
            rendered.append(text)
        if self._sep is not None:
            return self._sep.join(str(t) for t in rendered)
        return self.template.format(*rendered)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_message,
                (self.template, self.parts, self.cli, self._python, self._sep))


def _python(part):
    if isinstance(part, Param):
        return part.python()
    if isinstance(part, Message):
        return str(part)
    return part


def _rebuild_message(template, parts, cli, python, sep):
    return Message(template, *parts, cli=cli, python=python, _sep=sep)


def render_message(exc) -> object:
    """The message an exception was made with: a :class:`Message` stays one."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Message) else str(exc)


class DkrpError(Exception):
    """The root of every exception dkrp raises on purpose: a user's mistake (bad
    input, bad parameter, bad file) or a job the resources cannot run, not a bug."""


class InvalidInputError(DkrpError, ValueError):
    """Bad data or a bad parameter value: NaN/inf, the wrong shape or feature count, a
    value out of range, a malformed input file.

    A ``ValueError`` (scikit-learn's convention for such errors); scikit-learn's own
    input checks inside dkrp's entry points are re-raised as this, same message.
    """


class InvalidTypeError(DkrpError, TypeError):
    """An argument of the wrong type (a ``TypeError``), e.g. sparse input where dense
    input is required."""


class InputChangedError(InvalidInputError, RuntimeError):
    """An input file changed while dkrp was reading it (also a ``RuntimeError``, what
    it raised before)."""


class CapacityError(DkrpError, MemoryError):
    """Memory or disk cannot hold the job: a task larger than a worker's memory limit,
    workers that run out of memory before any task, an output larger than the free disk.

    A ``MemoryError``, what dkrp raised for these before. Nothing was started (or the
    message says what was left); the message names what to change.
    """


class MissingDependencyError(DkrpError, ImportError):
    """An optional package a feature needs is not installed; the message says what to
    ``pip install``."""


class DatasetNotFoundError(DkrpError, FileNotFoundError):
    """A dataset file is not where dkrp looks for it (and downloading was not allowed)."""


class SpecError(DkrpError, ValueError):
    """A projector spec is malformed, or rebuilds other hyperplanes than it records."""


class StoreError(DkrpError, RuntimeError):
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
        self.problems = tuple(p if isinstance(p, Message) else str(p) for p in problems)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_mismatch_error, (render_message(self), self.problems))


def _rebuild_mismatch_error(message, problems):
    return FeatureStoreMismatchError(message, problems=problems)


class PartitionInputError(InvalidInputError):
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
        return (_rebuild_partition_input_error, (render_message(self), self.partition))


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
                (render_message(self), self.partition, self.rows, self.attempts))


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
                (render_message(self), self.store, self.array, self.chunk, self.problem))


def _rebuild_chunk_error(message, store, array, chunk, problem):
    return ChunkError(message, store=store, array=array, chunk=chunk, problem=problem)


class CorruptStoreError(StoreError, ValueError):
    """A dkrp store's metadata or layout is corrupt (a member missing, an index out of
    range): re-create it. Also a ``ValueError``, what it was before."""


class ClusterError(DkrpError, RuntimeError):
    """The cluster cannot run the job: its workers are gone and none replaced them."""


class VoterError(DkrpError, RuntimeError):
    """Training one voter of an ensemble failed: its task raised, or killed its worker.

    The original exception (e.g. ``OSError``, ``distributed.KilledWorker``) is the
    ``__cause__``; the message names the voter (and its row block for the partition
    strategy), the attempts, the original error and, when the finished voters were
    kept (``fit(checkpoint=...)``, ``dkrp train``), that the same job resumes.

    Attributes
    ----------
    voter : int
        Index of the voter.
    attempts : int
        How many times the voter's task ran before giving up.
    """

    def __init__(self, message, *, voter, attempts):
        super().__init__(message)
        self.voter = int(voter)
        self.attempts = int(attempts)

    def __reduce__(self):  # picklable (it may cross process boundaries)
        return (_rebuild_voter_error, (render_message(self), self.voter, self.attempts))


def _rebuild_voter_error(message, voter, attempts):
    return VoterError(message, voter=voter, attempts=attempts)
