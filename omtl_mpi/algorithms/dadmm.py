"""D-ADMM (paper Algorithm 2): no server; every node gossips a table of what it knows of every
node's block of tasks, each node's part stamped with the round its owner wrote it, and keeps the
freshest copy of each. The table holds one row per node (``[stamp, S_j, m_j, H_j, B_j]``, the
parts the consensus and the vote need) and, where the math needs every task, one row per task
(``[c_k, v_k]`` with a learned Omega or the paper variant, ``w_k`` in the vote's ``rows`` form).

What each part is, the round's steps and the messages' sizes: docs/ALGORITHMS.md section 3;
the mixture prior's sums over every node (:attr:`DAdmmNode.sums`): section 2.8; under
``--sync partial``, its estimates through the table (:attr:`DAdmmNode.prior`): section 2.9.
The consensus runs the C-ADMM server's objects, which is why D-ADMM on a fully connected graph
predicts exactly like C-ADMM.
"""
from __future__ import annotations

import numpy as np

from . import gossiped_prior, mixture
from .admm import FIXED_OMEGA, GIVEN, AdmmParams, Consensus, TaskBlock, coupling, omega_arrays
from .contract import task_blocks
from .bayes import stats_size
from .experts import BAYES, MOMENT, ROWS, directions, related_rows, vote_experts
from .relationship import ExactStep, Relationship


def related_form(params, n_tasks: int, dim: int, n_nodes: int) -> str | None:
    """The related expert's form in D-ADMM (None without the vote): per node H_j (N d^2
    numbers in every table) where that is smaller than per task w_k (K d numbers)."""
    if not params.experts:
        return None
    return MOMENT if n_nodes * dim < n_tasks else ROWS


