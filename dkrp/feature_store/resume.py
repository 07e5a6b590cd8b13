"""Whether a feature store may be resumed by this run: the differences that forbid it.

A store is resumed only by the run that started it: the same projector (class,
parameters, scaling, checksum, versioned behaviours, input width), shape, dtypes,
encoding, compressor, input and format. :func:`resume_mismatches` names every
difference, in words a user can act on; :func:`dkrp.feature_store.plan_features`
refuses (or, with ``overwrite``, replaces) a store that has any.
"""

from __future__ import annotations

from .._spec import registered_projectors
from ..errors import Message, Param
from .encoding import FLOAT

__all__ = ["resume_mismatches"]


def resume_mismatches(old: dict, new: dict) -> list[str]:
    """Human-readable differences that forbid resuming ``old`` with ``new``."""
    old_spec, new_spec = old.get("spec") or {}, new["spec"]
    return _spec_mismatches(old_spec, new_spec) + _store_mismatches(old, new)


def _spec_mismatches(old_spec: dict, new_spec: dict) -> list:
    """The projector's differences: class, parameters, scaling, then (only when those agree)
    its checksum and its versioned behaviours, then its number of input features."""
    out = []
    if old_spec.get("class") != new_spec["class"]:
        out.append(
            f"projector class: store {old_spec.get('class')!r}, this run {new_spec['class']!r}"
        )
    old_params, new_params = old_spec.get("params") or {}, new_spec["params"]
    for key in sorted(set(old_params) | set(new_params)):
        a, b = old_params.get(key), new_params.get(key)
        if a != b:
            name = "seed (random_state)" if key == "random_state" else key
            out.append(f"{name}: store {a!r}, this run {b!r}")
    old_prep = (old_spec.get("fitted") or {}).get("preprocessing")
    new_prep = (new_spec.get("fitted") or {}).get("preprocessing")
    if old_prep != new_prep:
        from ..preprocessing import describe

        what = describe(old_prep), describe(new_prep)
        out.append(Message("scaling ({}/{}): store {}, this run {}{}", Param("standardize"),
                           Param("scale_rows"), what[0], what[1],
                           " (statistics of another input)" if what[0] == what[1] else ""))
    if not out and old_spec.get("checksum") != new_spec.get("checksum"):
        out.append("projector checksum (other hyperplanes from the same parameters)")
    if not out:  # a versioned behaviour (e.g. the cosine): old specs imply the legacy one
        legacy = getattr(registered_projectors().get(new_spec["class"]),
                         "legacy_fitted_values", {})
        old_fitted = {**legacy, **(old_spec.get("fitted") or {})}
        new_fitted = {**legacy, **(new_spec.get("fitted") or {})}
        for key in sorted(legacy):
            if old_fitted[key] != new_fitted[key]:
                out.append(f"{key.rstrip('_')}: store {old_fitted[key]!r}, this run "
                           f"{new_fitted[key]!r}")
    if old_spec.get("n_features_in") != new_spec["n_features_in"]:
        out.append(
            f"n_features_in: store {old_spec.get('n_features_in')}, this run "
            f"{new_spec['n_features_in']}"
        )
    return out


def _store_mismatches(old: dict, new: dict) -> list:
    """The store's differences: shape and dtypes, encoding, compressor, input, format."""
    out = []
    old_params = (old.get("spec") or {}).get("params") or {}
    new_params = new["spec"]["params"]
    for key in ("dtype", "n_samples", "n_components"):
        if old.get(key) != new[key] and (
                key != "n_components" or old_params.get(key) == new_params.get(key)):
            # (a map's n_components parameter, when it differs, was named above)
            out.append(f"{key}: store {old.get(key)!r}, this run {new[key]!r}")
    # stores written before these attributes: float features computed in their dtype
    defaults = {"encoding": FLOAT, "compute_dtype": old.get("dtype")}
    for key in ("encoding", "compute_dtype"):
        if old.get(key, defaults[key]) != new[key]:
            out.append(f"{key}: store {old.get(key, defaults[key])!r}, this run {new[key]!r}")
    if "compressor" in old and old["compressor"] != new.get("compressor", old["compressor"]):
        out.append(f"compressor: store {old['compressor']!r}, this run {new['compressor']!r}")
    old_in, new_in = old.get("input") or {}, new["input"]
    for key in sorted((set(old_in) | set(new_in)) - {"source_path"}):  # a hint, not identity
        if old_in.get(key) != new_in.get(key):
            out.append(f"input {key}: store {old_in.get(key)!r}, this run {new_in.get(key)!r}")
    if old.get("format_version") != new["format_version"]:
        out.append(
            f"format_version: store {old.get('format_version')!r}, this run "
            f"{new['format_version']}"
        )
    return out
