"""The numbers the papers publish, as data: ``published.csv`` and its loader.

Every value a seed paper prints in a table or in its text, for an experiment dkrp can
run, is one row of ``published.csv`` (package data, read with :mod:`importlib.resources`).
``dkrp experiment report`` puts each beside the value dkrp measures.  The file was
transcribed from the plain-text copies in ``../shared/papers``; where the PDF extraction
left a cell's place or value in doubt the row was left out rather than guessed.

Columns (in this order)
-----------------------
experiment
    One of :data:`EXPERIMENTS`: ``distortion`` (KRP Tables 2, 3, 5, 6, 8, 9),
    ``classification`` (KRP Tables 4, 7, 10 and the raw-feature / exact-kernel SVMs of
    its text), ``degree-selection`` (KRP Table 11), ``srf`` (SRF review Tables 1-2),
    ``spe`` (SPE paper, section 4), ``ensemble`` and ``rff`` (Rost & Zast thesis; it
    prints its results only as figures, so no rows yet).
source
    One of :data:`SOURCES`: ``krp2018`` (López-Sánchez et al., Pattern Recognition 2018),
    ``srf-review`` (Janati 2017), ``spe`` (Delogne & Jacques), ``rff-thesis``
    (Rost & Zast 2023).
table
    Where the value is printed: ``Table 2``, ``text §4.1.2``, ``Fig. 4``.
dataset
    One of :data:`DATASETS`: ``mnist``, ``webspam``, ``w8a``, ``covtype``, ``usps``,
    ``gisette``, ``fashion-mnist``, ``avocado``, ``wine-quality``, ``a9a``, and
    ``synthetic`` (the SPE paper's 10,000 x 100 binary problem).
method
    One of :data:`METHODS` (lowercase, hyphenated):

    - ``krp-gaussian``, ``krp-sparse-s1``, ``krp-sparse-s3``: KRP with a Gaussian or an
      Achlioptas (s = 1, 3) hyperplane pool; ``krp``: KRP whose pool the paper does not
      state (Table 11);
    - ``explicit-gaussian``, ``explicit-sparse-s1``, ``explicit-sparse-s3``: φ(x) + RP;
    - ``kg-rp`` (Kulis-Grauman RP), ``nystroem``, ``prp`` (P-RP, s = 1 Achlioptas entries),
      ``prp-gaussian`` (P-RP, Gaussian entries: Table 4), ``pca`` ;
    - ``linear-svm-raw``, ``poly-svm``, ``rbf-svm``, ``exact-kernel-svm``: SVMs on the
      original features (``exact-kernel-svm``: the SPE paper's <x, y>^2 kernel);
    - ``srf``, ``rff``, ``random-maclaurin``, ``tensorsketch`` (+ linear SVM);
    - ``spe-sketch-sketch``, ``spe-sketch-bits``, ``spe-bits-bits``,
      ``spe-train-sketch-test-bits``, ``spe-train-bits-test-sketch``: the sign product
      embedding's kernels <B(x), B(y)>, <B(x), sign B(y)>, <sign B(x), sign B(y)> and its
      asymmetric train/test setups;
    - ``rff-svm``, ``nystroem-svm``, ``pca-rbf-svm``, ``rff-krr``, ``exact-krr``,
      ``rff-ensemble``: the thesis's models.
params
    The configuration the paper fixes, ``key=value`` pairs joined by ``;`` (no spaces),
    values as printed: ``degree`` (g, the polynomial degree; the SRF review's P/p),
    ``k`` (output dimension), ``p`` (KRP hyperplanes / KG-RP samples), ``t`` (CLT terms;
    P-RP's printed ``t``), ``s`` (sparsity printed for P-RP), ``c`` and ``gamma`` (SVM),
    ``D`` (SRF features; the review prints 2^9 .. 2^14, stored as integers),
    ``pca_components``, ``m`` (SPE measurements), ``n_samples``, ``n_features``,
    ``n_informative``, ``cv`` (folds), ``n_features`` / ``noise`` for the thesis.
metric, value, std, unit
    ``metric`` is one of :data:`METRICS`; ``value`` is in the paper's units (accuracy in
    percent with ``unit`` ``%``, F1 as a fraction with unit ``""``, times with unit ``s``;
    ``4h 38m`` is stored as 16680 and said so in ``note``); ``std`` is the printed
    standard deviation (over the paper's 10 runs for krp2018 and srf-review), blank when
    none is printed.  ``seconds`` in a distortion table is the time to train the method
    and transform the 500 samples; ``train_seconds`` / ``transform_seconds`` in a
    classification table are the times to train the method and to transform the whole
    training set; in the SRF tables ``seconds`` is the printed "Time in s".
available
    ``yes`` when the dataset is in ``../shared/data``, ``subset`` for Covertype (only the
    15,120-row Kaggle subset is there), ``no`` (Webspam, Gisette).
note
    What a reader needs to compare fairly (held-out split, subset, a printed anomaly).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from importlib import resources

from ..errors import InvalidInputError

__all__ = [
    "COLUMNS",
    "DATASETS",
    "EXPERIMENTS",
    "METHODS",
    "METRICS",
    "SOURCES",
    "PublishedValue",
    "load_published",
    "parse_published",
]

COLUMNS = (
    "experiment", "source", "table", "dataset", "method", "params", "metric",
    "value", "std", "unit", "available", "note",
)
EXPERIMENTS = frozenset(
    {"distortion", "classification", "degree-selection", "srf", "spe", "ensemble", "rff"}
)
SOURCES = frozenset({"krp2018", "srf-review", "spe", "rff-thesis"})
METRICS = frozenset({
    "distortion", "accuracy", "f1", "cv_accuracy", "test_accuracy", "mse",
    "train_seconds", "transform_seconds", "seconds",
})
METHODS = frozenset({
    "krp", "krp-gaussian", "krp-sparse-s1", "krp-sparse-s3", "kg-rp", "nystroem",
    "explicit-gaussian", "explicit-sparse-s1", "explicit-sparse-s3", "prp", "prp-gaussian", "pca",
    "linear-svm-raw", "poly-svm", "rbf-svm", "exact-kernel-svm",
    "srf", "rff", "random-maclaurin", "tensorsketch",
    "spe-sketch-sketch", "spe-sketch-bits", "spe-bits-bits",
    "spe-train-sketch-test-bits", "spe-train-bits-test-sketch",
    "rff-svm", "nystroem-svm", "pca-rbf-svm", "rff-krr", "exact-krr", "rff-ensemble",
})
# dataset -> what ../shared/data holds of it (the only valid `available` for its rows)
DATASETS = {
    "mnist": "yes", "fashion-mnist": "yes", "usps": "yes", "a9a": "yes", "w8a": "yes",
    "avocado": "yes", "wine-quality": "yes", "synthetic": "yes", "covtype": "subset",
    "webspam": "no", "gisette": "no",
}
_UNITS = {
    "distortion": ("",), "f1": ("",), "mse": ("",),
    "accuracy": ("%", ""), "cv_accuracy": ("%", ""), "test_accuracy": ("%", ""),
    "train_seconds": ("s",), "transform_seconds": ("s",), "seconds": ("s",),
}
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CSV = "published.csv"


@dataclass(frozen=True)
class PublishedValue:
    """One number a paper publishes, with the configuration that produced it.

    Attributes
    ----------
    experiment, source, table, dataset, method : str
        See the module docstring for the vocabularies.
    params : dict of str to str
        The configuration the paper fixes (``{"degree": "2", "k": "1000", ...}``); values
        are the strings the paper prints.  Left out of the hash (a dict is unhashable);
        equality still compares it.
    metric : str
        One of :data:`METRICS`.
    value : float
        The published value, in the paper's units.
    std : float or None
        The published standard deviation, or None when the paper prints none.
    unit : str
        ``"%"``, ``"s"`` or ``""``.
    available : bool
        True when the dataset (or, for Covertype, a subset of it) is in ``../shared/data``.
    note : str
        What a reader needs to compare fairly; may be empty.
    """

    experiment: str
    source: str
    table: str
    dataset: str
    method: str
    params: dict[str, str] = field(hash=False)
    metric: str
    value: float
    std: float | None
    unit: str
    available: bool
    note: str


def load_published():
    """Read and validate every row of the packaged ``published.csv``.

    Returns
    -------
    list of PublishedValue
        In file order.

    Raises
    ------
    ValueError
        If a row is malformed; the message names the file line and what to fix.

    Examples
    --------
    >>> values = load_published()
    >>> [(v.value, v.std) for v in values
    ...  if v.table == "Table 2" and v.method == "krp-gaussian" and v.metric == "distortion"
    ...  and v.params == {"degree": "2", "k": "1000", "p": "976", "t": "30"}]
    [(0.059, 0.007)]
    """
    text = resources.files("dkrp.experiments").joinpath(_CSV).read_text(encoding="utf-8")
    return parse_published(text, origin=_CSV)


def parse_published(text, origin=_CSV):
    """Parse and validate the text of a published-values CSV.

    Parameters
    ----------
    text : str
        The whole file, header first.
    origin : str, default="published.csv"
        The name errors give for the file.

    Returns
    -------
    list of PublishedValue

    Raises
    ------
    ValueError
        On a wrong header, a row with the wrong number of fields, an unknown
        experiment/source/dataset/method/metric, a value or std that is not a finite
        number (std must also be >= 0), a unit that does not fit the metric, an
        ``available`` that contradicts what ``../shared/data`` holds, malformed params,
        or the same configuration and metric twice.  The message starts with
        ``"<origin> line <n>:"``.
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise InvalidInputError(
            f"{origin} line 1: the header must be {','.join(COLUMNS)!r}, got "
            f"{','.join(header or [])!r}"
        )
    values = []
    seen = {}
    for fields in reader:
        line = reader.line_num
        value = _parse_row(fields, f"{origin} line {line}")
        key = (value.experiment, value.source, value.table, value.dataset, value.method,
               tuple(sorted(value.params.items())), value.metric)
        if key in seen:
            raise InvalidInputError(
                f"{origin} line {line}: the same configuration and metric as line "
                f"{seen[key]}; remove one of them"
            )
        seen[key] = line
        values.append(value)
    return values


