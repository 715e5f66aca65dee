"""Undo a learner's calls: what its role objects were at a mark, and the rounds learned since.

The Python API's calls are transactions: a call that raises (or whose step would make the model
non-finite) leaves the learner exactly as it was. Copying the state before every call would
cost O(K d) where a ``learn_one`` costs O(d), so a :class:`Journal` keeps, since a mark, the
role objects as they were (every attribute by reference, every array whole but those with a
row per task, of which each task's rows are copied the first time a call after the mark steps
it) and the rounds learned since (their inputs, at most :data:`Journal.LIMIT` rounds and
:data:`Journal.BYTES`). Undoing a call puts the mark back and steps the rounds before the call
again: the same inputs on the same state give the same bits.

What a role object declares for it (``ROW_AXES`` or ``row_axes()``, ``NOT_STATE``), and what
an undeclared attribute costs: docs/DESIGN.md, *Adding a learner*, step 5. Role objects of
other packages are saved through their ``state()`` and put back by ``load_state()``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

_OWN = __name__.rsplit(".", 2)[0] + "."          # "omtl_mpi."
# values kept by reference without a look inside (they cannot change in place)
_ATOMS = frozenset({int, float, bool, str, bytes, type(None), slice, range, np.float64, np.int64,
                    np.bool_, np.intp})


class Journal:
    """The undo record of a learner's role objects (:class:`~omtl_mpi.engine.Engine`).

    Call :meth:`begin` before a call's rounds with the tasks they step, :meth:`add` with each
    round's inputs, and on failure :meth:`undo` with the function that steps a round. A call
    that succeeds needs nothing more (its rounds are kept as :meth:`add` kept them), so an
    interrupt after its last step is undone like any: an undo steps again only the rounds
    kept before the call began.
    """

    LIMIT = 64                  # rounds kept since the mark: an undo steps at most these again
    BYTES = 8 << 20             # and at most this much of their inputs (a round of every task
                                # of many is as large as the rows a mark would copy)

    def __init__(self, roles):
        self.roles = roles
        self.mark = None

    def begin(self, tasks: np.ndarray, rounds: int) -> None:
        """Before a call of ``rounds`` rounds that steps ``tasks`` (increasing): a new mark
        where the rounds kept would pass :data:`LIMIT` or their inputs :data:`BYTES`, then the
        rows of the tasks not yet met since it. Nothing is recorded as met before its rows are
        saved, so an interrupt in here leaves the journal as it was, or unmarked."""
        if (self.mark is None or self.full or len(self.rounds) + rounds > self.LIMIT
                or self.kept >= self.BYTES):
            self.mark = None
            mark, per_task = _mark(self.roles)
            self.rows, self.rounds, self.kept, self.full = [], [], 0, False
            self.met = np.zeros(self.roles.server_tasks, dtype=bool)
            self.mark, self.per_task = mark, per_task
        if len(tasks) == 1:
            new = () if self.met[tasks[0]] else tasks
        else:
            new = tasks[~self.met[tasks]]
        if len(new):
            rows, everything = [], self.roles.server_tasks
            for array, axis, a, b in self.per_task:
                if b - a == everything:                  # a holder of every task
                    local = new
                else:
                    lo, hi = np.searchsorted(new, (a, b))
                    if hi == lo:
                        continue
                    local = new[lo:hi] - a
                rows.append(("rows", array, axis, local, array.take(local, axis=axis)))
            self.rows += rows
            self.met[new] = True
        self.start, self.started_at = len(self.rounds), self.kept
        self.full = self.full or len(self.rounds) + rounds > self.LIMIT

    def add(self, *inputs) -> None:
        """A round of the call, stepped from ``inputs`` (arrays): kept for later undos, while
        the record holds fewer than :data:`LIMIT` rounds and :data:`BYTES` of inputs (past
        that, this call's are dropped, and the next call marks again)."""
        if self.full:
            return
        self.rounds.append(inputs)
        self.kept += sum(map(_nbytes, inputs))
        if self.kept > self.BYTES:
            self.full = True
            del self.rounds[self.start:]
            self.kept = self.started_at

    def undo(self, step) -> None:
        """Put the role objects back as they were before the call: the mark, then
        ``step(*inputs)`` of every round kept before the call began."""
        restore(self.mark)
        restore(self.rows)
        del self.rounds[self.start:]
        self.kept = self.started_at
        for inputs in self.rounds:
            step(*inputs)

    def forget(self) -> None:
        """The role objects were changed otherwise (a state loaded): mark again next time."""
        self.mark = None


def _nbytes(value) -> int:
    """The bytes of an input of a round: an array, or sparse rows (their arrays)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes


def walkable(obj) -> bool:
    """Whether ``obj`` is a role object of this package, walked attribute by attribute (the
    others go through their ``state()``)."""
    return type(obj).__module__.startswith(_OWN) and hasattr(obj, "__dict__")


def _mark(roles):
    """The role objects now, without the rows of their per-task arrays: (entries for
    :func:`restore`, [(array, axis, start, stop)] of every per-task array, whose tasks
    start..stop-1 of the run lie along ``axis``)."""
    saved, per_task = [], []
    owners = [(h, a, b) for h, (a, b) in zip(roles.holders, roles.blocks)]
    if roles.server is not None:
        owners.append((roles.server, 0, roles.server_tasks))
    owners.append((roles.comm, 0, roles.server_tasks))
    for role, a, b in owners:
        if not walkable(role):
            saved.append(("state", role, role.state()))
            continue
        found: list = []
        _save_object(role, found, saved, set())
        per_task += [(array, axis, a, b) for array, axis in found]
    return saved, per_task


def restore(saved: list) -> None:
    """Put back what was saved: every attribute rebound as it was, every array given its saved
    contents (in place, so that views of it, such as a message buffer's, see them too)."""
    for entry in saved:
        kind = entry[0]
        if kind == "attrs":
            _, obj, attrs = entry
            obj.__dict__.clear()
            obj.__dict__.update(attrs)
        elif kind == "whole":
            _, array, values = entry
            array[...] = values
        elif kind == "rows":
            _, array, axis, rows, values = entry
            index = [slice(None)] * array.ndim
            index[axis] = rows
            array[tuple(index)] = values
        elif kind == "list":
            entry[1][:] = entry[2]
        elif kind == "dict":
            entry[1].clear()
            entry[1].update(entry[2])
        elif kind == "rng":
            entry[1].bit_generator.state = entry[2]
        else:                                      # "state": a role object of another package
            entry[1].load_state(entry[2])


def _save_object(obj, per_task, saved, seen) -> None:
    """Save ``obj`` into ``saved``, but for its declared per-task arrays, which go to the list
    ``per_task`` as (array, axis) (``per_task`` None: saved whole too)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    attrs = obj.__dict__
    saved.append(("attrs", obj, dict(attrs)))
    axes = obj.row_axes() if hasattr(obj, "row_axes") else getattr(obj, "ROW_AXES", {})
    scratch = getattr(obj, "NOT_STATE", ())
    for name, value in attrs.items():
        kind = type(value)
        if kind in _ATOMS or name in scratch:
            continue
        if kind is np.ndarray:
            if id(value) in seen:
                continue
            seen.add(id(value))
            axis = axes.get(name) if per_task is not None else None
            if axis is None:
                saved.append(("whole", value, value.copy()))
            else:
                per_task.append((value, axis))
        else:
            _save_value(value, per_task, saved, seen)


def _save_value(value, per_task, saved, seen) -> None:
    """An attribute's value other than an atom or an array: a container (its arrays and role
    objects saved whole), a random generator, or a role object of this package."""
    if isinstance(value, (list, tuple, dict)):
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, list):
            saved.append(("list", value, list(value)))
        elif isinstance(value, dict):
            saved.append(("dict", value, dict(value)))
        for item in (value.values() if isinstance(value, dict) else value):
            kind = type(item)
            if kind is np.ndarray:
                if id(item) not in seen:
                    seen.add(id(item))
                    saved.append(("whole", item, item.copy()))
            elif kind not in _ATOMS:
                _save_value(item, None, saved, seen)
    elif isinstance(value, np.random.Generator):
        saved.append(("rng", value, value.bit_generator.state))
    elif walkable(value) and not dataclasses.is_dataclass(value) and not isinstance(value, type):
        _save_object(value, per_task, saved, seen)
