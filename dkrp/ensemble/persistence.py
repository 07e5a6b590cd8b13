"""Saving and loading an ensemble without pickle.

:func:`save_ensemble` writes ``dkrp.json`` (parameters, each voter's projector spec
and linear model, classes, versions, the SHA-256 of the arrays file) and
``voters.npz`` (``coef_``, ``intercept_``), each through a temporary file and an
atomic rename. :func:`load_ensemble`, registered with :mod:`dkrp._spec`'s format
dispatch under ``"dkrp.ensemble"`` (so :func:`dkrp.load` reads a model directory),
checks the SHA-256 before reading anything, reads with
``np.load(..., allow_pickle=False)``, and imports only the linear models of
:mod:`dkrp.ensemble.voters`' allow-list.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from .._spec import register_format
from ..errors import InvalidInputError, Message, Param, SpecError
from .voters import linear_model_class

ENSEMBLE_FORMAT = "dkrp.ensemble"
ENSEMBLE_FORMAT_VERSION = 1
MANIFEST = "dkrp.json"
ARRAYS = "voters.npz"
#: format -> the estimator class :func:`load_ensemble` rebuilds. The class registers
#: itself (:func:`register_estimator`): :mod:`~dkrp.ensemble.classifier` imports this
#: module to save, so this module does not import it (importing dkrp.ensemble, which
#: any import of this module does first, imports both).
_ESTIMATOR_CLASSES: dict[str, type] = {}


def register_estimator(cls: type) -> type:
    """Record ``cls`` as the class :func:`load_ensemble` rebuilds (a class decorator)."""
    _ESTIMATOR_CLASSES[ENSEMBLE_FORMAT] = cls
    return cls


def jsonable_params(est):
    params = est.get_params(deep=False)
    if not isinstance(params.get("method"), str):
        params["method"] = {"template": params["method"].get_params(deep=False),
                            "class": type(params["method"]).__name__}
    if not isinstance(params.get("estimator"), str):
        params["estimator"] = {"class": type(params["estimator"]).__name__,
                               "params": params["estimator"].get_params(deep=False)}
    if params.get("classes") is not None:
        params["classes"] = np.asarray(params["classes"]).tolist()
    params["random_state"] = int(est.seed_)
    return params


def sha256_of_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_ensemble(est, directory, *, overwrite):
    """Write ``est`` (fitted) to ``directory``: the arrays file, then the manifest."""
    from .. import __version__

    check_save_target(directory, overwrite)
    directory.mkdir(parents=True, exist_ok=True)
    classes = np.asarray(est.classes_)
    if classes.dtype.kind not in "biufU":
        raise InvalidInputError(f"Labels of dtype {classes.dtype} cannot be saved without "
                                "pickle; use integer or string labels.")
    arrays = {"classes": classes}
    voters = []
    for i, (pipe, info) in enumerate(zip(est.estimators_, est.voter_info_, strict=True)):
        projector, model = pipe[0], pipe[-1]
        arrays[f"coef_{i}"] = model.coef_
        arrays[f"intercept_{i}"] = np.atleast_1d(model.intercept_)
        arrays[f"classes_{i}"] = np.asarray(model.classes_)
        voters.append({"projector": projector.to_spec(), "model_class": type(model).__name__,
                       "model_params": model.get_params(deep=False), "info": info})
    manifest = {
        "format": ENSEMBLE_FORMAT,
        "format_version": ENSEMBLE_FORMAT_VERSION,
        "class": type(est).__name__,
        "params": jsonable_params(est),
        "seed": int(est.seed_),
        "n_features_in": int(est.n_features_in_),
        "classes": classes.tolist(),
        "voters": voters,
        "arrays_file": ARRAYS,
        "arrays_sha256": None,
        "fit_seconds": float(est.fit_seconds_),
        "versions": {"dkrp": __version__, "numpy": np.__version__,
                     "scikit-learn": _sklearn_version()},
    }
    # a parameter JSON cannot hold fails here, before any file is written: an arrays
    # file without its manifest is not dkrp's to replace (check_save_target)
    json.dumps(manifest, default=json_default)
    tmp = directory / f".{ARRAYS}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, directory / ARRAYS)
    manifest["arrays_sha256"] = sha256_of_file(directory / ARRAYS)
    text = json.dumps(manifest, indent=1, sort_keys=True, default=json_default)
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(text)
    os.replace(tmp, directory / MANIFEST)
    return directory


def check_save_target(directory, overwrite):
    """Refuse a ``directory`` a model cannot be saved to: a file, a saved model without
    ``overwrite``, or files of the model's names that are not a model dkrp saved (only
    ``dkrp.json`` and ``voters.npz`` are written, and only over a saved model's own)."""
    if directory.exists() and not directory.is_dir():
        raise FileExistsError(f"{directory} exists and is not a directory.")
    manifest, arrays = directory / MANIFEST, directory / ARRAYS
    if manifest.exists():
        if not overwrite:
            raise FileExistsError(Message("{} already holds a saved model; pass {} to "
                                          "replace it.", directory, Param("overwrite", True)))
        try:
            ours = json.loads(manifest.read_text()).get("format") == ENSEMBLE_FORMAT
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise FileExistsError(
                f"Refusing to replace {manifest}: it is not the manifest of a model dkrp "
                "saved. Move it away or choose another directory.")
    elif arrays.exists():
        raise FileExistsError(
            f"Refusing to replace {arrays}: {directory} holds no saved model ({MANIFEST}), "
            "so the file is not dkrp's. Move it away or choose another directory.")


