"""Learner objects: every learner of ``omtl-mpi algos`` as a Python object that learns from
arrays or from instances arriving one at a time, in one process.

Three shapes of the same learner, each the shape its users know:

* river's, one instance at a time: :meth:`Learner.learn_one`, :meth:`Learner.predict_one`,
  :meth:`Learner.decision_one`;
* the paper's, one round of every task at a time: :meth:`Learner.learn_round`,
  :meth:`Learner.predict_round`;
* scikit-learn's, a batch of instances with their tasks: :meth:`Learner.partial_fit`,
  :meth:`Learner.predict`, :meth:`Learner.decision_function`.

What a round is
---------------
The learners are round-based, as in the paper: in a round every task with an instance
predicts it, then the labels are revealed and the learner steps once (for C-ADMM: the w-steps,
the consensus, the z-steps). A task without an instance in a round is *inactive* in it, exactly
as a stream that has ended is in ``omtl-mpi run``: it takes no step, and what it shares stays
as it was. So:

* ``learn_round(X, y, active)`` is one round of ``omtl-mpi run``: the same predictions, and
  learned arrays equal to 1e-10 (the tests check both for every learner);
* ``learn_one(x, y, task=k)`` is one round in which only task k is active: it steps task k's
  rows and the shared state, not the other tasks. For the ADMM learners with Omega fixed (the
  defaults) that is O(d^2) with the default arow w-step (O(d) with euclid or adagrad), plus
  O(d^2) for the experts' vote (its d x d sums; while K <= d it works from the K models); with ``relationship=True`` the shared step is the learned
  Omega's, O(K d r) with an SVD of the K x d matrix V every ``omega_every`` rounds;
* ``partial_fit(X, y, tasks=...)`` takes each task's instances in the order given: round j of
  the call holds the j-th instance of every task that has one in it, as ``omtl-mpi run`` lays
  out streams (each call starts again at its own first round), so a data set passed in one
  call learns as ``omtl-mpi run --batch 1`` on it.

Predictions are made before the labels of their round are read, and ``predict_*`` never
changes the learner. ``decision_*`` is the number whose sign is the prediction (``>= 0`` is
+1, as ``sign(0) = +1`` throughout): a margin, or for the experts' vote the weighted vote.

Every bad input raises :class:`omtl_mpi.UserError` (a ``ValueError``) with one line that says
what to fix, before anything changes.
"""
from __future__ import annotations

import inspect
import math
import numbers
import re
import reprlib
import warnings
from dataclasses import fields

import numpy as np

from .algorithms import registry
from .errors import UserError

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

# options of a run that shape the learner object itself (the others, data, seed, batch...,
# describe a run over a data set: run_streams takes them)
_RUN_OPTIONS = ("intercept", "scale")
# the parameters that say how an instance names its task (no learned state depends on them)
_NAMING = ("task_key", "default_task")
_GRAPH_OPTIONS = ("topology", "nodes")
# the public class of every built-in learner, as its registry entry names it
CLASS_NAMES = {name: spec.class_name for name, spec in registry.REGISTRY.items() if spec.class_name}


# the largest count a loaded state may hold (learners._fits)
_COUNT_MAX = 2 ** 53

# the instances a learn_one round holds of its task (never written)
_ONE = np.ones(1, dtype=np.int64)
_ONE.flags.writeable = False

# a call whose step meets numbers too large for float64's operations (a singular matrix)
_TOO_LARGE = ("this call's step met numbers too large to compute with (an instance's features "
              "of a very large scale: try scale='online'); the call is undone, the learner is as "
              "it was")
# a call whose step overflows
_NON_FINITE = ("this call would make the model non-finite (NaN or inf): its step grows without "
               "bound (a small eta, a large class_weight, rho or lambda4, or features of a very "
               "large scale: try scale='online'); the call is undone, the learner is as it was")

# what numpy raises for a value that is no array of numbers (ragged, text, too large, ...)
_NOT_NUMBERS = (TypeError, ValueError, OverflowError)


def as_array(value, what: str, dtype=None) -> np.ndarray:
    """A caller's value as a numpy array (a copy with ``dtype``, from booleans, integers or
    real numbers only: complex numbers, dates and text are refused, not cast), or one
    UserError saying what ``what`` should be."""
    try:
        a = np.asarray(value)
        if dtype is not None:
            if a.dtype.kind not in "biuf":
                raise TypeError(a.dtype)
            # a longdouble beyond float64 becomes inf here, which the checks after refuse in
            # one line: numpy's overflow warning would be a second
            with np.errstate(over="ignore", invalid="ignore"):
                a = np.array(a, dtype=dtype)
        return a
    except _NOT_NUMBERS:
        raise UserError(f"{what}") from None


