"""The KRP paper's methods by the names its tables use, as dkrp projectors.

``make_map(method, degree, k, p, t, seed)`` builds one unfitted projector for the
homogeneous polynomial kernel ``<x, y>^degree``; ``DATA_DEPENDENT`` lists the ones
that fit on training rows (landmarks), the others fit on the shape alone.
"""

from __future__ import annotations

from ..errors import InvalidInputError

__all__ = ["DATA_DEPENDENT", "DEGREE_2_ONLY", "KRP_METHODS", "METHODS", "make_map"]

KRP_METHODS = ("krp-gaussian", "krp-sparse-s1", "krp-sparse-s3", "krp-structured")
METHODS = KRP_METHODS + ("kg-rp", "nystroem", "prp", "prp-gaussian", "explicit-gaussian",
                         "explicit-sparse-s1", "explicit-sparse-s3")
DATA_DEPENDENT = ("kg-rp", "nystroem")
#: explicit φ(x) needs d^2 columns (MNIST: 614,656), d^3 is out of reach; P-RP is g=2 only
DEGREE_2_ONLY = ("prp", "prp-gaussian", "explicit-gaussian", "explicit-sparse-s1",
                 "explicit-sparse-s3")
#: methods without p or t (their rows leave those columns empty)
NO_POOL = ("nystroem", "prp", "explicit-gaussian", "explicit-sparse-s1", "explicit-sparse-s3")

_DISTRIBUTION = {
    "gaussian": {"distribution": "gaussian"},
    "sparse-s1": {"distribution": "achlioptas", "density": 1.0},
    "sparse-s3": {"distribution": "achlioptas", "density": 1 / 3},
}


def make_map(method, *, degree, k, p=None, t=None, seed=0, explicit_form="tensor"):
    """An unfitted projector for ``method`` (one of :data:`METHODS`); ``explicit_form`` is
    the explicit maps' ``form`` (the paper's ``"tensor"``, or ``"monomials"``: for
    Gaussian entries the same distribution of features at half the cost for g = 2)."""
    from ..baselines import KulisGraumanRP, Nystroem
    from ..features import (
        ExplicitPolynomialProjection,
        IndependentPolynomialProjection,
        PolynomialRandomProjection,
    )

    if method.startswith("krp-"):
        kind = method[len("krp-"):]
        extra = {"pool": "structured"} if kind == "structured" else _DISTRIBUTION[kind]
        return PolynomialRandomProjection(degree=degree, n_components=k, n_hyperplanes=p,
                                          n_terms=t, random_state=seed, **extra)
    if method.startswith("explicit-"):
        return ExplicitPolynomialProjection(degree=degree, n_components=k, random_state=seed,
                                            form=explicit_form,
                                            **_DISTRIBUTION[method[len("explicit-"):]])
    if method == "kg-rp":
        return KulisGraumanRP(degree=degree, n_components=k, n_landmarks=p, n_terms=t,
                              random_state=seed)
    if method == "nystroem":
        return Nystroem(kernel="homogeneous_polynomial", degree=degree, n_components=k,
                        random_state=seed)
    if method == "prp":  # P-RP with s = 1 Achlioptas entries: Tables 2, 8 (one term), 7, 10 (t)
        return IndependentPolynomialProjection(degree=degree, n_components=k, n_terms=t or 1,
                                               random_state=seed, **_DISTRIBUTION["sparse-s1"])
    if method == "prp-gaussian":  # Table 4: P-RP, Gaussian entries, t terms
        return IndependentPolynomialProjection(degree=degree, n_components=k, n_terms=t or 1,
                                               random_state=seed, **_DISTRIBUTION["gaussian"])
    raise InvalidInputError(f"Unknown method {method!r}; choose one of {', '.join(METHODS)}.")
