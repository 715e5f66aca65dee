#!/usr/bin/env python
"""The floor under a round: what exchanging one round's messages costs on this machine, with no
learning at all, for the message patterns of C-ADMM (star) and D-ADMM (ring).

Usage: python scripts/bench_floor.py [--repeats 5] [--rounds 3000] [--out docs/PERFORMANCE.md]

Each configuration runs --rounds rounds of the pattern with the message sizes of K=5, d=9
(C-ADMM: d doubles up and 2d down per worker; D-ADMM: K (2d + 1) doubles to each ring
neighbour), on K+1 (star) or K (ring) processes, and reports the median over --repeats runs of
the wall time per round. Per-rank "work" between messages is either none or a fixed number of
small numpy calls (np.add on a 5 x 9 array), a stand-in for the learning math:

* MPI, as omtl-mpi exchanges (persistent point-to-point for the star, a persistent
  neighbourhood allgather for the ring; waiting by test-and-yield);
* MPI, nonblocking collectives (Igatherv + Iscatterv, Ineighbor_allgather), as before;
* one node's MPI shared memory with FIFO doorbells, ranks asleep while they wait, under
  SCHED_BATCH (omtl-mpi's ``--transport shm``: ShmStar, ShmGraph);
* operating-system pipes between forked processes, blocking reads: the kernel's own wake-ups,
  what any waiting scheme could do at best.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import replace_section, run_on  # noqa: E402
from omtlrun import MPIEXEC  # noqa: E402

K, D = 5, 9

MPI_CHILD = r"""
import os, sys, time
import numpy as np
from mpi4py import MPI
pattern, style, rounds, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
K, d = 5, 9
comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
A, B = np.ones((5, 9)), np.ones((5, 9))
def work(n):
    for _ in range(n):
        np.add(A, B, out=A)
def wait(reqs):
    test = MPI.Request.Testall
    while not test(reqs):
        os.sched_yield()
clock = None
if style == "shm":
    from omtl_mpi.comm.clock import PhaseClock
    from omtl_mpi.comm.shm import ShmGraph, ShmStar, set_batch_policy
    from omtl_mpi.topology import load_topology
    clock = PhaseClock(1)
    set_batch_policy()
if pattern == "star" and style == "shm":
    up, reply = np.ones(d), np.ones(2 * d * (size - 1))
    star = ShmStar(comm, [0] + [d] * (size - 1), [0] + [2 * d] * (size - 1))
elif pattern == "ring" and style == "shm":
    table = np.ones((K, 2 * d + 1))
    ring = ShmGraph(comm, load_topology("ring", size), table.shape)
elif pattern == "star":
    gspec = ([0] + [d] * (size - 1), [0] + [d * i for i in range(size - 1)])
    sspec = ([0] + [2 * d] * (size - 1), [0] + [2 * d * i for i in range(size - 1)])
    up, down = np.ones(d), np.empty(2 * d)
    gathered, reply, empty = np.empty(d * size), np.ones(2 * d * size), np.empty(0)
    if style == "persistent":
        if rank == 0:
            recv = [comm.Recv_init([gathered[i * d:(i + 1) * d], MPI.DOUBLE], i + 1, 0) for i in range(size - 1)]
            send = [comm.Send_init([reply[i * 2 * d:(i + 1) * 2 * d], MPI.DOUBLE], i + 1, 1) for i in range(size - 1)]
        else:
            both = [comm.Recv_init([down, MPI.DOUBLE], 0, 1), comm.Send_init([up, MPI.DOUBLE], 0, 0)]
else:
    nb = [(rank - 1) % size, (rank + 1) % size]
    graph = comm.Create_dist_graph_adjacent(nb, nb, reorder=False)
    table, inbox = np.ones((K, 2 * d + 1)), np.empty((2, K, 2 * d + 1))
    if style == "persistent":
        req = graph.Neighbor_allgather_init([table, MPI.DOUBLE], [inbox, MPI.DOUBLE])
comm.Barrier()
t0 = time.perf_counter()
for t in range(rounds):
    if style == "shm":
        if pattern == "star" and rank == 0:
            star.gather(clock); work(calls); star.scatter(reply, clock)
        elif pattern == "star":
            work(calls); star.up(up, clock); star.down(clock)
        else:
            work(calls); ring.exchange([table], clock)
    elif pattern == "star":
        if rank == 0:
            if style == "persistent":
                MPI.Prequest.Startall(recv); wait(recv)
                work(calls)
                MPI.Prequest.Startall(send); wait(send)
            else:
                wait([comm.Igatherv([empty, MPI.DOUBLE], [gathered, gspec, MPI.DOUBLE], 0)])
                work(calls)
                wait([comm.Iscatterv([reply, sspec, MPI.DOUBLE], [empty, MPI.DOUBLE], 0)])
        else:
            work(calls)
            if style == "persistent":
                MPI.Prequest.Startall(both); wait(both)
            else:
                r1 = comm.Igatherv([up, MPI.DOUBLE], None, 0)
                r2 = comm.Iscatterv(None, [down, MPI.DOUBLE], 0)
                wait([r1, r2])
    else:
        work(calls)
        if style == "persistent":
            req.Start()
            while not req.Test():
                os.sched_yield()
        else:
            r = graph.Ineighbor_allgather([table, MPI.DOUBLE], [inbox, MPI.DOUBLE])
            while not r.Test():
                os.sched_yield()
