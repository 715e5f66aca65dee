"""The contract every learner's role classes keep: what the runtime calls, with which shapes.

A learner is a set of role classes, by communication pattern (:mod:`.registry`): a
:class:`Worker` per block of tasks and one :class:`Server` for the ``server`` pattern (a star
around rank 0), a :class:`Node` per block for ``neighbours`` (gossip over a topology) and
``none`` (no communication). They are :class:`typing.Protocol` classes: a role class need not
inherit from them, it has their members, and :func:`check_roles`, which
:func:`.registry.register` calls, checks that it has them and that its constructor follows the
one convention (:data:`WORKER_PARAMETERS`, :data:`SERVER_PARAMETERS`, :data:`NODE_PARAMETERS`).

The shapes (K tasks, d weights, a holder's block ``start..stop-1`` of kb tasks, B instances per
task per round; labels -1/+1, 0 for padding, whose ``X`` rows are 0), the round's active tasks,
``decide``, ``state()``, ``TASK_AXIS`` and ``task_rows()`` are stated in docs/DESIGN.md,
*Adding a learner*, and in the protocols below.
"""
from __future__ import annotations

import inspect
from typing import ClassVar, Protocol

import numpy as np

# the constructor's parameters of each role, in order (the one convention)
WORKER_PARAMETERS = ("params", "n_tasks", "dim", "start", "stop")
SERVER_PARAMETERS = ("params", "n_tasks", "dim", "blocks")
NODE_PARAMETERS = ("params", "n_tasks", "dim", "start", "stop", "topology", "node")


class _Stateful(Protocol):
    """What every role has: its state."""

    def state(self) -> dict:
        """{name: array}, copies of every array that determines the next round."""

    def load_state(self, state: dict) -> None:
        """Restore a :meth:`state`."""


class _Holder(_Stateful, Protocol):
    """What a holder of tasks (a worker, a node) has besides.

    Attributes
    ----------
    TASK_AXIS : dict
        {state key: axis of the tasks in that array} for every per-task array of
        :meth:`state`; the keys it does not list are shared by every block of a run.
    """

    TASK_AXIS: ClassVar[dict | None]

    def decide(self, X: np.ndarray, active=slice(None)) -> np.ndarray:
        """The decision values (B, na) float64 of ``X`` (B, na, d), instances of the block's
        tasks ``active`` (as the round's step's: ``up``, ``local_step``), with the current
        state, changing no state: ``decide(X, active) >= 0`` equals, bit for bit, the
        predictions of the next step on the same ``X`` and ``active``."""

    def task_rows(self) -> dict:
        """{name: (kb, ...) array}, the block's final per-task arrays (``W`` first)."""


class Worker(_Holder, Protocol):
    """A worker of the ``server`` pattern: holds tasks ``start..stop-1`` of a run's K.

    Parameters
    ----------
    params : object
        The learner's resolved hyper-parameters (``Algorithm.params(...).resolved(T)``).
    n_tasks : int
        K, every task of the run.
    dim : int
        d, the weights per task.
    start, stop : int
        The block of tasks held, ``start..stop-1`` (kb = stop - start).

    Notes
    -----
    Optional members: ``sync_every`` (rounds between exchanges; 1 when absent; the same on
    the server); ``message``, the array :meth:`up` returns when it is the same array every
    round, which MPI then binds a persistent request to once; ``checked(rows)``, the arrays
    (views where they can be) whose finiteness says the block's is, of the tasks ``rows``
    (indices or a slice into the block; None: all) and the shared ones, so that the check
    after a call of the Python API costs what the call's tasks do (without it, every array of
    :meth:`state`); and for the undo of such a call (:mod:`.undo`), ``ROW_AXES`` (or
    ``row_axes()``) and ``NOT_STATE``, and the generic checks it skips, ``CHECK_SKIPS``.
    Of the messages: a keyword ``rows`` of the constructor, :meth:`up_size` and
    :meth:`down_size` (and the server's constructor), the run's RowFormat, taken by a learner
    that sizes its messages by the rows' stored entries (sparse data); ``sized(params,
    n_tasks, dim)`` (static), True when a message fills only a prefix of its buffer, which MPI
    then sends with its length; ``bind(reduce)``, called under MPI before the first round with
    ``reduce(values)``, the sum of ``values`` over every worker, on every rank (the exchange of
    sums a round may need beside its messages: the mixture prior's EM steps).
    """

    def __init__(self, params, n_tasks: int, dim: int, start: int, stop: int) -> None: ...

    @staticmethod
    def up_size(params, n_tasks: int, kb: int, dim: int) -> int:
        """The number of float64 numbers :meth:`up` sends for a block of ``kb`` of the run's
        ``n_tasks`` tasks."""

    @staticmethod
    def down_size(params, n_tasks: int, kb: int, dim: int) -> int:
        """The number of float64 numbers :meth:`down` receives for a block of ``kb`` of the
        run's ``n_tasks`` tasks."""

    def up(self, X: np.ndarray, y: np.ndarray, inv_count: np.ndarray, active=slice(None)):
        """One round: predict ``X`` (B, na, d), the block's ``active`` tasks' instances, then
        learn from ``y`` (B, na) and ``inv_count`` (na,).

        Returns
        -------
        predictions : ndarray of bool, shape (B, na)
            True for +1, made before ``y`` is read.
        message : ndarray of float64, shape (up_size(params, n_tasks, kb, dim),)
            What goes to the server this round (only on the rounds that exchange).
        """

    def down(self, reply: np.ndarray) -> None:
        """Take the server's flat reply of ``down_size(params, n_tasks, kb, dim)`` float64
        numbers."""


