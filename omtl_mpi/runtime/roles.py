"""This rank's roles of a run (server, workers, nodes), the exchange that joins them, and their
round loop: the same objects in one process and under MPI."""
from __future__ import annotations

import numpy as np

from ..algorithms.contract import all_finite
from ..comm.local import LocalStar
from .graph import run_graph
from .schedule import NO_HOOKS
from .star import run_star


class Roles:
    """This rank's learner objects and the communicator that joins them, for any pattern.

    Parameters
    ----------
    blocks : list of (start, stop)
        Every task holder's block (workers of a star, or nodes).
    local : list of (start, stop)
        The blocks held by this rank (all of them in one process).
    """

    def __init__(self, algo, params, K, d, blocks, local, rank, size, topology, world=None,
                 rows=None):
        self.algo, self.server, self.holders = algo, None, []
        self.server_tasks = K                   # every task of the run
        self.blocks = local if algo.pattern != "server" else (local[:1] if local else [])
        self.preds = self.staleness = None        # what the rounds so far produced
        self.transport = "local" if size == 1 else "mpi"      # recorded in the results
        if algo.pattern == "server":
            # the run's RowFormat, to the role classes that size their messages by it
            more = {"rows": rows} if rows is not None and takes_rows(algo.worker) else {}
            if local:
                self.holders = [algo.worker(params, K, d, *local[0], **more)]
            if rank == 0:
                self.server = algo.server(params, K, d, blocks, **more)
            if size == 1:
                self.comm = LocalStar()
            else:
                from ..comm.mpi import MpiStar
                up = [0] + [algo.worker.up_size(params, K, b - a, d, **more) for a, b in blocks]
                down = [0] + [algo.worker.down_size(params, K, b - a, d, **more) for a, b in blocks]
                worker = self.holders[0] if self.holders else None
                sized = getattr(algo.worker, "sized", None)
                self.comm = MpiStar(world.comm, up, down,
                                    up_buffer=getattr(worker, "message", None),
                                    reply_buffer=getattr(self.server, "reply", None),
                                    sized=bool(sized(params, K, d)) if callable(sized) else False)
            return
        first = 0 if size == 1 else rank
        self.holders = [algo.node(params, K, d, a, b, topology, first + i)
                        for i, (a, b) in enumerate(local)]
        if topology is None:
            from .graph import NoExchange
            self.comm = NoExchange()
            self.transport = "none"
        elif size == 1:
            from ..comm.graph import LocalGraph
            self.comm = LocalGraph(topology, [getattr(h, "inbox", None) for h in self.holders])
        else:
            from ..comm.graph import MpiGraph
            node = self.holders[0]
            inbox = getattr(node, "inbox", None)
            # a node with an inbox sends the same message array every round: bind to both
            self.comm = MpiGraph(world.comm, topology, node.message.shape,
                                 message=node.message if inbox is not None else None, inbox=inbox)

    def run(self, batches, clock, hooks=NO_HOOKS, first_round: int = 0, instances=None,
            labels: bool = True):
        """Rounds ``first_round..T-1``; predictions per holder (int8, -1/+1, in the slots of its
        stream's :class:`~omtl_mpi.data.rounds.RoundLayout`; booleans, True for +1, with
        ``labels`` False) and staleness (holders x T).
        ``hooks``: the between-round work (:class:`.schedule.Hooks`); ``instances``: every
        round's instances over all the tasks (:func:`~omtl_mpi.data.rounds.round_instances`),
        for the workers that plan by them.

        While the rounds run, :attr:`preds` holds booleans (True for +1): one numpy call per
        round instead of three; they become labels once, here.
        """
        rounds = clock.rows.shape[0]
        if self.preds is None:
            self.preds = [np.zeros(b.n_slots, dtype=bool) for b in batches]
            self.staleness = np.zeros((len(self.holders), rounds))
        if self.algo.pattern == "server":
            worker = self.holders[0] if self.holders else None
            plan = getattr(worker, "plan", None)
            if plan is not None and instances is not None:
                plan(instances, first_round)
            run_star(self.comm, worker, self.server, batches[0] if batches else None, clock,
                     self.preds[0] if self.preds else None, first_round, hooks)
        else:
            for node in self.holders:
                plan = getattr(node, "plan", None)
                if plan is not None and instances is not None:
                    plan(instances, first_round)
            run_graph(self.comm, self.holders, batches, clock, self.preds, self.staleness,
                      first_round, hooks)
        if not labels:          # the Python API's one-round calls: no conversion there and back
            return self.preds, self.staleness
        return [np.where(p, 1, -1).astype(np.int8) for p in self.preds], self.staleness

    def close(self) -> None:
        """Release the exchange's resources (persistent requests, the graph communicator)."""
        free = getattr(self.comm, "free", None)
        if free is not None:
            free()

    def state(self) -> dict:
        """Every variable of this rank's learner objects (checkpoints, generic checks)."""
        out = {f"holder{i}": h.state() for i, h in enumerate(self.holders)}
        if self.server is not None:
            out["server"] = self.server.state()
        return out

    def finite(self, tasks=None) -> bool:
        """True when every variable of this rank's learner objects is finite.

        ``tasks`` (increasing indices of the run's tasks): only these tasks' rows changed
        since the last check, so only they and the shared arrays are checked, where a role
        can say which those are (its optional ``checked(rows)``, :mod:`..algorithms.contract`);
        None: everything. One pass over all of them: the Python API checks after every call.
        """
        arrays = []
        for holder, (a, b) in zip(self.holders, self.blocks):
            checked = getattr(holder, "checked", None)
            if checked is None:
                arrays += _arrays(holder.state())
                continue
            rows = None
            if tasks is not None and len(tasks) == 1:       # learn_one: one task, a view
                k = int(tasks[0]) - a
                rows = slice(k, k + 1) if 0 <= k < b - a else slice(0, 0)
            elif tasks is not None:
                lo, hi = (0, len(tasks)) if b - a == self.server_tasks else np.searchsorted(tasks, (a, b))
                rows = np.asarray(tasks[lo:hi]) - a
                if len(rows) and rows[-1] - rows[0] == len(rows) - 1:
                    rows = slice(int(rows[0]), int(rows[-1]) + 1)     # views, not copies
            arrays += checked(rows)
        if self.server is not None:
            checked = getattr(self.server, "checked", None)
            arrays += checked() if checked is not None else _arrays(self.server.state())
        return all_finite(arrays)

    def load_state(self, state: dict) -> None:
        for i, h in enumerate(self.holders):
            h.load_state(state[f"holder{i}"])
        if self.server is not None:
            self.server.load_state(state["server"])


def takes_rows(cls) -> bool:
    """Whether a role class takes the run's RowFormat (a ``rows`` keyword): the learners whose
    messages carry entries of sparse rounds (C-ADMM)."""
    import inspect
    return "rows" in inspect.signature(cls).parameters


def _arrays(tree):
    """The numeric arrays of a nested :meth:`Roles.state` (dicts and lists of arrays)."""
    items = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else None
    if items is None:
        a = np.asarray(tree)
        if a.dtype.kind in "fc":
            yield a
        return
    for item in items:
        yield from _arrays(item)