elapsed = time.perf_counter() - t0
if style == "shm":
    (star if pattern == "star" else ring).free()
elif style == "persistent":
    for r in (recv + send if pattern == "star" and rank == 0 else both if pattern == "star" else [req]):
        r.Free()
times = comm.gather(elapsed, 0)
if rank == 0:
    print(f"US {1e6 * max(times) / rounds:.3f}", flush=True)
"""


def mpi_round_us(pattern: str, style: str, rounds: int, calls: int) -> float:
    ranks = K + 1 if pattern == "star" else K
    out = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-c", MPI_CHILD, pattern, style,
                          str(rounds), str(calls)], capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("US "):
            return float(line.split()[1])
    raise SystemExit(f"floor benchmark failed ({pattern}, {style}):\n{out.stderr}")


def pipes_round_us(pattern: str, rounds: int, calls: int) -> float:
    """The same pattern between forked processes over pipes with blocking reads."""
    import time

    import numpy as np
    A, B = np.ones((5, 9)), np.ones((5, 9))

    def work(n):
        for _ in range(n):
            np.add(A, B, out=A)

    n = K + 1 if pattern == "star" else K
    pipes = {(i, j): os.pipe() for i in range(n) for j in range(n) if i != j}

    def peers(i):
        if pattern == "star":
            return list(range(1, n)) if i == 0 else [0]
        return [(i - 1) % n, (i + 1) % n]

    def node(i):
        mine = peers(i)
        for _ in range(rounds):
            if pattern == "star" and i == 0:
                for j in mine:
                    os.read(pipes[(j, 0)][0], 1)
                work(calls)
                for j in mine:
                    os.write(pipes[(0, j)][1], b"x")
            else:
                work(calls)
                for j in mine:
                    os.write(pipes[(i, j)][1], b"x")
                for j in mine:
                    os.read(pipes[(j, i)][0], 1)

    children = []
    for i in range(1, n):
        pid = os.fork()
        if pid == 0:
            try:
                node(i)
            finally:
                os._exit(0)
        children.append(pid)
    t0 = time.perf_counter()
    node(0)
    elapsed = time.perf_counter() - t0
    for pid in children:
        os.waitpid(pid, 0)
    for r, w in pipes.values():
        os.close(r)
        os.close(w)
    return 1e6 * elapsed / rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--calls", default="16,48",
                    help="numpy calls of 'work' per rank per round, comma-separated (0 is always run)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    rows = []
    for pattern in ("star", "ring"):
        for calls in [0] + [int(c) for c in args.calls.split(",")]:
            for label, fn in (
                    ("MPI, persistent requests (omtl-mpi)", lambda: mpi_round_us(pattern, "persistent", args.rounds, calls)),
                    ("MPI, nonblocking collectives", lambda: mpi_round_us(pattern, "collective", args.rounds, calls)),
                    ("shared memory, doorbells, SCHED_BATCH (omtl-mpi --transport shm)",
                     lambda: mpi_round_us(pattern, "shm", args.rounds, calls)),
                    ("pipes, blocking reads (the kernel's floor)", lambda: pipes_round_us(pattern, args.rounds, calls))):
                us = statistics.median(fn() for _ in range(args.repeats))
                rows.append((pattern, calls, label, us))
                print(f"{pattern:<4} work {calls:>2} calls  {label:<44} {us:8.1f} us/round", flush=True)

    lines = [
        "## The floor under a round",
        "",
        f"Generated by `python scripts/bench_floor.py --repeats {args.repeats} --rounds {args.rounds} "
        f"--calls {args.calls}` on {run_on()}. Only the messages of a round, no learning: the star of C-ADMM on "
        f"{K + 1} processes (d doubles up, 2d down per worker, d={D}) and the ring of D-ADMM on {K} "
        f"processes (K (2d + 1) doubles to each neighbour). *work* is a number of small numpy calls "
        f"each process makes per round (the server makes them after gathering), a stand-in for the "
        f"learning math; one such call costs about 0.3 us here. Median over {args.repeats} runs.",
        "",
        "| pattern | processes | work (numpy calls per rank) | exchange | us per round |",
        "|---|---|---|---|---|",
    ]
    for pattern, calls, label, us in rows:
        lines.append(f"| {pattern} | {K + 1 if pattern == 'star' else K} | {calls} | {label} | {us:.1f} |")
    replace_section(args.out, "floor", "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
