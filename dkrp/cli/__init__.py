"""The ``dkrp`` command (also ``dask dkrp`` and ``python -m dkrp``): ingest, featurize,
info, verify, methods, demo, train, predict, experiment.

The only place in dkrp that prints. User errors (missing files, bad parameters,
a store made by another run, NaN in the input) become ``click.ClickException``:
one line saying what is wrong and what to do, no traceback.

With no ``--scheduler``/``--scheduler-file`` (and no ``scheduler-address`` in
``dask.config``) the commands that compute start an embedded ``LocalCluster`` of
worker processes sized to the machine, every socket bound to 127.0.0.1.

Modules
    :mod:`~dkrp.cli._group`
        the ``main`` click group, error wording, cluster options and client.
    :mod:`~dkrp.cli._confirm`
        ``--confirm-above`` and ``--yes``: big jobs announced, and asked about, first.
    :mod:`~dkrp.cli.stores`
        ``ingest``, ``info``, ``verify``.
    :mod:`~dkrp.cli.feature_maps`
        ``featurize``, ``methods``.
    :mod:`~dkrp.cli.models`
        ``train``, ``predict``.
    :mod:`~dkrp.cli.comparison`
        ``demo``.
    :mod:`~dkrp.cli.experiments`
        ``experiment`` (the papers' tables, and ``results/REPRODUCTION.md``).

Each command module registers its commands on ``main`` when imported; this
package imports them all, so ``dkrp.cli:main`` (the console script and the
``dask dkrp`` entry point) has every command.
"""

from __future__ import annotations

from . import comparison, experiments, models, stores  # noqa: F401 - importing registers the commands
from ._group import main
from .feature_maps import OPTION_FLAGS as OPTION_FLAGS
from .feature_maps import featurize as featurize
from .feature_maps import method_flags as method_flags

__all__ = ["main"]
