"""omtl_mpi.sklearn: scikit-learn's own estimator checks over MultiTaskClassifier for every
learner, each check it cannot meet declared with why; the classifier is the learner (the same
predictions, bit for bit, tasks from a column or a keyword), and scikit-learn's tools take it."""
import doctest
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import _env
from test_api import _python_block
import omtl_mpi
import omtl_mpi.sklearn
from omtl_mpi.algorithms import REGISTRY
from omtl_mpi.checks import _needed
from omtl_mpi.data import generate
from omtl_mpi.sklearn import MultiTaskClassifier

ALL = sorted(REGISTRY)
WEIGHING = [a for a in ALL if "class_weight" in omtl_mpi.parameters(a)]
# on the equivalence check's 15 rows their decision is the experts' vote, +-1 in any order
ORDER_FREE_THERE = ("c-admm", "d-admm")


def _expected_failures(clf) -> dict:
    """The estimator checks MultiTaskClassifier over ``clf.algo`` cannot meet, with why."""
    algo = clf.algo
    out = {"check_class_weight_classifiers":
           "the learner's class_weight weighs -1 (classes_[0]) by 1 and +1 by a number: the "
           "check's {0: 1000, 1: 0.0001} is refused, not rescaled into another model"
           if algo in WEIGHING else
           f"{algo} weighs no class: its class_weight is None only"}
    if algo not in ORDER_FREE_THERE:
        why = ("an online learner learns its rows in order, and the check shuffles the weighted "
               "rows but not the repeated ones (test_sample_weight_is_repetition checks the "
               "equivalence in one order)")
        out["check_sample_weight_equivalence_on_dense_data"] = why
        out["check_sample_weight_equivalence_on_sparse_data"] = why
    return out


def _as_built(algo) -> MultiTaskClassifier:
    """The classifier over ``algo`` with its defaults, and rounds= where the learner needs the
    run's length (PMSC-Log's euclid w-step): fit gives it its pass's, partial_fit cannot."""
    try:
        omtl_mpi.learner(algo, 1, 1)
    except omtl_mpi.UserError:
        return MultiTaskClassifier(algo, rounds=40)
    return MultiTaskClassifier(algo)


# strict: a declared failure that passes fails, so that the list stays what fails
@parametrize_with_checks([_as_built(a) for a in ALL],
                         expected_failed_checks=_expected_failures, xfail_strict=True)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ the classifier is the learner
def _rows(tasks=4, samples=60, seed=0):
    """Rows of several tasks of the paper's synthetic family: (X (n, 9), labels -1/+1, tasks),
    the tasks' rows interleaved at random, each task's in its order."""
    names, Xs, ys = generate(tasks=tasks, samples=samples, seed=seed)
    X, y = np.vstack(Xs), np.concatenate(ys).astype(np.int64)
    t = np.repeat(np.arange(tasks), samples)
    mix = np.random.default_rng(seed).permutation(len(t))
    for k in range(tasks):
        mine = np.flatnonzero(t[mix] == k)
        mix[mine] = np.sort(mix[mine])
    return X[mix], y[mix], t[mix]


@pytest.mark.parametrize("algo", ALL)
def test_fit_is_the_learners_partial_fit_bit_for_bit(algo):
    X, y, t = _rows()
    m = omtl_mpi.learner(algo, 4, 9, **_needed(algo)).partial_fit(X, y, tasks=t)
    by_keyword = MultiTaskClassifier(algo, **_needed(algo)).fit(X, y, tasks=t)
    by_column = MultiTaskClassifier(algo, task_column=2, **_needed(algo)).fit(
        np.insert(X, 2, t, axis=1), y)
    want = m.decision_function(X, tasks=t)
    assert np.array_equal(by_keyword.decision_function(X, tasks=t), want)
    assert np.array_equal(by_column.decision_function(np.insert(X, 2, t, axis=1)), want)
    assert np.array_equal(by_column.predict(np.insert(X, 2, t, axis=1)), m.predict(X, tasks=t))
    assert np.array_equal(by_keyword.learner_.W_, m.W_)
    proba = by_keyword.predict_proba(X[:5], tasks=t[:5])
    assert np.array_equal(proba, m.predict_proba(X[:5], tasks=t[:5]))
    # one instance at a time: the same up to the decision's rounding (a sum over one row or
    # over a batch of rows)
    assert np.allclose(proba, [[m.predict_proba_one(x, task=k)[-1], m.predict_proba_one(x, task=k)[1]]
                               for x, k in zip(X[:5], t[:5])], rtol=1e-12, atol=0)


