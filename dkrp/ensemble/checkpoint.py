"""Keeping each finished voter of a training job, so that running the job again resumes it.

A checkpoint directory (``fit(checkpoint=...)``; ``dkrp train --out MODEL`` uses
``.MODEL.partial`` beside it) holds ``job.json``, what identifies the job (the
estimator's parameters and seed, the resolved feature-map template, the training
data's shape, dtype and a hash of it, the classes), and per finished voter
``voter-<i>.npz`` (its arrays) then ``voter-<i>.json`` (its projector spec, linear
model, info and the SHA-256 of its arrays), each written through a temporary file and
an atomic rename: the JSON, written last, is the voter's done marker. No pickle.

A voter's seeds depend on the ensemble seed and its index only
(:func:`~dkrp.ensemble.voters.voter_seeds`), so a voter trained by a later run is the
one an uninterrupted run trains, bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError, Message
from .persistence import json_default, sha256_of_file

CHECKPOINT_FORMAT = "dkrp.ensemble.checkpoint"
JOB = "job.json"
_VOTER = re.compile(r"^voter-(\d+)\.(npz|json)$")
_INFO = ("partition", "n_rows", "n_iter", "converged", "seconds", "worker")

logger = logging.getLogger(__name__)


def _canonical(value):
    return json.loads(json.dumps(value, sort_keys=True, default=json_default))


def data_identity(X, y) -> dict:
    """What identifies the training data: shape, dtype, and a SHA-256 of all of it
    (in memory), or of X's first and last rows (a dask array, not read in full) and of
    all of ``y`` (one column: labels corrected in a re-ingested store change it)."""
    from .._validation import is_dask_collection

    identity = {"shape": [int(s) for s in X.shape], "dtype": str(X.dtype)}
    if is_dask_collection(X):
        from ..feature_store.fingerprint import input_fingerprint

        identity["edge_rows_sha256"] = input_fingerprint(X)["edge_rows_sha256"]
        h = hashlib.sha256()
        _update_labels(h, y.compute() if is_dask_collection(y) else y)
        identity["labels_sha256"] = h.hexdigest()
        return identity
    h = hashlib.sha256()
    if hasattr(X, "tocsr"):
        X = X.tocsr()
        for part in (X.indptr, X.indices, X.data):
            h.update(np.ascontiguousarray(part).tobytes())
    else:
        h.update(np.ascontiguousarray(X).tobytes())
    _update_labels(h, y)
    identity["sha256"] = h.hexdigest()
    return identity


def _update_labels(h, y) -> None:
    y = np.asarray(y)
    h.update(np.ascontiguousarray(y).tobytes() if y.dtype.kind != "O"
             else repr(y.tolist()).encode())


class Checkpoint:
    """The finished voters of one training job, kept in ``directory``.

    Use :meth:`open`; :meth:`finished` reads the kept voters, :meth:`keep` adds one,
    :meth:`remove` deletes what dkrp wrote there once the model is saved.

    Parameters
    ----------
    directory : pathlib.Path
    job : dict
        What identifies the job (JSON; see :mod:`dkrp.ensemble.checkpoint`).
    """

    def __init__(self, directory, job):
        self.directory = Path(directory)
        self.job = job

    @classmethod
    def open(cls, directory, job):
        """Create the checkpoint of ``job`` in ``directory``, or open the one there.

        Raises
        ------
        ValueError
            ``directory`` holds the checkpoint of another job (the message names what
            differs).
        FileExistsError
            ``directory`` is a file, or a directory of other files (not dkrp's).
        """
        directory = Path(directory)
        job = _canonical({"format": CHECKPOINT_FORMAT, **job})
        path = directory / JOB
        if directory.exists() and not directory.is_dir():
            raise FileExistsError(f"{directory} exists and is not a directory.")
        if path.exists():
            try:
                kept = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise FileExistsError(f"{path} is not the job file of a training checkpoint "
                                      f"({exc}); move {directory} away.") from exc
            if not isinstance(kept, dict) or kept.get("format") != CHECKPOINT_FORMAT:
                raise FileExistsError(f"{path} is not the job file of a training checkpoint "
                                      f"dkrp wrote; move {directory} away.")
            differences = _differences(kept, job)
            if differences:
                raise InvalidInputError(Message(
                    "{} holds the finished voters of another training job ({}): refused, so "
                    "that one model is not made of voters of two. Run that job again to "
                    "finish it, or remove {} to start this one.", directory,
                    "; ".join(differences), directory))
            return cls(directory, job)
        if directory.exists() and any(directory.iterdir()):
            raise FileExistsError(f"{directory} holds files and no {JOB}: it is not a "
                                  "training checkpoint dkrp made. Move it away.")
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, json.dumps(job, indent=1, sort_keys=True).encode())
        return cls(directory, job)

    def finished(self) -> dict:
        """The kept voters: index -> the result :func:`~dkrp.ensemble.voters.train_voter`
        returned. A voter whose files are incomplete or damaged is left out (trained again)."""
        n_voters = int(self.job["params"]["n_voters"])
        results = {}
        for entry in sorted(self.directory.iterdir()):
            match = _VOTER.match(entry.name)
            if not match or match.group(2) != "json" or int(match.group(1)) >= n_voters:
                continue
            i = int(match.group(1))
            try:
                results[i] = self._read(i)
            except Exception as exc:  # noqa: BLE001 - it is trained again instead
                logger.warning("voter %d in %s is not readable (%s); it is trained again",
                               i, self.directory, exc)
        return results

    def _read(self, i):
        meta = json.loads((self.directory / f"voter-{i}.json").read_text())
        npz = self.directory / f"voter-{i}.npz"
        if sha256_of_file(npz) != meta["arrays_sha256"]:
            raise InvalidInputError(f"{npz.name} does not match its SHA-256")
        with open(npz, "rb") as fh, np.load(fh, allow_pickle=False) as arrays:
            coef, intercept, classes = (arrays[k] for k in ("coef", "intercept", "classes"))
        if int(meta["index"]) != i:
            raise InvalidInputError(f"voter-{i}.json is voter {meta['index']}'s")
        return {"index": i, "spec": meta["spec"], "model_class": meta["model_class"],
                "model_params": meta["model_params"], "coef": coef, "intercept": intercept,
                "classes": classes, **{k: meta["info"][k] for k in _INFO}}

    def keep(self, result):
        """Write one voter's ``result`` (its arrays, then its JSON: the done marker)."""
        i = int(result["index"])
        npz = self.directory / f"voter-{i}.npz"
        tmp = self.directory / f".voter-{i}.tmp.npz"
        np.savez(tmp, coef=result["coef"], intercept=result["intercept"],
                 classes=storable_classes(result["classes"]))
        os.replace(tmp, npz)
        meta = {"index": i, "spec": result["spec"], "model_class": result["model_class"],
                "model_params": result["model_params"],
                "info": {k: result[k] for k in _INFO}, "arrays_sha256": sha256_of_file(npz)}
        text = json.dumps(meta, indent=1, sort_keys=True, default=json_default)
        _write_atomically(self.directory / f"voter-{i}.json", text.encode())

    def remove(self):
        """Delete the files dkrp wrote here, then the directory if nothing else is left."""
        for entry in self.directory.iterdir():
            name = entry.name
            if name == JOB or _VOTER.match(name) or re.match(r"^\.(voter-\d+|job)\.tmp", name):
                entry.unlink()
        try:
            self.directory.rmdir()
        except OSError:  # someone else's file is in there: left as it is
            logger.warning("%s holds files dkrp did not write; left in place", self.directory)


def storable_classes(classes) -> np.ndarray:
    """``classes`` as an array ``.npz`` holds without pickle: strings of an object array
    become a unicode array (what a reader of text labels gives), numbers stay as they are.

    Raises
    ------
    dkrp.errors.InvalidInputError
        Labels that are neither numbers nor all strings.
    """
    classes = np.asarray(classes)
    if classes.dtype.kind == "O" and all(isinstance(c, str) for c in classes.tolist()):
        classes = classes.astype(str)
    if classes.dtype.kind not in "biufU":
        raise InvalidInputError(f"Labels of dtype {classes.dtype} cannot be kept in a "
                                "checkpoint without pickle; use integer or string labels.")
    return classes


def _write_atomically(path, data: bytes):
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _differences(kept, job) -> list:
    """What differs between the checkpoint's job and this one, as ``name: kept, now``."""
    out = []
    for key in sorted(set(kept) | set(job)):
        old, new = kept.get(key), job.get(key)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            for sub in sorted(set(old) | set(new)):
                if old.get(sub) != new.get(sub):
                    name = sub if key == "params" else f"{key} {sub}"
                    out.append(f"{name} {old.get(sub)!r} in the checkpoint, "
                               f"{new.get(sub)!r} now")
        else:
            out.append(f"{key} {old!r} in the checkpoint, {new!r} now")
    return out
