"""Who holds which tasks: contiguous task blocks, and world-size validation per pattern."""
from __future__ import annotations

from ..algorithms.contract import task_blocks
from ..errors import UserError


def placement(n_tasks: int, size: int, pattern: str, nodes: int | None = None) -> tuple[list, list]:
    """Who holds which tasks: ``(blocks, by_rank)``, the run's blocks of tasks in holder order
    (the star's workers in rank order, a graph's nodes in node order) and each rank's blocks.

    The one placement of every layout: a star puts rank 0's server beside ``size - 1``
    workers of a block each (in one process, ``nodes`` workers, default one); a graph or a run without communication ``nodes`` blocks (default
    one per rank), one per rank under MPI; in one process (``size`` 1) the one rank holds every
    block.
    """
    if pattern == "server":     # nodes: the workers of --sync partial in one process
        blocks = task_blocks(n_tasks, nodes if size == 1 and nodes else max(size - 1, 1))
    else:
        blocks = task_blocks(n_tasks, nodes or size)
    if size == 1:
        return blocks, [blocks]
    return blocks, ([[]] if pattern == "server" else []) + [[b] for b in blocks]


def check_star_world(size: int, n_tasks: int, algo: str) -> None:
    """A server-pattern run needs 1 rank (in-process) or 2..K+1 ranks (server + 1..K workers)."""
    if size == 1:
        return
    if size - 1 > n_tasks:
        raise UserError(
            f"{algo} with {n_tasks} tasks uses at most {n_tasks + 1} ranks (rank 0 is the server, "
            f"each worker holds at least one task), but {size} were started: "
            f"start {n_tasks + 1} (one task per worker) or fewer (--np, or mpiexec -n)")


def graph_nodes(size: int, n_tasks: int, algo, requested: int | None) -> int:
    """Number of nodes of a neighbour-pattern run: one per rank under MPI; in one process
    ``--nodes`` (default: one per task, the paper's layout) simulated nodes."""
    if size > 1:
        if requested is not None and requested != size:
            raise UserError(f"--nodes {requested} does not match the {size} MPI ranks started; "
                            f"under MPI every rank is one node: drop --nodes or start {requested} ranks")
        nodes = size
    else:
        nodes = n_tasks if requested is None else requested
    if nodes > n_tasks:
        raise UserError(f"{algo.name} with {n_tasks} tasks uses at most {n_tasks} nodes (each node "
                        f"holds at least one task), but {nodes} were asked for: use {n_tasks} or fewer")
    if algo.one_task_per_node and nodes != n_tasks:
        raise UserError(f"{algo.name} runs one task per node: use {n_tasks} nodes (ranks) for "
                        f"{n_tasks} tasks, not {nodes}")
    return nodes


def check_none_world(size: int, n_tasks: int, algo: str) -> None:
    """Learners without communication: every rank holds at least one task."""
    if size > n_tasks:
        raise UserError(f"{algo} with {n_tasks} tasks uses at most {n_tasks} ranks (each rank holds "
                        f"at least one task), but {size} were started: start {n_tasks} or fewer "
                        "(--np, or mpiexec -n)")
