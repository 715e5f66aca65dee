"""Fused rounds: the whole round of a rank, math and messages, in compiled code.

With more ranks than cores a round costs each rank more in Python around its compiled steps
(the loop, the clock, the doorbells, the copies in and out of the window) than in the steps
themselves (docs/PERFORMANCE.md). When a run uses both the compiled steps (``--kernel numba``)
and the shared-memory transport, its rounds therefore run in the loops of :mod:`._fused`: one
compiled call runs rounds for up to :data:`CHUNK_SECONDS`, then this module shows progress,
writes checkpoints, injects --fail-at failures and turns a loop's status into an exception,
exactly where :func:`~omtl_mpi.runtime.schedule.rounds` does it for the Python loops.

The loops call the same compiled steps with the same arguments in the same order as the Python
loops, so a run gives the same bits either way (tests/test_fused.py). Rounds whose Omega
update needs relationship.py's careful path are finished here, in Python, by the learner's own
methods. Setting ``OMTL_MPI_FUSED=0`` in the environment of every rank keeps the Python loops
(for the benchmarks that measure what fusing is worth).

Which runs: C-ADMM (and PMSC-Log) and D-ADMM with the exact variant, the Euclidean w-step and at
most :data:`~omtl_mpi.algorithms.kernels.MAX_TASKS` tasks (the compiled Omega update), on Linux.
"""
from __future__ import annotations

import functools
import os
import sys
from time import CLOCK_MONOTONIC, perf_counter

import numpy as np

from ..algorithms import kernels

# a loop hands control back to Python at least this often (progress, signals, --fail-at)
CHUNK_SECONDS = 0.25
ENVIRONMENT = "OMTL_MPI_FUSED"


def usable(algo, params, transport: str, n_tasks: int) -> bool:
    """Whether a run's rounds go through the fused loops: the same answer on every rank of a
    job that agrees on its configuration and transport (runtime/run.py checks)."""
    if transport != "shm" or os.environ.get(ENVIRONMENT) == "0" or not sys.platform.startswith("linux"):
        return False
    if (getattr(params, "kernel", None) != "numba" or params.variant != "exact"
            or params.w_step != "euclid" or n_tasks > kernels.MAX_TASKS):
        return False
    from ..algorithms.cadmm import CAdmmServer, CAdmmWorker
    from ..algorithms.dadmm import DAdmmNode
    if algo.pattern == "server":
        return algo.worker is CAdmmWorker and algo.server is CAdmmServer
    return algo.pattern == "neighbours" and algo.node is DAdmmNode


@functools.cache
def load():
    """The compiled loops (:mod:`._fused`), after the compiled steps they call; compiled on the
    first call after a change to any of their files (runtime/run.py lets one rank do it first),
    then loaded from numba's cache."""
    kernels.load()
    from ..comm import _compiled as compiled_bells
    kernels.refresh(compiled_bells)
    from . import _fused
    kernels.refresh(_fused)
    kernels.mark_cache_ready("fused")
    return _fused


def run_star(comm, worker, server, stream, clock, progress, preds=None, first_round: int = 0,
             fault=None, checkpoint=None):
    """:func:`~omtl_mpi.runtime.star.run_star` for a :class:`~omtl_mpi.comm.shm.ShmStar`, fused."""
    role = (_StarWorker(comm, worker, stream, preds, clock) if worker is not None
            else _StarServer(comm, server, clock))
    _drive(role, first_round, clock.rows.shape[0], progress, fault, checkpoint)


def run_graph(comm, nodes, streams, clock, progress, preds, staleness, first_round: int = 0,
              fault=None, checkpoint=None):
    """:func:`~omtl_mpi.runtime.graph.run_graph` for a :class:`~omtl_mpi.comm.shm.ShmGraph`
    (one node per rank), fused."""
    (node,), (stream,), (pred,) = nodes, streams, preds
    role = _GraphNode(comm, node, stream, pred, staleness[0], clock)
    _drive(role, first_round, clock.rows.shape[0], progress, fault, checkpoint)


