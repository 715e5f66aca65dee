"""The learner object's face (:class:`Learner`): construction and parameters, the three shapes
of calls (one instance, one round, a batch), each a transaction on the engine, and the learned
arrays; its inputs are :mod:`.inputs`', its state :mod:`.state`'s."""
from __future__ import annotations

import math

import numpy as np

from ..errors import UserError
from .build import _NAMING, _api_text, _build, parameters
from .inputs import Inputs, as_array
from .state import State, _same

# the instances a learn_one round holds of its task (never written)
_ONE = np.ones(1, dtype=np.int64)
_ONE.flags.writeable = False

# a call whose step meets numbers too large for float64's operations (a singular matrix)
_TOO_LARGE = ("this call's step met numbers too large to compute with (an instance's features "
              "of a very large scale: try scale='online'); the call is undone, the learner is as "
              "it was")
_NON_FINITE = ("this call would make the model non-finite (NaN or inf): its step grows without "
               "bound (a small eta, a large class_weight, rho or lambda4, or features of a very "
               "large scale: try scale='online'); the call is undone, the learner is as it was")


try:
    # where river is installed a learner is one of its classifiers (its progressive validation,
    # pipelines, ensembles and check_estimator take only those); river is optional
    from river.base import Classifier as _Base
except ImportError:                 # pragma: no cover (river is a test dependency)
    _Base = object


