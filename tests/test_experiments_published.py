"""dkrp/experiments/published.csv: the papers' numbers, loaded and checked against the text.

The spot checks assert numbers read by eye from ../shared/papers (table, row, column
named in each case); the prose checks assert the differences the papers state in words,
which catch a value put in the wrong row or column by the transcription.
"""

from collections import Counter

import pytest

from dkrp.experiments.published import (
    COLUMNS,
    DATASETS,
    EXPERIMENTS,
    METHODS,
    METRICS,
    PublishedValue,
    load_published,
    parse_published,
)


@pytest.fixture(scope="module")
def values():
    return load_published()


@pytest.fixture(scope="module")
def csv_text():
    from importlib import resources

    return resources.files("dkrp.experiments").joinpath("published.csv").read_text("utf-8")


def find(values, table, method, params, metric, *, source="krp2018", dataset=None):
    """The one value at (source, table, method, params, metric[, dataset])."""
    hits = [
        v for v in values
        if v.source == source and v.table == table and v.method == method
        and v.params == params and v.metric == metric
        and (dataset is None or v.dataset == dataset)
    ]
    assert len(hits) == 1, (table, method, params, metric, hits)
    return hits[0]


def krp_params(degree, k, p=None, t=None, **extra):
    params = {"degree": str(degree), "k": str(k)}
    if p is not None:
        params["p"] = str(p)
    if t is not None:
        params["t"] = str(t)
    params.update({key: str(value) for key, value in extra.items()})
    return params


def test_every_row_loads_valid(values):
    assert all(isinstance(v, PublishedValue) for v in values)
    for v in values:
        assert v.experiment in EXPERIMENTS and v.method in METHODS and v.metric in METRICS
        assert v.dataset in DATASETS and v.available == (DATASETS[v.dataset] != "no")
        assert v.std is None or v.std >= 0
        assert all(isinstance(key, str) and isinstance(val, str) for key, val in
                   v.params.items())
    # the frozen dataclass hashes (params left out of the hash) and compares params
    assert len(set(values)) == len(values)


# Rows per printed table: 3 output dims x (methods) x 2 metrics for distortion tables,
# 2 dims x 4 methods x 3 metrics x 6 (p, t) lines + the Nystroem/phi+RP/P-RP line for the
# classification tables. A dropped or doubled line changes these counts.
EXPECTED_COUNTS = {
    ("krp2018", "Table 2"): 3 * 2 * (5 + 3 + 4 * 4),
    ("krp2018", "Table 3"): 3 * 2 * (1 + 4 * 4),
    ("krp2018", "Table 4"): 2 * 3 * (3 + 6 * 4),
    ("krp2018", "Table 5"): 3 * 2 * (5 + 4 * 4),
    ("krp2018", "Table 6"): 3 * 2 * (1 + 4 * 4),
    ("krp2018", "Table 7"): 2 * 3 * (3 + 6 * 4),
    ("krp2018", "Table 8"): 3 * 2 * (5 + 4 * 4),
    ("krp2018", "Table 9"): 3 * 2 * (1 + 4 * 4),
    # phi(x)+RP's k=1500 train time prints '10m 2.47s': left out
    ("krp2018", "Table 10"): 2 * 3 * (3 + 6 * 4) - 1,
    ("krp2018", "Table 11"): 6 * 3 * 2,
    ("krp2018", "text §4.1.2"): 3,
    ("krp2018", "text §4.2.2"): 3,
    ("krp2018", "text §4.3.2"): 4,
    ("srf-review", "Table 1"): 4 * (6 + 1) * 2,
    ("srf-review", "Table 2"): 4 * (6 + 1) * 2,
    ("spe", "text §4"): 3,
}


def test_row_counts_per_table(values):
    assert Counter((v.source, v.table) for v in values) == EXPECTED_COUNTS


def test_availability_follows_shared_data(values):
    by_dataset = {(v.dataset, v.available) for v in values}
    assert ("webspam", True) not in by_dataset and ("gisette", True) not in by_dataset
    assert ("mnist", True) in by_dataset and ("covtype", True) in by_dataset
    assert all("held-out" in v.note for v in values if v.dataset == "w8a")
    assert all("Kaggle subset" in v.note for v in values if v.dataset == "covtype")


