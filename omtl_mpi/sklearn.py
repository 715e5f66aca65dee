"""scikit-learn's shape of every learner: :class:`MultiTaskClassifier`, an estimator that
``cross_val_score``, ``GridSearchCV``, ``Pipeline`` and scikit-learn's own estimator checks
take. Needs scikit-learn (``pip install 'omtl-mpi[sklearn]'``); ``import omtl_mpi`` does not
load this module.

Every row of X belongs to a task, a whole number from 0: ``tasks=`` (one per row) to every
method, or ``task_column=j`` (column j of X holds each row's task, so that scikit-learn's tools
that pass only X and y keep each row with its task), or neither (one task). ``fit(X, y)`` is a
fresh learner and one pass over the rows as its ``partial_fit`` (bit for bit; the tests check
it), so the order of the rows counts; ``partial_fit`` goes on. ``classes_[1]`` is the learner's
+1. docs/GUIDE.md, *With scikit-learn*, says more.
"""
from __future__ import annotations

import difflib
import inspect
import numbers

import numpy as np

from .errors import UserError


class MissingDependency(UserError, ImportError):
    """An optional package this module needs is not installed: a UserError (one line, as every
    bad input) that ``except ImportError`` and ``pytest.importorskip`` also catch."""


try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.metrics import accuracy_score
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import (check_array, check_consistent_length, check_is_fitted,
                                          column_or_1d, validate_data)
except ImportError:
    raise MissingDependency("omtl_mpi.sklearn needs scikit-learn: "
                            "pip install 'omtl-mpi[sklearn]'") from None

# the classifier's own parameters; every other parameter is the learner's
_OWN = ("algo", "task_column", "n_tasks", "class_weight")
# learner parameters the classifier does not take as they are: the features come from X, the
# tasks from task_column or tasks=, and class_weight is scikit-learn's, mapped to the learner's
_NOT_EXPOSED = ("n_tasks", "n_features", "task_key", "class_weight")
# what fit leaves; a fit starts by removing it, so that one that fails leaves nothing half-made
_FITTED = ("learner_", "classes_", "n_tasks_", "n_features_in_", "feature_names_in_")


def _learner_defaults(algo) -> dict:
    """The learner parameters of ``algo`` that the classifier takes, with their defaults; {}
    for a value that names no registered learner (fit says so: get_params and set_params
    never raise, as scikit-learn's conventions ask)."""
    from .algorithms import registry
    if not isinstance(algo, str) or algo not in registry.REGISTRY:
        return {}
    from .learners import parameters
    return {k: v for k, v in parameters(algo).items() if k not in _NOT_EXPOSED}


def _is_default(value, default) -> bool:
    """``value`` is the default itself (a plain value of the same type: a bool is not 1)."""
    plain = (str, bool, int, float, type(None))
    return isinstance(value, plain) and type(value) is type(default) and value == default


def _check_names(algo: str, names, known: dict) -> None:
    """One ValueError for the first of ``names`` that is no parameter of the classifier over
    learner ``algo`` (whose parameters are ``known``)."""
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            raise UserError(f"MultiTaskClassifier(algo={algo!r}) has no parameter {name!r}"
                            + (f" (did you mean {near[0]!r}?)" if near else "")
                            + f"; its parameters: {', '.join(_OWN + tuple(known))}")