def _encodes(text: str) -> bool:
    """Whether UTF-8 can write ``text`` (a lone surrogate it cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_number(value) -> bool:
    """What a dict feature's value must be: a real number that a float can hold."""
    if not isinstance(value, numbers.Real):
        return False
    try:
        float(value)
    except _NOT_NUMBERS:
        return False
    return True


def _api_text(message: str) -> str:
    """A message of the command line's as a Python caller spells things: ``--w-step`` ->
    ``w_step``, ``--scale online`` -> ``scale='online'`` (a value among the option's choices),
    ``--no-experts`` -> ``experts=False``, ``--algo hashed`` -> ``learner('hashed', ...)``."""
    from .options import PRESETS, table
    opts = {o.flag: o for o in table().values()}
    for cli, api in _API_PHRASES.items():
        message = message.replace(cli, api)
    message = re.sub(r"--algo ([a-z0-9-]+)", r"learner('\1', ...)", message)
    message = re.sub(r"--no-([a-z0-9-]+)", lambda m: f"{m.group(1).replace('-', '_')}=False", message)

    def keyword(m) -> str:
        flag, value = m.group(1), m.group(2)
        name = flag[2:].replace("-", "_")
        choices = PRESETS if flag == "--preset" else getattr(opts.get(flag), "choices", None) or ()
        if value is not None and value in choices:
            return f"{name}={value!r}"
        return name + (f" {value}" if value is not None else "")
    return re.sub(r"(--[A-Za-z][A-Za-z0-9-]*)(?: ([A-Za-z][A-Za-z0-9-]*))?", keyword, message)


# what the command line's advice says of the import, as a learner's keywords say it
_API_PHRASES = {"import with a smaller --dims": "a smaller n_features",
                "a smaller --dims": "a smaller n_features"}


def _sparse_rows(X, n_features: int):
    """A scipy.sparse matrix as (a CSR copy with its columns sorted and repeats summed,
    indices, values); a matrix whose values are not numbers is one UserError."""
    if X.dtype.kind not in "fiub":
        raise UserError(f"a sparse X holds numbers, got dtype {X.dtype}")
    from .data.sparse import csr_arrays, csr_matrix
    data, indices, indptr, shape = csr_arrays(X)
    return csr_matrix(data, indices, indptr, shape), indices, data


def parameters(algo: str) -> dict:
    """The constructor parameters of learner ``algo`` with their defaults, in order.

    ``n_tasks`` and ``n_features`` come first (required), then the run options that shape the
    learner (``intercept``, ``scale``; ``topology`` and ``nodes`` for the neighbour learners),
    ``rounds``, ``task_key`` and ``default_task``, then the learner's hyper-parameters: the same names, defaults
    and checks as ``omtl-mpi run`` and sweep files (:mod:`omtl_mpi.options`).

    Examples
    --------
    >>> import omtl_mpi
    >>> params = omtl_mpi.parameters("pa")
    >>> list(params)[2:], params["C"]
    (['intercept', 'scale', 'rounds', 'task_key', 'default_task', 'C'], 1.0)
    """
    from .options import table
    spec = registry.get(algo)
    opts = table()
    out = {"n_tasks": inspect.Parameter.empty, "n_features": inspect.Parameter.empty}
    names = _RUN_OPTIONS + (_GRAPH_OPTIONS if spec.pattern == "neighbours" else ())
    out.update({name: opts[name].default for name in names})
    out["rounds"] = None
    out["task_key"] = None
    out["default_task"] = 0
    out.update({f.name: f.default for f in fields(spec.params)})
    return out


def _help(algo: str, name: str) -> str:
    from .options import table
    own = {"n_tasks": "Number of tasks K (>= 1).",
           "n_features": "Features per instance d (>= 1): the length of x, or for dict features "
                         "the number of coordinates their names are hashed into (names that "
                         "collide add up, as in any feature hashing); the intercept adds one "
                         "weight.",
           "rounds": "Rounds the stream will last, for the hyper-parameters whose default depends "
                     "on the run's length (eta of the euclid w-step: sqrt(rounds)); None: not "
                     "known (then such a hyper-parameter must be given).",
           "default_task": "The task of a dict x without the task_key entry (river's "
                           "convention: a feature may go missing; river's own checks send "
                           "such instances), said once by a UserWarning; None: such an x is "
                           "an error.",
           "task_key": "Key of x holding the task when x is a dict (river's progressive "
                       "validation passes x alone); None: give task= to every call."}
    if name in own:
        return own[name]
    opt = table()[name]
    return _api_text(opt.helps.get(algo, opt.help))