# (table, method, params, metric, value, std, dataset) read from the paper text.
KRP_SPOT = [
    # Table 2 (MNIST g=2): KRP Gaussian p=976, k=1000 and its time; KG-RP p=976, k=1000
    ("Table 2", "krp-gaussian", krp_params(2, 1000, 976, 30), "distortion", 0.059, 0.007),
    ("Table 2", "krp-gaussian", krp_params(2, 1000, 976, 30), "seconds", 0.079, None),
    ("Table 2", "kg-rp", krp_params(2, 1000, 976, 30), "distortion", 0.130, 0.006),
    ("Table 2", "kg-rp", krp_params(2, 200, 976, 30), "seconds", 7.525, None),
    ("Table 2", "explicit-gaussian", krp_params(2, 200), "distortion", 0.079, 0.002),
    ("Table 2", "nystroem", krp_params(2, 1000), "distortion", 0.101, 0.001),
    ("Table 2", "prp", krp_params(2, 500, t=30), "distortion", 0.054, 0.002),
    ("Table 2", "krp-gaussian", krp_params(2, 500, 8000, 30), "distortion", 0.055, 0.003),
    ("Table 2", "krp-gaussian", krp_params(2, 1000, 3000, 30), "seconds", 0.152, None),
    ("Table 2", "krp-sparse-s1", krp_params(2, 1000, 122, 30), "distortion", 0.159, 0.038),
    # Table 3 (MNIST g=3): Nystroem k=1000 (papers README: ~0.19); sparse s=3 p=488 k=500
    ("Table 3", "nystroem", krp_params(3, 1000), "distortion", 0.187, 0.001),
    ("Table 3", "krp-sparse-s3", krp_params(3, 500, 488, 30), "distortion", 0.124, 0.026),
    ("Table 3", "kg-rp", krp_params(3, 1000, 122, 30), "seconds", 0.424, None),
    # Table 4 (MNIST classification): issue 16's calibration row, and the 4h 38m cell
    ("Table 4", "krp-gaussian", krp_params(2, 1500, 488, 1), "accuracy", 96.95, 0.12),
    ("Table 4", "krp-gaussian", krp_params(2, 1500, 488, 1), "transform_seconds", 1.409, None),
    ("Table 4", "kg-rp", krp_params(2, 2000, 122, 10), "train_seconds", 0.714, None),
    ("Table 4", "nystroem", krp_params(2, 2000), "accuracy", 97.96, 0.02),
    ("Table 4", "explicit-gaussian", krp_params(2, 1500), "transform_seconds", 16680, None),
    ("Table 4", "prp-gaussian", krp_params(2, 2000, t=10), "accuracy", 97.33, 0.12),
    # Webspam (Tables 5-7): Nystroem's zero std, KG-RP's large time, Table 7's 2h 54m
    ("Table 5", "nystroem", krp_params(2, 1000), "distortion", 0.006, 0.000),
    ("Table 6", "kg-rp", krp_params(3, 1000, 2116, 30), "seconds", 50.742, None),
    ("Table 7", "explicit-gaussian", krp_params(2, 2000), "transform_seconds", 10440, None),
    # w8a (Tables 8-10): Table 9's time printed without its 's'; Table 10's F1
    ("Table 8", "kg-rp", krp_params(2, 200, 111, 30), "distortion", 0.887, 0.008),
    ("Table 9", "kg-rp", krp_params(3, 1000, 892, 30), "seconds", 10.862, None),
    ("Table 10", "kg-rp", krp_params(2, 1500, 111, 10), "f1", 0.1242, 0.063),
    ("Table 10", "prp", krp_params(2, 1500, t=10), "f1", 0.7679, 0.005),
    # Table 11 (Covertype): g=3, p=500 at k=2000; g=4, p=1000 at k=3000
    ("Table 11", "krp-gaussian", krp_params(3, 2000, 500), "cv_accuracy", 79.85, 0.34),
    ("Table 11", "krp-gaussian", krp_params(4, 3000, 1000), "test_accuracy", 74.29, 0.28),
    # text: the raw-feature and exact-kernel SVMs
    ("text §4.1.2", "linear-svm-raw", {"C": "0.5"}, "accuracy", 91.81, None),
    ("text §4.1.2", "rbf-svm", {"C": "5", "gamma": "0.02"}, "accuracy", 98.56, None),
    ("text §4.2.2", "poly-svm", {"degree": "2", "C": "512"}, "accuracy", 98.4, None),
    ("text §4.3.2", "linear-svm-raw", {"C": "1"}, "f1", 0.7343, None),
    ("text §4.3.2", "rbf-svm", {"C": "200", "gamma": "0.05"}, "f1", 0.9037, None),
]


@pytest.mark.parametrize("table, method, params, metric, value, std", KRP_SPOT)
def test_krp_values_match_the_paper(values, table, method, params, metric, value, std):
    row = find(values, table, method, params, metric)
    assert (row.value, row.std) == (value, std)


