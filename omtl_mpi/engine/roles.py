"""The engine: a rank's roles of a run (server, workers, nodes), the exchange that joins them,
their rounds, finiteness and state; the same objects in one process and under MPI, for every
caller: :func:`build` is the one place that makes them (docs/DESIGN.md, *Layers*)."""
from __future__ import annotations

import inspect

import numpy as np

from ..algorithms.contract import all_finite
from ..comm.local import LocalStar
from .graph import NoExchange, run_graph
from .placement import placement
from .schedule import NO_HOOKS
from .star import run_star


def build(algo, params, K: int, d: int, *, topology=None, world=None, rows=None,
          nodes: int | None = None, partial=None) -> "Engine":
    """This rank's :class:`Engine` for learner ``algo`` (a registry entry) with resolved
    hyper-parameters ``params`` on K tasks of d weights: the placement's blocks, the role
    objects of this rank's ones and their exchange.

    Parameters
    ----------
    topology : Topology, optional
        The graph of a neighbour-pattern run (None: a run without communication).
    world : LocalWorld or MpiWorld, optional
        The ranks; None or a world of one rank: everything in this process.
    rows : RowFormat, optional
        The run's instances as the messages of sparse rounds need them (C-ADMM).
    nodes : int, optional
        Blocks of a run without a topology (default one a rank); with ``partial`` in one
        process, the workers.
    partial : Partial, optional
        The asynchronous rounds of ``--sync partial`` (:mod:`.partial`; None: synchronous).
    """
    rank, size = (0, 1) if world is None else (world.rank, world.size)
    blocks, by_rank = placement(K, size, algo.pattern,
                                topology.n_nodes if topology is not None else nodes)
    return Engine(algo, params, K, d, blocks, by_rank[rank], rank, size, topology, world, rows,
                  partial)


