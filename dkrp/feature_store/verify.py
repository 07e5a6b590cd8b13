"""Verifying a store chunk by chunk, and repairing a feature store's bad chunks.

This module owns :func:`verify_store` (``dkrp verify STORE [--repair]``) and
:func:`verify_features`. Every chunk of every array is checked: its file must
exist, and it must decode, which checks its ``crc32c`` checksum (stores written
before dkrp added checksums can only be checked for missing and undecodable
chunks). A feature store's bad chunks are recomputed from the spec in the store
and the input recorded in its attributes: features are reproducible, so the
repaired store is byte-identical to a clean run. The input is first checked
against the store's input fingerprint (:func:`dkrp.feature_store.plan_features`
refuses another input), and the chunks are rewritten by the same chunk-write
tasks as ``featurize`` (:mod:`dkrp.feature_store.tasks`). Bad chunks of the labels
``y`` are copied again from the input's labels. A dataset store cannot
be rebuilt from itself: :func:`dkrp.io.verify_dataset` says how to re-ingest it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .._chunks import check_arrays, check_chunks, chunk_key, chunk_region, open_checked_metadata
from .._store import read_attrs
from ..errors import (
    FeatureStoreError,
    FeatureStoreMismatchError,
    InvalidInputError,
    Message,
    Param,
)
from .format import FEATURES_FORMAT

logger = logging.getLogger(__name__)

#: The input to repair from (``dkrp verify --input PATH``)
_INPUT = Param("input", metavar="PATH")

__all__ = ["verify_features", "verify_store"]


def verify_store(path, *, repair=False, client=None, input=None, labels=None,
                 progress=False, retries=0) -> dict:
    """Check every chunk of a dataset or feature store; repair a feature store's bad ones.

    Parameters
    ----------
    path : str or os.PathLike
        A dataset store (:func:`dkrp.io.ingest`) or a feature store
        (``dkrp featurize``).
    repair : bool, default=False
        Feature stores: recompute and rewrite exactly the missing and corrupt chunks
        (see :func:`verify_features`). Dataset stores cannot be repaired from
        themselves; the report's ``advice`` says how to re-ingest.
    client, input, labels, progress, retries
        See :func:`verify_features` (only ``client`` applies to dataset stores).

    Returns
    -------
    dict
        ``format`` (``"features"``/``"dataset"``), ``path``, ``complete``, ``ok`` (no
        bad chunk left), ``checksums`` (False for stores written before dkrp added
        crc32c checksums: changed bytes cannot be detected in those), ``arrays``,
        ``chunks_checked``, ``problems`` (each ``{"array", "chunk", "file",
        "problem": "missing"|"corrupt", "detail"}``), ``repaired`` (chunk indices
        rewritten; of ``Z`` in a feature store) and ``advice`` (what to do, or None).
        A feature store's report has the keys of :func:`verify_features` too.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    FeatureStoreError
        Not a dkrp store; or a repair that cannot be done (no recorded input, an
        input that does not match the store's fingerprint).
    """
    from ..io import DATASET_FORMAT, verify_dataset

    path = Path(path).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No store at {path}: the path does not exist.")
    attrs = read_attrs(path)
    kind = None if attrs is None else attrs.get("dkrp_format")
    if kind == DATASET_FORMAT:
        return verify_dataset(path, client=None if callable(client) else client)
    if kind != FEATURES_FORMAT:
        raise FeatureStoreError(
            f"{path} is not a dkrp dataset or feature store (attribute dkrp_format is {kind!r})."
        )
    return verify_features(path, repair=repair, client=client, input=input, labels=labels,
                           progress=progress, retries=retries)


def verify_features(path, *, repair=False, client=None, input=None, labels=None,
                    progress=False, retries=0, check=True) -> dict:
    """Check every chunk of a feature store and, with ``repair``, rewrite the bad ones.

    Every array is checked: ``Z``, ``done`` and, in a store with labels, ``y``. A
    chunk is bad when its ``Z`` chunk file is missing or corrupt although it is
    marked done (or the store is complete), or its ``done`` marker is corrupt (or
    missing from a complete store). The chunks of an unfinished run that are not
    done yet are not bad: they are counted as ``pending`` (rerun featurize). Every
    missing or corrupt chunk of ``y`` is bad (labels are written before the first
    chunk of ``Z``).

    Parameters
    ----------
    path : str or os.PathLike
        The feature store.
    repair : bool, default=False
        Recompute the bad chunks from the store's spec and its input and rewrite
        them (their ``Z`` chunk and ``done`` marker), and copy the bad chunks of
        ``y`` from the input's labels: the store becomes byte-identical to a clean
        run. Nothing else in the store is written.
    client : distributed.Client or callable, optional
        The cluster that recomputes the chunks (a zero-argument callable is called
        only when there is something to repair). A client also reads the chunks
        for the check; default, dask's default scheduler.
    input : str, os.PathLike or dask.array.Array, optional
        The input to recompute from. Default: the ``source_path`` recorded in the
        store's input fingerprint. Either way it must match that fingerprint, which
        knows an input by its content: a moved or copied one matches
        (:func:`~dkrp.feature_store.input_fingerprint`).
    labels : array-like of shape (n_samples,), optional
        The labels to repair ``y`` from, when ``input`` is a dask array. A dataset
        store brings its own, and giving ``labels`` with one is refused.
    progress : bool or callable, default=False
        As for :func:`dkrp.feature_store.write_features`.
    retries : int, default=0
        As for :func:`dkrp.feature_store.write_features`.
    check : bool, default=True
        Check that the cluster's workers regenerate the projector before writing.

    Returns
    -------
    dict
        As :func:`verify_store`, plus ``bad_chunks`` (chunk indices of ``Z`` found
        bad), ``bad_labels`` (of ``y``), ``repaired_labels`` (chunks of ``y``
        rewritten) and ``pending`` (chunks an unfinished run has not written yet).

    Raises
    ------
    FeatureStoreError
        As :func:`verify_store`; also a store that says it holds labels but lacks
        array ``y``, and a repair of ``y`` from an input without labels.
    """
    path = Path(path).expanduser().absolute()
    attrs = read_attrs(path)
    if attrs is None or attrs.get("dkrp_format") != FEATURES_FORMAT:
        raise FeatureStoreError(f"{path} is not a dkrp feature store.")
    n_chunks = int(attrs.get("n_chunks", 0))
    complete = attrs.get("complete") is True
    # the done markers first: a writer still running writes a chunk before its marker,
    # so a chunk marked done here is on disk when the chunks are listed below
    done_array = open_checked_metadata(path, "done")
    done = np.zeros(n_chunks, dtype=bool)
    for i in range(n_chunks):
        try:
            done[i] = bool(done_array[i] == 1)
        except Exception:  # noqa: BLE001 - a corrupt marker, reported by check_arrays
            pass
    reader = None if callable(client) else client
    names = ["Z", "done"]
    labels_meta = path / "y" / "zarr.json"
    if attrs.get("has_labels") is True and not labels_meta.is_file():
        raise FeatureStoreError(f"{path} says it holds labels but has no array y (y/zarr.json "
                                "is missing): the store is damaged. Featurize the input again.")
    if labels_meta.is_file():
        names.append("y")
    report = check_arrays(path, names, client=reader)

    problems, bad, bad_labels = [], set(), set()
    for p in report["problems"]:
        i = int(p["chunk"][0])
        if p["array"] == "y":  # written whole before the first chunk of Z: never pending
            problems.append(p)
            bad_labels.add(i)
            continue
        counts = (p["problem"] == "corrupt" and p["array"] == "done") or complete or done[i]
        if counts:
            problems.append(p)
            bad.add(i)
    # a chunk whose marker is corrupt is bad (repair rewrites it), not also pending
    pending = 0 if complete else sum(1 for i in range(n_chunks) if not done[i] and i not in bad)
    result = {
        "format": FEATURES_FORMAT,
        "path": str(path),
        "complete": complete,
        "ok": not (bad or bad_labels),
        "checksums": all(a["checksums"] for a in report["arrays"].values()),
        "arrays": report["arrays"],
        "chunks_checked": report["chunks_checked"],
        "problems": problems,
        "bad_chunks": sorted(bad),
        "bad_labels": sorted(bad_labels),
        "pending": pending,
        "repaired": [],
        "repaired_labels": [],
        "advice": None,
    }
    if (bad or bad_labels) and not repair:
        what = [f"recompute the {len(bad)} bad chunk(s) of Z from the spec and the input"
                ] if bad else []
        what += [f"copy the {len(bad_labels)} bad chunk(s) of the labels y from the input"
                 ] if bad_labels else []
        result["advice"] = f"Run `dkrp verify {path} --repair` to {' and '.join(what)}."
    if (bad or bad_labels) and repair:
        _repair(path, attrs, sorted(bad), sorted(bad_labels), client=client, input=input,
                labels=labels, progress=progress, retries=retries, check=check)
        result["repaired"], result["repaired_labels"] = sorted(bad), sorted(bad_labels)
        left = _recheck(path, sorted(bad))
        left_labels = _recheck_labels(path, sorted(bad_labels)) if bad_labels else []
        result["ok"] = not (left or left_labels)
        if not result["ok"]:  # pragma: no cover - defensive: the rewrite did not take
            result["advice"] = (f"Chunks {left} of Z and {left_labels} of y are still bad "
                                "after the repair.")
    if pending and result["ok"]:
        result["advice"] = (f"The store is incomplete: {pending} of {n_chunks} chunks are "
                            "not written yet. Run the same featurize command again to "
                            "finish it.")
    return result


def _repair(path, attrs, bad, bad_labels, *, client, input, labels, progress, retries,
            check):
    """Recompute chunks ``bad`` of ``Z`` of the store at ``path`` and rewrite them; copy
    chunks ``bad_labels`` of ``y`` from the input's labels."""
    import dask.array as da

    from .._spec import from_spec
    from ..io.inputs import open_labelled_input
    from ..parallel import check_workers
    from .encoding import store_options
    from .format import label_values, write_label_chunks
    from .plan import plan_features
    from .tasks import run_chunk_writes
    from .write import remove_partial_files

    projector = from_spec(attrs["spec"])  # regenerates the hyperplanes, checks the checksum
    fingerprint = attrs.get("input") or {}
    source = input if input is not None else fingerprint.get("source_path")
    if source is None:
        raise FeatureStoreError(
            f"Cannot repair {path}: it records no input path (it was written from an "
            "in-memory array). Pass the same input: verify_features(..., input=X)."
        )
    if isinstance(source, da.Array):
        X, provenance = source, None
    else:
        try:
            X, provenance, opened_labels = open_labelled_input(source)
        except FileNotFoundError as exc:
            raise FeatureStoreError(Message(
                "Cannot repair {}: its input {} is gone ({}). Pass the same input ({}), or "
                "featurize it again.", path, source, exc, _INPUT)) from exc
        if opened_labels is not None and labels is not None:
            # the store's y came from the input's own labels: others would make a store
            # that no clean run of this job writes
            raise InvalidInputError(Message(
                "Cannot repair {}: its input {} brings its own labels, and labels= gives "
                "others. Nothing was changed. Leave out labels= to copy the input's.",
                path, source))
        labels = opened_labels if labels is None else labels
    where = "the input given" if isinstance(source, da.Array) else f"the input {source}"
    # the same checks as a resume: another input, spec, dtype or shape is refused here
    try:
        plan = plan_features(X, projector, path, source=provenance, **store_options(attrs))
    except FeatureStoreMismatchError as exc:
        raise FeatureStoreMismatchError(Message(
            "Cannot repair {}: {} is not the one it was made from: {}. Nothing was changed. "
            "Pass the input the store was made from ({}), or featurize that input again into "
            "a new store.", path, where, Message.join("; ", exc.problems), _INPUT),
            problems=exc.problems) from exc
    if bad_labels:
        if labels is None:
            raise FeatureStoreError(
                Message("Cannot repair the labels of {}: {} has no labels. Pass the labels "
                        "the store was featurized with (verify_features(..., labels=y)), or "
                        "the dataset store they came from ({}).", path, where, _INPUT)
                if not isinstance(source, da.Array) else
                f"Cannot repair the labels of {path}: pass the input's labels too "
                "(verify_features(..., input=X, labels=y)).")
        values = label_values(labels)
        if values.shape != (int(attrs["n_samples"]),):
            raise FeatureStoreError(
                f"Cannot repair the labels of {path}: the input has {values.shape[0]} "
                f"labels, the store {attrs['n_samples']} rows.")
    current = None
    if bad:
        current = client() if callable(client) else client
        if check and current is not None:  # before anything in the store changes
            check_workers(current, projector)
    if bad_labels:
        logger.info("%s: copying chunks %s of the labels from the input", path, bad_labels)
        write_label_chunks(path, values, bad_labels)
    if not bad:
        return

    import zarr

    Z = zarr.open_array(str(path / "Z"), mode="r")
    done = zarr.open_array(str(path / "done"), mode="r")
    remove_partial_files(path)
    for i in bad:  # rewritten from nothing, exactly as in a clean run
        (path / "Z" / chunk_key(Z, (i, 0))).unlink(missing_ok=True)
        (path / "done" / chunk_key(done, (i,))).unlink(missing_ok=True)
    logger.info("%s: recomputing chunks %s", path, bad)
    n_chunks = int(attrs["n_chunks"])
    run_chunk_writes(plan["X"], projector, plan["dtype"], path, list(bad), current, progress,
                     n_chunks, n_chunks - len(bad), retries, store=plan["store"])


def _recheck(path, chunks) -> list[int]:
    """The chunks among ``chunks`` whose ``Z`` chunk or ``done`` marker is still bad."""
    import zarr

    left = []
    Z = zarr.open_array(str(path / "Z"), mode="r")
    done = zarr.open_array(str(path / "done"), mode="r")
    for i in chunks:
        files = [path / "Z" / chunk_key(Z, (i, 0)), path / "done" / chunk_key(done, (i,))]
        if (not all(f.is_file() for f in files)
                or check_chunks(path / "Z", [(i, 0)])
                or check_chunks(path / "done", [(i,)])
                or done[chunk_region(done, (i,))][0] != 1):
            left.append(i)
    return left


def _recheck_labels(path, chunks) -> list[int]:
    """The chunks among ``chunks`` of ``y`` whose file is missing or still bad (a missing
    chunk reads as the fill value without an error, so its file is looked for first)."""
    import zarr

    y = zarr.open_array(str(path / "y"), mode="r")
    gone = [i for i in chunks if not (path / "y" / chunk_key(y, (i,))).is_file()]
    return sorted(gone + [c[0] for c, _ in check_chunks(path / "y", [(i,) for i in chunks
                                                                       if i not in gone])])