@pytest.mark.parametrize("table, dataset, method, params, metric, value, std", [
    # Table 1 is filed at the D the review ran, a quarter of the printed one (issue 30), and
    # its "Time in s" row in seconds (printed as 100 x seconds)
    ("Table 1", "usps", "srf", {"degree": "20", "D": "4096"}, "accuracy", 97.61, 0.12),
    ("Table 1", "usps", "srf", {"degree": "7", "D": "256"}, "seconds", 1.7949, 1.1564),
    ("Table 1", "usps", "poly-svm", {"degree": "3"}, "seconds", 15.4657, None),
    ("Table 1", "usps", "poly-svm", {"degree": "3"}, "accuracy", 93.26, None),
    ("Table 2", "gisette", "srf", {"degree": "10", "D": "512", "pca_components": "2049"},
     "accuracy", 81.32, 2.13),
    ("Table 2", "gisette", "poly-svm", {"degree": "20", "pca_components": "2049"},
     "seconds", 2362.91, None),
])
def test_srf_review_values_match_the_paper(values, table, dataset, method, params, metric,
                                            value, std):
    row = find(values, table, method, params, metric, source="srf-review", dataset=dataset)
    assert (row.value, row.std, row.available) == (value, std, dataset == "usps")


def test_srf_review_table_1_is_filed_at_the_d_its_notebook_ran(values):
    # the review prints the column run at D = 2^k under the header 2^(k+2) (issue 30):
    # every SRF row of Table 1 names both, and the columns run are 2^7 .. 2^12
    import re

    rows = [v for v in values if v.source == "srf-review" and v.table == "Table 1"
            and v.method == "srf"]
    assert len(rows) == 4 * 6 * 2
    for v in rows:
        printed, run = map(int, re.match(r"D printed as 2\^(\d+), run at 2\^(\d+)",
                                         v.note).groups())
        assert int(v.params["D"]) == 2 ** run and printed == run + 2, v
    assert {int(v.params["D"]) for v in rows} == {2 ** k for k in range(7, 13)}
    # its times are seconds (the notebook prints 100 x seconds): 18.83 s at p = 3, 2^12
    p3 = find(values, "Table 1", "srf", {"degree": "3", "D": "4096"}, "seconds",
              source="srf-review")
    assert p3.value == 18.8307 and "printed as 1883.07" in p3.note


def test_spe_values_match_the_paper(values):
    spe = {v.method: v for v in values if v.source == "spe"}
    assert spe["exact-kernel-svm"].metric == "cv_accuracy"
    assert spe["exact-kernel-svm"].value == 87
    assert spe["spe-train-sketch-test-bits"].value == 74.2
    assert spe["spe-train-bits-test-sketch"].value == 79.5
    assert spe["spe-train-sketch-test-bits"].params["m"] == "5000"


def test_values_agree_with_the_prose(values):
    # §4.2.2: KRP Gaussian, k=1500, p=529, t=1 reaches 97.80%, "only 0.19% below" Nystroem,
    # and phi(x)+RP is ~0.09% below Nystroem.
    krp = find(values, "Table 7", "krp-gaussian", krp_params(2, 1500, 529, 1), "accuracy")
    nys = find(values, "Table 7", "nystroem", krp_params(2, 1500), "accuracy")
    phi = find(values, "Table 7", "explicit-gaussian", krp_params(2, 1500), "accuracy")
    assert krp.value == 97.80 and round(nys.value - krp.value, 2) == 0.19
    assert round(nys.value - phi.value, 2) == 0.09
    # §4.3.2: KRP Gaussian, k=2000, p=446, t=1 reaches F1 0.8973, 0.0018 below phi(x)+RP.
    krp = find(values, "Table 10", "krp-gaussian", krp_params(2, 2000, 446, 1), "f1")
    phi = find(values, "Table 10", "explicit-gaussian", krp_params(2, 2000), "f1")
    assert krp.value == 0.8973 and round(phi.value - krp.value, 4) == 0.0018
    # §4.4: for every (k, p) the degree best in CV is the degree best on test, and g=3
    # wins only from k=2000 on.
    for k in ("1000", "2000", "3000"):
        for p in ("500", "1000"):
            rows = [v for v in values if v.table == "Table 11" and v.params["k"] == k
                    and v.params["p"] == p]
            best = {
                metric: max((v for v in rows if v.metric == metric), key=lambda v: v.value)
                for metric in ("cv_accuracy", "test_accuracy")
            }
            assert best["cv_accuracy"].params["degree"] == best["test_accuracy"].params["degree"]
            assert best["cv_accuracy"].params["degree"] == ("2" if k == "1000" else "3")