def test_partial_fit_goes_on_as_the_learners_and_sparse_rows_too():
    X, y, t = _rows()
    m = omtl_mpi.learner("c-admm", 4, 9)
    clf = MultiTaskClassifier("c-admm")
    for part in np.array_split(np.arange(len(y)), 3):
        m.partial_fit(X[part], y[part], tasks=t[part])
        clf.partial_fit(X[part], y[part], classes=[-1, 1], tasks=t[part])
    assert np.array_equal(clf.decision_function(X, tasks=t), m.decision_function(X, tasks=t))
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    m = omtl_mpi.learner("arow", 4, 9).partial_fit(Xs, y, tasks=t)
    clf = MultiTaskClassifier("arow", task_column=0).fit(sp.hstack([t[:, None], Xs]).tocsr(), y)
    assert np.array_equal(clf.decision_function(sp.hstack([t[:, None], Xs]).tocsr()),
                          m.decision_function(Xs, tasks=t))


def test_rounds_are_those_of_the_pass_where_the_learner_needs_them():
    X, y, t = _rows()
    clf = MultiTaskClassifier("pmsc-log").fit(X, y, tasks=t)
    m = omtl_mpi.learner("pmsc-log", 4, 9, rounds=60).partial_fit(X, y, tasks=t)
    assert clf.learner_.rounds == 60
    assert np.array_equal(clf.decision_function(X, tasks=t), m.decision_function(X, tasks=t))
    with pytest.raises(ValueError, match="give eta= or rounds="):
        MultiTaskClassifier("pmsc-log").partial_fit(X, y, classes=[-1, 1], tasks=t)


def test_tasks_one_way_and_within_those_learned():
    X, y, t = _rows()
    clf = MultiTaskClassifier("pa").fit(X, y, tasks=t)
    assert clf.n_tasks_ == 4 and clf.learner_.n_tasks == 4
    with pytest.raises(ValueError, match=r"task 4 was not learned: .*n_tasks_ = 4 .*give n_tasks="):
        clf.predict(X[:1], tasks=[4])
    with pytest.raises(ValueError, match="which tasks"):
        clf.predict(X)
    assert MultiTaskClassifier("pa", n_tasks=6).fit(X, y, tasks=t).learner_.n_tasks == 6
    with pytest.raises(ValueError, match="task 3 is beyond n_tasks=2"):
        MultiTaskClassifier("pa", n_tasks=2).fit(X, y, tasks=t)
    with pytest.raises(ValueError, match="give them once"):
        MultiTaskClassifier("pa", task_column=0).fit(np.column_stack([t, X]), y, tasks=t)
    with pytest.raises(ValueError, match=r"row 0 holds 0\.5"):
        MultiTaskClassifier("pa").fit(X, y, tasks=np.full(len(y), 0.5))
    with pytest.raises(ValueError, match="task_column must be None or a column of X"):
        MultiTaskClassifier("pa", task_column=10).fit(X, y)
    one = MultiTaskClassifier("pa").fit(X, y)                  # neither: one task
    assert one.n_tasks_ == 1 and one.predict(X).shape == y.shape


def test_task_column_by_name_in_a_dataframe():
    pd = pytest.importorskip("pandas")
    X, y, t = _rows()
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(9)]).assign(user=t)
    by_name = MultiTaskClassifier(task_column="user").fit(df, y)
    by_index = MultiTaskClassifier(task_column=-1).fit(df.to_numpy(), y)
    assert np.array_equal(by_name.decision_function(df), by_index.decision_function(df.to_numpy()))
    with pytest.raises(ValueError, match=r"task_column='usr' names no column of X \(its columns: x0"):
        MultiTaskClassifier(task_column="usr").fit(df, y)