try:
    # where river is installed a learner is one of its classifiers (its progressive validation,
    # pipelines and ensembles take only those, and its check_estimator runs on them); river is
    # optional, and its base costs some 20 ms to import
    from river.base import Classifier as _Base
except ImportError:                 # pragma: no cover (river is a test dependency)
    _Base = object


class Learner(_Base):
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
        from .checks import _needed
        yield {"n_tasks": 3, "n_features": 16, "task_key": "task", **_needed(cls.algo)}

    def __reduce__(self):
        # copy.copy, copy.deepcopy and pickle (process pools, river's ensembles and checks)
        # carry the parameters and state_dict(), so a copy continues bit for bit: the role
        # objects' buffers and views of them (a worker's message) are built afresh, not split.
        # Within one release only: files are HDF5 (save), and nothing from a file is unpickled.
        # A class of one's own (a subclass) is rebuilt as itself, with what it set beside
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
        self._spec, self._cfg, self._roles = built["spec"], built["cfg"], built["roles"]
        self._dim = built["dim"]
        from .comm.clock import PhaseClock
        self._clock = PhaseClock(1)
        K = self.n_tasks
        self._scale_max = np.zeros((K, self.n_features)) if self.scale == "online" else None
        self._bool_labels = False
        self._unknown = False           # an interrupted undo left the state half restored
        self._defaulted = False         # a dict without the task key was given its default
        self.n_rounds_ = 0
        self.n_seen_ = np.zeros(K, dtype=np.int64)
        from .algorithms.undo import Journal
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

    # --------------------------------------------------------------------- inputs
    def _task(self, x, task):
        if task is not None and self.task_key is not None and isinstance(x, dict) \
                and self.task_key in x and x[self.task_key] != task:
            raise UserError(f"task={task!r} but x[{self.task_key!r}] is {x[self.task_key]!r}: "
                            "give the task once")
        if task is None:
            if self.task_key is None or not isinstance(x, dict):
                raise UserError("which task? give task=k (0..n_tasks-1), or build the learner "
                                "with task_key= and pass x as a dict holding the task")
            if self.task_key not in x:
                if self.default_task is None:
                    raise UserError(f"x has no {self.task_key!r} (the learner's task_key), and "
                                    "default_task is None: every instance must say its task")
                if not self._defaulted:         # said once: a misspelt task_key is not silent
                    self._defaulted = True
                    warnings.warn(f"x has no {self.task_key!r} (the learner's task_key): such "
                                  f"an x is of task {self.default_task} (default_task); give "
                                  "default_task=None to make it an error", UserWarning,
                                  stacklevel=3)
                return self.default_task
            task = x[self.task_key]
        if isinstance(task, (bool, np.bool_)) or not isinstance(task, (int, np.integer)) \
                or not 0 <= task < self.n_tasks:
            raise UserError(f"task must be an integer from 0 to {self.n_tasks - 1}, got {task!r}")
        return int(task)

    def _entries(self, x):
        """One sparse instance's (columns, values) of its non-zero features, checked: a dict
        of feature -> value hashed into n_features as the text importer hashes n-grams, or a
        scipy.sparse row (1, n_features). No dense row is made."""
        if isinstance(x, dict):
            from .data.featurise import hash_entries
            items = {k: v for k, v in x.items() if k != self.task_key}
            try:
                cols, values = hash_entries(items, self.n_features)
            except UnicodeEncodeError:
                bad = next(k for k in items if not _encodes(str(k)))
                raise UserError(f"a dict x's feature names are hashed as UTF-8 text, and "
                                f"{reprlib.repr(bad)} is not text that UTF-8 can write (a lone "
                                "surrogate)") from None
            except _NOT_NUMBERS:
                bad = next(k for k, value in items.items() if not _is_number(value))
                raise UserError(f"a dict x maps feature names to numbers; "
                                f"x[{reprlib.repr(bad)}] is {reprlib.repr(items[bad])}, not a "
                                "number") from None
        else:
            if x.ndim != 2 or x.shape != (1, self.n_features):
                raise UserError(f"a sparse x must have shape (1, {self.n_features}) (one row of "
                                f"n_features), got {x.shape}")
            cols, values = _sparse_rows(x, self.n_features)[1:3]
        if not np.isfinite(values).all():
            raise UserError("x holds NaN or inf; every feature must be a finite number")
        return cols, values

    def _vector(self, x) -> np.ndarray:
        """One instance's features (n_features,), float64, a copy: a 1-D array, or a dict of
        feature -> value hashed into n_features as the text importer hashes n-grams."""
        if isinstance(x, dict) or hasattr(x, "tocsr"):
            cols, values = self._entries(x)
            v = np.zeros(self.n_features)
            v[cols] = values
        else:
            v = as_array(x, f"x must be a 1-D array of {self.n_features} numbers or a dict of "
                            "feature -> number", np.float64)
            if v.shape != (self.n_features,):
                raise UserError(f"x must have shape ({self.n_features},) (n_features), got "
                                f"{v.shape}")
        if not np.isfinite(v).all():
            raise UserError("x holds NaN or inf; every feature must be a finite number")
        return v

    def _label(self, y) -> float:
        if isinstance(y, (bool, np.bool_)):
            return 1.0 if y else -1.0
        if isinstance(y, (int, float, np.integer, np.floating)) and y in (-1, 1):
            return float(y)
        raise UserError(f"a label is -1 or +1 (or a bool), got {y!r}")

    def _labels(self, y, shape) -> np.ndarray:
        a = as_array(y, f"y must be an array of labels of shape {shape}")
        if a.shape != shape:
            raise UserError(f"y must have shape {shape}, got {a.shape}")
        if a.dtype == bool:
            return np.where(a, 1.0, -1.0)
        if a.dtype.kind not in "iuf":
            raise UserError(f"labels are -1 or +1 (or bools), got an array of {a.dtype}")
        return a.astype(np.float64)

    def _prepared_sparse(self, indptr, cols, values, tasks: np.ndarray, update: bool):
        """Sparse instances as the learner sees them: rows (CSR ``indptr``, ``cols``,
        ``values``), one instance of each of ``tasks`` (B = 1), as :class:`SparseRows`
        (1, n, d'): scaled online (the running maxima of their entries' columns, updated only
        when ``update``) and the intercept's entry appended, as :meth:`_prepared` does for dense
        ones."""
        from .data.sparse import SparseRows
        n = len(tasks)
        counts = np.diff(indptr)
        values = np.array(values, dtype=np.float64)
        if self._scale_max is not None and len(values):
            task = np.repeat(tasks, counts)
            running = np.maximum(np.abs(values), self._scale_max[task, cols])
            values /= running
            if update:
                self._scale_max[task, cols] = running
        if self.intercept:
            where = np.asarray(indptr[1:]) + np.arange(n)        # each row's end, shifted
            cols = np.insert(np.asarray(cols, dtype=np.int64), indptr[1:], self.n_features)
            values = np.insert(values, indptr[1:], 1.0)
            indptr = np.concatenate(([0], where + 1))
        return SparseRows(values, np.asarray(cols, dtype=np.int32), np.asarray(indptr, dtype=np.int64),
                          (1, n, self._dim))

    def _prepared(self, X: np.ndarray, active, tasks: np.ndarray,
                  update: bool) -> np.ndarray:
        """Features as the learner sees them, (B, n, d'), of ``X`` (n, B, d), instances of
        ``tasks``: scaled online (the running maximum updated only when ``update``), the
        intercept appended, inactive instances all zero (as ``omtl-mpi run`` pads a short
        mini-batch); ``active`` (n, B) booleans, or None when every instance is."""
        n, B, d = X.shape
        if active is not None:
            X = np.where(active[:, :, None], X, 0.0)
        if self._scale_max is not None:
            # instance t of a task is scaled by the largest |value| of its stream up to t
            # (data/features.py), computed here round by round
            running = np.maximum(np.maximum.accumulate(np.abs(X), axis=1),
                                 self._scale_max[tasks][:, None])
            X = X / np.where(running > 0.0, running, 1.0)
            if update:
                self._scale_max[tasks] = running[:, -1]
        out = np.zeros((B, n, self._dim))
        out[:, :, :d] = X.transpose(1, 0, 2)
        if self.intercept:
            out[:, :, d] = 1.0 if active is None else active.T
        return out

    def _round_inputs(self, X, y, active):
        """Checked copies of a round's inputs: X (K, B, d), y (K, B) floats, active (K, B)."""
        K, d = self.n_tasks, self.n_features
        Xa = as_array(X, "X must be an array of numbers of shape (n_tasks, B, n_features)", np.float64)
        if Xa.ndim != 3 or Xa.shape[0] != K or Xa.shape[2] != d or Xa.shape[1] < 1:
            raise UserError(f"X must have shape (n_tasks, B, n_features) = ({K}, B, {d}) with B >= 1, "
                            f"got {Xa.shape}")
        B = Xa.shape[1]
        if active is None:
            act = np.ones((K, B), dtype=bool)
        else:
            act = as_array(active, f"active must be booleans of shape ({K},) or ({K}, {B})")
            if act.dtype != bool or act.shape not in ((K,), (K, B)):
                raise UserError(f"active must be booleans of shape ({K},) or ({K}, {B}), got "
                                f"{act.dtype} of shape {act.shape}")
            act = np.broadcast_to(act[:, None] if act.ndim == 1 else act, (K, B))
        if not np.isfinite(Xa[act]).all():
            raise UserError("X holds NaN or inf in an active instance; every feature must be finite")
        ya = None
        if y is not None:
            ya = self._labels(y, (K, B))
            bad = act & (ya != 1.0) & (ya != -1.0)
            if bad.any():
                k, b = np.argwhere(bad)[0]
                raise UserError(f"labels are -1 or +1 (or bools): y[{k}, {b}] is {ya[k, b]:g}")
            ya = np.where(act, ya, 0.0)
        return Xa, ya, act

    # --------------------------------------------------------------------- rounds
    def _transaction(self, tasks: np.ndarray, rounds: int, call):
        """``call()``, the work of a call of ``rounds`` rounds that steps the ``tasks``
        (increasing, unique), as a transaction: if it raises, or leaves any of their rows or a
        shared array non-finite, the learner is put back exactly as it was before (its counters
        too) and the error is raised, in the Python API's spelling. What this costs follows the
        call's tasks, whatever K (:class:`~omtl_mpi.algorithms.undo.Journal`)."""
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
        """One round of the learner on prepared inputs of the tasks ``tasks`` (increasing):
        Xp (B, n, d'), yf (B, n) with 0 for inactive instances; the predictions made before
        the labels, booleans (B, n). Tasks not in ``tasks``, and tasks without an instance,
        are inactive: they take no step (what a round costs follows the tasks in it). Called
        within :meth:`_transaction`, which keeps the round for an undo. ``count``: each
        task's instances in the round, where the caller knows them (learn_one: one)."""
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

    def _out_labels(self, positive):
        """Predictions as the labels were given: bools if the learner was taught with bools."""
        if self._bool_labels:
            return positive
        return np.where(positive, 1, -1).astype(np.int8)

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
            if as_array(y, "").dtype == bool:
                self._bool_labels = True
            return self._step(self._prepared(Xa, act, tasks, update=True), ya.T, tasks).T
        positive = self._transaction(np.flatnonzero(act.any(axis=1)), 1, call)
        if self._bool_labels:
            return positive & act
        return np.where(act, np.where(positive, 1, -1), 0).astype(np.int8)

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
        if self._bool_labels:
            return positive & act
        return np.where(act, np.where(positive, 1, -1), 0).astype(np.int8)

    # --------------------------------------------------------------------- one at a time
    def _one(self, x, task, update: bool, known: bool = False):
        """Task k and its one instance, prepared (1, 1, d'): the round holds only task k (a
        dict or a scipy.sparse row as sparse rows, whose non-zero features alone are read);
        ``known``: ``task`` is the checked task of ``x`` already."""
        k = task if known else self._task(x, task)
        if isinstance(x, dict) or hasattr(x, "tocsr"):
            cols, values = self._entries(x)
            return k, self._prepared_sparse(np.array([0, len(cols)]), cols, values,
                                            np.array([k]), update)
        v = self._vector(x)
        return k, self._prepared(v[None, None], None, np.array([k]), update)

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
            if isinstance(y, (bool, np.bool_)):
                self._bool_labels = True
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
    def _batch(self, X, tasks, y=None):
        """Checked inputs of partial_fit/predict: X (n, d) (an array, or a scipy.sparse matrix
        kept sparse), tasks (n,), y (n,) or None; and the round of each instance (its rank
        among the instances of its task)."""
        if hasattr(X, "tocsr"):
            Xa = _sparse_rows(X, self.n_features)[0]
        else:
            Xa = as_array(X, "X must be an array of numbers of shape (n, n_features)", np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features:
            raise UserError(f"X must have shape (n, {self.n_features}) (n_features columns), got "
                            f"{Xa.shape}")
        n = Xa.shape[0]
        if tasks is None:
            raise UserError("give tasks=, the task (0..n_tasks-1) of every row of X")
        if isinstance(tasks, (int, np.integer)) and not isinstance(tasks, (bool, np.bool_)):
            tasks = np.full(n, tasks)           # every row of one task
        t = as_array(tasks, f"tasks must be {n} integers (one per row of X)")
        if t.shape != (n,) or (n and t.dtype.kind not in "iu"):
            raise UserError(f"tasks must be {n} integers (one per row of X), got {t.dtype} of "
                            f"shape {t.shape}")
        if n and (t.min() < 0 or t.max() >= self.n_tasks):
            raise UserError(f"tasks must lie in 0..{self.n_tasks - 1}, got {int(t.min())}..{int(t.max())}")
        if not np.isfinite(Xa.data if hasattr(Xa, "tocsr") else Xa).all():
            raise UserError("X holds NaN or inf; every feature must be a finite number")
        ya = None
        if y is not None:
            ya = self._labels(y, (n,))
            if not np.isin(ya, (-1.0, 1.0)).all():
                raise UserError("labels are -1 or +1 (or bools); y holds "
                                f"{ya[~np.isin(ya, (-1.0, 1.0))][0]:g}")
        t = t.astype(np.int64)
        order = np.argsort(t, kind="stable")
        counts = np.bincount(t, minlength=self.n_tasks)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - starts[t[order]]
        return Xa, t, ya, rank

    def _by_round(self, Xa, t, rank):
        """Yield (round j, the rows of X in it in task order, their tasks, X of the round
        (n, 1, d), active (n, 1)): only the tasks with an instance in the round."""
        order = np.lexsort((t, rank))                      # by round, then by task
        bounds = np.searchsorted(rank[order], np.arange(int(rank.max()) + 2 if len(rank) else 1))
        for j in range(len(bounds) - 1):
            rows = order[bounds[j]:bounds[j + 1]]
            yield rows, t[rows], Xa[rows] if hasattr(Xa, "tocsr") else Xa[rows][:, None], \
                np.ones((len(rows), 1), dtype=bool)

    def _round_prepared(self, Xr, act, tr, update: bool):
        """A round of :meth:`_by_round`, prepared: dense (B, n, d'), or sparse rows."""
        if hasattr(Xr, "tocsr"):
            return self._prepared_sparse(Xr.indptr, Xr.indices, Xr.data, tr, update)
        return self._prepared(Xr, act, tr, update=update)

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
            if as_array(y, "").dtype == bool:
                self._bool_labels = True
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
                from .algorithms.admm import DENSE_OMEGA_MAX
                raise AttributeError(f"omega_ is kept as a K x K matrix up to "
                                     f"{DENSE_OMEGA_MAX:,} tasks, this "
                                     f"learner has {self.n_tasks}: Omega = omega_rest_ I + "
                                     "omega_basis_ diag(omega_values_ - omega_rest_) "
                                     "omega_basis_^T")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # --------------------------------------------------------------------- state
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
        import copy
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
        import copy
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
        from .persist import save_learner
        save_learner(path, self.state_dict())


def _score(decision: float) -> float:
    """The logistic of a decision value: the score of +1 that predict_proba_one and
    predict_proba give (monotone in the decision, 0.5 at 0). One number at a time, so that the
    two agree to the bit (numpy's vectorised tanh may round otherwise than its scalar one)."""
    return 0.5 * (1.0 + math.tanh(0.5 * decision))


def _restore(how, params: dict, state: dict) -> Learner:
    """A learner, built by its name or its class ``how`` with ``params``, continuing from
    ``state``: what a copy or a pickle of one is rebuilt from (:meth:`Learner.__reduce__`)."""
    if not isinstance(how, str):
        return how(**params).load_state_dict(state)
    rest = dict(params)
    return learner(how, rest.pop("n_tasks"), rest.pop("n_features"), **rest).load_state_dict(state)


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
        # a count (rounds, instances, steps) is a whole number >= 0, and far enough below
        # int64's largest that learning on cannot overflow it (2**53 rounds: some 285 years at
        # a round a microsecond); the prior's version of a task's matrices is -1 before the first
        lowest = -1 if where.endswith("bayes_version") else 0
        if g.min() < lowest or g.max() > _COUNT_MAX:
            return (f"{where} holds {g.min() if g.min() < lowest else g.max()}, where a count "
                    f"from {lowest} to 2**53 belongs")
    return None


def _build(algo: str, n_tasks, n_features, params: dict) -> dict:
    """Check a learner's parameters and build its roles; raises UserError, changes nothing."""
    from .options import run_config
    from .engine import build
    from .engine.placement import graph_nodes
    spec = registry.get(algo)
    for name, value in (("n_tasks", n_tasks), ("n_features", n_features)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise UserError(f"{name} must be an integer >= 1, got {value!r}")
    n_tasks, n_features = int(n_tasks), int(n_features)
    known = parameters(algo)
    params = dict(params)
    preset = params.pop("preset", None)
    if preset is not None:
        from .options import PRESETS, preset_values, table
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        values = preset_values(preset, spec, table())
        params = {**{k: v for k, v in values.items() if k in known}, **params}
    # numpy scalars are numbers like any other (the option table takes Python's)
    params = {k: v.item() if isinstance(v, np.generic) else v for k, v in params.items()}
    unknown = [k for k in params if k not in known]
    if unknown:
        import difflib
        near = difflib.get_close_matches(unknown[0], known, n=1)
        raise UserError(f"{algo} has no parameter {unknown[0]!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                        + f"; its parameters: {', '.join(known)}")
    given = {"n_tasks": n_tasks, "n_features": n_features}
    given.update({k: params.get(k, v) for k, v in list(known.items())[2:]})
    from .options import table
    opts = table()
    for k, v in given.items():          # eta="auto" is the default None, as on the command line
        if k in opts and opts[k].none_text is not None and v == opts[k].none_text:
            given[k] = None
    rounds = given["rounds"]
    if given["task_key"] is not None and (not isinstance(given["task_key"], (str, int))
                                          or isinstance(given["task_key"], bool)):
        raise UserError(f"task_key must be a dict key (a string or an integer) or None, got "
                        f"{given['task_key']!r}")
    default = given["default_task"]
    if default is not None and (isinstance(default, (bool, np.bool_)) or not isinstance(default, (int, np.integer))
                                or not 0 <= default < n_tasks):
        raise UserError(f"default_task must be a task (an integer from 0 to {n_tasks - 1}) or None, "
                        f"got {default!r}")
    if default is not None:
        given["default_task"] = int(default)
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer))
                               or rounds < 1):
        raise UserError(f"rounds must be an integer >= 1 or None, got {rounds!r}")
    if rounds is not None:
        given["rounds"] = rounds = int(rounds)         # JSON-ready, as every parameter
    # the option table checks types and values, refuses what has no effect, and builds the
    # learner's hyper-parameters: only what differs from the defaults counts as given, so that a
    # clone (every parameter passed) is never refused for a default that does nothing
    values = {"algo": algo}
    values.update({k: v for k, v in given.items()
                   if k not in ("n_tasks", "n_features", "rounds") + _NAMING and v != known[k]})
    try:
        cfg = run_config(values)
    except UserError as exc:
        raise UserError(_api_text(str(exc))) from None
    # the values as validated ("0.5" given is 0.5 stored; intercept=1 is True), so that
    # get_params, the repr and saved files hold what the learner uses
    for k in given:
        if hasattr(cfg.params, k):
            given[k] = getattr(cfg.params, k)
        elif k in ("intercept", "scale", "topology", "nodes"):
            given[k] = getattr(cfg, k)
    if rounds is None and cfg.params.resolved(1) != cfg.params.resolved(4):
        raise UserError(f"{algo}'s step control eta depends on the run's length with these "
                        "parameters (sqrt(T) for the euclid w-step): give eta= or rounds=")
    resolved = cfg.params.resolved(int(rounds or 1))
    dim = n_features + int(bool(cfg.intercept))
    from .runtime.run import check_model_memory
    try:                                    # before anything is allocated
        check_model_memory(cfg, n_tasks, dim, 1, spec.pattern)
    except UserError as exc:
        raise UserError(_api_text(str(exc))) from None
    topology = None
    if spec.pattern == "neighbours":
        from .topology import load_topology
        topology = load_topology(cfg.topology, graph_nodes(1, n_tasks, spec, cfg.nodes))
    roles = build(spec, resolved, n_tasks, dim, topology=topology)
    return {"given": given, "spec": spec, "cfg": cfg, "roles": roles, "dim": dim}


