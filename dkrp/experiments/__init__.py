"""The papers' experiments, re-run with one command (``dkrp experiment NAME``).

Each experiment lives in its own module and defines ``EXPERIMENT``, an
:class:`~dkrp.experiments._protocol.Experiment`: its profiles (``quick`` for the
test suite and a first look, ``full`` for the published tables), a ``run``
function yielding one row (a dict) per configuration and repeat, the columns that
make its summary table, and its plots. :func:`run_experiment` runs one and writes
``OUTPUT/NAME/`` (``runs.csv``, ``summary.md``, PNG plots, ``experiment.json``;
``OUTPUT/NAME-quick/`` for the quick profile);
:mod:`~dkrp.experiments.report` turns the committed ``results/*/runs.csv`` into
``results/REPRODUCTION.md`` beside the papers' numbers
(:mod:`~dkrp.experiments.published`).

Modules
    :mod:`~dkrp.experiments._protocol`
        ``Experiment`` and the ``RunContext`` a run receives.
    :mod:`~dkrp.experiments._outputs`
        the CSV, markdown and plot files, built beside the old ones and swapped in.
    :mod:`~dkrp.experiments.report`
        ``REPRODUCTION.md``: the papers' numbers, ours, and a verdict for each.
    one module per experiment
        ``distortion``, ``classification``, ``degree_selection``, ``srf``, ``spe``,
        ``ensemble``, ``rff``.
"""

from __future__ import annotations

import importlib

from ..errors import InvalidInputError

__all__ = ["EXPERIMENTS", "get_experiment", "run_experiment"]

#: name -> (module, one-line summary); modules are imported only when used
EXPERIMENTS = {
    "distortion": ("dkrp.experiments.distortion",
                   "KRP paper Tables 2, 3, 8, 9: distance distortion (eq. 18) of every map"),
    "classification": ("dkrp.experiments.classification",
                       "KRP paper Tables 4, 7, 10: linear SVM on each map's features"),
    "degree-selection": ("dkrp.experiments.degree_selection",
                         "KRP paper Table 11: choosing g by cross-validation (Covertype)"),
    "srf": ("dkrp.experiments.srf",
            "SRF review Tables 1-2: kernel MSE and SVM accuracy of SRF vs its peers (USPS)"),
    "spe": ("dkrp.experiments.spe",
            "Sign Product Embedding: asymmetric sketch/bit classification (Delogne & Jacques)"),
    "ensemble": ("dkrp.experiments.ensemble",
                 "Rost & Zast: majority vote of RFF + linear-SVM voters"),
    "rff": ("dkrp.experiments.rff",
            "Rost & Zast: RFF kernel ridge regression, RFF vs Nystrom vs PCA SVMs, noise"),
}


def get_experiment(name):
    """The :class:`~dkrp.experiments._protocol.Experiment` called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    """
    try:
        module, _ = EXPERIMENTS[name]
    except KeyError:
        raise InvalidInputError(
            f"Unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)} "
            "(`dkrp experiment --list` describes them)."
        ) from None
    return importlib.import_module(module).EXPERIMENT


def run_experiment(name, *, profile="quick", repeats=None, output="results", seed=0,
                   client=None, report=None, overrides=None, tag=None, overwrite=False):
    """Run one experiment and write ``output/name[-tag]/`` (``full``) or
    ``output/name[-tag]-profile/``; see :func:`._outputs.run_and_write`."""
    from ._outputs import run_and_write

    return run_and_write(get_experiment(name), profile=profile, repeats=repeats, output=output,
                         seed=seed, client=client, report=report, overrides=overrides,
                         tag=tag, overwrite=overwrite)