def test_a_scaled_task_column_is_one_clear_error():
    X, y, t = _rows()
    scaled_too = make_pipeline(StandardScaler(), MultiTaskClassifier(task_column=0))
    with pytest.raises(ValueError, match="keep the task column out of any scaling"):
        scaled_too.fit(np.column_stack([t, X]), y)


# ------------------------------------------------------------------ scikit-learn's tools
def test_cross_val_score_grid_search_and_pipelines():
    X, y, t = _rows()
    Xt = np.column_stack([t, X])
    folds = KFold(4, shuffle=True, random_state=0)
    clf = MultiTaskClassifier("c-admm", task_column=0)
    scores = cross_val_score(clf, Xt, y, cv=folds)
    assert scores.shape == (4,) and scores.mean() > 0.8
    search = GridSearchCV(clf, {"rho": [0.01, 0.1, 1.0]}, cv=folds).fit(Xt, y)
    assert search.best_estimator_.learner_.rho == search.best_params_["rho"]
    assert [p["rho"] for p in search.cv_results_["params"]] == [0.01, 0.1, 1.0]
    # a grid over learners: each candidate takes its own learner's defaults
    search = GridSearchCV(clf, [{"algo": ["c-admm"], "rho": [0.5]}, {"algo": ["pa"], "C": [0.5]}],
                          cv=folds).fit(Xt, y)
    assert not np.isnan(search.cv_results_["mean_test_score"]).any()
    # the scaler passes the task column through (last), or the tasks go to fit and predict
    through = make_pipeline(ColumnTransformer([("x", StandardScaler(), slice(1, None))],
                                              remainder="passthrough"),
                            MultiTaskClassifier(task_column=-1)).fit(Xt, y)
    routed = make_pipeline(StandardScaler(), MultiTaskClassifier()).fit(
        X, y, multitaskclassifier__tasks=t)
    scaled = StandardScaler().fit_transform(X)
    alone = MultiTaskClassifier().fit(scaled, y, tasks=t)
    assert np.array_equal(routed.predict(X, tasks=t), alone.predict(scaled, tasks=t))
    assert np.array_equal(through.predict(Xt), routed.predict(X, tasks=t))


def test_clone_and_parameters():
    X, y, t = _rows()
    clf = MultiTaskClassifier("pa", task_column=0, C=0.5)
    twin = clone(clf.fit(np.column_stack([t, X]), y))
    assert twin.get_params() == clf.get_params() and not hasattr(twin, "learner_")
    assert repr(twin) == "MultiTaskClassifier(algo='pa', task_column=0, C=0.5)"
    params = MultiTaskClassifier().get_params()
    assert params["rho"] == omtl_mpi.parameters("c-admm")["rho"] and "task_key" not in params
    assert MultiTaskClassifier().set_params(rho=0.3).fit(*_rows()[:2]).learner_.rho == 0.3
    with pytest.raises(ValueError, match=r"has no parameter 'rhoo' \(did you mean 'rho'\?\)"):
        MultiTaskClassifier().set_params(rhoo=1)
    with pytest.raises(ValueError, match="has no parameter 'task_key'"):
        MultiTaskClassifier(task_key="user").fit(*_rows()[:2])
    with pytest.raises(omtl_mpi.UserError, match=r"^rho must be > 0, got -1\.0$"):
        MultiTaskClassifier(rho=-1).fit(*_rows()[:2])
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        MultiTaskClassifier("nope").fit(*_rows()[:2])
    # another learner: the parameters changed that it has too stay, the others are its defaults
    moved = MultiTaskClassifier("c-admm", rho=0.5, experts=True).set_params(algo="pmsc-log")
    assert moved.get_params()["rho"] == 0.5
    assert moved.get_params()["lambda1"] == omtl_mpi.parameters("pmsc-log")["lambda1"]