def _docstring(algo: str) -> str:
    spec = registry.get(algo)
    cls = CLASS_NAMES.get(algo, "Learner")
    lines = [f"{spec.summary}", "", f"{spec.citation}. A :class:`Learner` "
             f"(``omtl_mpi.learner({algo!r}, ...)``): every method is documented there.", "",
             "Parameters", "----------"]
    for name, default in parameters(algo).items():
        shown = "" if default is inspect.Parameter.empty else f", default {default!r}"
        lines += [f"{name}{shown}", f"    {_help(algo, name)}"]
    lines += ["", "Examples", "--------",
              ">>> import omtl_mpi",
              f">>> m = omtl_mpi.{cls}(n_tasks=2, n_features=3{_example_rounds(spec)})",
              ">>> m.learn_one([1.0, 0.0, 0.5], 1, task=0)",
              ">>> m.predict_one([1.0, 0.0, 0.5], task=0) in (-1, 1)",
              "True"]
    return "\n".join(lines)


def _example_rounds(spec) -> str:
    """``, rounds=100`` for a learner whose defaults need the run's length (PMSC-Log's euclid
    w-step), else nothing."""
    params = spec.params()
    return ", rounds=100" if params.resolved(1) != params.resolved(4) else ""


def _make_class(algo: str, name: str) -> type:
    sig = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD if k in ("n_tasks", "n_features")
                          else inspect.Parameter.KEYWORD_ONLY, default=v)
        for k, v in parameters(algo).items()])
    spec = registry.get(algo)
    # the generic checks a learner's role class says do not apply to it (omtl_mpi.checks)
    skips = frozenset(getattr(spec.worker or spec.node, "CHECK_SKIPS", ()))
    cls = type(name, (Learner,), {"algo": algo, "__doc__": _docstring(algo), "__module__": __name__,
                                  "check_skips": skips})
    cls.__init__ = _init_with(sig)
    return cls


