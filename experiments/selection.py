"""The selection sets of the defaults protocol (experiments/PROTOCOL.md), for the experiments
that compare candidate defaults on them (stage1.py, lambdas.py, scale.py, sharing.py,
relationship.py, bias.py): the known-answer test beds, the paper's synthetic family and Landmine,
and the test beds and synthetic family at unit norm, as `make quality` leaves them in
results/data."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

# the repository root, so that a checkout's omtl_mpi is the one measured (the experiments are
# run as `python experiments/NAME.py` from it, which puts only experiments/ on the path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from omtl_mpi.algorithms.admm import Consensus, TaskBlock               # noqa: E402
from omtl_mpi.algorithms.experts import related_models                  # noqa: E402
from omtl_mpi.data.features import prepare                              # noqa: E402
from omtl_mpi.data.rounds import RoundBatches, rounds_needed            # noqa: E402
from omtl_mpi.data.source import FileSource, SyntheticSource, shuffled  # noqa: E402
from omtl_mpi.metrics import balanced_error, confusion, f1_positive      # noqa: E402

NORMALIZED_SYNTHETIC = "synthetic, normalized"      # not a file: the family drawn normalised

SETS = [("identical", "testbed-identical.h5"), ("clustered", "testbed-clustered.h5"),
        ("unrelated", "testbed-unrelated.h5"), ("Synthetic", None), ("Landmine", "landmine.h5"),
        # the same tasks at the scale of unit-norm features (step 2 of the protocol)
        ("identical, unit norm", "testbed-identical-normalized.h5"),
        ("clustered, unit norm", "testbed-clustered-normalized.h5"),
        ("unrelated, unit norm", "testbed-unrelated-normalized.h5"),
        ("Synthetic, unit norm", NORMALIZED_SYNTHETIC)]


def arguments(doc: str):
    """``--data-dir`` and ``--seeds`` (stream orders), with ``doc``'s first paragraph as help."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data-dir", default="results/data")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    return parser.parse_args()


def selection_sets(data_dir: str) -> list:
    """(label, path) of every selection set found (path None: the synthetic family)."""
    found = []
    for label, name in SETS:
        if name in (None, NORMALIZED_SYNTHETIC):        # drawn, not read
            found.append((label, name))
            continue
        path = os.path.join(data_dir, name)
        if not os.path.exists(path):
            print(f"(skipped {label}: {path} not found; run make quality first)", file=sys.stderr)
            continue
        found.append((label, path))
    return found


def stream(path, seed: int, intercept: bool = True, scale: str = "none") -> RoundBatches:
    """The set at ``path`` (None: the paper's synthetic family, 5 x 10000, seed 0;
    :data:`NORMALIZED_SYNTHETIC`: the same L2-normalised) in stream order ``seed``, one instance
    per task per round, as `omtl-mpi run` presents it (``--scale``: ``scale``)."""
    if path in (None, NORMALIZED_SYNTHETIC):
        source = SyntheticSource(5, 10000, 0, normalize=path is not None)
    else:
        source = FileSource(path)
    meta = source.meta()
    s = shuffled(source.load(np.arange(meta.n_tasks)), seed)
    X = prepare(s.X, intercept=intercept, scale=scale)
    return RoundBatches(X, s.y, 1, rounds_needed(meta.lengths, 1), X[0].shape[1])


class Tally:
    """Confusion counts (tp, fp, fn, tn) of every task's real instances, as a run counts them."""

    def __init__(self, n_tasks: int):
        self.conf = np.zeros((n_tasks, 4), np.int64)

    def add(self, positive: np.ndarray, y: np.ndarray) -> None:
        """One round: ``positive`` (K,) whether +1 is predicted, ``y`` (K,) the labels (0: none)."""
        self.conf += confusion(np.where(positive, 1, -1)[:, None], y[:, None])

    def scores(self) -> np.ndarray:
        """Final cumulative error, balanced error and F1 of the positive class, each the mean
        over the tasks (what a run's summary reports)."""
        _, fp, fn, _ = self.conf.T
        error = (fp + fn) / self.conf.sum(axis=1)
        return np.array([error.mean(), balanced_error(self.conf).mean(),
                         f1_positive(self.conf).mean()])


def admm_scores(data: RoundBatches, p, consensus=None, after_round=None) -> np.ndarray:
    """:meth:`Tally.scores` of C-ADMM in one process on ``data``, with the resolved parameters
    ``p``: what `omtl-mpi run` predicts. ``consensus``: a Consensus of one's own (a variant to
    compare); ``after_round(block)``: called after every round's z-step."""
    K, d = data.n_tasks, data.X.shape[-1]
    block = TaskBlock(p, K, d)
    consensus = Consensus(p, K, d) if consensus is None else consensus
    tally = Tally(K)
    for t in range(data.rounds):
        X, y, inv_count = data[t]
        positive, C = block.predict_and_step(X, y, inv_count)
        tally.add(positive[0], y[0])
        u, V = consensus.step(C)
        consensus.update_relationship()
        block.dual_step(u, V, *((related_models(u, V), block.experts.partial()) if p.experts else ()))
        if after_round is not None:
            after_round(block)
    return tally.scores()


def print_header(columns: list, sets: list, extra: tuple = ()) -> None:
    """The header of a table of :func:`table_row` rows: ``columns``, the sets, the three means
    (and the ``extra`` columns after them)."""
    print("| " + " | ".join(columns) + " | " + " | ".join(label for label, _ in sets)
          + " | mean | balanced error, mean | F1, mean |" + "".join(f" {e} |" for e in extra))
    print("|" + "---|" * (len(columns) + len(sets) + 3 + len(extra)))


def comparison(doc: str, columns: list, rows: list, scores) -> None:
    """Parse ``--data-dir``/``--seeds``, then print a Markdown table: one row per ``(cells,
    *args)`` of ``rows``, ``scores(path, seed, *args)`` (:meth:`Tally.scores`) averaged over the
    seeds on every selection set: the error on each set, then the means over the sets of the
    error (what the protocol's rule compares), the balanced error and F1."""
    args = arguments(doc)
    sets = selection_sets(args.data_dir)
    print_header(columns, sets)
    for cells, *extra in rows:
        row = [np.mean([scores(path, s, *extra) for s in args.seeds], axis=0) for _, path in sets]
        print(table_row(cells, row), flush=True)


def table_row(cells: list, scores: list) -> str:
    """A Markdown row: the label cells, each set's error, and the means over the sets of the
    error, balanced error and F1 (``scores``: one (error, balanced error, F1) per set)."""
    scores = np.asarray(scores)
    means = scores.mean(axis=0)
    return ("| " + " | ".join(cells) + " | " + " | ".join(f"{v:.4f}" for v in scores[:, 0])
            + " | " + " | ".join(f"{v:.4f}" for v in means) + " |")