# ------------------------------------------------------------------ labels and weights
@pytest.mark.parametrize("labels", [("ham", "spam"), (0, 1), (False, True), (-1, 1), (2.0, 7.0)])
def test_any_two_labels(labels):
    X, y, t = _rows()
    mapped = np.where(y > 0, labels[1], labels[0]) if not isinstance(labels[0], str) \
        else np.array(labels)[(y > 0).astype(int)]
    clf = MultiTaskClassifier("arow").fit(X, mapped, tasks=t)
    signs = MultiTaskClassifier("arow").fit(X, y, tasks=t)
    assert clf.classes_.tolist() == list(labels)
    assert np.array_equal(clf.predict(X, tasks=t),
                          np.array(labels)[(signs.predict(X, tasks=t) > 0).astype(int)])
    assert clf.score(X, mapped, tasks=t) == signs.score(X, y, tasks=t)


def test_two_classes_and_no_other():
    X, y, t = _rows()
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        MultiTaskClassifier().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match=r"must hold two classes, got one class \(1\.0\)"):
        MultiTaskClassifier().fit(X, np.ones(len(y)))
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        MultiTaskClassifier().partial_fit(X, y)
    clf = MultiTaskClassifier().partial_fit(X[:3], [1, 1, 1], classes=[-1, 1])
    with pytest.raises(ValueError, match="is not the same as on the first call"):
        clf.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="y holds 2, which is not one of the classes"):
        clf.partial_fit(X[:2], [1, 2])


def test_class_weight_as_scikit_learn_takes_it():
    X, y, t = _rows()
    labels = np.where(y > 0, "pos", "neg")
    clf = MultiTaskClassifier("c-admm", class_weight={"pos": 3}).fit(X, labels, tasks=t)
    m = omtl_mpi.learner("c-admm", 4, 9, class_weight="3.0").partial_fit(X, y, tasks=t)
    assert clf.learner_.class_weight == "3.0"
    assert np.array_equal(clf.decision_function(X, tasks=t), m.decision_function(X, tasks=t))
    same = MultiTaskClassifier("c-admm", class_weight={"neg": 1, "pos": 1}).fit(X, labels, tasks=t)
    assert same.learner_.class_weight == "none"
    balanced = MultiTaskClassifier("c-admm", class_weight="balanced").fit(X, labels, tasks=t)
    assert balanced.learner_.class_weight == "balanced"
    with pytest.raises(ValueError, match=r"weighs class 'neg' .* by 2.*give \{'pos': 3\}"):
        MultiTaskClassifier(class_weight={"neg": 2, "pos": 6}).fit(X, labels)
    with pytest.raises(ValueError, match="class_weight names 'maybe', which is not a class"):
        MultiTaskClassifier(class_weight={"maybe": 2}).fit(X, labels)
    with pytest.raises(ValueError, match="the pa learner weighs no class"):
        MultiTaskClassifier("pa", class_weight="balanced").fit(X, labels)


@pytest.mark.parametrize("algo", ["c-admm", "pa"])
def test_sample_weight_is_repetition(algo):
    X, y, t = _rows()
    w = np.random.default_rng(0).integers(0, 4, size=len(y))
    weighted = MultiTaskClassifier(algo).fit(X, y, tasks=t, sample_weight=w)
    repeated = MultiTaskClassifier(algo).fit(np.repeat(X, w, axis=0), np.repeat(y, w),
                                             tasks=np.repeat(t, w))
    assert np.array_equal(weighted.decision_function(X, tasks=t),
                          repeated.decision_function(X, tasks=t))
    with pytest.raises(ValueError, match=r"whole numbers >= 0 .* got 0\.5"):
        MultiTaskClassifier(algo).fit(X, y, tasks=t, sample_weight=np.full(len(y), 0.5))
    with pytest.raises(ValueError, match=r"whole numbers >= 0 .* got -1"):
        MultiTaskClassifier(algo).fit(X, y, tasks=t, sample_weight=-np.ones(len(y)))


# ------------------------------------------------------------------ the docs run
def test_guide_example_runs():
    exec(compile(_python_block("docs/GUIDE.md", "### With scikit-learn"), "GUIDE.md", "exec"), {})