class Server(_Stateful, Protocol):
    """The server of the ``server`` pattern, on rank 0.

    Parameters
    ----------
    params : object
        The learner's resolved hyper-parameters.
    n_tasks : int
        K, every task of the run.
    dim : int
        d, the weights per task.
    blocks : list of (start, stop)
        The workers' blocks, in rank order.

    Notes
    -----
    Optional members: ``sync_every`` (as the workers'); ``reply``, the array :meth:`step`
    returns when it is the same array every round (MPI binds to it once); ``checked()``, the
    arrays of :meth:`state` (without their copies), to be finite; ``ROW_AXES``,
    ``NOT_STATE``, ``rows`` and ``bind(reduce)``, as the workers'.
    """

    def __init__(self, params, n_tasks: int, dim: int, blocks) -> None: ...

    def step(self, gathered: np.ndarray) -> np.ndarray:
        """Every worker's message, concatenated in rank order, in; every worker's reply,
        concatenated in rank order, out (flat float64)."""

    def after_reply(self) -> None:
        """Work the replies need not wait for (C-ADMM's Omega update), run after they left."""

    def global_arrays(self) -> dict:
        """{name: array} of the run's shared arrays, for the results file's /model."""


class Node(_Holder, Protocol):
    """A node of the ``neighbours`` or ``none`` pattern: holds tasks ``start..stop-1``.

    Parameters
    ----------
    params, n_tasks, dim, start, stop
        As :class:`Worker`'s.
    topology : Topology or None
        The graph of the nodes (``neighbours``); None for the learners with no communication,
        and for a lone node.
    node : int
        This node's index in ``topology``. Whatever a node derives from the graph (its
        neighbour count, its mixing weights) it computes from these two in ``__init__``.

    Attributes
    ----------
    TASK_AXIS : dict or None
        As a worker's; None where the state is the node's own, not its
        block's (D-ADMM, D-PSGD).
    message : ndarray
        What goes to every neighbour after :meth:`local_step`, of the same shape every round
        (empty for ``none``: :class:`QuietNode`).

    Notes
    -----
    Optional members: ``inbox``, the array (n_neighbours, \\*message.shape) the exchange
    writes the neighbours' messages into, so that none is copied; ``plan(instances,
    first_round)``, every round's instances over all the tasks, before the first round;
    ``sums``, None or a callable whose generator, after each round, yields this node's parts
    of sums over every node and is sent each sum (:func:`drive_sums`); ``checked(rows)``,
    ``ROW_AXES``, ``NOT_STATE`` and ``CHECK_SKIPS``, as the workers'.
    """

    message: np.ndarray

    def __init__(self, params, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0) -> None: ...

    def local_step(self, X: np.ndarray, y: np.ndarray, inv_count: np.ndarray,
                   active=slice(None)) -> np.ndarray:
        """One round's own step: predict ``X`` (B, na, d), the block's ``active`` tasks'
        instances, then learn from ``y`` (B, na) and ``inv_count`` (na,); returns the
        predictions (B, na) booleans, True for +1, made before ``y`` is read."""

    def merge(self, received: np.ndarray) -> float:
        """Take the neighbours' messages, (n_neighbours, \\*message.shape); returns the mean
        staleness in rounds of what the node used (0.0 where that means nothing)."""

    def finish_round(self) -> None:
        """The round's work after the exchange."""

    def node_arrays(self) -> dict:
        """{name: array} of the node's own copies of shared variables (/model/node_NAME)."""


