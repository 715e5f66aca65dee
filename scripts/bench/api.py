#!/usr/bin/env python
"""Time the Python API's learner object on a task file, for a ``script`` row of the bench tool.

Usage: python scripts/bench/api.py --data FILE --what learn_one|learn_round|predict_one
       [--algo NAME] [--calls N] [--json] [--no-progress]

Reads every task of FILE, builds ``omtl_mpi.learner(NAME, K, d)`` (its defaults, as ``omtl-mpi
run --algo NAME`` has them) and learns the streams as ``omtl-mpi run --batch 1`` lays them out:
round t holds instance t of every task that has one.

* ``learn_round``: one ``learn_round(X, y, active)`` per round, X of shape (K, 1, d);
  ``ms_per_round`` is the loop's time over the rounds;
* ``learn_one``: one ``learn_one(x, y, task=k)`` per instance, round by round, task by task;
  ``ms_per_round`` is the loop's time over the calls (each call is one round of the learner, in
  which only its task is active);
* ``predict_one``: ``predict_one(x, task=k)`` then ``learn_one(x, y, task=k)`` per instance,
  as river's progressive validation does; ``ms_per_round`` is per pair of calls.

``--calls N`` times only the first N calls (or pairs) of ``learn_one`` and ``predict_one``:
round 0 of the first N tasks, for a file of many tasks.

The per-call inputs are made before the clock starts; the clock (``time.perf_counter``) covers
the whole loop only. The last line of stdout is the JSON report the bench tool reads:
``{"ms_per_round": ..., "transport": "api", "calls": N, ...}`` (N: the timed calls, or pairs
of calls for ``predict_one``; rounds for ``learn_round``). ``--json`` and
``--no-progress`` are accepted and ignored (the bench tool appends them to every row).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import omtl_mpi
from omtl_mpi.data.source import FileSource

WHAT = ("learn_one", "learn_round", "predict_one")


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, metavar="PATH", help="a task-stream HDF5 file")
    ap.add_argument("--what", required=True, choices=WHAT, help="what to time")
    ap.add_argument("--algo", default="c-admm", help="the learner (omtl-mpi algos): c-admm")
    ap.add_argument("--calls", type=int, default=None,
                    help="learn_one and predict_one: time only the first N (of a file of many tasks)")
    ap.add_argument("--json", action="store_true", help="accepted and ignored (the report is JSON)")
    ap.add_argument("--no-progress", action="store_true", help="accepted and ignored")
    return ap.parse_args()


def streams(path: str):
    """(X, y) lists of every task's stream of ``path`` (views of one read), and K, d."""
    source = FileSource(path)
    meta = source.meta()
    if hasattr(source, "load_block"):               # one slice of the file's arrays
        flat = source.load_block(0, meta.n_tasks)
        cuts = flat.offsets[1:-1]
        return np.split(flat.X, cuts), np.split(flat.y, cuts), meta.n_tasks, meta.dim
    loaded = source.load(range(meta.n_tasks))
    return loaded.X, loaded.y, meta.n_tasks, meta.dim


def one_at_a_time(X, y, calls=None) -> list:
    """(x, label, task) for every instance (the first ``calls``), round by round (t), task by
    task (k)."""
    longest = max(len(labels) for labels in y)
    out = []
    for t in range(longest):
        for k in range(len(X)):
            if t < len(y[k]):
                if calls is not None and len(out) == calls:
                    return out
                out.append((np.ascontiguousarray(X[k][t], dtype=np.float64), int(y[k][t]), k))
    return out


def rounds(X, y, K: int, d: int) -> list:
    """(X_t (K, 1, d), y_t (K, 1), active_t (K, 1)) for every round, as ``--batch 1`` lays the
    streams out: a task whose stream has ended is inactive, its row zero."""
    longest = max(len(labels) for labels in y)
    out = []
    for t in range(longest):
        Xt, yt = np.zeros((K, 1, d)), np.zeros((K, 1), dtype=np.int64)
        active = np.zeros((K, 1), dtype=bool)
        for k in range(K):
            if t < len(y[k]):
                Xt[k, 0], yt[k, 0], active[k, 0] = X[k][t], y[k][t], True
        yt[~active] = 1                 # ignored where inactive; a valid label all the same
        out.append((Xt, yt, active))
    return out


def main():
    args = arguments()
    X, y, K, d = streams(args.data)
    if not hasattr(omtl_mpi, "learner"):        # e.g. a --base revision older than the API
        raise SystemExit(f"api.py: the package in {os.path.dirname(omtl_mpi.__file__)} has no "
                         "omtl_mpi.learner (a revision before the Python API)")
    m = omtl_mpi.learner(args.algo, K, d)
    if args.what == "learn_round":
        work = rounds(X, y, K, d)
        learn = m.learn_round
        start = time.perf_counter()
        for Xt, yt, active in work:
            learn(Xt, yt, active)
        seconds = time.perf_counter() - start
    elif args.what == "learn_one":
        work = one_at_a_time(X, y, args.calls)
        learn = m.learn_one
        start = time.perf_counter()
        for x, label, k in work:
            learn(x, label, task=k)
        seconds = time.perf_counter() - start
    else:
        work = one_at_a_time(X, y, args.calls)
        learn, predict = m.learn_one, m.predict_one
        start = time.perf_counter()
        for x, label, k in work:
            predict(x, task=k)
            learn(x, label, task=k)
        seconds = time.perf_counter() - start
    print(json.dumps({"ms_per_round": 1000.0 * seconds / len(work), "transport": "api",
                      "calls": len(work), "what": args.what, "algo": args.algo, "K": K, "d": d,
                      "seconds": seconds}))


if __name__ == "__main__":
    main()
