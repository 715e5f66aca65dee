"""Who holds which tasks: contiguous task blocks per rank, and world-size validation."""
from __future__ import annotations

import numpy as np

from ..errors import UserError


def task_blocks(n_tasks: int, n_holders: int) -> list[tuple[int, int]]:
    """Split tasks 0..K-1 into ``n_holders`` contiguous blocks whose sizes differ by at most one.

    The first ``K mod n`` blocks get the extra task.
    """
    base, extra = divmod(n_tasks, n_holders)
    sizes = [base + (i < extra) for i in range(n_holders)]
    edges = np.concatenate(([0], np.cumsum(sizes))).astype(int)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(n_holders)]


def check_star_world(size: int, n_tasks: int, algo: str) -> None:
    """A server-pattern run needs 1 rank (in-process) or 2..K+1 ranks (server + 1..K workers)."""
    if size == 1:
        return
    if size - 1 > n_tasks:
        raise UserError(
            f"{algo} with {n_tasks} tasks uses at most {n_tasks + 1} ranks (rank 0 is the server, "
            f"each worker holds at least one task), but {size} were started: "
            f"run with -n {n_tasks + 1} (one task per worker) or fewer")
