"""What a learner keeps in memory, as its registry entry says (``Algorithm.footprint``).

The runtime asks the entry before any array is allocated (``runtime.run.check_model_memory``,
and the Python API's learner objects the same way): a list of parts, each the bytes of some
arrays on the rank that holds the most, what they are, and what the user changes to shrink
them, so that a run that cannot fit stops in one line naming its largest part and its fix.
"""
from __future__ import annotations

from typing import NamedTuple

from .admm import GIVEN, LARGE_DIM, AdmmParams, coordinates_of, coupling
from . import mixture
from .bayes import used as bayes_used
from .gossiped_prior import row_size as gossiped_row_size
from .cadmm import down_parts, up_parts
from .wsteps import AROW_DIAGONAL_ABOVE, AROW_FULL_MAX, arow_form, full_arow_cost


class Part(NamedTuple):
    """Some arrays of a learner: ``bytes`` on one rank, ``what`` they are (a phrase the
    message continues with "need about N"), ``fix`` what shrinks them."""

    bytes: int
    what: str
    fix: str


class Held(NamedTuple):
    """What a run puts on the rank that holds the most, from its placement."""

    name: str                   # the learner's --algo, for messages
    pattern: str                # "server", "neighbours" or "none"
    n_tasks: int
    dim: int                    # weights per task (with the intercept)
    tasks: int                  # the most tasks on one rank
    blocks: int                 # the most blocks of tasks on one rank
    worker_blocks: list         # the server pattern's workers' (start, stop), in rank order
    nodes: int                  # the neighbour pattern's graph nodes
    rows: object = None         # C-ADMM's RowFormat (None: messages of every coordinate)
    asynchronous: bool = False  # --sync partial (D-ADMM's rows then carry the mixture's estimate)


MORE_RANKS = "use fewer tasks or features, or more ranks so that each holds fewer tasks"
_SMALLER_D = ("reduce d (import with a smaller --dims), spread the tasks over more ranks, or use "
              "--arow-covariance diagonal (d numbers per task)")


def per_task(vectors: int):
    """The footprint of a learner that keeps ``vectors`` d-long vectors per task and nothing
    of every task (the default of an entry that names none)."""
    def footprint(params, held: Held) -> list:
        return [Part(held.tasks * vectors * held.dim * 8,
                     f"{held.tasks} task(s) of {held.dim} weights on one rank", MORE_RANKS)]
    return footprint


