"""The math tests' driver: a whole run of a learner on the engine in one process, straight from
in-memory streams, with an optional state round trip part-way (:func:`simulate`).

The generic checks every learner passes are :mod:`omtl_mpi.checks` (on the learner objects).
"""
from __future__ import annotations

import copy

import numpy as np

from omtl_mpi.algorithms import registry
from omtl_mpi.comm.clock import PhaseClock
from omtl_mpi.data.rounds import RoundLayout, round_instances, rounds_needed
from omtl_mpi.engine import build
from omtl_mpi.engine.schedule import Hooks


class _Stop(Exception):
    """Ends a simulated run at a checkpoint, as a killed job would."""


def simulate(name: str, X_list, y_list, *, params=None, batch: int = 1, nodes: int | None = None,
             topology: str = "ring", restart_at: int | None = None, planned: bool = True):
    """Run learner ``name`` in one process on the given streams.

    With ``restart_at = r`` the run stops after r rounds, every role's state is copied out,
    brand-new roles are built and loaded with it, and the run continues: a checkpoint round trip.
    ``planned``: give the roles every round's instances, as ``omtl-mpi run`` does.

    Returns
    -------
    preds : list of ndarray (n_k,) int8, the predictions of every task in stream order
    rows : dict of per-task final arrays (one row per task)
    """
    algo = registry.get(name)
    params = params if params is not None else algo.params()
    K, d = len(X_list), X_list[0].shape[1]
    lengths = [len(y) for y in y_list]
    T = rounds_needed(lengths, batch)
    resolved = params.resolved(T)
    topo = None
    if algo.pattern == "neighbours":
        from omtl_mpi.topology import load_topology
        topo = load_topology(topology, nodes or K)

    def make():
        return build(algo, resolved, K, d, topology=topo, nodes=nodes)

    roles = make()
    batches = []
    for a, b in roles.blocks:
        layout = RoundLayout(lengths[a:b], batch, T, d)
        layout.fill(0, np.concatenate(X_list[a:b]), np.concatenate(y_list[a:b]), lengths[a:b])
        batches.append(layout)

    clock = PhaseClock(T)
    instances = round_instances(lengths, batch, T) if planned else None
    if restart_at is None:
        preds, _ = roles.run(batches, clock, instances=instances)
    else:
        saved = {}

        def stop(t):
            saved.update(copy.deepcopy(roles.state()))
            raise _Stop
        try:
            roles.run(batches, clock, Hooks(checkpoint=(restart_at, stop)), instances=instances)
        except _Stop:
            pass
        first = [p.copy() for p in roles.preds]
        roles = make()
        roles.load_state(saved)
        roles.preds = first
        roles.staleness = np.zeros((len(roles.holders), T))
        preds, _ = roles.run(batches, clock, first_round=restart_at, instances=instances)
    flat = []
    for p, layout in zip(preds, batches):
        per_task = p[layout.task_order()]
        flat += np.split(per_task, np.cumsum(layout.lengths)[:-1])
    return flat, roles.task_rows()
