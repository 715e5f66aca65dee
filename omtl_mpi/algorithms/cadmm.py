"""C-ADMM (paper Algorithm 1): rank 0 is the server, workers hold contiguous blocks of tasks.

Messages are flat float64 arrays, made of parts (docs/ALGORITHMS.md section 2.5):

* up, per worker: with Omega fixed at I/K (the defaults) the change of the sum of its tasks'
  messages c_k (d numbers), since every v_k then follows from c_k and u alone; with a learned
  Omega (or the paper variant), its tasks' c_k (the paper's protocol, kb d numbers). With the
  vote (docs/ALGORITHMS.md section 2.6) also the round's mistakes of its experts (3 numbers)
  and what the related expert needs of its tasks (the change of their part of H, d x d, or
  their models, kb x d, whichever is smaller for the run: :class:`.experts.Related`); with
  more tasks than features, also its tasks' statistics for the empirical-Bayes expert (2 d^2 +
  d + 2 numbers, all but two of them 0 in the rounds that cannot end in a new prior:
  :meth:`.bayes.EmpiricalBayes.statistics`).
* down, per worker: u; with a learned Omega its tasks' v_k; with the vote every task's
  mistakes and H, or its tasks' related models (kb x d), and every task's statistics for the
  empirical-Bayes expert.
* asynchronous (``--sync partial``): the statistics every round, a worker's E-step sums with
  a mixture prior, and in the reply, in the statistics' place, the prior the server estimated
  (:mod:`.served_prior`).

So with the defaults a round's messages and the server's work do not grow with the tasks, and
a worker's work follows its tasks that have an instance in the round.

With ``--coordinates nonzero`` (large d: a round changes only the coordinates of its
instances) the changes travel as entries, (coordinate, value) or (task, coordinate, value)
with a count: up, the change of the sum of C and, with the vote, the W entries changed; down,
the entries of u that changed and every task's W entries that changed (each worker keeps a
copy of every model for the related expert, ``models`` form) with its tasks' rows of the
models' Gram matrix. A message's capacity is the most pairs a round can touch
(:class:`~omtl_mpi.data.sparse.RowFormat`): O(non-zeros), never O(d).
"""
from __future__ import annotations

import numpy as np

from .admm import (FIXED_OMEGA, GIVEN, AdmmParams, BlockRole, Consensus, TaskBlock,
                   coordinates_of, coupling, omega_arrays, related_default)
from . import mixture, served_prior
from .bayes import stats_size
from .mixture import MixtureBayes
from .experts import (BAYES, MODELS, MOMENT, ROWS, directions, distinct, gram_change,
                      related_rows, vote_experts)
from .relationship import ExactStep, Relationship


def related_form(params, n_tasks: int, dim: int) -> str | None:
    """The form of the related expert in C-ADMM (None without the vote): H (d x d numbers in
    every message, O(d^2) per task) with more tasks than features, else the tasks' rows
    (kb x d numbers, O(K d) per task on the server), the smaller of the two; with
    ``--coordinates nonzero`` and fewer tasks than features, every model's changed entries."""
    return related_default(n_tasks, dim, coordinates_of(params, dim)) if params.experts else None


def _vote_parts(params, n_tasks: int, kb: int, dim: int, mistakes: str,
                asynchronous: bool = False) -> list:
    """(name, size) of the vote's fixed parts of a message (none without the vote): the
    experts' mistakes (named ``mistakes``: ``totals`` in a reply), the related expert's
    statistic (moment and rows forms) and, where the vote has it, the empirical-Bayes expert's
    statistics; ``asynchronous`` (``--sync partial``): a worker's E-step sums beside them, and
    in a reply the prior the server estimated (:mod:`.served_prior`) in their place."""
    form = related_form(params, n_tasks, dim)
    if form is None:
        return []
    names = vote_experts(n_tasks, dim, params.class_weight)
    parts = [(mistakes, len(names))]
    if form in (MOMENT, ROWS):
        parts.append(("related", dim * dim if form == MOMENT else kb * dim))
    if BAYES in names and asynchronous and mistakes == "totals":
        parts.append(("prior", served_prior.reply_size(dim)))
    elif BAYES in names:
        parts.append(("bayes", stats_size(dim)))
        if asynchronous and served_prior.sums_size(dim):
            parts.append(("groups", served_prior.sums_size(dim)))
    return parts