class Learner(Inputs, State, _Base):
    """A learner of ``omtl-mpi algos`` as a Python object (see the module's docstring).

    Build one with :func:`learner` or a class of its own (:class:`CADMM`, ...); the parameters
    are those of ``omtl-mpi algos NAME``, as keyword arguments with underscores.

    Parameters
    ----------
    n_tasks, n_features : int
        K tasks, d features per instance.
    **params
        The learner's parameters (:func:`parameters`); each is stored under its name.

    Attributes
    ----------
    W_ : ndarray, shape (K, d')
        Every task's weights (d' = d, plus one for the intercept: its last column).
    u_, V_, Z_, omega_, U_ : ndarray
        The other learned arrays of the learners that have them (C-ADMM's shared u, task parts
        V, duals Z and task-relationship matrix Omega; D-ADMM: node 0's copy of u and Omega).
        ``omega_`` is K x K up to 1,024 tasks; beyond, Omega is ``omega_basis_``,
        ``omega_values_`` and ``omega_rest_`` (Omega = rest I + basis diag(values - rest)
        basis^T), and ``omega_`` raises AttributeError.
    n_rounds_ : int
        Rounds learned so far.
    n_seen_ : ndarray of int, shape (K,)
        Instances learned per task.

    Examples
    --------
    >>> import numpy as np, omtl_mpi
    >>> m = omtl_mpi.learner("c-admm", n_tasks=3, n_features=2)
    >>> for t in range(50):
    ...     x = np.array([1.0, -0.5]) if t % 2 else np.array([-1.0, 0.5])
    ...     m.learn_one(x, 1 if t % 2 else -1, task=t % 3)
    >>> int(m.predict_one([2.0, -1.0], task=0)), int(m.predict_one([-2.0, 1.0], task=0))
    (1, -1)
    >>> m.W_.shape, m.n_rounds_
    ((3, 3), 50)
    """

    algo: str = ""
    # river reads it: a learner learns from labels
    _supervised = True

    @classmethod
    def _unit_test_params(cls):
        """The parameters river's checks build a learner of this class with (river's hook):
        a few tasks, dict features hashed into 16, the task named by ``x["task"]``."""
        from ..checks import _needed
        yield {"n_tasks": 3, "n_features": 16, "task_key": "task", **_needed(cls.algo)}

    def __reduce__(self):
        # copies and pickles carry the parameters and state_dict(), so a copy continues bit for
        # bit (the roles' buffers built afresh); within one release only (files are HDF5). A
        # subclass is rebuilt as itself, with what it set beside
        from .classes import _CLASSES
        cls = type(self)
        how = self.algo if cls is _CLASSES.get(self.algo) else cls
        beside = {k: v for k, v in vars(self).items() if k not in self._own}
        return _restore, (how, self.get_params(), self.state_dict()), beside or None

    def __init__(self, n_tasks, n_features, **params):
        built = _build(self.algo, n_tasks, n_features, params)
        self._install(built)

    # --------------------------------------------------------------------- construction
    def _install(self, built: dict) -> None:
        for name, value in built["given"].items():
            setattr(self, name, value)
        self._param_names = tuple(built["given"])
        self._roles, self._dim = built["roles"], built["dim"]
        from ..comm.clock import PhaseClock
        self._clock = PhaseClock(1)
        K = self.n_tasks
        self._scale_max = np.zeros((K, self.n_features)) if self.scale == "online" else None
        self._bool_labels = False
        self._unknown = False           # an interrupted undo left the state half restored
        self._defaulted = False         # a dict without the task key was given its default
        self.n_rounds_ = 0
        self.n_seen_ = np.zeros(K, dtype=np.int64)
        from ..algorithms.undo import Journal
        self._journal = Journal(self._roles)   # what undoes a call that fails
        self._own = frozenset(vars(self)) | {"_own"}   # the learner's attributes (copies rebuild them)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor parameters, by name (scikit-learn's convention).

        Examples
        --------
        >>> import omtl_mpi
        >>> params = omtl_mpi.PA(n_tasks=2, n_features=3, C=0.5).get_params()
        >>> params["C"], params["n_tasks"], params["intercept"]
        (0.5, 2, True)
        """
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params) -> "Learner":
        """Change parameters before any learning (after it, :meth:`clone` makes a fresh learner
        with them: a learner's state belongs to the parameters it was learned with)."""
        if self.n_rounds_:
            raise UserError(f"set_params after {self.n_rounds_} rounds of learning would leave "
                            "the learned state under other parameters; use clone(**params) for a "
                            "fresh learner with them")
        merged = {**self.get_params(), **params}
        self._install(_build(self.algo, merged.pop("n_tasks"), merged.pop("n_features"), merged))
        return self

    def clone(self, new_params: dict | None = None, include_attributes: bool = False,
              **params) -> "Learner":
        """A fresh learner with the same parameters, nothing learned; ``new_params`` (river's
        spelling) or keyword arguments change some. ``include_attributes`` (river's): the
        learned state too, a copy that continues bit for bit (with the same parameters only: a
        state belongs to the parameters it was learned with).

        Examples
        --------
        >>> import omtl_mpi
        >>> m = omtl_mpi.PA(2, 3, C=0.5)
        >>> m.learn_one([1.0, 0.0, 0.0], -1, task=0)
        >>> twin = m.clone(C=0.25)
        >>> twin, twin.n_rounds_
        (PA(n_tasks=2, n_features=3, C=0.25), 0)
        >>> m.clone(include_attributes=True).n_rounds_
        1
        """
        given = {**self.get_params(), **(new_params or {}), **params}
        fresh = type(self)(**given)
        if include_attributes:
            if any(not _same(fresh.get_params()[k], v) for k, v in self.get_params().items()
                   if k not in _NAMING):
                raise UserError("clone(include_attributes=True) copies the learned state, which "
                                "belongs to the parameters it was learned with: change "
                                "parameters in a fresh clone (include_attributes=False)")
            fresh.load_state_dict(self.state_dict())
        return fresh

    def __dir__(self):
        return sorted(set(super().__dir__()) | {f"{k}_" for k in self._model()})

    def __repr__(self) -> str:
        defaults = parameters(self.algo)
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if k in ("n_tasks", "n_features") or v != defaults.get(k)]
        return f"{type(self).__name__}({', '.join(shown)})"

    # --------------------------------------------------------------------- rounds
    def _transaction(self, tasks: np.ndarray, rounds: int, call):
        """``call()``, a call of ``rounds`` rounds that steps the ``tasks`` (increasing), as a
        transaction: if it raises, or leaves any of their rows or a shared array non-finite, the
        learner is put back exactly as it was (counters too) and the error raised in the API's
        spelling; the cost follows the call's tasks (:class:`~omtl_mpi.algorithms.undo.Journal`)."""
        self._known()
        journal, roles = self._journal, self._roles
        journal.begin(tasks, rounds)
        before = (self.n_rounds_, self.n_seen_[tasks], self._bool_labels,
                  None if self._scale_max is None else self._scale_max[tasks])
        try:
            # a step that overflows is found by the check below, not by numpy's warnings
            with np.errstate(all="ignore"):
                try:
                    out = call()
                except (ArithmeticError, np.linalg.LinAlgError):
                    # what numpy raises on the way where a step meets numbers it cannot
                    # compute with (an SVD of inf, a matrix singular in float64)
                    raise UserError(_NON_FINITE if not roles.finite(tasks) else _TOO_LARGE) from None
                if not roles.finite(tasks):
                    raise UserError(_NON_FINITE)
            return out
        except BaseException as exc:
            # an interrupt in the middle of the undo (a second Ctrl-C) would leave a state that
            # is neither: every call says so until a state is loaded
            self._unknown = True
            with np.errstate(all="ignore"):
                journal.undo(self._round)
            self.n_rounds_, self.n_seen_[tasks], self._bool_labels = before[:3]
            if before[3] is not None:
                self._scale_max[tasks] = before[3]
            self._unknown = False
            if isinstance(exc, UserError):
                raise type(exc)(_api_text(str(exc))) from None
            raise

    def _known(self) -> None:
        """Refuse to go on from a state an interrupted undo left half restored."""
        if self._unknown:
            raise UserError("a call of this learner was interrupted while it was being undone: "
                            "its state is not known; load a saved state (load_state_dict, or "
                            "omtl_mpi.load) or build the learner again")

    def _step(self, Xp: np.ndarray, yf: np.ndarray, tasks: np.ndarray, count=None) -> np.ndarray:
        """One round on prepared inputs of the tasks ``tasks`` (increasing): Xp (B, n, d'), yf
        (B, n) with 0 for inactive instances; the predictions made before the labels, booleans
        (B, n). Other tasks are inactive: no step. Called within :meth:`_transaction`, which
        keeps the round for an undo; ``count``: each task's instances, where known."""
        self._journal.add(Xp, yf, tasks)
        if count is None:
            count = (yf != 0.0).sum(axis=0)
        out = self._round(Xp, yf, tasks, count)
        self.n_rounds_ += 1
        self.n_seen_[tasks] += count
        return out

    def _round(self, Xp: np.ndarray, yf: np.ndarray, tasks: np.ndarray, count=None) -> np.ndarray:
        """:meth:`_step`'s work on the engine, without the counters."""
        if count is None:
            count = (yf != 0.0).sum(axis=0)
        return self._roles.step(Xp, yf, tasks, count, self._clock)

    def _decisions(self, Xp: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        """Decision values (B, n) on prepared instances of ``tasks`` (increasing), changing
        nothing. The model is finite (every step that would make it otherwise is undone), so
        a value is NaN only where an instance's features overflow against it: an error."""
        self._known()
        with np.errstate(all="ignore"):
            out = self._roles.decide(Xp, tasks)
        if np.isnan(out).any():
            raise UserError("an instance's decision value is NaN: its features are of a scale "
                            "at which the model's products overflow; scale them (or build the "
                            "learner with scale='online')")
        return out

    def _out_labels(self, positive, act=None):
        """Predictions as the labels were given: bools if the learner was taught with bools;
        with ``act``, 0 (False) where not active."""
        if self._bool_labels:
            return positive if act is None else positive & act
        signs = np.where(positive, 1, -1)
        return (signs if act is None else np.where(act, signs, 0)).astype(np.int8)

    def _learned_bools(self, y) -> None:
        """From the first bool label on, the learner predicts bools (as river expects)."""
        if as_array(y, "").dtype == bool:
            self._bool_labels = True

    def learn_round(self, X, y, active=None) -> np.ndarray:
        """Learn one round: every active task's instances, predicted and then learned.

        Parameters
        ----------
        X : array_like, shape (K, B, d)
            B instances of every task (B = 1 unless mini-batches).
        y : array_like, shape (K, B)
            Their labels, -1 or +1 (or bools); ignored where not active.
        active : array_like of bool, shape (K,) or (K, B), optional
            Which tasks (or instances) the round holds; default all. An inactive task learns
            nothing itself, as a stream that has ended in ``omtl-mpi run``.

        Returns
        -------
        ndarray, shape (K, B)
            The predictions made before the labels were read (int8 -1/+1), 0 where not active;
            for a learner taught with bools, bools (False where not active: ``active`` tells
            those apart).

        Examples
        --------
        >>> import numpy as np, omtl_mpi
        >>> m = omtl_mpi.CADMM(n_tasks=2, n_features=3)
        >>> X = np.array([[[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]]])        # (K, B, d)
        >>> m.learn_round(X, [[-1], [1]], active=[True, False]).tolist()
        [[1], [0]]
        >>> m.predict_round(X).tolist()     # task 1, without an instance yet, predicts with u
        [[-1], [-1]]
        """
        Xa, ya, act = self._round_inputs(X, y, active)
        if ya is None:
            raise UserError("learn_round needs the labels y")
        tasks = np.arange(self.n_tasks)

        def call():
            self._learned_bools(y)
            return self._step(self._prepared(Xa, act, tasks, update=True), ya.T, tasks).T
        return self._out_labels(self._transaction(np.flatnonzero(act.any(axis=1)), 1, call), act)

    def decision_round(self, X, active=None) -> np.ndarray:
        """The decision values (K, B) of a round's instances (0 where not active); nothing changes."""
        Xa, _, act = self._round_inputs(X, None, active)
        tasks = np.arange(self.n_tasks)
        return np.where(act, self._decisions(self._prepared(Xa, act, tasks, update=False), tasks).T, 0.0)

    def predict_round(self, X, active=None) -> np.ndarray:
        """The predictions (K, B) of a round's instances (0 where not active); nothing changes."""
        Xa, _, act = self._round_inputs(X, None, active)
        tasks = np.arange(self.n_tasks)
        positive = self._decisions(self._prepared(Xa, act, tasks, update=False), tasks).T >= 0.0
        return self._out_labels(positive, act)

    # --------------------------------------------------------------------- one at a time
    def learn_one(self, x, y, *, task=None) -> None:
        """Learn one instance of one task: one round in which only that task is active.

        Parameters
        ----------
        x : array_like of shape (n_features,), or dict
            The features, or a dict of feature -> value (hashed into n_features, as the text
            importer hashes n-grams; the ``task_key`` entry, if any, names the task).
        y : {-1, +1} or bool
            From the first bool label on, the learner predicts bools (as river expects).
        task : int, optional
            The task (0..K-1); read from ``x[task_key]`` when not given.

        Examples
        --------
        >>> import omtl_mpi
        >>> m = omtl_mpi.AROW(n_tasks=3, n_features=2, task_key="user")
        >>> m.learn_one({"user": 2, "clicks": 3.0, "age": 0.5}, True)
        >>> m.predict_one({"user": 2, "clicks": 3.0, "age": 0.5}), m.n_seen_.tolist()
        (True, [0, 0, 1])
        """
        label = self._label(y)
        k = self._task(x, task)
        tasks = np.array([k])

        def call():
            Xp = self._one(x, k, update=True, known=True)[1]
            self._learned_bools(y)
            return self._step(Xp, np.array([[label]]), tasks, _ONE)
        self._transaction(tasks, 1, call)

    def decision_one(self, x, *, task=None) -> float:
        """The decision value of one instance (its sign is :meth:`predict_one`'s); nothing changes.

        Examples
        --------
        >>> import omtl_mpi
        >>> m = omtl_mpi.PA(n_tasks=1, n_features=2, intercept=False)
        >>> m.learn_one([1.0, 0.0], -1, task=0)
        >>> m.decision_one([1.0, 0.0], task=0), m.predict_one([1.0, 0.0], task=0)
        (-1.0, -1)
        """
        k, Xp = self._one(x, task, update=False)
        return float(self._decisions(Xp, np.array([k]))[0, 0])

    def predict_one(self, x, *, task=None):
        """The prediction of one instance, -1 or +1 (a bool for a learner taught with bools)."""
        positive = self.decision_one(x, task=task) >= 0.0
        if self._bool_labels:
            return bool(positive)
        return 1 if positive else -1

    def predict_proba_one(self, x, *, task=None) -> dict:
        """A score for each label, ``{1: s, -1: 1 - s}`` for a learner taught with -1/+1 (and
        ``{True: s, False: 1 - s}`` before any label and for one taught with bools, as river's
        binary classifiers key theirs), s the logistic of the decision value: monotone in it,
        so that river's ranking metrics (ROCAUC) work, but not a calibrated probability (the
        learners are margin-based).

        Examples
        --------
        >>> import omtl_mpi
        >>> m = omtl_mpi.PA(n_tasks=1, n_features=2)
        >>> m.predict_proba_one([1.0, 0.0], task=0)
        {False: 0.5, True: 0.5}
        >>> m.learn_one([1.0, 0.0], -1, task=0)
        >>> sorted(m.predict_proba_one([1.0, 0.0], task=0))
        [-1, 1]
        """
        s = _score(self.decision_one(x, task=task))
        # keyed by the labels learned, as river's classifiers key theirs; before any, as a
        # binary river classifier does (False/True)
        if self._bool_labels or self.n_rounds_ == 0:
            return {False: 1.0 - s, True: s}
        return {-1: 1.0 - s, 1: s}

    # --------------------------------------------------------------------- scikit-learn's shape
    def partial_fit(self, X, y, *, tasks) -> "Learner":
        """Learn a batch of instances of any tasks (scikit-learn's shape); returns self.

        Each task's instances are taken in the order given: round j holds the j-th instance of
        every task that has one (``omtl-mpi run``'s layout with ``--batch 1``).

        Parameters
        ----------
        X : array_like, shape (n, d)
        y : array_like, shape (n,)
            -1 or +1 (or bools).
        tasks : array_like of int, shape (n,), or int
            Every row's task (an int: every row is of that task).

        Examples
        --------
        >>> import numpy as np, omtl_mpi
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
        >>> m = omtl_mpi.CADMM(n_tasks=2, n_features=2).partial_fit(X, [1, -1, -1, 1], tasks=[0, 1, 0, 1])
        >>> m.n_rounds_, m.n_seen_.tolist()
        (2, [2, 2])
        >>> m.predict(X, tasks=[0, 1, 0, 1]).shape, m.decision_function(X, tasks=0).shape
        ((4,), (4,))
        """
        Xa, t, ya, rank = self._batch(X, tasks, y)

        def call():
            self._learned_bools(y)
            for rows, tr, Xr, act in self._by_round(Xa, t, rank):
                self._step(self._round_prepared(Xr, act, tr, True), ya[rows][None], tr)
            return self
        # the whole call is one transaction: a round that fails undoes the rounds before it
        return self._transaction(np.unique(t), int(rank.max()) + 1 if len(rank) else 0, call)

    def decision_function(self, X, *, tasks) -> np.ndarray:
        """Decision values (n,) of instances of any tasks; nothing changes."""
        Xa, t, _, rank = self._batch(X, tasks)
        out = np.zeros(Xa.shape[0])
        for rows, tr, Xr, act in self._by_round(Xa, t, rank):
            out[rows] = self._decisions(self._round_prepared(Xr, act, tr, False), tr)[0]
        return out

    def predict(self, X, *, tasks) -> np.ndarray:
        """Predictions (n,) of instances of any tasks, -1/+1 (bools for a learner taught with
        bools); nothing changes."""
        return self._out_labels(self.decision_function(X, tasks=tasks) >= 0.0)

    def predict_proba(self, X, *, tasks) -> np.ndarray:
        """The scores (n, 2) of -1 and +1 (columns in that order) of instances of any tasks:
        :meth:`predict_proba_one`'s, for many at once; nothing changes.

        Examples
        --------
        >>> import numpy as np, omtl_mpi
        >>> m = omtl_mpi.PA(n_tasks=2, n_features=2).partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
        >>> p = m.predict_proba(np.eye(2), tasks=[0, 1])
        >>> p.shape, bool((p.sum(axis=1) == 1.0).all()), bool(p[0, 1] > 0.5 > p[1, 1])
        ((2, 2), True, True)
        """
        decisions = self.decision_function(X, tasks=tasks)
        s = np.fromiter(map(_score, decisions.tolist()), dtype=np.float64, count=len(decisions))
        return np.stack([1.0 - s, s], axis=1)

    # --------------------------------------------------------------------- learned arrays
    def _model(self) -> dict:
        """The learned arrays by name, as the results file's /model holds them."""
        return self._roles.model()

    def __getattr__(self, name: str):
        # learned arrays (W_, u_, V_, Z_, omega_, U_): computed on demand from the roles, so
        # that they are always the current ones; a copy, so that nobody edits the learner
        if name.endswith("_") and not name.startswith("_") and "_roles" in self.__dict__:
            self._known()
            model = self._model()
            if name[:-1] in model:
                return np.array(model[name[:-1]])
            if name == "omega_" and "omega_basis" in model:
                from ..algorithms.admm import DENSE_OMEGA_MAX
                raise AttributeError(f"omega_ is kept as a K x K matrix up to "
                                     f"{DENSE_OMEGA_MAX:,} tasks, this "
                                     f"learner has {self.n_tasks}: Omega = omega_rest_ I + "
                                     "omega_basis_ diag(omega_values_ - omega_rest_) "
                                     "omega_basis_^T")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


def _score(decision: float) -> float:
    """The logistic of a decision value: the score of +1 that predict_proba_one and
    predict_proba give (monotone in the decision, 0.5 at 0). One number at a time, so that the
    two agree to the bit (numpy's vectorised tanh may round otherwise than its scalar one)."""
    return 0.5 * (1.0 + math.tanh(0.5 * decision))


def _restore(how, params: dict, state: dict) -> Learner:
    """A learner, built by its name or its class ``how`` with ``params``, continuing from
    ``state``: what a copy or a pickle of one is rebuilt from (:meth:`Learner.__reduce__`)."""
    from .classes import learner
    if not isinstance(how, str):
        return how(**params).load_state_dict(state)
    rest = dict(params)
    return learner(how, rest.pop("n_tasks"), rest.pop("n_features"), **rest).load_state_dict(state)


# pickles name it where the classes live (omtl_mpi.learners), not in this module
_restore.__module__ = "omtl_mpi.learners"