def test_docstring_examples_run():
    result = doctest.testmod(omtl_mpi.sklearn, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_without_scikit_learn_one_line():
    code = ("import sys; sys.modules['sklearn'] = None\n"       # as if it were not installed
            "try:\n    import omtl_mpi.sklearn\n"
            "except ImportError as exc:\n"
            "    import omtl_mpi; print(isinstance(exc, omtl_mpi.UserError), exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=_env())
    assert out.stdout == ("True omtl_mpi.sklearn needs scikit-learn: pip install "
                          "'omtl-mpi[sklearn]'\n"), out.stderr


def test_a_fitted_classifier_pickles_and_goes_on_as_the_original():
    """A fitted C-ADMM classifier, pickled (as joblib's process pools do) or deep-copied,
    continues partial_fit bit for bit: its learner's copies keep sharing across tasks."""
    import copy
    import pickle
    from omtl_mpi.data import generate
    names, Xs, ys = generate(tasks=4, samples=120, seed=2)
    X = np.vstack([np.column_stack([np.full(len(x), k), x]) for k, x in enumerate(Xs)])
    y = np.concatenate(ys)
    clf = MultiTaskClassifier("c-admm", task_column=0).fit(X[::2], y[::2])
    for twin in (pickle.loads(pickle.dumps(clf)), copy.deepcopy(clf)):
        twin.partial_fit(X[1::2], y[1::2])
    clf.partial_fit(X[1::2], y[1::2])
    assert np.array_equal(twin.decision_function(X), clf.decision_function(X))
    assert np.array_equal(twin.learner_.W_, clf.learner_.W_)


def test_a_fit_that_fails_leaves_nothing_half_made():
    from sklearn.exceptions import NotFittedError
    X, y, t = _rows()
    # a parameter refused, and a step that overflows (features of 1e200: their squares are
    # beyond float64 whatever the label, in every numpy)
    for bad in (MultiTaskClassifier("c-admm", rho=-1.0), MultiTaskClassifier("c-admm")):
        with pytest.raises(ValueError):
            bad.fit(np.vstack([X, [[1e200] * X.shape[1]]]), np.append(y, y[0]),
                    tasks=np.append(t, 0))
        assert not hasattr(bad, "n_features_in_") and not hasattr(bad, "learner_")
        with pytest.raises(NotFittedError):
            bad.predict(X, tasks=t)


def test_what_the_second_hunt_found_in_the_classifier_is_one_error():
    """A sparse X whose indices pass its shape crashed the process once scipy sliced out the
    task column; huge weights and task ids ran out of memory; a longdouble warned."""
    import warnings
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 3, 60), rng.normal(size=(60, 4))])
    y = np.where(X[:, 1] > 0, "a", "b")
    bad = sp.csr_matrix(X)
    bad.indices = bad.indices.copy()
    bad.indices[0] = 5
    with pytest.raises(ValueError, match="indices do not fit"):
        MultiTaskClassifier("arow", task_column=0).fit(bad, y)
    fitted = MultiTaskClassifier("c-admm", task_column=0).fit(X, y)
    with pytest.raises(ValueError, match="indices do not fit"):
        fitted.decision_function(bad)
    with pytest.raises(ValueError, match="would need .* of memory"):
        MultiTaskClassifier("pa").fit(X[:, 1:], y, sample_weight=[1e12] + [1] * 59)
    for task in (2 ** 40, 2 ** 62):
        huge = X.copy()
        huge[0, 0] = task
        with pytest.raises(ValueError, match="need about"):
            MultiTaskClassifier("pa", task_column=0).fit(huge, y)
    with pytest.raises(ValueError, match="task ids"):
        MultiTaskClassifier("pa").fit(X[:, 1:], y, tasks=np.array([2 ** 63] + [0] * 59, dtype=np.uint64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="infinity"):
            MultiTaskClassifier("pa").fit(np.array([[np.longdouble("1e4000"), 1], [1, 2]]), [0, 1])