def _pairs(kb: int, dim: int, rows) -> int:
    """The capacity, in (task, coordinate) pairs, of the entry parts of ``kb`` tasks'
    messages (``rows``: the run's RowFormat; None: every coordinate)."""
    return kb * dim if rows is None else rows.pairs(kb, dim)


def _entries(params, dim: int) -> bool:
    """Whether the consensus's changes travel as entries (Omega fixed, --coordinates nonzero)."""
    return coupling(params) != GIVEN and coordinates_of(params, dim) == "nonzero"


def sized(params, n_tasks: int, dim: int) -> bool:
    """Whether the messages end in entries packed after their fixed parts, of which a message
    uses a prefix: its first number says how many numbers it uses, and only those need to
    travel (:class:`~omtl_mpi.comm.mpi.MpiStar`'s ``sized`` messages)."""
    return _entries(params, dim) or related_form(params, n_tasks, dim) == MODELS


def _packed(params, n_tasks: int, dim: int, up: bool) -> tuple:
    """The names of the entry arrays packed at the end of a message, in order: each holds one
    number per (task, coordinate) pair changed (``pair`` is task * d + coordinate, the task
    counted in the run)."""
    names = []
    if _entries(params, dim):
        names += ["pair", "dC"] if up else ["u_cols", "u_vals"]
    if related_form(params, n_tasks, dim) == MODELS:
        names += ["W"] if up else ["W_pair", "W"]
        if up and "pair" not in names:
            names.insert(0, "pair")
    return tuple(names)


def up_parts(params, n_tasks: int, kb: int, dim: int, rows=None,
             asynchronous: bool = False) -> list:
    """(name, size) of every part of a worker's message, in order (with entries: the fixed
    parts, then one part holding the packed entry arrays, :func:`pack`)."""
    parts = [("used", 1), ("n", 1)] if sized(params, n_tasks, dim) else []
    if not _entries(params, dim):
        parts.append(("C", kb * dim) if coupling(params) == GIVEN else ("dC", dim))
    parts += _vote_parts(params, n_tasks, kb, dim, "mistakes", asynchronous)
    names = _packed(params, n_tasks, dim, up=True)
    if names:
        parts.append(("packed", len(names) * _pairs(kb, dim, rows)))
    return parts


def down_parts(params, n_tasks: int, kb: int, dim: int, rows=None,
               asynchronous: bool = False) -> list:
    """(name, size) of every part of the server's reply to a worker, in order."""
    every = _pairs(n_tasks, dim, rows)         # every worker's entries
    form = related_form(params, n_tasks, dim)
    parts = [("used", 1), ("n_u", 1), ("n_W", 1)] if sized(params, n_tasks, dim) else []
    if not _entries(params, dim):
        parts.append(("u", dim))
    if coupling(params) == GIVEN:
        parts.append(("V", kb * dim))
    parts += _vote_parts(params, n_tasks, kb, dim, "totals", asynchronous)
    if form == MODELS:
        parts += [("gram", kb * n_tasks), ("diag", n_tasks)]
    names = _packed(params, n_tasks, dim, up=False)
    if names:
        parts.append(("packed", len(names) * every))
    return parts


# How an asynchronous server step folds the messages a worker sent since the last step into one
# (docs/ALGORITHMS.md section 2.9): changes add up, states are the newest
SUM, NEWEST = "sum", "newest"


def merges(params, n_tasks: int, dim: int, rows=None):
    """{part: SUM or NEWEST} of a worker's message for ``--sync partial``, or why it cannot run
    asynchronously (a string): messages of entries (their pairs change from round to round)
    have no merge. The empirical-Bayes expert's statistics and E-step sums are states of the
    worker's tasks (:mod:`.served_prior`)."""
    if sized(params, n_tasks, dim):
        return ("its messages are entries of the coordinates a round changes (--coordinates "
                "nonzero, or the vote's models at large d); use --coordinates all")
    parts = dict(up_parts(params, n_tasks, 1, dim, rows, asynchronous=True))
    kind = {"C": NEWEST, "dC": SUM, "mistakes": SUM, "bayes": NEWEST, "groups": NEWEST,
            "related": SUM if related_form(params, n_tasks, dim) == MOMENT else NEWEST}
    return {name: kind[name] for name in parts}