def test_times_agree_with_the_prose(values):
    # §4.3.1: on w8a KRP keeps its times "always below 70 ms" (Tables 8 and 9).
    krp = [v for v in values if v.table in ("Table 8", "Table 9") and v.metric == "seconds"
           and v.method.startswith("krp-")]
    assert len(krp) == 2 * 3 * 3 * 4 and max(v.value for v in krp) < 0.070
    # §4.2.1: on Webspam "KG-RP times range from half a second to almost one minute".
    kg = [v.value for v in values if v.table in ("Table 5", "Table 6") and v.method == "kg-rp"
          and v.metric == "seconds"]
    assert len(kg) == 2 * 4 * 3 and 0.5 < min(kg) and max(kg) < 60


def _replace_line(text, old_start, new_line):
    """The CSV text with its first line starting `old_start` replaced; and that line's number."""
    lines = text.split("\n")
    index = next(i for i, line in enumerate(lines) if line.startswith(old_start))
    lines[index] = new_line
    return "\n".join(lines), index + 1


GOOD = ("distortion,krp2018,Table 2,mnist,krp-gaussian,degree=2;k=1000;p=976;t=30,"
        "distortion,0.059,0.007,,yes,")


@pytest.mark.parametrize("bad_line, message", [
    (GOOD.replace("distortion,krp2018", "distorsion,krp2018"), "unknown experiment 'distorsion'"),
    (GOOD.replace("krp2018", "krp2019"), "unknown source 'krp2019'"),
    (GOOD.replace("mnist", "mnist-full"), "unknown dataset 'mnist-full'"),
    (GOOD.replace("krp-gaussian", "krp_gaussian"), "unknown method 'krp_gaussian'"),
    (GOOD.replace("t=30,distortion", "t=30,distance"), "unknown metric 'distance'"),
    (GOOD.replace("0.059,0.007", "0.059±0.007,"), "value must be a finite number, got '0.059±"),
    (GOOD.replace("0.059,0.007", "0,059,0.007"), "expected 12 fields"),
    (GOOD.replace("0.059,0.007", "n/a,0.007"), "value must be a finite number, got 'n/a'"),
    (GOOD.replace("0.059,0.007", "nan,0.007"), "value must be a finite number"),
    (GOOD.replace("0.059,0.007", "0.059,±0.007"), "std must be a finite number"),
    (GOOD.replace("0.059,0.007", "0.059,-0.007"), "std must be >= 0"),
    (GOOD.replace("0.007,,yes", "0.007,%,yes"), "unit '%' does not fit metric 'distortion'"),
    (GOOD.replace(",yes,", ",no,"), "available must be 'yes' for dataset 'mnist'"),
    (GOOD.replace("degree=2;k=1000", "degree2;k=1000"), "params item 'degree2'"),
    (GOOD.replace("degree=2;k=1000", "degree=2;degree=3"), "params key 'degree' appears twice"),
    (GOOD.replace("degree=2;k=1000", "degree=2; k=1000"), "params item ' k=1000'"),
    (GOOD.replace("Table 2", " "), "table is empty"),
])
def test_a_planted_malformed_row_names_its_line(csv_text, bad_line, message):
    text, number = _replace_line(csv_text, GOOD, bad_line)
    with pytest.raises(ValueError, match=rf"^published\.csv line {number}: ") as info:
        parse_published(text)
    assert message in str(info.value)


def test_a_duplicated_row_names_both_lines(csv_text):
    lines = csv_text.rstrip("\n").split("\n")
    first = lines.index(GOOD) + 1
    with pytest.raises(ValueError, match=rf"line {len(lines) + 1}: the same configuration "
                                         rf"and metric as line {first}"):
        parse_published("\n".join([*lines, GOOD]) + "\n")


def test_a_wrong_header_is_refused(csv_text):
    text = csv_text.replace(",".join(COLUMNS), ",".join(COLUMNS).replace("std", "sd"), 1)
    with pytest.raises(ValueError, match=r"^published\.csv line 1: the header must be"):
        parse_published(text)
    with pytest.raises(ValueError, match="line 1: the header must be"):
        parse_published("")


def test_empty_params_parse_to_an_empty_dict(csv_text):
    header = ",".join(COLUMNS)
    row = "spe,spe,text §4,synthetic,exact-kernel-svm,,cv_accuracy,87,,%,yes,"
    (value,) = parse_published(f"{header}\n{row}\n")
    assert value.params == {} and value.std is None and value.available is True
