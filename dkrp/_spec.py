"""Projector specs: the registry of classes, JSON specs, rebuild, save and load.

A spec is the JSON description of a fitted projector. For data-independent maps it
holds the class, the parameters, the number of input features and the seed: the
hyperplanes are regenerated from it. Data-dependent maps also carry their learnt
arrays (base64 ``.npy`` inside the spec, or an ``.npz`` beside a saved JSON file).
Every spec records a SHA-256 of the state arrays; :func:`rebuild` recomputes it and
refuses a mismatch, so a process that would regenerate other hyperplanes (another
numpy, say) never silently produces other features.

This module owns that format and is the only place a projector is rebuilt from a
spec: :func:`dkrp.from_spec`, :func:`dkrp.load`, the workers of the dask path and
:func:`dkrp.parallel.check_workers` all call :func:`rebuild`. It talks to
projectors only through the hooks of :class:`dkrp.base.BaseProjector` and never
imports it (the base class registers its subclasses here).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import io
import json
import os
import re
from pathlib import Path

import numpy as np

from ._names import PROJECTORS
from ._npy import load as load_npy
from ._random import array_checksum
from .errors import InvalidTypeError, SpecError

__all__ = [
    "SPEC_FORMAT",
    "SPEC_FORMAT_VERSION",
    "SpecError",
    "register",
    "registered_projectors",
    "to_spec",
    "spec_json",
    "rebuild",
    "from_spec",
    "save",
    "load",
    "register_format",
]

SPEC_FORMAT = "dkrp.projector"
SPEC_FORMAT_VERSION = 1

#: Projector classes other than dkrp's own (:data:`dkrp._names.PROJECTORS`), by spec
#: name: subclasses defined elsewhere (e.g. :class:`dkrp.testing.faulty.FaultyProjection`),
#: which register themselves when their module is imported.
_REGISTRY: dict[str, type] = {}
#: Saved formats other than a projector, read by :func:`load`: format -> (loader, manifest
#: file name). Modules register themselves when imported; ``_FORMAT_MODULES`` names the
#: module to import for a format not registered yet (imported lazily, so this module
#: never imports them at module level).
_FORMATS: dict[str, tuple] = {}
_FORMAT_MODULES = {"dkrp.ensemble": "dkrp.ensemble"}


def _target(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register(cls) -> type:
    """Record ``cls`` under its class name so specs naming it can be rebuilt.

    A spec names its class by ``__name__`` alone, so a name identifies one class: the
    names of dkrp's projectors (:data:`dkrp._names.PROJECTORS`) are theirs, and any other
    name belongs to the first class registered under it. The same definition registered
    again (a module reloaded, a notebook cell rerun) replaces it.

    Raises
    ------
    TypeError
        If the name is taken by another class (a subclass named like a dkrp projector, or
        two classes of one name in different modules): otherwise every later
        :func:`from_spec` of a spec naming it would build the wrong class.
    """
    name, target = cls.__name__, _target(cls)
    taken = PROJECTORS.get(name) or (_target(_REGISTRY[name]) if name in _REGISTRY else None)
    if taken is not None and taken != target:
        raise InvalidTypeError(
            f"Cannot register the projector class {target} as {name!r}: that spec name is "
            f"taken by {taken}, and a spec names its class by name alone, so specs of one "
            f"would rebuild the other. Give the class another name (e.g. My{name}).")
    if name not in PROJECTORS:
        _REGISTRY[name] = cls
    return cls


def registered_projectors() -> dict[str, type]:
    """Map of spec class names to projector classes (every public projector of dkrp, and
    any other subclass defined so far)."""
    return {**{name: _registered_class(name) for name in PROJECTORS}, **_REGISTRY}


def _registered_class(name):
    """The class a spec naming ``name`` rebuilds: dkrp's own from :data:`PROJECTORS`
    (importing its module: ``import dkrp`` imports the projector modules lazily), others
    from the registry. None for an unknown name; an ImportError of the module itself
    propagates."""
    if isinstance(name, str) and name in PROJECTORS:
        module, _, qualname = PROJECTORS[name].partition(":")
        return getattr(importlib.import_module(module), qualname)
    return _REGISTRY.get(name) if isinstance(name, str) else None


def _dkrp_version() -> str:
    from . import __version__

    return __version__


@functools.lru_cache(maxsize=1)
def machine() -> dict:
    """The running machine as a spec records it: numpy's BLAS and the kernel it runs
    (e.g. ``"openblas Haswell"``) and the widest vector extension numpy dispatches to.

    Draws never depend on them (the seed contract); a spec carries them so that a
    checksum refused on another machine can say what differs.
    """
    blas = "unknown"
    try:
        from threadpoolctl import threadpool_info

        for info in threadpool_info():
            if info.get("user_api") == "blas" and "numpy" in info.get("filepath", ""):
                blas = f"{info.get('internal_api')} {info.get('architecture')}"
                break
    except Exception:  # noqa: BLE001 - a description only; never fail a spec for it
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # pragma: no cover - numpy < 2
        features = {}
    order = ("AVX512_SKX", "AVX512F", "AVX2", "AVX", "SSE42", "ASIMD", "NEON")
    cpu = next((name for name in order if features.get(name)), "baseline")
    return {"blas": blas, "cpu": cpu}


def encode_array(a: np.ndarray) -> str:
    """An array as base64 ``.npy`` text (no pickle)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def decode_array(text: str) -> np.ndarray:
    """Inverse of :func:`encode_array`; object arrays are refused."""
    return load_npy(io.BytesIO(base64.b64decode(text.encode("ascii"))))


