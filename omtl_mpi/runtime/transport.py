"""How a job's per-round messages travel (``omtl-mpi run --transport auto|mpi|shm``).

* ``mpi``: MPI point-to-point (C-ADMM's star) and neighbourhood collectives on a
  distributed-graph communicator (D-ADMM, D-PSGD), with persistent requests; a waiting rank
  tests and yields the CPU.  Works on any number of nodes.
* ``shm``: every rank on one node; messages go through one MPI shared-memory window and a
  waiting rank sleeps on a FIFO until its peers wake it (:mod:`omtl_mpi.fast.shm`).
* ``auto`` (the default): ``shm`` when every rank of the job is on one node and the node has
  more of the job's ranks than CPUs they may use, else ``mpi``.

Why the split: a polling rank is always runnable, so with more ranks than cores the scheduler
gives the polling ranks their share of the core that the rank with work needs; a sleeping rank
takes nothing.  With a core per rank, polling wakes up sooner than a sleeper can be woken, and
MPI is the right choice (docs/PERFORMANCE.md measures both with more ranks than cores).

:func:`decide` is pure, so the rule is tested directly.
"""
from __future__ import annotations

import os
from typing import Sequence

from ..errors import ConfigError
from ..options import TRANSPORT

MODES = TRANSPORT.choices


def cpu_mask() -> list[int]:
    """The CPUs this process may run on (all of the machine's where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def decide(mode: str, world_size: int, node_masks: Sequence[Sequence[int]]) -> str:
    """``"mpi"`` or ``"shm"`` for a job of ``world_size`` ranks, seen from one node.

    Parameters
    ----------
    mode : {"auto", "mpi", "shm"}
    world_size : int
        Ranks in the job (more than 1).
    node_masks : sequence of sequence of int
        The affinity mask (CPUs it may run on) of every rank of the job on this node.

    Raises
    ------
    ConfigError
        ``shm`` asked for a job that spans several nodes, or an unknown mode.
    """
    if mode not in MODES:
        raise ConfigError(f"--transport must be one of {', '.join(MODES)}, got {mode!r}")
    one_node = len(node_masks) == world_size
    if mode == "mpi":
        return "mpi"
    if mode == "shm":
        if not one_node:
            raise ConfigError(f"--transport shm needs every rank on one node, but only "
                              f"{len(node_masks)} of the {world_size} ranks share this one; use "
                              "--transport mpi (or auto) for jobs across nodes")
        return "shm"
    cpus = set()
    for mask in node_masks:
        cpus.update(mask)
    return "shm" if one_node and len(node_masks) > len(cpus) else "mpi"


def choose(world, mode: str) -> str:
    """The transport of this job: ``"local"`` in one process, else :func:`decide` on this
    rank's node (the same answer on every rank: a job is on one node or it is not). Collective."""
    if mode not in MODES:
        raise ConfigError(f"--transport must be one of {', '.join(MODES)}, got {mode!r}")
    if world.size == 1:
        return "local"
    _, masks = world.node_peers(cpu_mask())
    return decide(mode, world.size, masks)


def star(kind: str, world, up_counts, down_counts, up_buffer=None, reply_buffer=None):
    """The star exchange of ``kind`` ("mpi" or "shm") on ``world``'s communicator."""
    if kind == "shm":
        from ..fast.shm import ShmStar
        return ShmStar(world.comm, up_counts, down_counts)
    from ..comm.mpi import MpiStar
    return MpiStar(world.comm, up_counts, down_counts, up_buffer=up_buffer, reply_buffer=reply_buffer)


def graph(kind: str, world, topology, message_shape, message=None, inbox=None):
    """The neighbour exchange of ``kind`` ("mpi" or "shm") on ``world``'s communicator."""
    if kind == "shm":
        from ..fast.shm import ShmGraph
        return ShmGraph(world.comm, topology, message_shape, inbox=inbox)
    from ..comm.graph import MpiGraph
    return MpiGraph(world.comm, topology, message_shape, message=message, inbox=inbox)
