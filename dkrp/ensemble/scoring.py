"""Scoring a trained ensemble: :func:`evaluate` (predict once, score the ensemble and
each voter) and :func:`summary_lines` (the per-voter table that ``dkrp train``,
``dkrp predict`` and the pipelines print)."""

from __future__ import annotations

import time

import numpy as np

from .._validation import is_dask_collection
from ..errors import InvalidInputError
from .voters import hard_vote


def evaluate(model, X, y=None, *, client=None, retries=0):
    """Predict ``X`` once and score the ensemble and each voter (the CLI's summary table).

    The voters' labels are computed in one pass (lazy and parallel for dask ``X``,
    on ``client`` when given); the hard vote is taken from them, the soft vote
    needs the decision functions as well. ``retries``: extra attempts of a row block's
    task that raises, on ``client`` (``Client.compute(retries=)``).

    Returns
    -------
    dict
        ``y_pred``, ``votes`` (n_samples, n_voters), ``seconds``, and when ``y`` is
        given ``accuracy``, ``macro_f1``, ``voter_accuracy`` (one per voter),
        ``unseen_classes`` (the labels of ``y`` that are not among ``model.classes_``,
        sorted; every row with one counts as an error) and ``n_unseen`` (those rows).
        :func:`unseen_classes_warning` words the last two for a user.
    """
    from sklearn.metrics import accuracy_score, f1_score

    t0 = time.perf_counter()
    parts = [model.predict_voters(X)]
    if model.voting == "soft":
        parts.append(model.predict(X))
    if y is not None and is_dask_collection(y):
        parts.append(y)
    if any(is_dask_collection(p) for p in parts):
        if client is not None:
            parts = client.gather(client.compute(parts, retries=retries))
        else:
            import dask

            parts = list(dask.compute(*parts))
    votes = np.asarray(parts[0])
    if model.voting == "soft":
        y_pred = np.asarray(parts[1])
    else:
        y_pred = model.classes_[hard_vote(np.searchsorted(model.classes_, votes),
                                          model.n_classes_)]
    if y is not None:
        y = np.asarray(parts[-1] if is_dask_collection(y) else y)
    out = {"y_pred": y_pred, "votes": votes, "seconds": time.perf_counter() - t0}
    if y is not None:
        if y.shape[0] != y_pred.shape[0]:
            raise InvalidInputError("Found input variables with inconsistent numbers of samples: "
                                    f"[{y_pred.shape[0]}, {y.shape[0]}]")
        out["accuracy"] = float(accuracy_score(y, y_pred))
        out["macro_f1"] = float(f1_score(y, y_pred, average="macro"))
        out["voter_accuracy"] = [float((votes[:, j] == y).mean())
                                 for j in range(votes.shape[1])]
        labels, counts = np.unique(y, return_counts=True)
        unseen = ~np.isin(labels, model.classes_)
        out["unseen_classes"] = labels[unseen].tolist()
        out["n_unseen"] = int(counts[unseen].sum())
    return out


def unseen_classes_warning(model, evaluation):
    """A sentence on the test labels the model never saw, or None when there are none.

    Such labels usually mean another encoding of the classes (``{0, 1}`` against a model
    trained on ``{-1, 1}``): the accuracy is then not the model's.
    """
    unseen = evaluation.get("unseen_classes")
    if not unseen:
        return None
    n = len(evaluation["y_pred"])
    return (f"{evaluation['n_unseen']} of {n} test rows have a label the model never saw "
            f"({', '.join(map(str, unseen))}); the model's classes are "
            f"{', '.join(map(str, model.classes_.tolist()))}. Those rows count as errors: "
            "check that the test labels are encoded as the training labels were.")


def summary_lines(model, evaluation=None):
    """The summary table: per voter its training time, solver and (with labels) accuracy."""
    has_acc = evaluation is not None and "voter_accuracy" in evaluation
    head = f"{'voter':>5} {'partition':>9} {'rows':>9} {'solver':<22} {'iter':>5} {'train s':>8}"
    if has_acc:
        head += f" {'accuracy':>8}"
    lines = [head, "-" * len(head)]
    for j, info in enumerate(model.voter_info_):
        part = "-" if info.get("partition") is None else str(info["partition"])
        line = (f"{j:>5} {part:>9} {info.get('n_rows') or 0:>9} {info.get('solver', ''):<22} "
                f"{info.get('n_iter') or 0:>5} {info.get('seconds') or 0:>8.2f}")
        if info.get("converged") is False:
            line += " (not converged)"
        if has_acc:
            line += f" {evaluation['voter_accuracy'][j]:>8.4f}"
        lines.append(line)
    lines.append("-" * len(head))
    fit_s = getattr(model, "fit_seconds_", float("nan"))
    line = f"{'vote':>5} {model.voting:>9} {'':>9} {'':<22} {'':>5} {fit_s:>8.2f}"
    if has_acc:
        line += f" {evaluation['accuracy']:>8.4f}"
    lines.append(line)
    if has_acc:
        acc = np.asarray(evaluation["voter_accuracy"])
        lines.append(f"ensemble accuracy {evaluation['accuracy']:.4f}, macro-F1 "
                     f"{evaluation['macro_f1']:.4f}; voters mean {acc.mean():.4f} (min "
                     f"{acc.min():.4f}, max {acc.max():.4f}); "
                     f"predict {evaluation['seconds']:.1f} s")
    return lines
