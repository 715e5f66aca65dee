"""Generic checks that every registered learner must pass (in the spirit of river's
``check_estimator``), and the one-process driver they use.

``tests/test_algorithm_checks.py`` runs :func:`check_algorithm` for every name in the registry,
so a new learner cannot skip them.  Users adding a learner can call it directly.
"""
from __future__ import annotations

import copy

import numpy as np

from ..algorithms import registry
from ..comm.clock import PhaseClock
from ..data.rounds import RoundBatches, rounds_needed
from .layout import task_blocks
from .schedule import Hooks


class _Stop(Exception):
    """Ends a simulated run at a checkpoint, as a killed job would."""


def simulate(name: str, X_list, y_list, *, params=None, batch: int = 1, nodes: int | None = None,
             topology: str = "ring", restart_at: int | None = None):
    """Run learner ``name`` in one process on the given streams.

    With ``restart_at = r`` the run stops after r rounds, every role's state is copied out,
    brand-new roles are built and loaded with it, and the run continues: a checkpoint round trip.

    Returns
    -------
    preds : list of ndarray (n_k,) int8, the predictions of every task in stream order
    rows : dict of per-task final arrays (one row per task)
    """
    from .roles import Roles
    algo = registry.get(name)
    params = params if params is not None else algo.params()
    K, d = len(X_list), X_list[0].shape[1]
    lengths = [len(y) for y in y_list]
    T = rounds_needed(lengths, batch)
    resolved = params.resolved(T)
    topo = None
    if algo.pattern == "server":
        blocks = task_blocks(K, 1)
    else:
        n = nodes or (K if algo.pattern == "neighbours" else 1)
        if algo.pattern == "neighbours":
            from ..topology import load_topology
            topo = load_topology(topology, n)
        blocks = task_blocks(K, n)
    batches = [RoundBatches(X_list[a:b], y_list[a:b], batch, T, d) for a, b in blocks]

    def build():
        return Roles(algo, resolved, K, d, blocks, blocks, 0, 1, topo)

    roles = build()
    clock = PhaseClock(T)
    if restart_at is None:
        preds, _ = roles.run(batches, clock)
    else:
        saved = {}

        def stop(t):
            saved.update(copy.deepcopy(roles.state()))
            raise _Stop
        try:
            roles.run(batches, clock, Hooks(checkpoint=(restart_at, stop)))
        except _Stop:
            pass
        first = [p.copy() for p in roles.preds]
        roles = build()
        roles.load_state(saved)
        roles.preds = first
        roles.staleness = np.zeros((len(roles.holders), T))
        preds, _ = roles.run(batches, clock, first_round=restart_at)
    flat = []
    for p, (a, b) in zip(preds, blocks):
        per_task = p.transpose(2, 0, 1).reshape(b - a, -1)
        flat += [per_task[k, : lengths[a + k]] for k in range(b - a)]
    rows: dict = {}
    for h in roles.holders:
        for key, value in h.task_rows().items():
            rows.setdefault(key, []).append(np.array(value))
    return flat, {k: np.concatenate(v) for k, v in rows.items()}


def check_algorithm(name: str, X_list, y_list, params=None) -> None:
    """Assert the generic properties of learner ``name`` on the given streams (AssertionError).

    ``params``: the learner's hyper-parameters (default: its defaults).

    * seeding is idempotent: two runs give bit-identical predictions and variables;
    * inputs are not mutated;
    * state copied out mid-stream into fresh objects continues identically;
    * mini-batches run and predict every instance.
    """
    X_copy = [x.copy() for x in X_list]
    y_copy = [y.copy() for y in y_list]
    preds_a, rows_a = simulate(name, X_list, y_list, params=params)
    preds_b, rows_b = simulate(name, X_list, y_list, params=params)
    for k, (pa, pb) in enumerate(zip(preds_a, preds_b)):
        assert pa.tobytes() == pb.tobytes(), f"{name}: task {k} predictions differ run to run"
    for key in rows_a:
        assert rows_a[key].tobytes() == rows_b[key].tobytes(), f"{name}: {key} differs run to run"
    for k in range(len(X_list)):
        assert np.array_equal(X_list[k], X_copy[k]) and np.array_equal(y_list[k], y_copy[k]), \
            f"{name}: input stream of task {k} was modified"
    half = max(len(y) for y in y_list) // 2
    preds_r, rows_r = simulate(name, X_list, y_list, params=params, restart_at=half)
    for k, (pa, pr) in enumerate(zip(preds_a, preds_r)):
        assert np.array_equal(pa, pr), f"{name}: task {k} predictions change after a state round trip"
    for key in rows_a:
        assert np.array_equal(rows_a[key], rows_r[key]), f"{name}: {key} changes after a state round trip"
    preds_m, _ = simulate(name, X_list, y_list, params=params, batch=3)
    assert [len(p) for p in preds_m] == [len(y) for y in y_list], f"{name}: mini-batch lost instances"
    assert all(set(np.unique(p)) <= {-1, 1} for p in preds_m), f"{name}: predictions not in {{-1, +1}}"