def admm(params: AdmmParams, held: Held) -> list:
    """The ADMM learners' (c-admm, d-admm, admm-single, pmsc-log): the task blocks' rows and
    w-step metrics, what a learned Omega and the vote's experts keep, and the messages (the
    server's) or the gossiped table (a node's)."""
    K, d, kb = held.n_tasks, held.dim, held.tasks
    out = []
    per_task_numbers = 5 * d + 8
    if params.w_step == "arow" and arow_form(params.arow_covariance, d) == "full":
        # each task's d x d matrix, and a round's copy of the active ones
        out.append(Part(2 * kb * d * d * 8, f"the arow w-step keeps a {d} x {d} matrix per task: "
                        f"{kb} task(s) on one rank", _SMALLER_D))
    elif params.w_step in ("arow", "adagrad"):
        per_task_numbers += d
    out.append(Part(kb * per_task_numbers * 8, f"{kb} task(s) of {d} weights on one rank", MORE_RANKS))
    if coupling(params) == GIVEN:
        out.append(Part(6 * K * d * 8 + K * min(K, d) * 8,
                        f"a learned Omega (or --variant paper) couples every task: the consensus "
                        f"keeps {K} tasks' messages and models",
                        "drop --relationship (Omega fixed at I/K needs no row per task), or use "
                        "more memory"))
    if params.experts and K <= d:
        out.append(Part(2 * K * d * 8, f"the vote's related expert keeps a row per task ({K} x {d})",
                        "use --no-experts (the vote's related expert keeps every task's model), "
                        "or fewer tasks or features"))
    if params.experts and bayes_used(K, d, params.class_weight):
        # Q_k (packed: d (d + 1) / 2) and (Pi + Q_k / s2)^-1 per task, a new prior's copies
        # (d^2) and the work array (d (d + 1))
        out.append(Part((2 * d * d + 3 * d * (d + 1) // 2) * kb * 8,
                        f"the vote's empirical-Bayes expert keeps two {d} x {d} matrices per "
                        f"task: {kb} task(s) on one rank",
                        "spread the tasks over more ranks, reduce d, or use --no-experts"))
    if held.pattern == "server":
        # the messages, sized for the fullest round: the server holds every worker's
        sizes = [sum(n for _, n in up_parts(params, K, b - a, d, held.rows))
                 + sum(n for _, n in down_parts(params, K, b - a, d, held.rows))
                 for a, b in held.worker_blocks]
        out.append(Part(8 * sum(sizes), f"{held.name}'s messages, sized for the fullest round",
                        MORE_RANKS))
    if held.pattern == "neighbours":
        nodes = held.nodes
        width = 1 + d + 3 + (d * d if params.experts and nodes * d < K else 0)
        if (held.asynchronous and params.experts and bayes_used(K, d, params.class_weight)
                and mixture.used(d)):
            width += gossiped_row_size(d)       # the estimate in progress (gossiped_prior)
        rows = (2 * d if coupling(params) == GIVEN else 0) + (d if params.experts and nodes * d >= K else 0)
        out.append(Part(held.blocks * 3 * (nodes * width + K * rows) * 8,
                        f"d-admm's gossiped table: {nodes} nodes" + (f" and {K} tasks" if rows else "")
                        + " per copy, a few copies per node",
                        "use fewer nodes (--nodes, or fewer ranks): each node keeps a row per node"))
    return out


def arow(params, held: Held) -> list:
    """Single-task AROW's: its d x d matrix per task in the full form, else d-vectors."""
    d, kb = held.dim, held.tasks
    if arow_form(params.arow_covariance, d) == "full":
        return [Part(kb * (d * d + 2 * d) * 8, f"AROW keeps a {d} x {d} matrix per task: {kb} "
                     "task(s) on one rank", _SMALLER_D)]
    return per_task(4)(params, held)


def hashed(params, held: Held) -> list:
    """The hashed learner's: the server's table, its accumulators and a round's sums, and a
    worker's copy of its part (its tasks' rows at d: what fewer --bits cannot shrink)."""
    d, kb = held.dim, held.tasks
    return [Part(4 * (1 << params.bits) * 8,
                 f"the hashed table of 2^{params.bits} weights and its accumulators",
                 "use fewer --bits (2^bits weights of 8 bytes, four arrays of them)"),
            Part(kb * 6 * d * 8, f"{kb} task(s) of {d} weights on one rank (the hashed "
                 "learner's rows of each task)", MORE_RANKS)]


def drom(params, held: Held) -> list:
    """DROM's K x K task-relationship matrix and its inverse, beside its per-task rows."""
    K = held.n_tasks
    return [Part(4 * K * K * 8 + held.tasks * 3 * held.dim * 8,
                 f"drom keeps a {K} x {K} task-relationship matrix and its inverse",
                 "use fewer tasks, or a learner without a K x K matrix (c-admm, d-admm)")]


def large_d(params, d: int) -> str | None:
    """The line that says which large-d forms ``--arow-covariance auto`` and ``--coordinates
    auto`` chose on the user's behalf at ``d`` weights (None where they chose the defaults'
    small-d forms, or the user chose)."""
    covariance = getattr(params, "arow_covariance", None)
    uses_arow = isinstance(params, AdmmParams) and params.w_step == "arow" or (
        not isinstance(params, AdmmParams) and covariance is not None)
    said = []
    if uses_arow and covariance == "auto" and arow_form("auto", d) == "diagonal":
        said.append(f"above {AROW_DIAGONAL_ABOVE}, AROW's diagonal covariance (full would need "
                    f"{full_arow_cost(d)}; --arow-covariance full asks for it up to d = "
                    f"{AROW_FULL_MAX})")
    if isinstance(params, AdmmParams) and params.coordinates == "auto" \
            and coordinates_of(params, d) == "nonzero":
        said.append(f"above {LARGE_DIM}, steps on the coordinates of each round's instances "
                    "only (--coordinates nonzero; --coordinates all steps every one)")
    if not said:
        return None
    # d counts the weights, the intercept's among them (--dims 640 gives 641)
    return f"d = {d} weights: {'; and '.join(said)}"