class DAdmmNode:
    """One D-ADMM node, node ``node`` of ``topology``, holding tasks ``start..stop-1`` of
    ``n_tasks`` (:class:`.contract.Node`; without a topology, a node with no neighbours);
    ``asynchronous``: a node of ``--sync partial``, whose rows carry the mixture prior's
    estimate in progress where the vote has one (:attr:`prior`).

    ``slots`` (n_neighbours + 1, size) holds this node's table in slot 0 (what it sends) and
    what its neighbours sent in the others (:attr:`inbox`, where the exchange writes), so that
    merging is one argmax over the node stamps and no message is copied on the way.

    Attributes
    ----------
    sums : callable or None
        With the empirical-Bayes expert's mixture prior, ``sums()`` after every round: a
        generator of the round's sums over every node (module text; :meth:`_sums`); None
        without it (the round loop then never asks) and with ``asynchronous``.
    prior : GossipedPrior or None
        With the mixture prior and ``asynchronous`` (``--sync partial``, whose nodes never
        enter a sum in the same round), its estimates agreed through the table's prior columns
        (:mod:`.gossiped_prior`), advanced after every round's merge; None otherwise.
    """

    # its state is the node's (a table of every node, its own Omega), not its block's
    TASK_AXIS = None

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0, asynchronous: bool = False):
        K, d = n_tasks, dim
        if topology is not None:
            n_neighbours, n_nodes = len(topology.neighbours(node)), topology.n_nodes
            blocks = task_blocks(K, n_nodes)
        else:
            n_neighbours, n_nodes, blocks, node = 0, 1, [(start, stop)], 0
        self.K, self.d, self.start, self.stop, self.node = K, d, start, stop, node
        self.given = coupling(params) == GIVEN
        self.form = related_form(params, K, d, n_nodes)
        names = vote_experts(K, d, params.class_weight) if params.experts else ()
        # the empirical-Bayes expert's mixture prior is estimated from sums over every node
        # (sums), or under --sync partial from the table's prior columns (gossiped_prior); its
        # Gaussian prior from the table's rows B
        groups = BAYES in names and mixture.used(d)
        gossiped = groups and asynchronous
        # node rows: [stamp, S (fixed Omega), m (vote), H (vote, moment form), B (vote, bayes)]
        cols, width = {}, 1
        for name, size in (("S", 0 if self.given else d), ("m", len(names)),
                           ("H", d * d if self.form == MOMENT else 0),
                           ("B", stats_size(d) if BAYES in names and not groups else 0)):
            cols[name] = slice(width, width + size)
            width += size
        if gossiped:        # only then: every other table keeps its layout, to the bit
            prior_cols, width = gossiped_prior.columns(d, width)
        # task rows: [c, v (learned Omega)], [w (vote, rows form)]
        tcols, twidth = {}, 0
        for name, size in (("c", d if self.given else 0), ("v", d if self.given else 0),
                           ("w", d if self.form == ROWS else 0)):
            tcols[name] = slice(twidth, twidth + size)
            twidth += size
        self._node_size = n_nodes * width
        self.slots = np.zeros((n_neighbours + 1, self._node_size + K * twidth))
        self.table = self.slots[0]
        self.inbox = self.slots[1:]
        n_slots = n_neighbours + 1
        self._nodes = self.slots[:, : self._node_size].reshape(n_slots, n_nodes, width)
        self._tasks = self.slots[:, self._node_size:].reshape(n_slots, K, twidth)
        self._cols, self._tcols = cols, tcols
        own_node = self._nodes[0, node]
        own_tasks = self._tasks[0, start:stop]
        self._sizes = np.array([b - a for a, b in blocks], dtype=np.float64)
        # the task rows' owners, to take each from the copy its owner's row came from
        self._owner = np.repeat(np.arange(n_nodes), np.diff([0] + [b for _, b in blocks])) \
            if twidth else None
        self._task_index = np.arange(K)
        self._node_index = np.arange(n_nodes)
        self.block = TaskBlock(params, stop - start, d, mode=GIVEN if self.given else FIXED_OMEGA,
                               message=own_tasks[:, tcols["c"]] if self.given else None,
                               total_tasks=K, related_mode=self.form, groups=groups)
        # the run's instances up to each round (plan), for the mixture's estimates
        self._seen = None
        self._groups = groups
        self.sums = self._sums if groups and not gossiped else None
        self.prior = (gossiped_prior.GossipedPrior(self.block.bayes, self._nodes[0], prior_cols,
                                                   node) if gossiped else None)
        if self.block.bayes is not None and not groups:
            # the table's rows add up the changes (a node cannot tell in which rounds another
            # node will estimate a prior from its row): kept in O(d^2) per task that learns
            self.block.bayes.running = True
        self.consensus = Consensus(params, K, d) if self.given else None
        self._u_weight = ExactStep(Relationship.identity(K), params.a, params.rho,
                                   params.lambda2, params.lambda4)
        self._own_node, self._own_tasks = own_node, own_tasks
        self._paper = params.variant == "paper"
        self.round = 0

    @staticmethod
    def merges(params, n_tasks: int, dim: int, rows=None):
        """For ``--sync partial``, ``{}``: each node mixes with the newest table it holds of
        each neighbour (the tables' stamps already let it keep the freshest rows), and the
        mixture prior's estimates are agreed through the table (:mod:`.gossiped_prior`)."""
        return {}

    @property
    def stamps(self) -> np.ndarray:
        """The round in which each node's rows, as this node knows them, were written (N,)."""
        return self._nodes[0, :, 0]

    @property
    def message(self) -> np.ndarray:
        """What goes to every neighbour: the whole table."""
        return self.table

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        """Step 1: predictions (B, na); the node's own rows now hold this round's messages."""
        self.round += 1
        block, cols = self.block, self._cols
        positive = block.predict_and_step(X, y, inv_count, active)
        row = self._own_node
        row[0] = self.round
        if not self.given and block.coordinates == "nonzero":
            where, values = block.delta_pairs
            np.add.at(row[cols["S"]], where, values)
        elif not self.given:
            row[cols["S"]] += block.delta_C
        if block.experts is not None:
            row[cols["m"]] += block.delta_mistakes
            if self.form == MOMENT:
                row[cols["H"]] += block.delta_H.reshape(-1)
            else:
                self._own_tasks[:, self._tcols["w"]] = block.W
            if block.bayes is not None and not self._groups:
                row[cols["B"]] += block.bayes.delta
        return positive

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The decision values (B, na) behind :meth:`local_step`'s predictions, changing
        nothing."""
        return self.block.decide(X, active)

    def merge(self, received: np.ndarray) -> float:
        """Step 2's second half: keep, for every node, the freshest copy of its rows among the
        neighbours' tables ``received`` (n_neighbours, size; normally :attr:`inbox` itself,
        filled by the exchange); returns the mean staleness (rounds) of what is used this
        round, ``t - stamp`` over all tasks."""
        nodes, tasks = self._nodes, self._tasks
        if received.shape[0]:
            if received is not self.inbox:      # not received in place: stack them here
                slots = np.concatenate((self.table[None], received))
                nodes = slots[:, : self._node_size].reshape(len(slots), *nodes.shape[1:])
                tasks = slots[:, self._node_size:].reshape(len(slots), *tasks.shape[1:])
            # argmax returns the first maximum: on a tie our own copy wins (ties are copies of
            # the same version, except our own rows, which nobody else has fresher)
            best = nodes[:, :, 0].argmax(axis=0)
            self._nodes[0][...] = nodes[best, self._node_index]
            if self._owner is not None:
                self._tasks[0][...] = tasks[best[self._owner], self._task_index]
        stamps = self._nodes[0, :, 0]
        return self.round - float(self._sizes @ stamps) / self.K

    def finish_round(self) -> None:
        """Steps 3-5: Omega from the gossiped V, the consensus from the gossiped messages,
        the vote's sums, z-step."""
        block, cols, tcols = self.block, self._cols, self._tcols
        nodes, tasks = self._nodes[0], self._tasks[0]
        V_own = None
        if self.given:
            cons = self.consensus
            cons.update_relationship(tasks[:, tcols["v"]])          # Omega from v_j(t-1)
            if self._paper:
                cons.V[...] = tasks[:, tcols["v"]]                  # V_old of the "paper" variant
            u, V = cons.step(tasks[:, tcols["c"]])
            V_own = V[self.start:self.stop]
        else:
            u = self._u_weight.u(None, column_sum=nodes[:, cols["S"]].sum(axis=0))
        if block.experts is not None:
            block.experts.set_totals(nodes[:, cols["m"]].sum(axis=0))
            if self.form == MOMENT:
                block.related.H.reshape(-1)[...] = nodes[:, cols["H"]].sum(axis=0)
            else:
                W = tasks[:, tcols["w"]]
                block.related.rows[...] = related_rows(directions(W[self.start:self.stop]), W, self.K)
            if block.bayes is not None and not self._groups:
                block.bayes.set_totals(nodes[:, cols["B"]].sum(axis=0))
        block.dual_step(u, V_own)
        if self.given:
            self._own_tasks[:, tcols["v"]] = V_own
        if self.prior is not None:
            # after the z-step, as a synchronous round's sums: a prior taken here is used
            # from the next round on
            self.prior.advance(self._seen_at(self.round - 1))

    def _seen_at(self, t: int) -> float:
        """The instances over all tasks up to round ``t`` (the plan's)."""
        if self._seen is None:
            raise RuntimeError("asynchronous D-ADMM with the mixture prior needs the run's plan "
                               "(DAdmmNode.plan) before its first round")
        return float(self._seen[min(t, len(self._seen) - 1)])

    def plan(self, instances, first_round: int = 0) -> None:
        """Every round's instances over all the tasks (the same on every node), from round 0
        whatever ``first_round`` (a resumed node counts its rounds itself), so that the rounds
        that end in a mixture prior's estimate are known without asking the other nodes."""
        self._seen = np.cumsum(np.asarray(instances, dtype=np.float64))

    def _sums(self):
        """The round's sums over every node, with the empirical-Bayes expert's mixture prior: a
        generator that yields this node's part of each sum and is sent the sum over every node
        (in node order, by the runtime): without a plan, the nodes' instances; in a round that
        ends in an estimate (:func:`.mixture.em_steps`), every node's statistics, then the EM
        steps' (:meth:`.MixtureBayes.estimate`)."""
        bayes, t = self.block.bayes, self.round - 1
        if self._seen is not None and t < len(self._seen):
            N = float(self._seen[t])
        else:
            N = float((yield np.array([bayes.n.sum()]))[0])
        if mixture.em_steps(N, bayes.estimated_at)[1] == bayes.estimated_at:
            return
        totals = yield bayes.statistics()
        yield from bayes.estimate(totals)

    def state(self) -> dict:
        out = {f"block_{k}": v for k, v in self.block.state().items()}
        if self.consensus is not None:
            out.update({f"consensus_{k}": v for k, v in self.consensus.state().items()})
        out["table"] = self.table.copy()
        out["round"] = np.int64(self.round)
        if self.prior is not None:
            out.update(self.prior.state())
        return out

    def load_state(self, state: dict) -> None:
        self.block.load_state({k[6:]: v for k, v in state.items() if k.startswith("block_")})
        if self.consensus is not None:
            self.consensus.load_state({k[10:]: v for k, v in state.items()
                                       if k.startswith("consensus_")})
        self.table[...] = state["table"]          # in place: the exchange is bound to this buffer
        self.round = int(state["round"])
        if self.prior is not None:
            self.prior.load_state(state)

    def checked(self, rows=None) -> list:
        """The arrays of the tasks ``rows`` (None: all), the table and the node's own
        consensus, to be finite."""
        arrays = self.block.checked(rows) + [self.table]
        if self.consensus is not None:
            c = self.consensus
            arrays += [c.u, c.V, c.rel.basis, c.rel.values]
        return arrays

    def task_rows(self) -> dict:
        rows = self.block.task_rows()
        return {k: rows[k] for k in ("W", "Z", "V")}

    def node_arrays(self) -> dict:
        """This node's own copy of the shared quantities (each node has its own u and Omega)."""
        rel = self.consensus.rel if self.consensus is not None else Relationship.identity(self.K)
        return {"u": self.block.u, **omega_arrays(rel)}