def _drive(role, first: int, last: int, progress, fault, checkpoint) -> None:
    """Rounds ``first..last-1`` in chunks that end where the schedule has work: before the
    --fail-at round, after every checkpoint round."""
    every, save = checkpoint if checkpoint else (0, None)
    fail_at = fault.at if fault is not None else -1
    t = first
    role.state[role.loops.T] = t
    while t < last:
        if t == fail_at:
            role.sync()
            fault.trigger(t)
        stop = fail_at if t < fail_at < last else last
        if every:
            stop = min(stop, (t // every + 1) * every)
        role.run(stop, progress)
        t = stop
        if every and t % every == 0 and t < last:
            role.sync()
            save(t)
    role.sync()
    progress.close()


class _Role:
    """What the three loops share: their position, the bells, the clock, the status handling."""

    def __init__(self, bells, clock):
        self.loops = load()
        self.bells = bells
        b = bells.arrays()
        # a round's last sender rings (comm/_compiled.arrive): one token from any sender is a
        # round, so every listened-to sender is counted as the same one
        where = np.full(max(b["listen"], default=0) + 1, -1, dtype=np.int64)
        where[b["listen"]] = 0
        self.bell_args = (b["fd"], b["peers"], b["token"], where, np.zeros(1, dtype=np.int64),
                          np.zeros(64, dtype=np.uint32))
        self.state = np.zeros(6, dtype=np.int64)
        self.acc = np.zeros(3)
        self.rows = clock.rows
        self.clock_id = CLOCK_MONOTONIC     # perf_counter's: the loops' times and Python's mix
        self.done = False                   # whether a round has run in the compiled loop

    def call(self, stop: int, deadline: float) -> int:
        """One call of the role's compiled loop (:attr:`loop`, its arguments :attr:`args`)."""
        before = self.state[self.loops.T]
        status = self.loop(self.state, self.acc, stop, deadline, self.clock_id, self.rows,
                           *self.args, *self.bell_args)
        self.done = self.done or self.state[self.loops.T] > before
        return status

    def run(self, stop: int, progress) -> None:
        """Rounds up to ``stop`` (exclusive), handing back to Python every CHUNK_SECONDS."""
        loops, state = self.loops, self.state
        while state[loops.T] < stop:
            status = self.call(stop, perf_counter() + CHUNK_SECONDS)
            progress.update(int(state[loops.T]))
            if status == loops.OK or status == loops.bells.INTERRUPTED:
                continue            # back in Python: a pending signal's handler has run
            if status == loops.CAREFUL:
                self.careful()
                self._finish_row()
                continue
            raise self._error(status)

    def _finish_row(self) -> None:
        """The clock row of a round that Python finished, and on to the next round."""
        loops, state, acc = self.loops, self.state, self.acc
        t = int(state[loops.T])
        total = perf_counter() - acc[0]
        self.rows[t] = (total - acc[1] - acc[2], acc[1], acc[2])
        state[loops.T] = t + 1
        state[loops.PHASE] = loops.START

    def _error(self, status: int) -> Exception:
        bells, info = self.loops.bells, int(self.state[self.loops.INFO])
        if status == bells.PEER_LOST:
            return self.bells.lost()
        if status == bells.UNEXPECTED:
            return RuntimeError(f"unexpected wake-up from rank {info}")
        return OSError(info, f"doorbell: {os.strerror(info)}")


class _StarWorker(_Role):
    def __init__(self, comm, worker, stream, preds, clock):
        super().__init__(comm.bells, clock)
        self.block = worker.block
        parts = comm.parts()
        kb, d = self.block.W.shape
        self.reply = parts["reply"].reshape(kb + 1, d)
        W, Z, R, rY, loss, keep, inv, rho = self.block.compiled_arguments()
        self.args = (W, Z, R, rY, stream.X, stream.y_float, stream.inv_count, preds, loss, keep,
                     inv, rho, self.block.C, parts["up"].reshape(kb, d),
                     parts["down"].reshape(kb + 1, d), self.reply, parts["arrivals"],
                     parts["workers"])
        self.loop = self.loops.star_worker

    def careful(self):
        raise AssertionError("a worker's rounds need no careful path")

    def sync(self):
        if self.done:       # the block keeps views of the last reply, as after ShmStar.down
            self.block.u, self.block.V = self.reply[0], self.reply[1:]


class _Consensus:
    """The live consensus arrays of a server or node loop, and their way back."""

    def _consensus_args(self, consensus):
        p = consensus.p
        self.consensus = consensus
        self.M, self.evals, self.Q = consensus.live_arrays()
        K = self.evals.shape[0]
        self.state[self.loops.STEPS] = consensus.rounds
        return (self.M, self.evals, self.Q, np.empty_like(self.M), np.empty(K), np.empty((K, K)),
                consensus.uv, bool(p.relationship), int(p.omega_every), float(p.omega_eps),
                float(p.a), float(p.rho), float(p.lambda2), float(p.lambda4))

    def _consensus_out(self):
        self.consensus.adopt(self.M, self.evals, self.Q, int(self.state[self.loops.STEPS]))

    def _consensus_in(self):
        M, evals, Q = self.consensus.live_arrays()
        self.M[...], self.evals[...], self.Q[...] = M, evals, Q
        self.state[self.loops.STEPS] = self.consensus.rounds


class _StarServer(_Role, _Consensus):
    def __init__(self, comm, server, clock):
        super().__init__(comm.bells, clock)
        self.server = server
        parts = comm.parts()
        K, d = server.K, server.dim
        rows = server.reply_rows
        self.args = (*self._consensus_args(server.consensus), parts["gathered"].reshape(K, d),
                     parts["down"].reshape(rows.shape[0], d), rows)
        self.loop = self.loops.star_server

    def careful(self):
        self._consensus_out()
        self.server.after_reply()
        self._consensus_in()

    def sync(self):
        self._consensus_out()


class _GraphNode(_Role, _Consensus):
    def __init__(self, comm, node, stream, preds, staleness, clock):
        super().__init__(comm.bells, clock)
        self.node, self.comm = node, comm
        W, Z, R, rY, loss, keep, inv, rho = node.block.compiled_arguments()
        self.state[self.loops.EXCHANGES] = comm.exchanges
        self.state[self.loops.NODE_ROUND] = node.round
        self.args = (staleness, W, Z, R, rY, stream.X, stream.y_float, stream.inv_count, preds,
                     loss, keep, inv, rho, *self._consensus_args(node.consensus), node.slots,
                     comm.copies, int(comm.rank), comm.neighbours.astype(np.int64),
                     comm.arrivals.reshape(-1), comm.degrees, node.start, node.stop)
        self.loop = self.loops.graph_node

    def careful(self):
        self._sync_node()
        self.node.finish_round()
        self._consensus_in()

    def _sync_node(self):
        self.node.round = int(self.state[self.loops.NODE_ROUND])
        self.comm.exchanges = int(self.state[self.loops.EXCHANGES])
        self._consensus_out()

    def sync(self):
        self._sync_node()
        if self.done:       # the block keeps views of the last step's (u, V), as finish_round
            uv = self.consensus.uv
            self.node.block.u, self.node.block.V = uv[0], uv[1 + self.node.start:1 + self.node.stop]