def json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _sklearn_version():
    import sklearn

    return sklearn.__version__


def load_ensemble(manifest: dict, directory: Path):
    """Rebuild a saved :class:`RandomFeatureVotingClassifier` (called by :func:`dkrp.load`)."""
    if manifest.get("format_version") != ENSEMBLE_FORMAT_VERSION:
        raise SpecError(f"Unsupported ensemble format_version "
                        f"{manifest.get('format_version')!r}; this dkrp reads "
                        f"{ENSEMBLE_FORMAT_VERSION}.")
    try:
        npz_path = directory / manifest["arrays_file"]
        expected = manifest["arrays_sha256"]
        voters = manifest["voters"]
        params = dict(manifest["params"])
        classes_json = manifest["classes"]
        n_features = int(manifest["n_features_in"])
        seed = int(manifest["seed"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"{directory / MANIFEST} is not a complete ensemble manifest "
                        f"({type(exc).__name__}: {exc}).") from exc
    if Path(manifest["arrays_file"]).name != manifest["arrays_file"]:
        raise SpecError(f"arrays_file {manifest['arrays_file']!r} must be a file name in "
                        f"{directory}.")
    arrays = _read_checked_arrays(npz_path, expected)
    classes = arrays.get("classes")
    if classes is None or classes.tolist() != classes_json:
        raise SpecError(f"{npz_path} and {MANIFEST} disagree on the classes.")
    params = _rebuilt_params(params)
    est = _ESTIMATOR_CLASSES[ENSEMBLE_FORMAT](**params)
    results = [_voter_result(arrays, npz_path, i, v) for i, v in enumerate(voters)]
    est.n_features_in_ = n_features
    est.seed_ = seed
    est._set_voters(results, classes)
    for pipe in est.estimators_:
        if pipe[0].n_features_in_ != n_features or pipe[-1].coef_.shape[1] != \
                pipe[0]._n_features_out:
            raise SpecError(f"A voter in {directory} does not fit its feature counts.")
    est.fit_seconds_ = float(manifest.get("fit_seconds", float("nan")))
    return est


def _read_checked_arrays(npz_path, expected) -> dict:
    """The arrays of ``npz_path`` once its SHA-256 is the manifest's (no pickle)."""
    if not npz_path.is_file():
        raise FileNotFoundError(f"The ensemble's arrays file {npz_path} is missing.")
    actual = sha256_of_file(npz_path)
    if actual != expected:
        raise SpecError(
            f"{npz_path} does not match the SHA-256 recorded in {MANIFEST} (recorded "
            f"{str(expected)[:12]}…, file {actual[:12]}…): the file was modified or "
            "truncated. Refused; restore it or retrain."
        )
    if not zipfile.is_zipfile(npz_path):
        # np.load would read any other file as a pickle, and refuse it as one
        raise SpecError(f"{npz_path} is not a readable .npz (not a zip archive): refused.")
    try:
        with open(npz_path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):  # object arrays need pickle: refuse them
            raise SpecError(f"{npz_path} holds arrays that would need pickle: refused.") from exc
        raise SpecError(f"{npz_path} is not a readable .npz ({type(exc).__name__}: {exc}): "
                        "refused.") from exc
    except Exception as exc:  # noqa: BLE001 - a corrupt zip/npy
        raise SpecError(f"{npz_path} is not a readable .npz ({type(exc).__name__}: {exc}): "
                        "refused.") from exc
    # numpy hands back a member that is not a .npy as its raw bytes
    raw = sorted(k for k, v in arrays.items() if not isinstance(v, np.ndarray))
    if raw:
        raise SpecError(f"{npz_path} is not a readable .npz (members {raw} are not .npy "
                        "arrays): refused.")
    return arrays


def _rebuilt_params(params) -> dict:
    """The classifier's parameters with its map template and linear model rebuilt from JSON."""
    method = params.get("method")
    if isinstance(method, dict):
        from .._spec import registered_projectors

        cls = registered_projectors().get(method.get("class"))
        if cls is None:
            raise SpecError(f"Unknown projector class {method.get('class')!r}.")
        params["method"] = cls(**method["template"])
    estimator = params.get("estimator")
    if isinstance(estimator, dict):
        params["estimator"] = linear_model_class(estimator["class"])(**estimator["params"])
    return params


def _voter_result(arrays, npz_path, i, v) -> dict:
    """Voter ``i``'s arrays and manifest entry, as the classifier keeps them."""
    try:
        coef, intercept = arrays[f"coef_{i}"], arrays[f"intercept_{i}"]
        vclasses = arrays[f"classes_{i}"]
    except KeyError as exc:
        raise SpecError(f"{npz_path} lacks the arrays of voter {i} ({exc}).") from exc
    if coef.ndim != 2 or coef.dtype.kind != "f" or intercept.shape != (coef.shape[0],):
        raise SpecError(f"Voter {i}'s arrays in {npz_path} have the wrong shapes.")
    return {"index": i, "spec": v["projector"], "model_class": v["model_class"],
            "model_params": v["model_params"], "coef": coef, "intercept": intercept,
            "classes": vclasses,
            **{k: v["info"].get(k) for k in ("partition", "n_rows", "n_iter", "converged",
                                             "seconds", "worker")}}

register_format(ENSEMBLE_FORMAT, load_ensemble, MANIFEST)
