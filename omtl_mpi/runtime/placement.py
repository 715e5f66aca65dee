"""Pinning ranks to CPUs when a node has more ranks than CPUs (``omtl-mpi run --bind``).

With more ranks than cores (the normal laptop case) the operating system spreads ranks evenly
over the cores.  For a server-pattern learner whose server does more per round than a worker
(C-ADMM's Omega update, DROM's Frank-Wolfe step) that is the wrong balance: the server is on
every round's critical path, and the workers that share its core cannot run while it computes.
``--bind auto`` (the default) instead pins every rank of such a node to one CPU, the server to a
CPU shared with as few workers as its weight calls for (docs/PERFORMANCE.md measures the
effect; scripts/bench_round.py shows it against ``--bind none`` in the same invocation).

It is for ranks that poll while they wait (``--transport mpi``): a polling rank takes its share
of the core from the rank with work.  Ranks that sleep while they wait (``--transport shm``, the
default with more ranks than CPUs) take nothing, and there pinning measured slower than the
system's own balancing, so :func:`bind` leaves them alone.

It acts only when all of the following hold, and otherwise leaves placement to the system:

* the node has more ranks of this job than CPUs it may use (the affinity mask), and at least
  two such CPUs;
* every rank on the node has the same affinity mask: the launcher did not place them itself
  (``mpiexec -bind-to``, ``srun --cpu-bind``);
* the ranks' weights differ.  With equal weights an even spread is already right, and pinning
  measured no faster (D-ADMM ring on 5 ranks, pmsc-log's light server).

The planning functions are pure (no MPI, no system calls), so they are tested directly.
"""
from __future__ import annotations

import os
from typing import Sequence

MODES = ("auto", "none")


def plan(cpus: Sequence[int], weights: Sequence[float]) -> list[int]:
    """Each rank's CPU: heaviest rank first (rank order among equals), each onto the CPU with
    the least weight so far (the first such CPU among equals).

    Parameters
    ----------
    cpus : sequence of int
        The CPUs the ranks may use, in the order ties are broken.
    weights : sequence of float
        Per-round CPU need of each rank (a worker is 1), in node-local rank order.

    Returns
    -------
    list of int
        The CPU of each rank, in the order of ``weights``.
    """
    load = [0.0] * len(cpus)
    out = [0] * len(weights)
    for r in sorted(range(len(weights)), key=lambda i: -weights[i]):
        slot = min(range(len(cpus)), key=load.__getitem__)
        load[slot] += weights[r]
        out[r] = cpus[slot]
    return out


def decide(mode: str, masks: Sequence[Sequence[int]], weights: Sequence[float]) -> list[int] | None:
    """The CPU of every rank of a node (node-local rank order), or None to leave placement to
    the operating system (see the module's conditions).

    Parameters
    ----------
    mode : {"auto", "none"}
    masks : sequence of sequence of int
        Each rank's current affinity mask (the CPUs it may run on).
    weights : sequence of float
        Each rank's per-round CPU need relative to a worker's.
    """
    if mode not in MODES:
        raise ValueError(f"--bind must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "none" or not masks:
        return None
    cpus = sorted(masks[0])
    if any(sorted(m) != cpus for m in masks[1:]):
        return None                      # the launcher placed the ranks: respect it
    if len(cpus) < 2 or len(masks) <= len(cpus) or len(set(weights)) == 1:
        return None
    return plan(cpus, weights)


def cpu_mask() -> list[int]:
    """The CPUs this process may run on (all of the machine's where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def bind(world, mode: str, weight: float, polling: bool = True) -> int | None:
    """Pin this rank as :func:`decide` says for its node; collective over ``world``.

    Parameters
    ----------
    world : MpiWorld or LocalWorld
        Needs ``node_peers(value)``: this rank's index among the ranks sharing its node and
        their values.
    mode : {"auto", "none"}
    weight : float
        This rank's per-round CPU need relative to a worker's.
    polling : bool
        Whether the ranks poll while they wait (``--transport mpi``); ranks that sleep are left
        to the operating system (the module's reasons). The same on every rank.

    Returns
    -------
    int or None
        The CPU this rank is now pinned to, or None if placement was left alone.
    """
    if mode == "none" or not polling or world.size == 1 or not hasattr(os, "sched_setaffinity"):
        return None
    index, peers = world.node_peers((cpu_mask(), float(weight)))
    cpus = decide(mode, [m for m, _ in peers], [w for _, w in peers])
    if cpus is None:
        return None
    try:
        os.sched_setaffinity(0, {cpus[index]})
    except OSError:                  # e.g. the CPU set changed meanwhile: run unpinned
        return None
    return cpus[index]
