"""A learner's state as plain data and its checks: what :meth:`Learner.state_dict` gives and
:meth:`Learner.load_state_dict` accepts (layout, version, every array checked against the
learner's own before anything is replaced), and the file format's version."""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UserError
from .build import _NAMING

if TYPE_CHECKING:
    from .learner import Learner

FORMAT = "omtl-mpi-learner"
# the layout of state_dict() and of saved files (their parameters, state and digest): bumped
# whenever either changes, so that another release's is refused in one line naming the versions
VERSION = 4


def _other_version(version, where: str) -> UserError:
    """The one line for a learner's state in another release's layout."""
    which = ("an older" if isinstance(version, int) and not isinstance(version, bool)
             and version < VERSION else "another")
    return UserError(f"{where} of version {version!r}, written by {which} omtl-mpi; this release "
                     f"reads version {VERSION}: load it with the omtl-mpi that wrote it, or learn "
                     "the learner afresh")

# the largest count a loaded state may hold (learners._fits)
_COUNT_MAX = 2 ** 53


class State:
    """The learner's state methods (mixed into :class:`~omtl_mpi.learners.Learner`)."""

    def state_dict(self) -> dict:
        """Everything the learner knows, as plain data: ``format``, ``version``, ``algo``,
        ``params`` (JSON-ready) and ``state`` (nested dicts of numpy arrays). Loading it into a
        learner with the same parameters continues bit for bit; nothing here is pickled.

        Examples
        --------
        >>> import omtl_mpi
        >>> m = omtl_mpi.CADMM(n_tasks=2, n_features=3)
        >>> m.learn_one([1.0, 2.0, 0.0], 1, task=1)
        >>> state = m.state_dict()
        >>> state["algo"], state["params"]["n_tasks"], sorted(state["state"])
        ('c-admm', 2, ['learner', 'roles'])
        >>> copy = omtl_mpi.CADMM(n_tasks=2, n_features=3).load_state_dict(state)
        >>> bool((copy.W_ == m.W_).all()), copy.n_rounds_
        (True, 1)
        >>> omtl_mpi.CADMM(n_tasks=3, n_features=3).load_state_dict(state)
        Traceback (most recent call last):
        ...
        omtl_mpi.errors.UserError: the state is of a learner with n_tasks=2, this one has n_tasks=3; build the learner with the state's parameters (omtl_mpi.load does)
        """
        self._known()
        return self._state()

    def _state(self) -> dict:
        """:meth:`state_dict`, of any state (load_state_dict's template)."""
        extra = {"n_rounds": np.int64(self.n_rounds_), "n_seen": self.n_seen_.copy(),
                 "bool_labels": np.bool_(self._bool_labels)}
        if self._scale_max is not None:
            extra["scale_max"] = self._scale_max.copy()
        # a deep copy: the roles' state() should copy, and a state must not change as the
        # learner goes on even where one does not
        return {"format": FORMAT, "version": VERSION, "algo": self.algo, "params": self.get_params(),
                "state": {"roles": copy.deepcopy(self._roles.state()), "learner": extra}}

    def load_state_dict(self, state: dict) -> "Learner":
        """Continue from a :meth:`state_dict` of a learner with the same parameters.

        Raises
        ------
        UserError
            For a state of another learner, K, d or parameters (naming the difference), or one
            whose arrays are not this learner's; nothing changes then.
        """
        if not isinstance(state, dict) or not isinstance(state.get("format"), str) \
                or state["format"] != FORMAT:
            raise UserError(f"not a learner's state: state_dict() gives a dict with format {FORMAT!r}")
        version = state.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
            raise _other_version(version, "a learner's state")
        if not isinstance(state.get("algo"), str) or state["algo"] != self.algo:
            raise UserError(f"the state is of a {state.get('algo')!r} learner, this is a "
                            f"{self.algo!r} learner")
        theirs, mine = state.get("params"), self.get_params()
        if not isinstance(theirs, dict):
            raise UserError("the state's params are not a dict of parameters (state_dict() gives one)")
        # task_key and default_task say how instances name their task: they shape no state
        mine = {k: v for k, v in mine.items() if k not in _NAMING}
        theirs = {k: v for k, v in theirs.items() if k not in _NAMING}
        for name in mine:
            if name in theirs and _same(theirs[name], mine[name]):
                continue
            raise UserError(f"the state is of a learner with {name}={theirs.get(name, 'unset')!r}, "
                            f"this one has {name}={mine[name]!r}; build the learner with the "
                            "state's parameters (omtl_mpi.load does)")
        extra_names = sorted(set(theirs) - set(mine))
        if extra_names:
            raise UserError(f"the state has parameters this learner does not: {', '.join(extra_names)}")
        tree = state.get("state")
        expected = self._state()["state"]
        problem = first_difference(tree, expected, "state", _fits)
        if problem:
            raise UserError(f"the state does not fit this learner: {problem}")
        tree = copy.deepcopy(tree)
        self._roles.load_state(tree["roles"])
        self._journal.forget()
        self._unknown = False
        extra = tree["learner"]
        self.n_rounds_ = int(extra["n_rounds"])
        self.n_seen_ = np.array(extra["n_seen"], dtype=np.int64)
        self._bool_labels = bool(extra["bool_labels"])
        if self._scale_max is not None:
            self._scale_max = np.array(extra["scale_max"], dtype=np.float64)
        return self

    def save(self, path) -> None:
        """Write the learner to an HDF5 file (atomically: nothing half-written on failure);
        :func:`load` reads it back. Arrays and JSON only, never pickle."""
        from ..persist import save_learner
        save_learner(path, self.state_dict())