def _init_with(sig):
    def __init__(self, n_tasks, n_features, **params):
        Learner.__init__(self, n_tasks, n_features, **params)
    __init__.__signature__ = sig
    return __init__


for _algo, _name in CLASS_NAMES.items():
    globals()[_name] = _make_class(_algo, _name)
_CLASSES = {algo: globals()[name] for algo, name in CLASS_NAMES.items()}


def learner(algo: str, n_tasks: int, n_features: int, *, preset: str | None = None, **params) -> Learner:
    """A learner of ``omtl-mpi algos`` by name, with its parameters.

    Parameters
    ----------
    algo : str
        ``c-admm``, ``d-admm``, ... (``omtl-mpi algos``), or a learner registered with
        :func:`omtl_mpi.algorithms.registry.register`.
    n_tasks, n_features : int
    preset : {"paper"}, optional
        Start from named settings (``--preset``); parameters given still win.
    **params
        The learner's parameters (:func:`parameters`).

    Examples
    --------
    >>> import omtl_mpi
    >>> m = omtl_mpi.learner("c-admm", n_tasks=4, n_features=9, preset="paper", rounds=100)
    >>> m.w_step, m.intercept, m.relationship
    ('euclid', False, True)
    >>> omtl_mpi.learner("c-admm", 4, 9, rho=-1)
    Traceback (most recent call last):
    ...
    omtl_mpi.errors.UserError: rho must be > 0, got -1.0
    """
    registry.get(algo)                      # an unknown name: one line, with the known ones
    if preset is not None:
        params["preset"] = preset
    cls = _CLASSES.get(algo)
    if cls is None:
        cls = _CLASSES[algo] = _make_class(algo, "".join(p.title() for p in re.split(r"[^a-zA-Z0-9]", algo)))
    return cls(n_tasks, n_features, **params)