def pack(parts: dict, arrays, counts) -> None:
    """Write ``arrays`` one after another into ``parts["packed"]``, each of the length its
    count in ``counts`` gives, and into ``parts["used"]`` (the message's first number) how many
    numbers of the message, from its start, are used."""
    tail = parts["packed"]
    offset = 0
    for values, n in zip(arrays, counts):
        tail[offset: offset + n] = values
        offset += n
    parts["used"][0] = (tail.ctypes.data - parts["used"].ctypes.data) // 8 + offset


def unpack(parts: dict, counts) -> list:
    """The arrays :func:`pack` wrote (views), of the lengths ``counts``."""
    tail, out, offset = parts["packed"], [], 0
    for n in counts:
        out.append(tail[offset: offset + n])
        offset += n
    return out


def _views(buffer: np.ndarray, parts: list, offset: int = 0) -> dict:
    """{name: the part's slice of ``buffer``} for consecutive ``parts`` from ``offset``."""
    out = {}
    for name, size in parts:
        out[name] = buffer[offset: offset + size]
        offset += size
    return out


class CAdmmWorker(BlockRole):
    """Worker role for tasks ``start..stop-1`` of ``n_tasks``: predict, w-step, send; receive
    the consensus; z-step (:class:`.contract.Worker`)."""

    TASK_AXIS = TaskBlock.task_axis()
    # for .undo: the message's and the reply's layouts and views (message itself is saved)
    NOT_STATE = ("_up", "_down", "_packed", "_packed_down", "_cached", "_served")

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int,
                 rows=None, asynchronous: bool = False):
        self.start, self.stop, self.dim = start, stop, dim
        self.kb = kb = stop - start
        self.K_all = n_tasks
        # sent every round, the same buffer (MPI binds to it)
        up = up_parts(params, n_tasks, kb, dim, rows, asynchronous)
        self.message = np.zeros(sum(size for _, size in up))
        self._up = _views(self.message, up)
        self._down = down_parts(params, n_tasks, kb, dim, rows, asynchronous)
        self._packed = _packed(params, n_tasks, dim, up=True)
        self._packed_down = _packed(params, n_tasks, dim, up=False)
        self._cached = None
        given = coupling(params) == GIVEN
        self.block = TaskBlock(params, kb, dim, mode=GIVEN if given else FIXED_OMEGA,
                               message=self._up["C"].reshape(kb, dim) if given else None,
                               total_tasks=n_tasks, related_mode=related_form(params, n_tasks, dim),
                               groups=True)
        self._instances, self._round = None, 0
        # --sync partial with the empirical-Bayes expert: the prior comes from the server
        self._served = (served_prior.TakenPrior(self.block.bayes, self._up.get("groups"))
                        if asynchronous and "bayes" in self._up else None)

    def plan(self, instances, first_round: int = 0) -> None:
        """Every round's instances over all the tasks (the same on every rank) and the round
        that comes next: the empirical-Bayes expert's statistics are then computed exactly in
        the rounds that end in a new prior (without a plan, in those that may: a round has at
        most B instances of each task)."""
        self._instances, self._round = np.asarray(instances), first_round

    @staticmethod
    def sized(params, n_tasks: int, dim: int) -> bool:
        """Whether a message uses only a prefix of its buffer (:func:`sized`)."""
        return sized(params, n_tasks, dim)

    @staticmethod
    def up_size(params, n_tasks: int, kb: int, dim: int, rows=None,
                asynchronous: bool = False) -> int:
        return sum(size for _, size in up_parts(params, n_tasks, kb, dim, rows, asynchronous))

    @staticmethod
    def down_size(params, n_tasks: int, kb: int, dim: int, rows=None,
                  asynchronous: bool = False) -> int:
        return sum(size for _, size in down_parts(params, n_tasks, kb, dim, rows, asynchronous))

    def up(self, X, y, inv_count, active=slice(None)):
        """One round's predictions (B, na) and the flat message to the server (the same
        buffer every round)."""
        block, up = self.block, self._up
        t, self._round = self._round, self._round + 1
        positive = block.predict_and_step(X, y, inv_count, active)
        if "dC" in up:
            up["dC"][...] = block.delta_C
        if "mistakes" in up:
            up["mistakes"][...] = block.delta_mistakes
            if block.related.mode == MOMENT:
                up["related"][...] = block.delta_H.reshape(-1)
            elif block.related.mode == ROWS:
                up["related"][...] = block.W.reshape(-1)
            if "bayes" in up:       # asynchronous: every round's (the server sums the newest)
                up["bayes"][...] = block.bayes.statistics(
                    None if self._served is not None else self._bound(t, y))
        if self._packed:
            rows, cols, values = block.W_pairs
            n = len(cols)
            arrays = {"pair": (rows + self.start) * self.dim + cols, "W": values}
            if "dC" in self._packed:
                arrays["dC"] = block.delta_pairs[1]
            up["n"][0] = n
            pack(up, [arrays[k] for k in self._packed], [n] * len(self._packed))
        return positive, self.message

    def _bound(self, t: int, y) -> float:
        """The most instances round ``t`` (labels ``y``, B x na) can hold over every block, the
        same on every rank: the plan's count; else in one block of every task (one process,
        the Python API) the round's own; else B of each of the run's tasks (the rounds are
        padded to B on every rank)."""
        planned = self._instances
        if planned is not None and t < len(planned):
            return float(planned[t])
        return float(np.count_nonzero(y) if self.kb == self.K_all else self.K_all * y.shape[0])

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The decision values (B, na) behind :meth:`up`'s predictions, changing nothing."""
        return self.block.decide(X, active)

    @staticmethod
    def merges(params, n_tasks: int, dim: int, rows=None):
        """How a server folds several messages of a worker into one (:func:`merges`)."""
        return merges(params, n_tasks, dim, rows)

    @staticmethod
    def message_parts(params, n_tasks: int, kb: int, dim: int, rows=None,
                      asynchronous: bool = False) -> list:
        """(name, start, stop) of every part of the message of a worker of kb tasks."""
        out, offset = [], 0
        for name, size in up_parts(params, n_tasks, kb, dim, rows, asynchronous):
            out.append((name, offset, offset + size))
            offset += size
        return out

    def bind(self, reduce) -> None:
        """``reduce(values)``: the sum over every worker of ``values``, on every rank (the
        exchange of the mixture prior's EM steps, :mod:`.mixture`); None in one process."""
        if isinstance(self.block.bayes, MixtureBayes):
            self.block.bayes.sum_blocks = reduce

    def down(self, msg: np.ndarray) -> None:
        d, block = self.dim, self.block
        down = self._down_views(msg)
        packed = {}
        if "packed" in down:
            n_u, n_W = int(down["n_u"][0]), int(down["n_W"][0])
            names = self._packed_down
            packed = dict(zip(names, unpack(down, [n_u if k.startswith("u_") else n_W
                                                    for k in names])))
        if "totals" in down:
            block.experts.set_totals(down["totals"])
            related = block.related
            if related.mode == MODELS:
                task, col = np.divmod(packed["W_pair"].astype(np.intp), d)
                np.put(related.all_models, col * self.K_all + task, packed["W"])
                related.set_cosines(down["gram"].reshape(self.kb, -1), down["diag"], self.start)
            else:
                (related.H if related.mode == MOMENT else related.rows).reshape(-1)[...] = down["related"]
            if "bayes" in down:
                block.bayes.set_totals(down["bayes"])
            elif "prior" in down:
                self._served.receive(down["prior"])
        V = down["V"].reshape(-1, d) if "V" in down else None
        if "u_cols" in packed:
            block.dual_step(packed["u_vals"], V, packed["u_cols"].astype(np.intp))
        else:
            block.dual_step(down["u"], V)

    def _down_views(self, msg: np.ndarray) -> dict:
        """The reply's parts (cached for the buffer the reply arrives in every round)."""
        if self._cached is None or self._cached[0] is not msg:
            self._cached = (msg, _views(msg, self._down))
        return self._cached[1]

    def state(self) -> dict:
        out = self.block.state()
        if self._served is not None:
            out.update(self._served.state())
        return out

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)
        if self._served is not None:
            self._served.load_state(state)

    def task_rows(self) -> dict:
        """Final per-task arrays of this block (one row per task) for the results file."""
        rows = self.block.task_rows()
        return {k: rows[k] for k in ("W", "Z", "V")}


