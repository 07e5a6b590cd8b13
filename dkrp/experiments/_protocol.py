"""What an experiment is (:class:`Experiment`) and what a run receives (:class:`RunContext`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..evaluation import timer  # one timer for protocols and experiments

__all__ = ["PROFILES", "Experiment", "RunContext", "timer"]

PROFILES = ("quick", "full")


@dataclass(frozen=True)
class Experiment:
    """One of the papers' experiments.

    Parameters
    ----------
    name : str
        The name ``dkrp experiment`` takes (and the output folder's).
    title : str
        One line: which paper, which tables.
    profiles : mapping of str to dict
        ``"quick"`` (small slices, minutes on 2 cores, run by the test suite) and
        ``"full"`` (the published configuration): JSON-able parameters handed to ``run``
        as ``ctx.params``; ``"repeats"`` in them is the default number of repeats.
    run : callable
        ``run(ctx)`` yields one row (a flat dict of numbers and strings) per configuration
        and repeat: the configuration columns, ``seed``, and the measured metrics.
    config_columns : tuple of str
        The columns that identify a configuration (the summary table's rows); a column a
        run never writes is skipped.
    metric_columns : tuple of str
        The measured columns summarised as mean ± std over repeats.
    plot : callable, optional
        ``plot(frame, folder) -> list of paths``: PNG figures from the runs (a pandas
        ``DataFrame``), drawn with matplotlib's Agg backend.
    notes : str
        What a reader of the results needs (data substitutions, splits, subsampling).
    tables : callable, optional
        ``tables(frame) -> str``: markdown appended to ``summary.md`` after the main table
        (a comparison the per-configuration table cannot show, e.g. which degree wins).
    """

    name: str
    title: str
    profiles: Mapping[str, dict]
    run: Callable[[RunContext], Iterable[dict]]
    config_columns: tuple = ()
    metric_columns: tuple = ()
    plot: Callable | None = None
    notes: str = ""
    tables: Callable | None = None

    def params(self, profile, overrides=None) -> dict:
        """The parameters of ``profile`` with ``overrides`` applied (unknown keys refused)."""
        if profile not in self.profiles:
            raise InvalidInputError(
                f"Experiment {self.name!r} has no profile {profile!r}; "
                f"choose one of {', '.join(self.profiles)}."
            )
        params = dict(self.profiles[profile])
        for key, value in (overrides or {}).items():
            if key not in params:
                raise InvalidInputError(
                    f"Experiment {self.name!r} has no parameter {key!r}; "
                    f"its parameters are {', '.join(sorted(params))}."
                )
            params[key] = value
        return params


@dataclass
class RunContext:
    """What ``Experiment.run`` receives.

    Attributes
    ----------
    params : dict
        The profile's parameters (after ``--set`` overrides).
    profile : str
    repeats : int
        How many seeds each configuration runs with: ``seeds()``.
    seed : int
        The first seed.
    client : distributed.Client or None
        The Dask cluster featurization runs on (None: in this process).
    report : callable
        ``report(line)``: a progress line for the user (the CLI prints it on stderr).
    """

    params: dict
    profile: str = "quick"
    repeats: int = 1
    seed: int = 0
    client: object = None
    report: Callable[[str], None] = field(default=lambda line: None)

    def seeds(self):
        """The seeds of the repeats: ``seed, seed + 1, ..., seed + repeats - 1``."""
        return range(self.seed, self.seed + self.repeats)

    def transform(self, projector, X):
        """``projector.transform(X)`` and its wall-clock seconds.

        On a cluster (``client`` set) dense inputs are featurized there, in row blocks
        (:func:`dkrp.featurize`'s path: every worker rebuilds the map from its spec),
        and gathered; sparse inputs and runs without a cluster transform in this process.
        """
        import scipy.sparse as sp

        from ..base import BaseProjector

        if self.client is None or sp.issparse(X) or not isinstance(projector, BaseProjector):
            projector.transform(X[:1])  # compile and allocate once: the timing is the mapping
            with timer() as t:
                Z = projector.transform(X)
            return Z, t["seconds"]
        import dask.array as da

        workers = max(1, len(self.client.scheduler_info()["workers"]))
        rows = max(1, -(-X.shape[0] // (2 * workers)))
        with timer() as t:
            dX = da.from_array(np.asarray(X), chunks=(rows, X.shape[1]))
            Z = self.client.compute(projector.transform(dX)).result()
        return Z, t["seconds"]
