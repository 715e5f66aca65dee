"""The learners as river classifiers, checked by river's own suite (river.checks), and the
habits of river's users: copies that continue, progressive validation, pipelines, bagging."""
import copy
import gc
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.algorithms.registry import REGISTRY
from omtl_mpi.checks import _needed, _same_state

river = pytest.importorskip("river")
from river import checks, datasets, evaluate, metrics  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGOS = sorted(REGISTRY)


def _river_learner(algo):
    return omtl_mpi.learner(algo, 3, 16, task_key="task", **_needed(algo))


def _cases():
    """(algo, check) of every learner and every check river's check_estimator runs on it."""
    out, ids = [], []
    for algo in ALGOS:
        m = _river_learner(algo)
        seen = {}
        for check in checks.yield_checks(m):
            if check.__name__ in m._unit_test_skips():
                continue
            n = seen[check.__name__] = seen.get(check.__name__, 0) + 1
            out.append((algo, check))
            ids.append(f"{algo}-{check.__name__}-{n}")
    return out, ids


CASES, CASE_IDS = _cases()


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """river's check_bounded_memory_growth collects the garbage twice a check (gc.collect), and
    a full collection walks every object of this process (the packages, pytest's and the other
    tests'): a quarter of a second each here. What the process holds before these tests is moved
    out of the collector's reach (gc.freeze), so that a collection walks only what the checks
    make; what they measure (the learner's own size) is the same."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


# river's data sets have no task key: every instance is of the default task, said once a learner
@pytest.mark.filterwarnings("ignore:x has no 'task'")
@pytest.mark.parametrize("algo, check", CASES, ids=CASE_IDS)
def test_every_learner_passes_rivers_check_estimator(algo, check):
    """river.checks.check_estimator, check by check (it runs each on a clone, as here)."""
    check(_river_learner(algo).clone())


def test_a_learner_is_a_river_classifier_in_a_fresh_process():
    code = ("import omtl_mpi, river.base; "
            "print(isinstance(omtl_mpi.CADMM(3, 4), river.base.Classifier), "
            "issubclass(omtl_mpi.learners.Learner, river.base.Classifier))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr


@pytest.mark.parametrize("algo", ALGOS)
def test_copies_and_pickles_learn_as_the_learner(algo):
    """The issue's snippet: the same online error from a learner, its deep copy and its pickle
    round trip (before: 0.1395 against 0.5055 for C-ADMM, whose copies stopped sharing), for
    copies of a fresh learner and of one half-way through the streams."""
    from omtl_mpi.data import generate
    names, X, y = generate(tasks=6, samples=40, seed=0)
    K, d, T = 6, 9, 40
    make = lambda: omtl_mpi.learner(algo, K, d, **_needed(algo))          # noqa: E731

    def error(m, rounds):
        wrong = 0
        for t in rounds:
            for k in range(K):
                wrong += m.predict_one(X[k][t], task=k) != y[k][t]
                m.learn_one(X[k][t], y[k][t], task=k)
        return wrong, m.state_dict()["state"]
    first, state = error(make(), range(T))
    for copy_of in (copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m)), copy.copy):
        wrong, s = error(copy_of(make()), range(T))
        assert wrong == first and _same_state(state, s) is None
        m = make()
        early, _ = error(m, range(T // 2))
        late, s = error(copy_of(m), range(T // 2, T))
        assert early + late == first and _same_state(state, s) is None


def test_rivers_default_rocauc_agrees_with_the_exact_auc():
    """On Phishing, a task per value of ip_in_url: river's ROCAUC() (ten thresholds over the
    probability of True) within 0.01 of the exact AUC of the decision values."""
    from sklearn.metrics import roc_auc_score
    m = omtl_mpi.learner("c-admm", 2, 16, task_key="ip_in_url")
    roc, truth, scores = metrics.ROCAUC(), [], []
    for x, y in datasets.Phishing():
        roc.update(y, m.predict_proba_one(x))
        truth.append(y)
        scores.append(m.decision_one(x))
        m.learn_one(x, y)
    exact = roc_auc_score(truth, scores)
    assert exact > 0.85 and abs(roc.get() - exact) <= 0.01, (roc.get(), exact)


def test_a_missing_task_key_is_the_default_task_or_one_error():
    m = omtl_mpi.PA(3, 4, task_key="user")                   # default_task=0, said once
    with pytest.warns(UserWarning, match="x has no 'user' .* of task 0 .* default_task=None"):
        m.learn_one({"a": 1.0}, 1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.learn_one({"a": 1.0}, 1)                          # not again
    assert m.n_seen_.tolist() == [2, 0, 0]
    m = omtl_mpi.PA(3, 4, task_key="user", default_task=2)
    with pytest.warns(UserWarning):
        m.learn_one({"a": 1.0}, 1)
    assert m.n_seen_.tolist() == [0, 0, 1]
    with pytest.raises(omtl_mpi.UserError, match="x has no 'user' .* default_task is None"):
        omtl_mpi.PA(3, 4, task_key="user", default_task=None).learn_one({"a": 1.0}, 1)
    with pytest.raises(omtl_mpi.UserError, match="default_task must be a task"):
        omtl_mpi.PA(3, 4, default_task=3)
    # how instances name their task shapes no state: a state loads under another default
    state = omtl_mpi.PA(3, 4, task_key="user").state_dict()
    omtl_mpi.PA(3, 4, default_task=1).load_state_dict(state)


def test_clone_with_its_attributes_continues_and_refuses_other_parameters():
    m = omtl_mpi.CADMM(3, 4, task_key="t")
    rng = np.random.default_rng(0)
    stream = [({"t": int(rng.integers(3)), "a": rng.normal(), "b": rng.normal()}, bool(rng.random() < 0.5))
              for _ in range(60)]
    for x, y in stream[:30]:
        m.learn_one(x, y)
    twin = m.clone(include_attributes=True)
    for x, y in stream[30:]:
        assert m.predict_proba_one(x) == twin.predict_proba_one(x)
        m.learn_one(x, y)
        twin.learn_one(x, y)
    assert _same_state(m.state_dict()["state"], twin.state_dict()["state"]) is None
    assert m.clone(include_attributes=True, task_key="u").n_rounds_ == m.n_rounds_
    with pytest.raises(omtl_mpi.UserError, match="belongs to the parameters it was learned with"):
        m.clone({"rho": 0.3}, include_attributes=True)


def test_the_guides_river_example_runs():
    from test_api import _python_block
    code = _python_block("docs/GUIDE.md", "### With river")
    exec(compile(code, "GUIDE.md", "exec"), {})


def test_progressive_validation_through_a_pipeline_and_bagging():
    from river import compose, ensemble, preprocessing
    scaled = compose.TransformerUnion(compose.Select("ip_in_url"),
                                      compose.Discard("ip_in_url") | preprocessing.StandardScaler())
    pipeline = scaled | omtl_mpi.learner("arow", 2, 16, task_key="ip_in_url")
    acc = evaluate.progressive_val_score(datasets.Phishing(), pipeline, metrics.Accuracy())
    assert acc.get() > 0.85
    twin = pipeline.clone(include_attributes=True)           # the learned state comes along
    assert twin[-1].n_rounds_ == pipeline[-1].n_rounds_ > 0
    assert _same_state(twin[-1].state_dict()["state"], pipeline[-1].state_dict()["state"]) is None
    bagged = ensemble.BaggingClassifier(omtl_mpi.learner("pa", 2, 16, task_key="ip_in_url"),
                                        n_models=3, seed=0)
    assert evaluate.progressive_val_score(datasets.Phishing(), bagged, metrics.Accuracy()).get() > 0.8


def test_a_copy_of_a_subclass_is_of_that_class_with_what_it_set():
    class Noted(omtl_mpi.PA):
        def hello(self):
            return "hello"
    m = Noted(3, 4)
    m.note = {"kept": 1}
    m.learn_one([1.0, 0, 0, 0], 1, task=0)
    for twin in (copy.copy(m), copy.deepcopy(m)):
        assert type(twin) is Noted and twin.hello() == "hello" and twin.note == {"kept": 1}
        assert _same_state(twin.state_dict()["state"], m.state_dict()["state"]) is None
