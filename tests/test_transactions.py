"""A learner's calls are transactions: a call that raises, or whose step would make the model
non-finite, leaves the learner exactly as before it (state, counters, scaling), and the learner
goes on as a twin that never saw the call would, bit for bit."""
import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.algorithms import registry
from omtl_mpi.checks import _same_state
from omtl_mpi.engine import Engine

K, D = 7, 4

# every learner, and the forms of C-ADMM and D-ADMM whose steps touch other state
VARIANTS = [(algo, {}) for algo in registry.REGISTRY] + [
    ("c-admm", {"relationship": True}),
    ("c-admm", {"preset": "paper"}),
    ("c-admm", {"w_step": "adagrad"}),
    ("c-admm", {"w_step": "euclid", "eta": 1.0}),
    ("c-admm", {"class_weight": "balanced"}),
    ("c-admm", {"experts": False}),
    ("c-admm", {"scale": "online"}),
    ("d-admm", {"relationship": True}),
    ("arow", {"arow_covariance": "diagonal"}),
]
IDS = [f"{a}-{'-'.join(f'{k}={v}' for k, v in p.items())}" if p else a for a, p in VARIANTS]


def _build(algo, params, n_tasks=K):
    needed = {"rounds": 200} if "eta" in omtl_mpi.parameters(algo) and "eta" not in params else {}
    return omtl_mpi.learner(algo, n_tasks, D, **needed, **params)


class Injected(RuntimeError):
    pass


@pytest.fixture
def fail_after_round(monkeypatch):
    """Make the next round run to its end, every role object stepped, then raise."""
    run = Engine.run
    armed = []

    def failing(self, *args, **kwargs):
        out = run(self, *args, **kwargs)
        if armed:
            armed.clear()
            raise Injected("after the round")
        return out
    monkeypatch.setattr(Engine, "run", failing)
    return armed


def _state(m):
    return m.state_dict()["state"]


def _assert_same(a, b, what):
    where = _same_state(_state(a), _state(b))
    assert where is None, f"{what}: the states differ at {where}"
    assert a.n_rounds_ == b.n_rounds_ and (a.n_seen_ == b.n_seen_).all(), f"{what}: counters differ"


@pytest.mark.parametrize("algo, params", VARIANTS, ids=IDS)
def test_a_call_that_fails_is_undone_and_the_learner_goes_on_as_its_twin(algo, params, fail_after_round):
    m, twin = _build(algo, params), _build(algo, params)
    rng = np.random.default_rng(3)
    for call in range(60):
        k = int(rng.integers(K))
        x = rng.normal(size=D)
        label = 1 if x.sum() + 0.3 * rng.normal() >= 0 else -1
        if call % 9 == 4:            # a round that fails after every role object has stepped
            before = _state(m)
            fail_after_round.append(True)
            with pytest.raises(Injected):
                m.learn_one(x, label, task=k)
            assert _same_state(before, _state(m)) is None
            _assert_same(m, twin, f"after the failed call {call}")
        if call % 11 == 6:           # features at which a step may overflow
            huge = np.full(D, 1e200) * np.sign(rng.normal(size=D))
            before = _state(m)
            try:
                m.learn_one(huge, label, task=k)
            except omtl_mpi.UserError as exc:
                assert "undone" in str(exc)
                assert _same_state(before, _state(m)) is None
            else:
                twin.learn_one(huge, label, task=k)
        assert m.decision_one(x, task=k) == twin.decision_one(x, task=k)
        m.learn_one(x, label, task=k)
        twin.learn_one(x, label, task=k)
    _assert_same(m, twin, "at the end")
    assert np.isfinite(m.W_).all()