def _parse_row(fields, where):
    """One CSV row -> PublishedValue; `where` ("published.csv line 7") prefixes errors."""
    if len(fields) != len(COLUMNS):
        raise InvalidInputError(
            f"{where}: expected {len(COLUMNS)} fields ({','.join(COLUMNS)}), got {len(fields)}"
        )
    row = dict(zip(COLUMNS, fields, strict=True))
    for name, allowed in (("experiment", EXPERIMENTS), ("source", SOURCES),
                          ("dataset", DATASETS), ("method", METHODS), ("metric", METRICS)):
        if row[name] not in allowed:
            raise InvalidInputError(
                f"{where}: unknown {name} {row[name]!r}; expected one of {sorted(allowed)}"
            )
    if not row["table"].strip():
        raise InvalidInputError(f"{where}: table is empty; say where the paper prints the value")
    value = _number(row["value"], "value", where)
    std = None if row["std"] == "" else _number(row["std"], "std", where)
    if std is not None and std < 0:
        raise InvalidInputError(f"{where}: std must be >= 0, got {row['std']!r}")
    if row["unit"] not in _UNITS[row["metric"]]:
        raise InvalidInputError(
            f"{where}: unit {row['unit']!r} does not fit metric {row['metric']!r}; expected "
            f"one of {list(_UNITS[row['metric']])}"
        )
    expected = DATASETS[row["dataset"]]
    if row["available"] != expected:
        raise InvalidInputError(
            f"{where}: available must be {expected!r} for dataset {row['dataset']!r} "
            f"(what ../shared/data holds), got {row['available']!r}"
        )
    return PublishedValue(
        experiment=row["experiment"], source=row["source"], table=row["table"],
        dataset=row["dataset"], method=row["method"],
        params=_parse_params(row["params"], where), metric=row["metric"], value=value,
        std=std, unit=row["unit"], available=row["available"] != "no", note=row["note"],
    )


def _number(text, name, where):
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise InvalidInputError(f"{where}: {name} must be a finite number, got {text!r}")
    return number


def _parse_params(text, where):
    """``"degree=2;k=1000"`` -> ``{"degree": "2", "k": "1000"}``; ``""`` -> ``{}``."""
    params = {}
    if text == "":
        return params
    for item in text.split(";"):
        key, sep, value = item.partition("=")
        if not sep or not _KEY.match(key) or not value or value != value.strip():
            raise InvalidInputError(
                f"{where}: params item {item!r} is not key=value (params look like "
                f"'degree=2;k=1000', no spaces)"
            )
        if key in params:
            raise InvalidInputError(f"{where}: params key {key!r} appears twice in {text!r}")
        params[key] = value
    return params