class Engine:
    """This rank's learner objects and the communicator that joins them, for any pattern
    (made by :func:`build`).

    Parameters
    ----------
    blocks : list of (start, stop)
        Every task holder's block (workers of a star, or nodes), as :attr:`all_blocks`.
    local : list of (start, stop)
        The blocks held by this rank (all of them in one process), as :attr:`local`.
    """

    def __init__(self, algo, params, K, d, blocks, local, rank, size, topology, world=None,
                 rows=None, partial=None):
        self.algo, self.server, self.holders = algo, None, []
        self.server_tasks = K                   # every task of the run
        self.all_blocks, self.local = blocks, local
        self.blocks = local if algo.pattern != "server" else (local[:1] if local else [])
        self._edges = np.array(self.blocks, dtype=np.int64).reshape(-1)    # a0, b0, a1, b1...
        self.preds = self.staleness = None        # what the rounds so far produced
        self.transport = "local" if size == 1 else "mpi"      # recorded in the results
        self.partial = partial
        self.predicted_at = None        # on --sync partial's simulated clock: (W, T) units
        self._cut, self._resumed = {}, None     # --sync partial at a checkpoint: its cut
        if algo.pattern == "server":
            # the run's RowFormat, to the role classes that size their messages by it
            takes_rows = "rows" in inspect.signature(algo.worker).parameters     # C-ADMM's
            more = {"rows": rows} if rows is not None and takes_rows else {}
            if partial is not None:
                # the roles' asynchronous message layouts (C-ADMM's: the served prior)
                more_async = dict(more, asynchronous=True)
                self.blocks = local
                self.holders = [algo.worker(params, K, d, a, b, **more_async) for a, b in local]
                self.server = algo.server(params, K, d, blocks, **more_async) if rank == 0 else None
                self.comm = None if size == 1 else world.comm
                self._down_sizes = [algo.worker.down_size(params, K, b - a, d, **more_async)
                                    for a, b in blocks]
                self._kinds = algo.worker.merges(params, K, d, **more)
                self._parts_of = [algo.worker.message_parts(params, K, b - a, d, **more_async)
                                  for a, b in blocks]
                self.rank = rank
                return
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
        # the nodes' asynchronous table layout (D-ADMM's: the mixture prior's columns)
        more = ({"asynchronous": True} if partial is not None
                and "asynchronous" in inspect.signature(algo.node).parameters else {})
        self.holders = [algo.node(params, K, d, a, b, topology, first + i, **more)
                        for i, (a, b) in enumerate(local)]
        if topology is None:
            self.comm = NoExchange()
            self.transport = "none"
        elif partial is not None:           # point-to-point tables (.partial.gossip)
            self.neighbours = [list(topology.neighbours(i)) for i in range(topology.n_nodes)]
            self.comm, self.rank = (None if size == 1 else world.comm), rank
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
        stream's :class:`~omtl_mpi.data.rounds.RoundLayout`; with ``labels`` False booleans, True
        for +1, as :attr:`preds` holds them while the rounds run: one numpy call a round, not
        three) and staleness (holders x T). ``hooks``: the between-round work
        (:class:`.schedule.Hooks`); ``instances``: every round's instances over all the tasks
        (:func:`~omtl_mpi.data.rounds.round_instances`), for the workers that plan by them."""
        rounds = clock.rows.shape[0]
        if self.preds is None:
            self.preds = [np.zeros(b.n_slots, dtype=bool) for b in batches]
            self.staleness = np.zeros((len(self.holders), rounds))
        for holder in self.holders if instances is not None else ():
            plan = getattr(holder, "plan", None)
            if plan is not None:
                plan(instances, first_round)
        if self.partial is not None:
            self._run_partial(batches, clock, hooks, first_round)
        elif self.algo.pattern == "server":
            worker = self.holders[0] if self.holders else None
            run_star(self.comm, worker, self.server, batches[0] if batches else None, clock,
                     self.preds[0] if self.preds else None, first_round, hooks)
        else:
            run_graph(self.comm, self.holders, batches, clock, self.preds, self.staleness,
                      first_round, hooks)
        if not labels:          # the Python API's one-round calls: no conversion there and back
            return self.preds, self.staleness
        return [np.where(p, 1, -1).astype(np.int8) for p in self.preds], self.staleness

    def _cut_template(self) -> dict:
        """The shapes of --sync partial's state at a cut: in one process the executor's
        (:func:`.partial.run_schedule`), under MPI the server's or the worker's."""
        W, T = len(self.all_blocks), self.partial.rounds
        if self.algo.pattern != "server":       # D-ADMM's: tables
            if self.comm is None:
                return {f"table_{j}": np.zeros(self.holders[j].message.size)
                        for j in range(len(self.holders))}
            n, size = len(self.neighbours[self.rank]), self.holders[0].message.size
            return {"newest": np.zeros((n, size)), "have": np.zeros(n, dtype=np.int64),
                    "used": np.zeros((T, n), dtype=np.int64)}
        folder = np.zeros(sum(parts[-1][2] for parts in self._parts_of))
        if self.comm is None:
            out = {"made": np.int64(0), "held_steps": np.full(W, -1, dtype=np.int64),
                   "folder": folder}
            out.update({f"held_{w}": np.zeros(self._down_sizes[w]) for w in range(W)})
            return out
        if self.server is not None:
            ints = np.zeros(W, dtype=np.int64)
            return {"sent": ints, "took": ints, "last": ints, "steps": np.int64(0),
                    "taken": np.zeros((W, T), dtype=np.int64), "folder": folder}
        return {"newest": np.zeros(self._down_sizes[self.rank - 1]), "have": np.int64(0),
                "replied": np.int64(0), "used": np.zeros(T, dtype=np.int64)}

    def _keep(self, state: dict) -> None:
        """What --sync partial's rounds continue from at a checkpoint's cut (:meth:`state`)."""
        self._cut = state

    def _run_partial(self, batches, clock, hooks, first_round: int = 0) -> None:
        """The rounds of ``--sync partial`` (:mod:`.partial`): in one process the schedule
        given (a replay) or drawn on the simulated clock; under MPI the server's or the
        worker's side. :attr:`schedule` is then this rank's part of it (taken, used)."""
        from . import partial as async_rounds
        p, rounds = self.partial, clock.rows.shape[0]
        W = len(self.all_blocks)
        every = hooks.checkpoint[0] if hooks.checkpoint else 0
        if self.algo.pattern != "server":
            self._run_partial_graph(batches, clock, hooks, first_round, every)
        elif self.comm is None:
            if p.schedule is not None:
                taken, used = p.schedule
            else:
                factors = np.stack([p.stragglers.factors(w + 1, rounds) for w in range(W)])
                taken, used, self.predicted_at = async_rounds.simulate(
                    factors, p.min_workers, p.max_delay, every)
            async_rounds.check_schedule(taken, used, W, rounds)
            async_rounds.run_schedule(self.holders, self.server, batches, self.preds, taken,
                                      used, self._parts_of, self._kinds, clock, hooks,
                                      first_round, self._resumed, self._keep)
            self.schedule = (taken, used)
        elif self.server is not None:
            barrier = async_rounds.PartialBarrier(W, rounds, p.min_workers, p.max_delay)
            folder = async_rounds.Folder(self._parts_of, self._kinds)
            async_rounds.serve(self.comm, self.server, barrier, folder, self.server.reply_slices(),
                               clock, hooks, first_round, self._resumed, self._keep)
            self.schedule = (barrier.taken, None)
        else:
            w = self.rank - 1
            self.schedule = (None, async_rounds.work(
                self.comm, self.holders[0], batches[0], self.preds[0], rounds,
                self._down_sizes[w], clock, hooks, first_round, self._resumed, self._keep))

    def _run_partial_graph(self, batches, clock, hooks, first_round: int, every: int) -> None:
        """D-ADMM's ``--sync partial``: in one process every node on the simulated clock (or
        the schedule to replay), under MPI this rank's node (:func:`.partial_graph.gossip`)."""
        from . import partial_graph as async_rounds
        p, rounds, nb = self.partial, clock.rows.shape[0], self.neighbours
        if self.comm is None:
            N = len(nb)
            if p.schedule is not None:
                used = p.schedule[1]
            else:
                factors = np.stack([p.stragglers.factors(i, rounds) for i in range(N)])
                used, self.predicted_at = async_rounds.simulate_graph(factors, nb, p.max_delay,
                                                                      every)
            async_rounds.check_graph_schedule(used, nb, N, rounds, p.max_delay)
            async_rounds.run_graph_schedule(self.holders, batches, self.preds, self.staleness,
                                            used, nb, clock, hooks, first_round, self._resumed,
                                            self._keep)
            self.schedule = (None, used)
        else:
            mine = async_rounds.gossip(self.comm, self.holders[0], self.rank, nb[self.rank],
                                       batches[0], self.preds[0], self.staleness[0], rounds,
                                       p.max_delay, clock, hooks, first_round, self._resumed,
                                       self._keep)
            width = max(len(n) for n in nb)
            padded = np.full((1, rounds, width), -1, dtype=np.int64)
            padded[0, :, :mine.shape[1]] = mine
            self.schedule = (None, padded)

    def step(self, Xp: np.ndarray, yf: np.ndarray, tasks: np.ndarray, count: np.ndarray,
             clock) -> np.ndarray:
        """One round in one process on the inputs of the tasks ``tasks`` (increasing): Xp
        (B, n, d), yf (B, n) with 0 for absent instances, ``count`` each task's instances; the
        predictions made before the labels, booleans (B, n). Tasks not in ``tasks``, and those
        without an instance, take no step: what a round costs follows the tasks in it."""
        learning = count > 0
        self.preds = None               # sized by this round's batch
        if len(self.blocks) == 1 and learning.all():
            # one block (every learner but D-ADMM's and D-PSGD's nodes), every task given
            # learning (learn_one): the inputs as they are
            n = self.blocks[0][1]
            active = slice(None) if len(tasks) == n else np.asarray(tasks, dtype=np.intp)
            preds, _ = self.run([_Round(Xp, yf, 1.0 / count, active, n)], clock, labels=False)
            return preds[0].reshape(yf.shape)
        rounds, where = [], []
        cuts = np.searchsorted(tasks, self._edges).tolist()    # each block's columns, at once
        for i, (a, b) in enumerate(self.blocks):
            lo, hi = cuts[2 * i], cuts[2 * i + 1]
            mine = np.arange(lo, hi)[learning[lo:hi]]          # columns of this block's active tasks
            active = (slice(None) if len(mine) == b - a
                      else (tasks[mine] - a).astype(np.intp))
            rounds.append(_Round(Xp[:, mine], yf[:, mine], 1.0 / count[mine], active, b - a))
            where.append(mine)
        preds, _ = self.run(rounds, clock, labels=False)
        out = np.zeros(yf.shape, dtype=bool)
        for p, mine, r in zip(preds, where, rounds):
            out[:, mine] = p.reshape(r.item[1].shape)
        return out

    def decide(self, Xp: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        """Decision values (B, n) on the inputs Xp (B, n, d) of the tasks ``tasks``
        (increasing), changing nothing."""
        out = np.zeros(Xp.shape[:2])
        for h, (a, b) in zip(self.holders, self.blocks):
            lo, hi = np.searchsorted(tasks, (a, b))
            if hi > lo:
                active = slice(None) if hi - lo == b - a else (tasks[lo:hi] - a).astype(np.intp)
                out[:, lo:hi] = h.decide(Xp[:, lo:hi], active)
        return out

    def task_rows(self) -> dict:
        """This rank's per-task arrays by name, its holders' rows in task order."""
        rows: dict = {}
        for h in self.holders:
            for key, value in h.task_rows().items():
                rows.setdefault(key, []).append(np.asarray(value))
        return {k: np.concatenate(v) for k, v in rows.items()}

    def model(self) -> dict:
        """The learned arrays by name, as a results file's /model holds them: the per-task
        rows, and the server's shared arrays or (without a server) the first node's own."""
        model = self.task_rows()
        if self.server is not None:
            model.update(self.server.global_arrays())
        elif self.holders:
            model.update(self.holders[0].node_arrays())
        return model

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
        if self.partial is not None:
            # the asynchronous rounds' own, at the last cut (before one: its shapes)
            out["partial"] = dict(self._cut) or self._cut_template()
        return out

    def finite(self, tasks=None) -> bool:
        """True when every variable of this rank's learner objects is finite, in one pass.

        ``tasks`` (increasing indices of the run's tasks; None: everything): only these tasks'
        rows changed since the last check (the Python API's, after every call), so only they and
        the shared arrays are checked, where a role says which (its optional ``checked(rows)``).
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
        if "partial" in state:
            self._resumed = dict(state["partial"])


class _Round:
    """One round of a block as the round loops read a layout (:class:`~omtl_mpi.data.rounds.
    RoundLayout`): the round's active tasks' X (B, na, d), y (B, na), inv_count (na,) and
    which tasks they are."""

    __slots__ = ("item", "n_slots", "slot_ptr", "n_tasks")

    def __init__(self, X, y, inv_count, active, n_tasks):
        self.item = (X, y, inv_count, active)
        self.n_slots = y.size
        self.slot_ptr = np.array([0, y.size])
        self.n_tasks = n_tasks

    def __getitem__(self, t):
        return self.item


def _arrays(tree):
    """The numeric arrays of a nested :meth:`Engine.state` (dicts and lists of arrays)."""
    items = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else None
    if items is None:
        a = np.asarray(tree)
        if a.dtype.kind in "fc":
            yield a
        return
    for item in items:
        yield from _arrays(item)