class ArrayState:
    """``state()`` and ``load_state()`` of a role whose state is its float64 arrays named in
    ``_STATE`` (copied out, rebound to copies on loading) and its counters named in
    ``_COUNTS`` (int64 in the state)."""

    _STATE: tuple = ()
    _COUNTS: tuple = ()

    def state(self) -> dict:
        out = {k: getattr(self, k).copy() for k in self._STATE}
        out.update({k: np.int64(getattr(self, k)) for k in self._COUNTS})
        return out

    def load_state(self, state: dict) -> None:
        for k in self._STATE:
            setattr(self, k, np.array(state[k], dtype=np.float64))
        for k in self._COUNTS:
            setattr(self, k, int(state[k]))


class QuietNode:
    """The node hooks of a node that sends nothing (the ``none`` pattern, which still goes
    through the neighbour loop, with an empty exchange): a subclass overrides those it has."""

    message = np.zeros((0,))

    def merge(self, received) -> float:
        return 0.0

    def finish_round(self) -> None:
        pass

    def node_arrays(self) -> dict:
        return {}


class QuietServer:
    """The server hooks of a server with no work after the replies, no arrays for /model and
    no state (a subclass overrides those it has)."""

    def after_reply(self) -> None:
        pass

    def global_arrays(self) -> dict:
        return {}

    def state(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass


def all_finite(arrays) -> bool:
    """Whether every number of ``arrays`` (float arrays, any shapes) is finite: the small ones
    in one pass over them all, since a role object's finiteness check (``finite(rows)``) runs
    after every call of the Python API and a check per small array would cost more than the
    call's step; a large one on its own (joining it to the others would copy it)."""
    small = []
    for a in arrays:
        if a.size > _JOINED:
            if not np.isfinite(a).all():
                return False
        elif a.size:
            small.append(a.ravel())
    return not small or bool(np.isfinite(np.concatenate(small)).all())


# the largest array all_finite joins to the others before checking them in one pass
_JOINED = 4096


def task_blocks(n_tasks: int, n_holders: int) -> list[tuple[int, int]]:
    """Tasks 0..K-1 split into ``n_holders`` contiguous blocks whose sizes differ by at most
    one, the first ``K mod n`` blocks one larger: who holds what, in every layout (the workers
    of a star in rank order, the nodes of a topology in node order).

    Examples
    --------
    >>> task_blocks(5, 2)
    [(0, 3), (3, 5)]
    """
    base, extra = divmod(n_tasks, n_holders)
    out, start = [], 0
    for i in range(n_holders):
        stop = start + base + (i < extra)
        out.append((start, stop))
        start = stop
    return out


def drive_sums(generators: list, add) -> None:
    """Run generators of sums over every task holder together (a node's ``sums()``, the
    mixture prior's :meth:`.MixtureBayes.estimate`): each yields this holder's part of a sum,
    ``add(parts)`` gives each generator the sum (a list, one per generator), and they are sent
    it, until they end. The holders decide from the same numbers, so every generator yields
    the same number of times; one that does not is an error."""
    parts = [next(g, None) for g in generators]
    while parts and all(p is not None for p in parts):
        parts = [_resume(g, total) for g, total in zip(generators, add(parts))]
    if any(p is not None for p in parts):
        raise RuntimeError("the task holders of one process disagree on a round's sums")


def _resume(generator, value):
    """The generator's next part after it is sent ``value`` (None when it ends)."""
    try:
        return generator.send(value)
    except StopIteration:
        return None


def _members(protocol) -> tuple[list[str], list[str]]:
    """The methods and the attributes a role of ``protocol`` must have (its own and its base
    protocols', not object's)."""
    own = [c for c in protocol.__mro__ if c.__module__ == __name__]
    methods = [name for c in own for name, value in vars(c).items()
               if not name.startswith("_") and isinstance(value, (staticmethod, type(_members)))]
    return methods, [name for c in reversed(own) for name in vars(c).get("__annotations__", {})]


_ROLES = {"worker": (Worker, WORKER_PARAMETERS), "server": (Server, SERVER_PARAMETERS),
          "node": (Node, NODE_PARAMETERS)}


def _shown(parameter: inspect.Parameter) -> str:
    """A parameter as a signature shows it, without its annotation."""
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    default = "" if parameter.default is inspect.Parameter.empty else f"={parameter.default!r}"
    return f"{stars.get(parameter.kind, '')}{parameter.name}{default}"


def _constructor_problem(cls: type, expected: tuple) -> str | None:
    """What is wrong with ``cls``'s constructor against the convention ``expected``, or None."""
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return "has no constructor signature to inspect"
    shown = ", ".join(_shown(p) for p in parameters)
    positional = {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}
    head = parameters[: len(expected)]
    if tuple(p.name for p in head) != expected or any(p.kind not in positional for p in head):
        return f"takes ({shown})"
    # a caller with no graph (a learner with no communication, a test) leaves them out
    if expected == NODE_PARAMETERS and any(p.default is inspect.Parameter.empty for p in head[-2:]):
        return f"takes ({shown}), without defaults for topology and node"
    variadic = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    if any(p.default is inspect.Parameter.empty and p.kind not in variadic
           for p in parameters[len(expected):]):
        return f"takes ({shown}), parameters beyond the convention without defaults"
    return None


def _task_axis_problem(axes, role: str) -> str | None:
    """What is wrong with a role class's ``TASK_AXIS``, or None."""
    allowed = "a dict {state key: task axis}" + (" or None" if role == "node" else "")
    if axes is None and role == "node":
        return None
    if not isinstance(axes, dict) or not all(
            isinstance(k, str) and isinstance(a, (int, np.integer)) for k, a in axes.items()):
        return f"TASK_AXIS must be {allowed}, got {axes!r}"
    return None


def check_roles(algo) -> None:
    """Raise TypeError, one line, unless ``algo``'s role classes keep the contract.

    Checks that the pattern's role classes are given, that each has every member of its
    protocol (methods callable), ``TASK_AXIS`` of the right kind, and the constructor of the
    one convention (:data:`WORKER_PARAMETERS`, :data:`SERVER_PARAMETERS`,
    :data:`NODE_PARAMETERS`).

    Parameters
    ----------
    algo : registry.Algorithm
    """
    roles = ("worker", "server") if algo.pattern == "server" else ("node",)
    for role in roles:
        cls = getattr(algo, role)
        if cls is None:
            raise TypeError(f"learner {algo.name!r}: the {algo.pattern!r} pattern needs a {role} "
                            "class (omtl_mpi.algorithms.contract)")
        protocol, expected = _ROLES[role]
        where = f"learner {algo.name!r}: {role} class {cls.__name__}"
        contract = f"the contract is omtl_mpi.algorithms.contract.{protocol.__name__}"
        methods, attributes = _members(protocol)
        for name in methods:
            if not callable(getattr(cls, name, None)):
                raise TypeError(f"{where} has no method {name}(); {contract}")
        for name in attributes:
            if not hasattr(cls, name):
                raise TypeError(f"{where} has no attribute {name}; {contract}")
        problem = _task_axis_problem(cls.TASK_AXIS, role) if "TASK_AXIS" in attributes else None
        if problem is not None:
            raise TypeError(f"{where}: {problem}; {contract}")
        problem = _constructor_problem(cls, expected)
        if problem is not None:
            convention = ", ".join({"topology": "topology=None", "node": "node=0"}.get(n, n)
                                   for n in expected)
            raise TypeError(f"{where} {problem}; every {role} class takes ({convention}) "
                            f"({contract})")


def merge_states(cls: type, states: list[dict]) -> dict:
    """The state of one block holding the tasks of consecutive blocks ``states`` (task order).

    Per-task arrays (the keys of ``cls.TASK_AXIS``) are concatenated along their task axis;
    every other key is shared and must be equal in every block.

    Parameters
    ----------
    cls : type
        The worker or node class whose :meth:`state` gave ``states``.
    states : list of dict
        The blocks' states, in task order.

    Returns
    -------
    dict
        A state a holder of all those tasks can :meth:`load_state`.

    Raises
    ------
    TypeError
        ``cls.TASK_AXIS`` is None: its state is a node's, not a block of tasks'.
    ValueError
        No states, states with different keys, or a shared key that differs between blocks.
    """
    axes = getattr(cls, "TASK_AXIS", None)
    if axes is None:
        raise TypeError(f"{cls.__name__} has no TASK_AXIS: its state is a node's, not a block "
                        "of tasks', and does not merge")
    if not states:
        raise ValueError(f"{cls.__name__}: no states to merge")
    keys = list(states[0])
    for i, state in enumerate(states[1:], 1):
        if set(state) != set(keys):
            raise ValueError(f"{cls.__name__}: block {i}'s state has keys {sorted(state)}, "
                             f"block 0's {sorted(keys)}")
    out = {}
    for key in keys:
        values = [np.asarray(state[key]) for state in states]
        if key in axes:
            try:
                out[key] = np.concatenate(values, axis=axes[key])
            except (ValueError, np.exceptions.AxisError):
                raise ValueError(f"{cls.__name__}: the blocks' {key!r} of shapes "
                                 f"{', '.join(str(v.shape) for v in values)} do not join along "
                                 f"axis {axes[key]}, its TASK_AXIS") from None
            continue
        for i, value in enumerate(values[1:], 1):
            if value.shape != values[0].shape or not np.array_equal(value, values[0], equal_nan=True):
                raise ValueError(f"{cls.__name__}: shared state {key!r} differs between block 0 "
                                 f"and block {i}; if it is per task, name it in TASK_AXIS with "
                                 "the axis of its tasks")
        out[key] = values[0].copy()
    return out