def _task_ids(values, where: str, hint: str = "") -> np.ndarray:
    """Task ids (int64) of an array of whole numbers >= 0, or one ValueError naming ``where``."""
    a = np.asarray(values)
    if a.dtype.kind not in "iuf":
        raise UserError(f"{where} must hold task ids (whole numbers >= 0), got {a.dtype} values{hint}")
    with np.errstate(invalid="ignore"):
        # a number beyond int64 is no task either (its cast would wrap round)
        bad = ((~np.isfinite(a) | (a < 0) | (a != np.round(a)) | (a >= 2.0 ** 63))
               if a.dtype.kind == "f" else (a > np.iinfo(np.int64).max) if a.dtype.kind == "u"
               else a < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise UserError(f"{where} must hold task ids (whole numbers >= 0): row {i} holds "
                        f"{a[i].item()!r}{hint}")
    return a.astype(np.int64)


def _two_classes(classes: np.ndarray, where: str) -> np.ndarray:
    """``classes`` (sorted, unique) when there are two; else one ValueError."""
    if len(classes) != 2:
        got = f"one class ({classes.tolist()[0]!r})" if len(classes) == 1 else len(classes)
        raise UserError(f"MultiTaskClassifier is a binary classifier: {where} must hold two "
                        f"classes, got {got}")
    return classes


class MultiTaskClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier over any learner of ``omtl-mpi algos`` (see the module's
    docstring for the tasks and what fit learns).

    Parameters
    ----------
    algo : str, default "c-admm"
        The learner (``omtl-mpi algos``).
    task_column : int or str, optional
        The column of X that holds every row's task (negative: from the end; a name: of a
        DataFrame's columns); the other columns are the features. None: the tasks come from
        ``tasks=``, or every row is of one task.
    n_tasks : int, optional
        The number of tasks K; None: the largest task of the first fit + 1. Predicting a task
        beyond them is an error.
    class_weight : None, "balanced" or dict, optional
        scikit-learn's, for the learners that weigh classes (others: None only). A dict
        ``{label: weight}`` (classes left out weigh 1) must weigh ``classes_[0]``, the
        learner's -1, by 1; "balanced" is the learner's, from each task's classes seen so far.
    **params
        The learner's parameters (``omtl_mpi.parameters(algo)``) but for ``n_tasks``,
        ``n_features`` (from X), ``task_key`` and ``class_weight``; checked by the learner, at
        fit. ``get_params`` lists every one, with its default where not given (for
        ``GridSearchCV`` and ``clone``). ``rounds=None``: fit gives the learner the rounds of
        its pass (the most rows of one task); ``partial_fit`` cannot know them, so a learner
        that needs them (PMSC-Log's euclid w-step) needs ``rounds=`` or ``eta=`` there.
        A new ``algo`` keeps the parameters it shares that were changed from the defaults.

    Attributes
    ----------
    learner_ : omtl_mpi.Learner
        The fitted learner (K = ``n_tasks_``, d = the features).
    classes_ : ndarray, shape (2,)
        The two labels, sorted: ``classes_[1]`` is the learner's +1.
    n_tasks_ : int
        The tasks learned.
    n_features_in_ : int
        Columns of X, the task column included.
    feature_names_in_ : ndarray of str
        X's column names, where X was a DataFrame with string column names.

    Examples
    --------
    Column 0 holds the task: two tasks whose labels disagree on the second feature.

    >>> import numpy as np
    >>> from omtl_mpi.sklearn import MultiTaskClassifier
    >>> rng = np.random.default_rng(0)
    >>> task, x = rng.integers(0, 2, size=400), rng.normal(size=(400, 2))
    >>> y = np.where(x[:, 0] + np.where(task == 0, 1, -1) * x[:, 1] >= 0, "yes", "no")
    >>> clf = MultiTaskClassifier("c-admm", task_column=0).fit(np.column_stack([task, x]), y)
    >>> clf.classes_.tolist(), clf.n_tasks_, clf.n_features_in_
    (['no', 'yes'], 2, 3)
    >>> clf.predict([[0, 1.0, 2.0], [1, 1.0, 2.0]]).tolist()
    ['yes', 'no']
    >>> clf.predict([[2, 1.0, 2.0]])
    Traceback (most recent call last):
    ...
    omtl_mpi.errors.UserError: task 2 was not learned: this classifier has n_tasks_ = 2 (tasks 0..1; n_tasks=None took the number from the first fit: give n_tasks= for more)
    """

    def __init__(self, algo="c-admm", task_column=None, n_tasks=None, class_weight=None,
                 **params):
        self.algo = algo
        self.task_column = task_column
        self.n_tasks = n_tasks
        self.class_weight = class_weight
        # the learner parameters given (get_params adds the others' defaults); private, as
        # scikit-learn's checks require of anything set in __init__ that is not in its signature
        self._params = params

    # ----------------------------------------------------------------- parameters
    def get_params(self, deep: bool = True) -> dict:
        """The classifier's parameters and every parameter of its learner, given or default.

        Examples
        --------
        >>> from omtl_mpi.sklearn import MultiTaskClassifier
        >>> params = MultiTaskClassifier("pa", C=0.5).get_params()
        >>> params["algo"], params["C"], params["intercept"]
        ('pa', 0.5, True)
        """
        return {**{k: getattr(self, k) for k in _OWN}, **_learner_defaults(self.algo),
                **self._params}

    def set_params(self, **params) -> "MultiTaskClassifier":
        """Set parameters (the classifier's and the learner's); returns self.

        A name that is no parameter of the learner raises ValueError, changing nothing. A new
        ``algo`` keeps the learner parameters changed from the old learner's defaults that
        the new learner has too; the others take the new learner's defaults.

        Examples
        --------
        >>> from omtl_mpi.sklearn import MultiTaskClassifier
        >>> clf = MultiTaskClassifier("c-admm", rho=0.5, loss="hinge")
        >>> clf.set_params(algo="admm-single").get_params()["rho"]
        0.5
        >>> clf.set_params(algo="pa", C=0.1)
        MultiTaskClassifier(algo='pa', C=0.1)
        """
        own = {k: params.pop(k) for k in _OWN if k in params}
        algo = own.get("algo", self.algo)
        known = _learner_defaults(algo)
        if known:
            _check_names(algo, params, known)
        kept = self._params
        if "algo" in own and not (isinstance(algo, str) and algo == self.algo):
            old = _learner_defaults(self.algo)
            # values of a name we cannot judge (an unknown learner, old or new) stay
            kept = {k: v for k, v in kept.items()
                    if not old or not known or (k in known and not _is_default(v, old.get(k)))}
        for k, v in own.items():
            setattr(self, k, v)
        self._params = {**kept, **params}
        return self

    def __repr__(self) -> str:
        # scikit-learn's repr counts every parameter of **params as changed: only those that
        # differ from their defaults, here
        own = inspect.signature(type(self).__init__).parameters
        defaults = {**{k: own[k].default for k in _OWN}, **_learner_defaults(self.algo)}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if k not in defaults or repr(v) != repr(defaults[k])]
        return f"{type(self).__name__}({', '.join(shown)})"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False      # the learners tell two classes apart
        tags.input_tags.sparse = True                 # rows of a scipy.sparse matrix, as such
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return "learner_" in self.__dict__

    # ----------------------------------------------------------------- inputs
    def _split(self, X, tasks, fitted: bool):
        """Validated rows X as (the features, every row's task, int64), from task_column or
        ``tasks`` (or one task), checked against the tasks learned when ``fitted``."""
        if hasattr(X, "tocsr"):            # before scipy slices it: its indices checked
            from .data.sparse import checked_csr
            X = checked_csr(X)
        n, cols = X.shape
        j = self.task_column
        if j is not None:
            if tasks is not None:
                raise UserError(f"tasks= given, but this classifier reads the tasks from column "
                                f"{j!r} of X (task_column): give them once")
            if isinstance(j, str):
                names = list(getattr(self, "feature_names_in_", ()))
                if j not in names:
                    raise UserError(f"task_column={j!r} names no column of X " + (
                        f"(its columns: {', '.join(map(str, names))})" if names else
                        "(X has no column names: give the column's index)"))
                j = names.index(j)
            if isinstance(j, bool) or not isinstance(j, numbers.Integral) or not -cols <= j < cols:
                raise UserError(f"task_column must be None or a column of X (0..{cols - 1}, or "
                                f"negative from the end), got {j!r}")
            if cols < 2:
                raise UserError(f"task_column={j} leaves X without features: X needs a column "
                                "of tasks and at least one of features")
            j = int(j) % cols
            column = X[:, [j]].toarray().ravel() if hasattr(X, "tocsr") else X[:, j]
            t = _task_ids(column, f"column {j} of X (task_column)",
                          "; keep the task column out of any scaling (a ColumnTransformer "
                          "with 'passthrough' for it)")
            X = X[:, np.arange(cols) != j]
        elif tasks is not None:
            t = _task_ids(column_or_1d(tasks, input_name="tasks"), "tasks")
            check_consistent_length(X, t)
        elif fitted and self.n_tasks_ > 1:
            raise UserError(f"which tasks? this classifier learned {self.n_tasks_}: give tasks= "
                            "(one per row of X)")
        else:
            t = np.zeros(n, dtype=np.int64)
        if fitted and len(t) and t.max() >= self.n_tasks_:
            K = self.n_tasks_
            raise UserError(f"task {int(t.max())} was not learned: this classifier has n_tasks_ "
                            f"= {K} (tasks 0..{K - 1}" + ("; n_tasks=None took the number from "
                            "the first fit: give n_tasks= for more)" if self.n_tasks is None
                            else ")"))
        return X, t

    def _learning(self, X, y, tasks, sample_weight, fitted: bool):
        """Checked inputs of fit and partial_fit: (features, labels, tasks), every row
        repeated as many times as its sample weight says."""
        with np.errstate(over="ignore", invalid="ignore"):     # scikit-learn refuses the inf
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=not fitted)
        check_classification_targets(y)
        X, t = self._split(X, tasks, fitted)
        if sample_weight is not None:
            w = column_or_1d(check_array(sample_weight, ensure_2d=False, dtype=np.float64,
                                         input_name="sample_weight"), input_name="sample_weight")
            check_consistent_length(y, w)
            if (w < 0).any() or (w != np.round(w)).any():
                bad = w[(w < 0) | (w != np.round(w))][0]
                raise UserError("sample_weight must hold whole numbers >= 0 (the learners have no "
                                "weights of their own: an instance of weight k is learned k "
                                f"times), got {bad:g}")
            if not w.any():
                raise UserError("sample_weight is zero for every instance: nothing to learn")
            from .data.importers.common import require_memory
            n_rows = float(w.sum())
            require_memory(n_rows * (X.shape[1] + 3) * 8.0 * 2, f"sample_weight's {n_rows:.0f} "
                           "rows (each row learned as many times as its weight)",
                           "give smaller weights")
            # np.repeat's order: each row where it was, as many times as its weight
            rows = np.repeat(np.arange(len(w)), w.astype(np.int64))
            X, y, t = X[rows], y[rows], t[rows]
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise UserError(f"Only binary classification is supported. The type of the target "
                            f"is {kind}: MultiTaskClassifier tells two classes apart")
        return X, y, t

    def _signs(self, y, classes) -> np.ndarray:
        """Labels as the learner takes them: +1 for ``classes[1]``, -1 for ``classes[0]``."""
        positive, negative = y == classes[1], y == classes[0]
        if not (positive | negative).all():
            bad = y[~(positive | negative)].tolist()[0]
            raise UserError(f"y holds {bad!r}, which is not one of the classes "
                            f"{classes.tolist()!r} (classes_)")
        return np.where(positive, 1.0, -1.0)

    def _n_tasks(self, t) -> int:
        """K of a new learner: n_tasks, or the largest task of ``t`` + 1."""
        K = self.n_tasks
        if K is None:
            return int(t.max()) + 1 if len(t) else 1
        if isinstance(K, bool) or not isinstance(K, numbers.Integral) or K < 1:
            raise UserError(f"n_tasks must be None or an integer >= 1, got {K!r}")
        if len(t) and t.max() >= K:
            raise UserError(f"task {int(t.max())} is beyond n_tasks={K} (tasks 0..{K - 1})")
        return int(K)

    def _learner_kwargs(self, classes) -> dict:
        """The learner's parameters: those given, and class_weight as the learner takes it."""
        from .algorithms import registry
        from .learners import parameters
        known = _learner_defaults(self.algo)
        if not known:
            if not isinstance(self.algo, str):
                raise UserError(f"algo must be the name of a learner (omtl-mpi algos), got "
                                f"{self.algo!r}")
            registry.get(self.algo)               # an unknown name: one line with the known ones
        _check_names(self.algo, self._params, known)
        kwargs = dict(self._params)
        cw = self.class_weight
        if cw is None:
            return kwargs
        if "class_weight" not in parameters(self.algo):
            having = [a for a in sorted(registry.REGISTRY) if "class_weight" in parameters(a)]
            raise UserError(f"class_weight={cw!r}: the {self.algo} learner weighs no class (those "
                            f"that do: {', '.join(having)}); give class_weight=None")
        if isinstance(cw, str) and cw == "balanced":
            kwargs["class_weight"] = "balanced"
            return kwargs
        if not isinstance(cw, dict):
            raise UserError(f"class_weight must be None, 'balanced' or a dict {{class: weight}}, "
                            f"got {cw!r}")
        labels = classes.tolist()
        for key, value in cw.items():
            if key not in labels:
                raise UserError(f"class_weight names {key!r}, which is not a class of y "
                                f"({labels!r})")
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not np.isfinite(value) or value <= 0:
                raise UserError(f"class_weight[{key!r}] must be a number > 0, got {value!r}")
        low, high = (float(cw.get(c, 1.0)) for c in classes)
        if low != 1.0:
            raise UserError(f"class_weight weighs class {labels[0]!r} (classes_[0], the learner's "
                            f"-1) by {low:g}, but the {self.algo} learner weighs -1 by 1 and +1 "
                            f"by a number: give {{{labels[1]!r}: {high / low:g}}} (the same ratio)")
        # weight 1 is no weighting, exactly: the learner's "none" (a number turns off its
        # empirical-Bayes expert)
        kwargs["class_weight"] = "none" if high == 1.0 else repr(high)
        return kwargs

    def _predicting(self, X, tasks):
        """Checked inputs of the predicting methods: (features, every row's task)."""
        check_is_fitted(self)
        with np.errstate(over="ignore", invalid="ignore"):     # scikit-learn refuses the inf
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return self._split(X, tasks, fitted=True)

    # ----------------------------------------------------------------- learning
    def fit(self, X, y, tasks=None, sample_weight=None) -> "MultiTaskClassifier":
        """A fresh learner, and one pass over the rows as its ``partial_fit``; returns self.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix, shape (n, d)
            The features (and, with ``task_column``, the tasks' column).
        y : array_like, shape (n,)
            Two labels, any.
        tasks : array_like of int, shape (n,), optional
            Every row's task (without ``task_column``); None: one task.
        sample_weight : array_like, shape (n,), optional
            Whole numbers >= 0: a row of weight k is learned k times, where it stands (as
            ``np.repeat``; the learners have no per-instance weights).
        """
        return self._fit_new(X, y, tasks, sample_weight, None)

    def _fit_new(self, X, y, tasks, sample_weight, classes) -> "MultiTaskClassifier":
        """A fresh learner over these rows (fit's, or partial_fit's first call with
        ``classes``); a call that fails leaves nothing half made (the input checks set
        n_features_in_ on the way)."""
        for name in _FITTED:
            self.__dict__.pop(name, None)
        try:
            X, y, t = self._learning(X, y, tasks, sample_weight, fitted=False)
            one_pass = classes is None          # fit's: the rounds of its pass are known
            if one_pass:
                classes = _two_classes(np.unique(y), "y")
            signs = self._signs(y, classes)
            n_tasks = None if one_pass else self._n_tasks(t)    # partial_fit checks it first
            kwargs = self._learner_kwargs(classes)
            if one_pass and kwargs.get("rounds") is None:
                # the rounds of this one pass (counted without an array of every task id)
                kwargs["rounds"] = int(np.unique(t, return_counts=True)[1].max())
            from .learners import learner
            m = learner(self.algo, n_tasks or self._n_tasks(t), X.shape[1], **kwargs)
            m.partial_fit(X, signs, tasks=t)
        except BaseException:
            for name in _FITTED:
                self.__dict__.pop(name, None)
            raise
        self.learner_, self.classes_, self.n_tasks_ = m, classes, m.n_tasks
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None,
                    tasks=None) -> "MultiTaskClassifier":
        """Learn more rows (the first call: a fresh learner, as fit); returns self.

        Parameters
        ----------
        X, y, tasks, sample_weight
            As :meth:`fit`.
        classes : array_like, shape (2,), optional
            The two labels; needed on the first call (y may hold only one of them), and when
            given later, the same.

        Examples
        --------
        >>> import numpy as np
        >>> from omtl_mpi.sklearn import MultiTaskClassifier
        >>> clf = MultiTaskClassifier("arow", n_tasks=3)
        >>> clf.partial_fit([[1.0, 0.0], [0.0, 1.0]], [1, 0], classes=[0, 1], tasks=[0, 2])
        MultiTaskClassifier(algo='arow', n_tasks=3)
        >>> clf.partial_fit([[1.0, 1.0]], [1], tasks=[1]).learner_.n_seen_.tolist()
        [1, 1, 1]
        """
        fitted = self.__sklearn_is_fitted__()
        if not fitted:
            for name in _FITTED:
                self.__dict__.pop(name, None)
            if classes is None:
                raise UserError("classes must be passed on the first call to partial_fit: the "
                                "two labels (this call's y may hold only one)")
        if classes is not None:
            given = np.unique(column_or_1d(classes, input_name="classes"))
            if fitted and not np.array_equal(given, self.classes_):
                raise UserError(f"classes={given.tolist()!r} is not the same as on the first call "
                                f"to partial_fit ({self.classes_.tolist()!r})")
            classes = _two_classes(given, "classes")
        if not fitted:
            return self._fit_new(X, y, tasks, sample_weight, classes)
        X, y, t = self._learning(X, y, tasks, sample_weight, fitted)
        # a call that fails changes nothing (undone)
        self.learner_.partial_fit(X, self._signs(y, self.classes_), tasks=t)
        return self

    # ----------------------------------------------------------------- predicting
    def decision_function(self, X, tasks=None) -> np.ndarray:
        """The learner's decision values (n,): positive for ``classes_[1]``; nothing changes."""
        X, t = self._predicting(X, tasks)
        return self.learner_.decision_function(X, tasks=t)

    def predict(self, X, tasks=None) -> np.ndarray:
        """The predicted labels (n,), of ``classes_``; nothing changes."""
        X, t = self._predicting(X, tasks)
        return self.classes_[(self.learner_.predict(X, tasks=t) > 0).astype(np.intp)]

    def predict_proba(self, X, tasks=None) -> np.ndarray:
        """Scores (n, 2) of ``classes_[0]`` and ``classes_[1]``, the learner's
        ``predict_proba_one``: the logistic of the decision value, monotone in it (for ranking
        metrics such as ROC AUC), not a calibrated probability; nothing changes."""
        X, t = self._predicting(X, tasks)
        return self.learner_.predict_proba(X, tasks=t)

    def score(self, X, y, sample_weight=None, tasks=None) -> float:
        """The accuracy of :meth:`predict` on X (its tasks as predict reads them) against y."""
        return accuracy_score(y, self.predict(X, tasks=tasks), sample_weight=sample_weight)