def state_checksum(est) -> str:
    """SHA-256 of the projector's state arrays, in declaration order, and of its scaling.

    A projector without ``preprocessing_`` (every spec written before scaling existed)
    keeps the checksum of its state arrays alone.
    """
    from .preprocessing import checksum

    base = array_checksum(*est._state_arrays().values())
    return checksum(base, getattr(est, "preprocessing_", None))


def to_spec(est) -> dict:
    """The JSON-serialisable spec of a fitted projector (see :meth:`BaseProjector.to_spec`)."""
    params = {name: plain_json(value) for name, value in est.get_params(deep=False).items()}
    params["random_state"] = int(est.seed_)
    spec = {
        "format": SPEC_FORMAT,
        "format_version": SPEC_FORMAT_VERSION,
        "class": type(est).__name__,
        "params": params,
        "n_features_in": int(est.n_features_in_),
        "seed": int(est.seed_),
        "fitted": _fitted(est),
        "arrays": None,
        "checksum": est.spec_checksum_,
        "versions": {"dkrp": _dkrp_version(), "numpy": np.__version__, **machine()},
    }
    spec["params_checksum"] = params_checksum(spec)
    if est.data_dependent:
        spec["arrays"] = {k: encode_array(v) for k, v in est._state_arrays().items()}
    json.dumps(spec)  # fail here, not on a worker, if something is not JSON-able
    return spec


def plain_json(value):
    """A value as JSON holds it: numpy scalars (a grid from ``np.arange`` or
    ``np.logspace`` hands them out) become the Python numbers they equal, so the spec and
    its checksum are those of ``n_components=10``, not a ``TypeError`` (and a message
    says ``0``, not ``np.int64(0)``)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return type(value)(plain_json(v) for v in value)
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    return value


#: What a spec says of its map besides the state arrays, which ``checksum`` covers.
_DESCRIBED = ("class", "params", "n_features_in", "seed", "fitted")


def params_checksum(spec: dict) -> str:
    """SHA-256 of a spec's class, parameters, input width, seed and fitted values.

    The state checksum covers only the arrays a rebuild makes, and a data-dependent map
    carries its learnt arrays: an edited Nyström ``gamma`` or PCA ``whiten`` would
    rebuild the same arrays and silently map rows differently. Specs written before
    this field existed load as before (without the check).
    """
    described = {key: spec.get(key) for key in _DESCRIBED}
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_params_checksum(spec):
    recorded = spec.get("params_checksum")
    if recorded is not None and recorded != params_checksum(spec):
        raise SpecError(
            f"This {spec.get('class')} spec disagrees with itself: its class, parameters, "
            "input width, seed or fitted values are not those it was written with "
            "(params_checksum). An edited spec maps rows differently from the store or "
            "model it came with: restore it from where it came from (a feature store "
            "keeps its spec: dkrp info --spec STORE), or fit a new map with the "
            "parameters you want instead of editing a spec."
        )


def _fitted(est) -> dict:
    """The spec's fitted values: the class's, plus ``preprocessing`` when it scales rows."""
    fitted = est._fitted_extras()
    prep = getattr(est, "preprocessing_", None)
    if prep:
        fitted["preprocessing"] = prep
    return fitted


def spec_json(est) -> str:
    """The spec as canonical JSON text (sorted keys): the dask path's task payload."""
    return json.dumps(est.to_spec(), sort_keys=True, separators=(",", ":"))