@pytest.mark.parametrize("algo, params", VARIANTS[:12], ids=IDS[:12])
def test_failed_rounds_and_batches_are_undone(algo, params, fail_after_round):
    m, twin = _build(algo, params), _build(algo, params)
    rng = np.random.default_rng(5)
    for t in range(12):
        X = rng.normal(size=(K, 1, D))
        y = np.where(X.sum(axis=2) >= 0, 1, -1)
        active = rng.random(K) < 0.6
        if t % 4 == 1:
            fail_after_round.append(True)
            with pytest.raises(Injected):
                m.learn_round(X, y, active)
            _assert_same(m, twin, "after a failed learn_round")
        assert (m.learn_round(X, y, active) == twin.learn_round(X, y, active)).all()
    # partial_fit: one transaction over all its rounds (here the third of four fails)
    Xb = rng.normal(size=(20, D))
    yb = np.where(Xb.sum(axis=1) >= 0, 1, -1)
    tb = rng.integers(K, size=20)
    calls = []
    run = Engine.run

    def third_fails(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise Injected("third round")
        return run(self, *args, **kwargs)
    Engine.run = third_fails
    try:
        with pytest.raises(Injected):
            m.partial_fit(Xb, yb, tasks=tb)
    finally:
        Engine.run = run
    _assert_same(m, twin, "after a failed partial_fit")
    m.partial_fit(Xb, yb, tasks=tb)
    twin.partial_fit(Xb, yb, tasks=tb)
    _assert_same(m, twin, "after partial_fit")


def test_the_issues_cases_never_show_a_non_finite_state():
    m = omtl_mpi.learner("c-admm", 2, 2)
    m.learn_one([1.0, .5], 1, task=0)
    before = m.state_dict()
    with pytest.raises(omtl_mpi.UserError, match="undone"):
        m.learn_one([1e200, 1e200], -1, task=0)
    assert np.isfinite(m.W_).all() and m.n_rounds_ == 1
    assert _same_state(before["state"], m.state_dict()["state"]) is None
    m.learn_one([1.0, -0.5], -1, task=1)         # and it goes on

    m = omtl_mpi.learner("arow", 3, 4)
    refused = 0
    for i in range(100):
        seen, rounds = m.n_seen_.copy(), m.n_rounds_
        try:
            m.learn_one(1e200 * np.ones(4) * (1 if i % 2 else -1), 1, task=i % 3)
        except omtl_mpi.UserError:
            refused += 1
            assert m.n_rounds_ == rounds and (m.n_seen_ == seen).all()
    assert refused and np.isfinite(m.W_).all()

    m = omtl_mpi.learner("c-admm", 3, 4, variant="paper", w_step="euclid", eta=1.0, lambda4=1e4,
                         relationship=True, experts=False)
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(24):
        before = m.state_dict()["state"]
        try:
            m.learn_one(rng.normal(size=4), 1, task=int(rng.integers(3)))
        except omtl_mpi.UserError as exc:
            refused += 1
            assert "--" not in str(exc), str(exc)         # the API's spelling, not the CLI's
            assert _same_state(before, m.state_dict()["state"]) is None
    assert refused                                          # the variant diverged, and was refused


def test_no_numpy_warning_reaches_the_caller():
    m = omtl_mpi.learner("c-admm", 2, 2)
    m.learn_one([1.0, .5], 1, task=0)
    with np.errstate(all="raise"):
        with pytest.raises(omtl_mpi.UserError):
            m.learn_one([1e200, 1e200], -1, task=0)
        m.W_, m.predict_one([1e300, 1e300], task=0)


@pytest.mark.parametrize("algo", ["c-admm", "arow", "pa", "adagrad", "admm-single", "pooled", "pmsc-log",
                                  "mt-perceptron", "hashed"])
def test_what_a_call_saves_does_not_grow_with_the_tasks(algo):
    """A call saves the rows of its tasks the first time it meets them after a mark, and the
    mark the shared arrays: as many bytes at K = 400 as at K = 200 (a learner whose step
    touches every task, D-ADMM's and D-PSGD's nodes or DROM's K x K, saves what it touches)."""
    sizes = []
    for n_tasks in (200, 400):
        m = _build(algo, {}, n_tasks)
        rng = np.random.default_rng(0)
        for i in range(3 * n_tasks):
            m.learn_one(rng.normal(size=D), 1 if i % 2 else -1, task=i % n_tasks)
        journal = m._journal
        journal.forget()
        m.learn_one(rng.normal(size=D), 1, task=5)
        entries = journal.mark + journal.rows
        sizes.append(sum(e[-1].nbytes for e in entries if isinstance(e[-1], np.ndarray)))
    assert sizes[1] <= sizes[0] * 1.05 + 64, f"{algo}: {sizes[0]} bytes saved at K = 200, {sizes[1]} at 400"


@pytest.mark.parametrize("algo, params", [("c-admm", {}), ("d-admm", {}), ("c-admm", {"relationship": True}),
                                          ("c-admm", {"w_step": "adagrad"})])
def test_a_step_that_cannot_compute_is_one_error_and_undone(algo, params):
    """Features of 1e50 make the mixture prior's matrices singular in float64 (numpy raises
    LinAlgError with every number still finite): one UserError, nothing changed."""
    m = omtl_mpi.learner(algo, 12, 4, **params)
    m.learn_one([1.0, 0.5, -0.3, 0.2], 1, task=0)
    for scale in (1e50, 1e150, 1e300):
        before = _state(m)
        try:
            m.learn_one(np.array([1.0, 2.0, -1.0, 3.0]) * scale, -1, task=1)
        except omtl_mpi.UserError as exc:
            assert "undone" in str(exc)
            assert _same_state(before, _state(m)) is None


def test_calls_with_no_active_task():
    m = omtl_mpi.CADMM(4, 3)
    m.learn_round(np.zeros((4, 1, 3)), np.ones((4, 1)), active=np.zeros(4, dtype=bool))
    m.partial_fit(np.zeros((0, 3)), np.zeros(0), tasks=np.zeros(0, dtype=int))
    m.learn_one([1.0, 0.0, 0.0], 1, task=2)
    assert m.n_seen_.tolist() == [0, 0, 1, 0]


def test_an_interrupt_during_the_undo_leaves_a_learner_that_says_so(monkeypatch):
    from omtl_mpi.algorithms import undo
    m = omtl_mpi.CADMM(3, 4)
    m.learn_one(np.ones(4), 1, task=0)
    state = m.state_dict()

    def interrupted(self, step):
        raise KeyboardInterrupt
    monkeypatch.setattr(undo.Journal, "undo", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.learn_one(np.full(4, 1e200), 1, task=1)
    monkeypatch.undo()
    for call in (lambda: m.learn_one(np.ones(4), 1, task=0), lambda: m.predict_one(np.ones(4), task=0),
                 m.state_dict, lambda: m.W_):
        with pytest.raises(omtl_mpi.UserError, match="interrupted while it was being undone"):
            call()
    m.load_state_dict(state)                                   # a state loaded: known again
    m.learn_one(np.ones(4), 1, task=0)


def test_an_interrupt_while_the_journal_saves_rows_leaves_it_right():
    """Ctrl-C inside the journal's begin, between two of a task's arrays (before any step):
    the call raises and changes nothing, and a later undo is still exact (no task is recorded
    as met before its rows are saved)."""
    class Interrupting(list):
        def __iter__(self):
            yield next(super().__iter__())
            raise KeyboardInterrupt
    m, twin = omtl_mpi.AdaGrad(3, 4), omtl_mpi.AdaGrad(3, 4)
    for learner in (m, twin):
        learner.learn_one(np.ones(4), 1, task=0)            # the journal's mark
    kept = m._journal.per_task
    m._journal.per_task = Interrupting(kept)
    with pytest.raises(KeyboardInterrupt):
        m.learn_one(np.ones(4), -1, task=1)
    m._journal.per_task = kept
    _assert_same(m, twin, "after an interrupt in begin")
    for learner in (m, twin):
        learner.learn_one(np.array([1.0, -1.0, 0.5, 0.0]), -1, task=1)
    with pytest.raises(omtl_mpi.UserError):
        m.learn_one(np.full(4, 1e308), 1, task=1)
    _assert_same(m, twin, "after an undo following it")


def test_the_inputs_the_journal_keeps_are_bounded():
    """Rounds of every task of many: the journal keeps at most its BYTES of their inputs (the
    next call marks again), not 64 rounds' worth."""
    from omtl_mpi.algorithms.undo import Journal
    m = omtl_mpi.PA(20000, 50)
    X = np.ones((20000, 1, 50))
    y = np.ones((20000, 1))
    for _ in range(6):
        m.learn_round(X, y)
        kept = sum(sum(a.nbytes for a in r) for r in m._journal.rounds)
        assert kept <= Journal.BYTES


@pytest.mark.parametrize("rounds", [3, 80])      # within the journal's rounds, and beyond them
def test_an_interrupt_after_a_calls_last_step_is_undone(monkeypatch, rounds):
    """Ctrl-C once every round of a call has stepped (here: as its finiteness is checked): the
    call raises and changes nothing, for calls the journal keeps and calls too long to keep."""
    m, twin = omtl_mpi.AROW(2, 3), omtl_mpi.AROW(2, 3)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2 * rounds, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    tasks = np.tile([0, 1], rounds)
    for learner in (m, twin):
        learner.partial_fit(X, y, tasks=tasks)
    finite = Engine.finite

    def interrupted(self, tasks=None):
        finite(self, tasks)
        raise KeyboardInterrupt
    monkeypatch.setattr(Engine, "finite", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.partial_fit(X[::-1], y[::-1], tasks=tasks)
    monkeypatch.undo()
    _assert_same(m, twin, "after the interrupted call")
    for learner in (m, twin):
        learner.partial_fit(X, y, tasks=tasks)
    _assert_same(m, twin, "after the next call")