class CAdmmServer:
    """Server role: the consensus over every task's messages, the vote's sums and statistic,
    Omega every m rounds."""

    # for .undo: the messages' and the reply's layouts and views (reply itself is saved)
    NOT_STATE = ("_up_names", "_down_names", "_ups", "_downs", "_replies", "_cached")

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, blocks, rows=None,
                 asynchronous: bool = False):
        K, d = n_tasks, dim
        self.K, self.dim = K, d
        self.given = coupling(params) == GIVEN
        self.form = related_form(params, K, d)
        self.entries = _entries(params, d)
        self._up_names = _packed(params, K, d, up=True)
        self._down_names = _packed(params, K, d, up=False)
        self.consensus = Consensus(params, K, d) if self.given else None
        # with Omega fixed at I/K only the sum of every task's message is needed: u = w S
        self._u_weight = ExactStep(Relationship.identity(K), params.a, params.rho,
                                   params.lambda2, params.lambda4)._sum_weight
        self.S = np.zeros(d)                     # sum of every task's last message c_k
        self.u = np.zeros(d)
        names = vote_experts(K, d, params.class_weight)
        self.totals = np.zeros(len(names))
        # the empirical-Bayes expert's statistics, summed over every task
        self.bayes = (np.zeros(stats_size(d)) if self.form is not None and BAYES in names
                      else None)
        # with a mixture prior, the server takes part in its EM steps' exchanges (bind)
        self._groups = (np.zeros(mixture.sums_size(d)) if self.bayes is not None and mixture.used(d)
                        and not asynchronous else None)
        # --sync partial: the prior estimated here, for every worker (.served_prior)
        self._served = (served_prior.ServedPrior(d) if self.bayes is not None and asynchronous
                        else None)
        self._reduce, self.estimated_at = None, 0.0
        # the vote's related expert: H, or every task's model as last sent (rows or columns)
        self.related = (np.zeros((d, d) if self.form == MOMENT else (d, K) if self.form == MODELS
                                 else (K, d)) if self.form is not None else None)
        # the models form: their Gram matrix, kept up to date by the entries that change
        self.gram = np.zeros((K, K)) if self.form == MODELS else None
        self._C = np.zeros((K, d)) if self.given else None
        self._ups, self._downs, offset, reply = [], [], 0, 0
        for a, b in blocks:
            parts = up_parts(params, K, b - a, d, rows, asynchronous)
            self._ups.append((a, b, offset, parts))
            offset += sum(size for _, size in parts)
            parts = down_parts(params, K, b - a, d, rows, asynchronous)
            self._downs.append((a, b, reply, parts))
            reply += sum(size for _, size in parts)
        self.reply = np.zeros(reply)
        self._replies = [(a, b, _views(self.reply, parts, offset))
                         for a, b, offset, parts in self._downs]
        self._cached = None

    def reply_slices(self) -> list:
        """(start, stop) of every worker's reply in :attr:`reply`, in rank order."""
        return [(offset, offset + sum(size for _, size in parts))
                for _, _, offset, parts in self._downs]

    def _parts(self, up_all: np.ndarray) -> list:
        """Every worker's (start, stop, {part: view}) in the gathered messages (cached for the
        buffer they arrive in every round)."""
        if self._cached is None or self._cached[0] is not up_all:
            self._cached = (up_all, [(a, b, _views(up_all, parts, offset))
                                     for a, b, offset, parts in self._ups])
        return self._cached[1]

    def _entries_of(self, parts) -> list:
        """Every worker's packed entry arrays by name, in rank order."""
        names = self._up_names
        return [dict(zip(names, unpack(part, [int(part["n"][0])] * len(names))))
                for _, _, part in parts]

    def step(self, up_all: np.ndarray) -> np.ndarray:
        """Gathered messages (flat, rank order) in; every worker's reply (flat, rank order) out
        (the same buffer every round)."""
        d = self.dim
        parts = self._parts(up_all)
        V = changed = found = None
        if self.given:
            for a, b, part in parts:
                self._C[a:b] = part["C"].reshape(-1, d)
            u, V = self.consensus.step(self._C)
            self.u[...] = u
        elif self.entries:
            found = self._entries_of(parts)
            cols = [f["pair"].astype(np.intp) % d for f in found]
            changed = distinct(np.concatenate(cols))
            for where, f in zip(cols, found):   # rank order
                np.add.at(self.S, where, f["dC"])
            self.u[changed] = self.S[changed] * self._u_weight
        else:
            for _, _, part in parts:             # rank order
                self.S += part["dC"]
            np.multiply(self.S, self._u_weight, out=self.u)
        related = self.related
        if self.form is not None:
            if self.bayes is not None:
                self.bayes[...] = 0.0           # the blocks send their statistics, not changes
            for a, b, part in parts:
                self.totals += part["mistakes"]
                if self.bayes is not None:
                    self.bayes += part["bayes"]
                if self.form == MOMENT:
                    related += part["related"].reshape(d, d)
                elif self.form == ROWS:
                    related[a:b] = part["related"].reshape(-1, d)
            if self._served is not None:
                self._served.step(self.bayes, [part["groups"] for _, _, part in parts]
                                  if self._served.mix else [])
            if self.form == ROWS:
                unit = directions(related)
                related = related_rows(unit, related, self.K, unit)
            elif self.form == MODELS:
                if found is None:
                    found = self._entries_of(parts)
                pairs = np.concatenate([f["pair"] for f in found])
                values = np.concatenate([f["W"] for f in found])
                task, col = np.divmod(pairs.astype(np.intp), d)
                gram_change(related, self.gram, task, col, values)
                diag = np.diagonal(self.gram)
        arrays = {}
        if changed is not None:
            arrays.update(u_cols=changed, u_vals=self.u[changed])
        if self.form == MODELS:
            arrays.update(W_pair=pairs, W=values)
        counts = [len(arrays[k]) for k in self._down_names]
        for a, b, reply in self._replies:
            if "u" in reply:
                reply["u"][...] = self.u
            if V is not None:
                reply["V"][...] = V[a:b].reshape(-1)
            if self.form is not None:
                reply["totals"][...] = self.totals
            if self.form == MODELS:
                reply["gram"][...] = self.gram[a:b].reshape(-1)
                reply["diag"][...] = diag
            elif self.form is not None:
                reply["related"][...] = (related if self.form == MOMENT else related[a:b]).reshape(-1)
            if self._served is not None:
                reply["prior"][...] = self._served.flat
            elif self.bayes is not None:
                reply["bayes"][...] = self.bayes
            if self._down_names:
                reply["n_u"][0] = len(changed) if changed is not None else 0
                reply["n_W"][0] = len(values) if self.form == MODELS else 0
                pack(reply, [arrays[k] for k in self._down_names], counts)
        return self.reply

    def bind(self, reduce) -> None:
        """``reduce(values)``: the exchange of the mixture prior's EM steps, in which a server
        that holds no tasks takes part with zeros (:meth:`after_reply`)."""
        self._reduce = reduce

    def after_reply(self) -> None:
        """Work that the replies need not wait for: the Omega update; with a mixture prior, the
        EM steps' exchanges of a round that ends in an estimate (the workers decide alike, from
        the same totals: :func:`.mixture.em_steps`)."""
        if self.given:
            self.consensus.update_relationship()
        if self._groups is not None:
            steps, self.estimated_at = mixture.em_steps(self.bayes[-2], self.estimated_at)
            if self._reduce is not None:
                for _ in range(steps):
                    self._reduce(self._groups)

    def checked(self) -> list:
        """Every array of :meth:`state`, to be finite, without copying them."""
        arrays = [a for a in (self.S, self.u, self.totals, self.related, self.bayes, self.gram)
                  if a is not None]
        if self._served is not None:
            arrays += self._served.arrays()
        if self.given:
            c = self.consensus
            arrays += [c.u, c.V, c.rel.basis, c.rel.values]
        return arrays

    def state(self) -> dict:
        out = {"S": self.S.copy(), "u": self.u.copy(), "totals": self.totals.copy()}
        if self.related is not None:
            out["related"] = self.related.copy()
        if self.bayes is not None:
            out["bayes"] = self.bayes.copy()
        if self._groups is not None:
            out["estimated_at"] = np.float64(self.estimated_at)
        if self.gram is not None:
            out["gram"] = self.gram.copy()
        if self._served is not None:
            out.update(self._served.state())
        if self.given:
            out.update({f"consensus_{k}": v for k, v in self.consensus.state().items()})
        return out

    def load_state(self, state: dict) -> None:
        self.S[...] = state["S"]
        self.u[...] = state["u"]
        self.totals[...] = state["totals"]
        if self.related is not None:
            self.related[...] = state["related"]
        if self.bayes is not None:
            self.bayes[...] = state["bayes"]
        if self._groups is not None:
            self.estimated_at = float(state["estimated_at"])
        if self.gram is not None:
            self.gram[...] = state["gram"]
        if self._served is not None:
            self._served.load_state(state)
        if self.given:
            self.consensus.load_state({k[10:]: v for k, v in state.items()
                                       if k.startswith("consensus_")})

    def global_arrays(self) -> dict:
        """Final shared arrays for the results file: u and Omega (fixed at I/K, or learned)."""
        rel = self.consensus.rel if self.given else Relationship.identity(self.K)
        return {"u": self.u, **omega_arrays(rel)}