def _parse(spec) -> dict:
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise SpecError(f"Not a dkrp projector spec: invalid JSON ({exc}).") from exc
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise SpecError(f"Not a dkrp projector spec (expected format={SPEC_FORMAT!r}).")
    if spec.get("format_version") != SPEC_FORMAT_VERSION:
        raise SpecError(
            f"Unsupported spec format_version {spec.get('format_version')!r}; this dkrp "
            f"reads version {SPEC_FORMAT_VERSION}."
        )
    return spec


def _check_redundant_fields(spec, est, seed):
    """Refuse a spec whose copies of one value disagree (a hand edit, say)."""
    random_state = spec["params"].get("random_state", seed)
    if random_state != seed:
        raise SpecError(
            f"This {spec['class']} spec disagrees with itself: params.random_state is "
            f"{random_state!r} but seed is {seed}. The spec was edited or corrupted; to use "
            "another seed, fit a new projector (e.g. dkrp featurize --seed N) instead of "
            "editing a spec."
        )


def rebuild(spec, *, verify=True):
    """Rebuild the fitted projector a spec describes.

    Parameters
    ----------
    spec : dict or str
        A dict from :func:`to_spec`, or its JSON text.
    verify : bool, default=True
        Compare the rebuilt state's checksum with the recorded one and raise on a
        mismatch. ``False`` returns the projector as this process rebuilds it, with
        ``spec_checksum_`` set to what it computed (used to report the mismatch).

    Returns
    -------
    projector : BaseProjector

    Raises
    ------
    SpecError
        Malformed spec, unknown class, or a checksum mismatch.
    """
    spec = _parse(spec)
    name = spec.get("class")
    cls = _registered_class(name)
    if cls is None:
        raise SpecError(f"Unknown projector class {name!r}; known: "
                        f"{sorted(registered_projectors())}.")
    try:
        est = cls(**spec["params"])
        n_features = int(spec["n_features_in"])
        seed = int(spec["seed"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"Malformed {name} spec: {type(exc).__name__}: {exc}.") from exc
    _check_redundant_fields(spec, est, seed)
    est.n_features_in_ = n_features
    est._resolve_params(n_features)
    est.seed_ = seed
    fitted = {**est.legacy_fitted_values, **(spec.get("fitted") or {})}
    prep = fitted.pop("preprocessing", None)
    for key, value in est._fitted_values_from_params().items():
        if key in fitted and fitted[key] != value:
            raise SpecError(
                f"This {name} spec disagrees with itself: its parameters give {key}={value!r} "
                f"but its fitted values say {fitted[key]!r}. The spec was edited or "
                "corrupted: refit the projector (or restore the saved file) instead of "
                "editing it."
            )
    est._set_fitted_extras(fitted)
    if cls.data_dependent:
        arrays = spec.get("arrays")
        if not arrays:
            raise SpecError(f"The spec of {name} carries no learnt arrays.")
        est._set_state_arrays({k: decode_array(v) for k, v in arrays.items()})
    else:
        est._draw_state(None, n_features)
    if prep is not None:
        from .preprocessing import check_preprocessing

        try:
            est.preprocessing_ = check_preprocessing(prep, n_features)
        except ValueError as exc:
            raise SpecError(f"Malformed {name} spec: {exc}") from exc
    checksum = state_checksum(est)
    est.spec_checksum_ = checksum
    if verify and checksum != spec.get("checksum"):
        _refuse_checksum_mismatch(spec, name, checksum)
    if verify:  # last: the checks above say more where they apply
        _check_params_checksum(spec)
    return est


def _release(version) -> tuple | None:
    """The release numbers of a version (``"0.2.0"`` -> ``(0, 2, 0)``); None if it has none."""
    found = re.match(r"\d+(\.\d+)*", version) if isinstance(version, str) else None
    return tuple(int(part) for part in found.group().split(".")) if found else None


def _refuse_checksum_mismatch(spec, name, checksum):
    """Raise the SpecError of a rebuilt state that does not match the spec's checksum,
    saying the likeliest cause from what the spec records of where it was written.

    A spec that disagrees with itself (``params_checksum``) was edited, whoever wrote it.
    Another numpy, or a dkrp that is not older than this one, may draw other bits: pin the
    versions. A dkrp rebuilds the specs of its earlier releases bit for bit (old draws
    stay behind ``legacy_fitted_values``), so a spec of an older dkrp is judged as one of
    this dkrp: another kind of machine (draw version 1 pools), or edited or corrupted.
    """
    versions = spec.get("versions") or {}
    here = {"numpy": np.__version__, "dkrp": _dkrp_version(), **machine()}
    mismatch = (f"The {name} rebuilt from this spec does not match its checksum (spec "
                f"{str(spec.get('checksum'))[:12]}…, here {checksum[:12]}…)")
    there_dkrp, there_release, here_release = (
        versions.get("dkrp"), _release(versions.get("dkrp")), _release(here["dkrp"]))
    older_dkrp = (there_dkrp != here["dkrp"] and None not in (there_release, here_release)
                  and there_release < here_release)
    other_versions = versions.get("numpy") != here["numpy"] or (
        there_dkrp != here["dkrp"] and not older_dkrp)
    other_machine = [f"{key} {versions[key]!r} there, {here[key]!r} here"
                     for key in ("blas", "cpu") if key in versions and versions[key] != here[key]]
    if other_versions or other_machine:
        _check_params_checksum(spec)  # an edit explains it wherever the spec was written
    if other_versions:
        raise SpecError(
            f"{mismatch}. The spec was written with numpy {versions.get('numpy')} and "
            f"dkrp {there_dkrp}; this process has numpy {here['numpy']} and "
            f"dkrp {here['dkrp']}. Pin the same versions on every client and worker.")
    wrote = (f"the same numpy ({here['numpy']}) and dkrp ({here['dkrp']}) that wrote it"
             if not older_dkrp else
             f"the same numpy ({here['numpy']}) that wrote it and dkrp {here['dkrp']}, "
             f"which rebuilds the specs of dkrp {there_dkrp} bit for bit")
    if other_machine:
        raise SpecError(
            f"{mismatch}, with {wrote}, on another kind of machine "
            f"({'; '.join(other_machine)}). A spec written before dkrp drew every "
            "pool with the same bits everywhere (orthogonal or tight-frame pools, SRF "
            "radii: no draw_version_ 2) rebuilds only where it was written: use it "
            "there, or fit the map again (new fits draw the same bits on every machine).")
    raise SpecError(
        f"{mismatch}, with {wrote}: the spec was edited or corrupted. Restore it from "
        "where it came from (a feature store keeps its spec: dkrp info --spec STORE) or "
        "refit.")


def from_spec(spec):
    """Rebuild a fitted projector from its spec, bit for bit.

    Parameters
    ----------
    spec : dict or str
        A dict from :meth:`BaseProjector.to_spec`, or its JSON text.

    Returns
    -------
    projector : BaseProjector

    Raises
    ------
    SpecError
        If the spec is malformed or the regenerated state does not match the
        recorded checksum (e.g. a process with another numpy build).
    """
    return rebuild(spec, verify=True)


def save(est, path) -> Path:
    """Save ``est`` as JSON (``path``) plus ``.npz`` of learnt arrays where there are any.

    Both files are written to temporary names and renamed into place. No pickle is
    involved: :func:`load` reads JSON and ``np.load(..., allow_pickle=False)``.
    """
    path = Path(path)
    spec = est.to_spec()
    arrays = spec.pop("arrays")
    if arrays is not None:
        npz = path.with_suffix(".npz")
        _check_arrays_file_is_ours(path, npz)
        decoded = {k: decode_array(v) for k, v in arrays.items()}
        tmp = npz.with_name(npz.name + ".tmp.npz")
        np.savez(tmp, **decoded)
        os.replace(tmp, npz)
        spec["arrays_file"] = npz.name
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(spec, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


def _check_arrays_file_is_ours(path: Path, npz: Path) -> None:
    """Refuse to write the arrays beside ``path`` over an ``.npz`` that is not the arrays
    file of a spec saved at ``path`` (``path`` is the caller's to name; its sibling is not)."""
    if not npz.exists():
        return
    try:
        ours = json.loads(path.read_text()).get("arrays_file") == npz.name
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise FileExistsError(
            f"Refusing to write {npz}: the learnt arrays of {path} go there, but that file "
            f"is not the arrays file of a spec saved at {path.name}. Move it away or save "
            "under another name.")


def register_format(name, loader, manifest):
    """Let :func:`load` read a saved directory whose ``manifest`` JSON says ``format=name``.

    ``loader(manifest_dict, directory)`` returns the loaded object.
    """
    _FORMATS[name] = (loader, manifest)


def _format_loader(name):
    if name not in _FORMATS and name in _FORMAT_MODULES:
        importlib.import_module(_FORMAT_MODULES[name])
    return _FORMATS.get(name, (None, None))[0]


def _load_directory(path: Path):
    for name in _FORMAT_MODULES:
        _format_loader(name)
    manifests = sorted({m for _, m in _FORMATS.values()})
    found = [path / m for m in manifests if (path / m).is_file()]
    if not found:
        raise FileNotFoundError(
            f"{path} is a directory but holds no saved dkrp model (expected "
            f"{' or '.join(manifests)})."
        )
    try:
        manifest = json.loads(found[0].read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{found[0]} is not valid JSON: {exc}") from exc
    loader = _format_loader(manifest.get("format")) if isinstance(manifest, dict) else None
    if loader is None:
        raise SpecError(f"{found[0]} does not describe a saved dkrp model (format "
                        f"{manifest.get('format') if isinstance(manifest, dict) else None!r}).")
    return loader(manifest, path)


def load(path):
    """Load a saved dkrp object: a projector (JSON + optional ``.npz``, from
    :meth:`BaseProjector.save`) or a model directory (e.g. a
    :class:`~dkrp.ensemble.RandomFeatureVotingClassifier` saved with ``save``).

    Nothing is unpickled: JSON and ``np.load(..., allow_pickle=False)`` only.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No saved dkrp object at {path}.")
    if path.is_dir():
        return _load_directory(path)
    try:
        spec = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path} is not a JSON projector spec: {exc}") from exc
    if isinstance(spec, dict) and spec.get("format") != SPEC_FORMAT:
        loader = _format_loader(spec.get("format"))
        if loader is not None:
            return loader(spec, path.parent)
    arrays_file = spec.pop("arrays_file", None) if isinstance(spec, dict) else None
    if arrays_file is not None:
        npz_path = path.parent / arrays_file
        try:
            with np.load(npz_path, allow_pickle=False) as npz:
                spec["arrays"] = {k: encode_array(npz[k]) for k in npz.files}
        except ValueError as exc:  # object arrays need pickle: refuse them
            raise SpecError(f"{npz_path} holds arrays that would need pickle: refused.") from exc
    return from_spec(spec)