def _same(a, b) -> bool:
    """Two parameter values are the same (a bool is not the number 1; 1 and 1.0 are equal)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def first_difference(got, want, where: str, leaf) -> str | None:
    """Where two trees of dicts, lists and arrays first differ: in their keys or lengths, or
    where ``leaf(got, want, where)`` (for two leaves) returns a text; None where they agree."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{where} should be a dict"
        missing = sorted(set(map(str, want)) - set(map(str, got)))
        if missing:
            return f"{where} lacks {missing[0]!r}"
        extra = sorted(set(map(str, got)) - set(map(str, want)))
        if extra:
            return f"{where} has {extra[0]!r}, which this learner does not"
        found = (first_difference(got[key], want[key], f"{where}/{key}", leaf) for key in want)
        return next((f for f in found if f), None)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where} should be a list of {len(want)}"
        found = (first_difference(g, w, f"{where}/{i}", leaf) for i, (g, w) in enumerate(zip(got, want)))
        return next((f for f in found if f), None)
    return leaf(got, want, where)


def _fits(got, want, where: str) -> str | None:
    """A loaded array that can stand for this learner's: its shape, a numeric kind, finite."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"{where} has shape {g.shape}, this learner's has {w.shape}"
    # the same kind of number: a count stays a whole number, a flag a bool
    kinds = {"b": "b", "i": "iu", "u": "iu", "f": "f"}
    if g.dtype.kind not in kinds.get(w.dtype.kind, ""):
        return f"{where} holds {g.dtype}, this learner's {w.dtype}"
    if g.dtype.kind == "f" and not np.isfinite(g).all():
        return f"{where} holds NaN or inf"
    if g.dtype.kind in "iu" and g.size:
        # a count (rounds, instances, steps) is a whole number >= 0, far enough below int64's
        # largest that learning on cannot overflow it; the prior's version is -1 before the first
        lowest = -1 if where.endswith("bayes_version") else 0
        if g.min() < lowest or g.max() > _COUNT_MAX:
            return (f"{where} holds {g.min() if g.min() < lowest else g.max()}, where a count "
                    f"from {lowest} to 2**53 belongs")
    return None