def load(path) -> Learner:
    """Read a learner written by :meth:`Learner.save` (parameters and state).

    Raises
    ------
    UserError
        One line, for a file that is not a learner's, or is damaged.

    Examples
    --------
    >>> import os, tempfile, omtl_mpi
    >>> m = omtl_mpi.AROW(n_tasks=2, n_features=3)
    >>> m.learn_one([1.0, 0.5, -1.0], -1, task=1)
    >>> path = os.path.join(tempfile.mkdtemp(), "arow.h5")
    >>> m.save(path)
    >>> again = omtl_mpi.load(path)
    >>> again, bool((again.W_ == m.W_).all()), again.n_rounds_
    (AROW(n_tasks=2, n_features=3), True, 1)
    """
    from .persist import load_learner
    built = {}

    def expected(algo, params, version):
        """The learner the file's parameters describe, built before any array is read: what
        each of the file's arrays must look like."""
        if version != VERSION:        # another release's layout: say so, not which array differs
            raise _other_version(version, f"{path}: a learner file")
        if algo not in registry.REGISTRY:
            raise UserError(f"{path}: a learner {algo!r}, which is not registered: import the "
                            "module that registers it first")
        lacking = [k for k in parameters(algo) if k not in params]
        if lacking:
            raise UserError(f"{path}: its parameters lack {', '.join(lacking)}; the file is "
                            "damaged: save the learner again")
        rest = dict(params)
        try:
            built["m"] = learner(algo, rest.pop("n_tasks"), rest.pop("n_features"), **rest)
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
        return built["m"].state_dict()["state"]
    state = load_learner(path, expected)
    try:
        return built["m"].load_state_dict(state)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
