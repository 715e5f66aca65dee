"""The Python API (omtl_mpi.learner, run_streams, check_learner...): the same numbers as the
command line, state that round-trips, errors a caller can catch, and an import that does
nothing to the process."""
import doctest
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import MPIEXEC, TIMEOUT, _env, dense_rounds, omtl
from conftest import forked
import omtl_mpi
from omtl_mpi.algorithms import REGISTRY
from omtl_mpi.checks import parametrize_with_checks
from omtl_mpi.data.rounds import rounds_needed
from omtl_mpi.data.source import FileSource, shuffled
from omtl_mpi.learners import VERSION as LEARNER_VERSION

ALL = sorted(REGISTRY)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_import_changes_nothing_and_starts_no_mpi():
    code = ("import os, sys; before = dict(os.environ); import omtl_mpi; "
            "print(os.environ == before, 'mpi4py' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in _env().items() if "NUM_THREADS" not in k})
    assert out.stdout.split() == ["True", "False", "False"], out.stderr


def test_public_names_resolve():
    for name in omtl_mpi.__all__:
        assert getattr(omtl_mpi, name) is not None, name
    assert issubclass(omtl_mpi.UserError, ValueError)
    with pytest.raises(AttributeError):
        omtl_mpi.no_such_name


@pytest.mark.parametrize("module", ["omtl_mpi.learners", "omtl_mpi.learners.learner",
                                    "omtl_mpi.learners.build", "omtl_mpi.learners.classes",
                                    "omtl_mpi.learners.state", "omtl_mpi.streams", "omtl_mpi.checks",
                                    "omtl_mpi.text", "omtl_mpi.data.featurise"])
def test_docstring_examples_run(module):
    import importlib
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if module != "omtl_mpi.data.featurise":
        assert result.attempted > 0


def test_every_public_name_has_an_example():
    import inspect
    missing = []
    for name in omtl_mpi.__all__:
        obj = getattr(omtl_mpi, name)
        if name.startswith("__") or name == "UserError":
            continue
        doc = inspect.getdoc(obj) or ""
        if ">>>" not in doc:
            missing.append(name)
    assert not missing


# ------------------------------------------------------------------ the CLI's numbers
def _rounds_of(path, seed, batch, intercept):
    """The CLI's streams of a file as learn_round's arguments: raw features (the learner adds
    the intercept itself), round by round."""
    source = FileSource(str(path))
    meta = source.meta()
    streams = shuffled(source.load(np.arange(meta.n_tasks)), seed)
    T = rounds_needed(meta.lengths, batch)
    return meta, dense_rounds(streams.X, streams.y, batch, T), T


@pytest.mark.parametrize("name", ALL)
def test_learn_round_and_run_streams_are_the_command_line(name, small_tasks, tmp_path):
    """For every learner: learn_round over a data set predicts as `omtl-mpi run` on it, and
    learns the same W (1e-10); run_streams on its streams gives every task's predictions."""
    out = tmp_path / "run.h5"
    extra = ["--nodes", "5"] if REGISTRY[name].pattern == "neighbours" else []
    # the command line's own main() in a forked child: what `omtl-mpi run` runs, without
    # starting Python again
    code, _, err = forked("run", "--algo", name, "--data", small_tasks, "--seed", "4", "--batch", "2",
                          "--out", out, *extra)
    assert code == 0, err
    meta, rb, T = _rounds_of(small_tasks, 4, 2, True)
    m = omtl_mpi.learner(name, meta.n_tasks, meta.dim, rounds=T)
    preds = []
    X, Y = rb
    for t in range(T):
        active = (Y[t] != 0).T
        preds.append(m.learn_round(X[t].transpose(1, 0, 2), Y[t].T, active))
    P = np.concatenate(preds, axis=1)
    with h5py.File(out) as f:
        cli = np.split(f["predictions"][()], f["tasks/offsets"][1:-1])
        for k, n in enumerate(meta.lengths):
            np.testing.assert_array_equal(P[k, :n], cli[k], err_msg=f"task {k}")
        np.testing.assert_allclose(m.W_, f["model/W"][()], rtol=0, atol=1e-10)
        streams = FileSource(str(small_tasks)).load(np.arange(meta.n_tasks))
        res = omtl_mpi.run_streams(streams.X, streams.y, algo=name, seed=4, batch=2,
                                   **({"nodes": 5} if extra else {}))
        for k in range(meta.n_tasks):
            np.testing.assert_array_equal(res.predictions[k], cli[k])
        np.testing.assert_allclose(res.learner.W_, f["model/W"][()], rtol=0, atol=1e-10)
    assert m.n_rounds_ == T and m.n_seen_.tolist() == meta.lengths.tolist()


def test_learn_round_with_online_scaling_is_the_command_line(small_tasks, tmp_path):
    out = tmp_path / "run.h5"
    r = omtl("run", "--data", small_tasks, "--scale", "online", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    meta, rb, T = _rounds_of(small_tasks, 1, 1, True)
    m = omtl_mpi.CADMM(meta.n_tasks, meta.dim, scale="online")
    X, Y = rb
    P = np.concatenate([m.learn_round(X[t].transpose(1, 0, 2), Y[t].T, (Y[t] != 0).T)
                        for t in range(T)], axis=1)
    with h5py.File(out) as f:
        cli = np.split(f["predictions"][()], f["tasks/offsets"][1:-1])
        for k, n in enumerate(meta.lengths):
            np.testing.assert_array_equal(P[k, :n], cli[k])


def test_partial_fit_of_a_whole_data_set_is_the_command_line(small_tasks, tmp_path):
    out = tmp_path / "run.h5"
    r = omtl("run", "--data", small_tasks, "--out", out)
    assert r.returncode == 0, r.stderr
    source = FileSource(str(small_tasks))
    streams = source.load(np.arange(5))
    X, y = np.concatenate(streams.X), np.concatenate(streams.y)
    tasks = np.concatenate([np.full(len(v), k) for k, v in enumerate(streams.y)])
    # any interleaving of the tasks in which each task's instances keep their order
    slots = tasks[np.random.default_rng(0).permutation(len(y))]
    order = np.empty(len(y), dtype=np.int64)
    for k in range(5):
        order[slots == k] = np.flatnonzero(tasks == k)
    assert not np.array_equal(tasks[order], tasks)
    m = omtl_mpi.CADMM(5, 9).partial_fit(X[order], y[order], tasks=tasks[order])
    with h5py.File(out) as f:
        np.testing.assert_allclose(m.W_, f["model/W"][()], rtol=0, atol=1e-10)
        np.testing.assert_allclose(m.u_, f["model/u"][()], rtol=0, atol=1e-10)


def test_run_streams_is_the_command_line(small_tasks, tmp_path):
    out = tmp_path / "run.h5"
    r = omtl("run", "--data", small_tasks, "--seed", "2", "--relationship", "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    streams = FileSource(str(small_tasks)).load(np.arange(5))
    res = omtl_mpi.run_streams(streams.X, streams.y, seed=2, relationship=True, names=streams.names)
    cli = omtl_mpi.load_result(out)
    assert res.names == cli.names
    for k in range(5):
        np.testing.assert_array_equal(res.predictions[k], cli.predictions[k])
    np.testing.assert_array_equal(res.per_task_error, cli.per_task_error)
    np.testing.assert_allclose(res.omega, cli.omega, rtol=0, atol=1e-10)
    assert not np.allclose(res.omega, np.eye(5) / 5)          # Omega was learned
    assert res.mean_error == pytest.approx(json.loads(r.stdout)["mean_error"], abs=1e-12)
    # the fitted learner holds the run's final state and goes on from it
    np.testing.assert_allclose(res.learner.W_, cli.model["W"], rtol=0, atol=1e-10)
    assert res.learner.predict_one(streams.X[0][0], task=0) in (-1, 1)
    res.learner.learn_one(streams.X[0][0], int(streams.y[0][0]), task=0)
    # saved, it is the CLI's results file
    res.save(tmp_path / "again.h5")
    again = omtl_mpi.load_result(tmp_path / "again.h5")
    for a, b in zip(again.task_curves, cli.task_curves):
        np.testing.assert_array_equal(a, b)
    frame = res.to_pandas()
    assert list(frame["task"]) == list(streams.names) and frame["error"].tolist() == res.per_task_error.tolist()


SCRIPT = """
import sys, numpy as np, omtl_mpi
from omtl_mpi.data import generate
names, X, y = generate(tasks=4, samples=300, seed=5)
for name in sys.argv[2:]:          # one job runs every learner in turn, on the same ranks
    res = omtl_mpi.run_streams(X, y, algo=name, seed=1, **({'nodes': 3} if name == 'd-admm' else {}))
    if res is not None:
        np.savez(f"{sys.argv[1]}-{name}.npz", errors=res.per_task_error, W=res.learner.W_,
                 preds=np.concatenate(res.predictions),
                 after=[res.learner.decision_one(x, task=1) for x in X[1][:20]])
"""


@pytest.mark.mpi
def test_run_streams_under_mpiexec_is_one_process(mpiexec, tmp_path):
    """C-ADMM, D-ADMM and AROW, one after the other in one process and in one job of 3 ranks
    (which also shows that run_streams can be called again on the same ranks)."""
    names = ["c-admm", "d-admm", "arow"]
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**_env(), "PYTHONPATH": ROOT}
    local = subprocess.run([sys.executable, str(script), str(tmp_path / "one"), *names],
                           capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert local.returncode == 0, local.stderr
    mpi = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-m", "mpi4py", str(script),
                          str(tmp_path / "mpi"), *names], capture_output=True, text=True,
                         timeout=TIMEOUT, env=env)
    assert mpi.returncode == 0, mpi.stderr
    for name in names:
        a, b = np.load(tmp_path / f"one-{name}.npz"), np.load(tmp_path / f"mpi-{name}.npz")
        np.testing.assert_array_equal(a["preds"], b["preds"], err_msg=name)
        np.testing.assert_array_equal(a["errors"], b["errors"], err_msg=name)
        np.testing.assert_allclose(a["W"], b["W"], rtol=0, atol=1e-10, err_msg=name)
        # the fitted learner gathered from the ranks decides as the one of one process
        np.testing.assert_allclose(a["after"], b["after"], rtol=0, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("call, message", [
    ("omtl_mpi.run_streams([[[1.0]]], [[0]])", "y_list[0]: labels are -1 or +1 (or bools)"),
    ("omtl_mpi.run_streams([[[1.0], [2.0]]], [[1, -1]], algo='pa', batch=5)",
     "batch 5 is more than the longest stream (2 instances): one round would hold them all; use batch 2 or less"),
    ("omtl_mpi.run_streams([[[float(MPI.COMM_WORLD.rank)]]], [[1]])",
     "the ranks were given different streams: every rank must call run_streams with the same "
     "X_list and y_list (seed any random draw)"),
])
@pytest.mark.mpi
def test_run_streams_errors_are_one_line_on_every_rank(call, message, mpiexec, tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import sys, omtl_mpi\nfrom mpi4py import MPI\ntry:\n"
                      f"    {call}\n"
                      "except omtl_mpi.UserError as exc:\n"
                      "    open(f'{sys.argv[1]}/{MPI.COMM_WORLD.rank}.txt', 'w').write(str(exc))\n")
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", str(script), str(tmp_path)],
                       capture_output=True, text=True, timeout=TIMEOUT, env={**_env(), "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        assert (tmp_path / f"{rank}.txt").read_text() == message


def test_run_streams_refuses_what_does_not_apply():
    for options, text in (({"data": "synthetic"}, "data (a data file or the synthetic family) does not apply"),
                          ({"synth_tasks": 5}, "synth_tasks"),
                          ({"comm": 5}, "comm must be an mpi4py communicator"),
                          ({"rhoo": 1}, "unknown option 'rhoo'")):
        with pytest.raises(omtl_mpi.UserError, match=re.escape(text)):
            omtl_mpi.run_streams([[[1.0]]], [[1]], **options)


# ------------------------------------------------------------------ the generic checks
@pytest.mark.mpi
@parametrize_with_checks(ALL)
def test_every_learner_passes_the_checks(learner, check):
    check(learner)


def test_checks_name_a_learner_that_mutates_its_input(monkeypatch):
    from omtl_mpi.algorithms.independent import PaNode
    step = PaNode.local_step

    def mutating(self, X, y, inv_count, active=slice(None)):
        X *= 1.0000001              # a role that writes into its round's arrays
        return step(self, X, y, inv_count, active)
    monkeypatch.setattr(PaNode, "local_step", mutating)
    with pytest.raises(AssertionError, match="check_inputs_not_mutated: PaNode.local_step wrote"):
        omtl_mpi.check_learner("pa", mpi=False)
    monkeypatch.undo()
    monkeypatch.setattr(omtl_mpi.learners.Learner, "_round_inputs",
                        lambda self, X, y, active: _no_copy(self, X, y, active))
    with pytest.raises(AssertionError, match="check_inputs_not_mutated: learn_round changed"):
        omtl_mpi.check_learner("pa", mpi=False)


def _no_copy(self, X, y, active):
    """The learner's input check, but writing into the caller's X."""
    K, B = len(X), X.shape[1]
    act = np.ones((K, B), dtype=bool) if active is None else np.broadcast_to(
        np.asarray(active)[:, None] if np.ndim(active) == 1 else active, (K, B))
    ya = None if y is None else np.where(act, np.asarray(y, dtype=float), 0.0)
    X *= 1.0 + 1e-9
    return X, ya, act


def test_checks_name_a_state_that_does_not_round_trip(monkeypatch):
    from omtl_mpi.algorithms.independent import AdagradNode
    monkeypatch.setattr(AdagradNode, "_STATE", ("W",))       # forgets its accumulator S
    with pytest.raises(AssertionError, match="check_state_round_trip"):
        omtl_mpi.check_learner("adagrad", mpi=False)


# ------------------------------------------------------------------ state
def test_state_dict_continues_bit_for_bit_and_refuses_others(tmp_path):
    from omtl_mpi.checks import _streams, _learn
    m = omtl_mpi.CADMM(4, 3, relationship=True)
    X, y = _streams(m)
    _learn(m, X, y, rounds=20)
    state = m.state_dict()
    assert json.dumps(state["params"])          # JSON-ready
    problems = {
        "another learner": (omtl_mpi.DADMM(4, 3), "of a 'c-admm' learner, this is a 'd-admm'"),
        "another K": (omtl_mpi.CADMM(5, 3, relationship=True), "n_tasks=4, this one has n_tasks=5"),
        "another d": (omtl_mpi.CADMM(4, 2, relationship=True), "n_features=3, this one has n_features=2"),
        "another rho": (omtl_mpi.CADMM(4, 3, relationship=True, rho=0.2), "rho=0.1, this one has rho=0.2"),
    }
    for what, (other, text) in problems.items():
        before = other.state_dict()["state"]
        with pytest.raises(omtl_mpi.UserError, match=text.replace("(", r"\(")):
            other.load_state_dict(state)
        from omtl_mpi.checks import _same_state
        assert _same_state(before, other.state_dict()["state"]) is None, what
    damaged = m.state_dict()
    damaged["state"]["roles"]["server"]["consensus_V"] = np.zeros((2, 2))
    with pytest.raises(omtl_mpi.UserError, match="state/roles/server/consensus_V has shape"):
        m.clone().load_state_dict(damaged)


def test_saved_files_are_checked(tmp_path):
    m = omtl_mpi.AROW(2, 3)
    m.learn_one([1.0, 2.0, 3.0], 1, task=1)
    m.save(tmp_path / "m.h5")
    assert omtl_mpi.load(tmp_path / "m.h5").W_.tolist() == m.W_.tolist()
    (tmp_path / "text.h5").write_text("not hdf5")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["format"] = "something"
    cases = {tmp_path / "missing.h5": "no such", tmp_path / "text.h5": "cannot read it",
             tmp_path / "other.h5": "is not a learner file", tmp_path: "not a regular file|folder"}
    for path, text in cases.items():
        with pytest.raises(omtl_mpi.UserError, match=text):
            omtl_mpi.load(path)
    with h5py.File(tmp_path / "m.h5", "a") as f:
        f.attrs["params"] = json.dumps({**m.get_params(), "n_tasks": 3})
    with pytest.raises(omtl_mpi.UserError, match=r"state/.* has shape \(2,?.*\) of .*, this learner's \(3,?"):
        omtl_mpi.load(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5", "a") as f:
        f.attrs["params"] = json.dumps({"n_tasks": 2, "n_features": 3})
    with pytest.raises(omtl_mpi.UserError, match="its parameters lack intercept"):
        omtl_mpi.load(tmp_path / "m.h5")


def test_hostile_learner_files_are_refused_before_reading(tmp_path):
    m = omtl_mpi.PA(2, 3)
    m.save(tmp_path / "good.h5")
    target = tmp_path / "elsewhere.h5"
    m.save(target)
    import shutil
    for name, change in {
        "soft": lambda f: (f.move("state", "real"), f.__setitem__("state", h5py.SoftLink("/real"))),
        "external": lambda f: (f.__delitem__("state"), f.__setitem__("state", h5py.ExternalLink(str(target), "/state"))),
        "deep": lambda f: f["state/roles/holder0"].__setitem__("W2", h5py.SoftLink("/state/roles/holder0/W")),
        "huge": lambda f: (f["state/roles/holder0"].__delitem__("W"),
                           f["state/roles/holder0"].create_dataset("W", shape=(200000, 200000), dtype="f8", chunks=(100, 100))),
    }.items():
        path = tmp_path / f"{name}.h5"
        shutil.copy(tmp_path / "good.h5", path)
        with h5py.File(path, "a") as f:
            change(f)
        with pytest.raises(omtl_mpi.UserError, match="link|shape|not this learner's"):
            omtl_mpi.load(path)


def test_a_call_that_would_go_non_finite_is_undone_and_the_learner_goes_on(tmp_path):
    m = omtl_mpi.Pooled(1, 1, gamma0=1e300, intercept=False)
    with pytest.raises(omtl_mpi.UserError, match="would make the model non-finite .* undone"):
        for _ in range(200):
            m.learn_one([1e300], -1, task=0)
            m.learn_one([-1e300], -1, task=0)
    before = m.state_dict()
    assert np.isfinite(m.W_).all()
    m.learn_one([1.0], 1, task=0)
    assert m.predict_one([1.0], task=0) in (-1, 1) and m.n_rounds_ == before["state"]["learner"]["n_rounds"] + 1
    m.save(tmp_path / "goes-on.h5")
    assert np.isfinite(omtl_mpi.load(tmp_path / "goes-on.h5").W_).all()


def test_parameters_are_stored_as_validated():
    m = omtl_mpi.CADMM(3, 2, rho="0.5", intercept=1, arow_r=np.float32(0.5))
    assert m.rho == 0.5 and m.intercept is True and type(m.arow_r) is float
    assert omtl_mpi.CADMM(3, 2, rho=0.5, arow_r=0.5).load_state_dict(m.state_dict()).rho == 0.5
    assert omtl_mpi.DADMM(4, 2, nodes=np.int64(2)).nodes == 2
    assert omtl_mpi.CADMM(3, 2, eta="auto").eta is None
    assert omtl_mpi.CADMM(3, 2, preset="paper", rounds=10).w_step == "euclid"
    assert omtl_mpi.CADMM(3, 2).clone({"rho": 0.3}).rho == 0.3        # river's clone(new_params)
    assert "W_" in dir(omtl_mpi.CADMM(3, 2))


def test_save_writes_nothing_on_failure(tmp_path):
    m = omtl_mpi.PA(2, 2)
    with pytest.raises(omtl_mpi.UserError, match="folder .* does not exist; create it first"):
        m.save(tmp_path / "no" / "such" / "m.h5")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ inputs
def test_bad_parameters_are_one_catchable_line():
    cases = {
        lambda: omtl_mpi.learner("c-admm", 3, 2, rhoo=1): "c-admm has no parameter 'rhoo' (did you mean 'rho'?)",
        lambda: omtl_mpi.learner("c-admm", 3, 2, rho=-1): "rho must be > 0, got -1",
        lambda: omtl_mpi.learner("c-admm", 0, 2): "n_tasks must be an integer >= 1",
        lambda: omtl_mpi.learner("c-admm", 3, 2.5): "n_features must be an integer >= 1",
        lambda: omtl_mpi.learner("nope", 3, 2): "unknown algorithm 'nope'",
        lambda: omtl_mpi.learner("c-admm", 3, 2, w_step="euclid"): "give eta= or rounds=",
        lambda: omtl_mpi.learner("c-admm", 3, 2, delta=2.0): "delta does nothing for this run",
        lambda: omtl_mpi.learner("d-admm", 3, 2, nodes=4): "at most 3 nodes",
        lambda: omtl_mpi.learner("d-admm", 3, 2, topology="moebius"): "moebius",
        lambda: omtl_mpi.learner("c-admm", 3, 2, preset="fast"): "unknown preset 'fast'",
        lambda: omtl_mpi.PA(3, 2).set_params(C=0): "C must be",
        lambda: omtl_mpi.PA(10**9, 9): "task(s) of 10 weights on one rank need about",
        lambda: omtl_mpi.AROW(3, 10**6, arow_covariance="full"):
            "arow_covariance='full' at d = 1000001 weights (an intercept counts one): a 1,000,001 x 1,000,001 matrix per task",
        lambda: omtl_mpi.AROW(3, 4096, arow_covariance="full"):          # the keyword, not --dims
            "at d = 4097 weights (an intercept counts one): a 4,097 x 4,097 matrix per task (128 "
            "MiB) and about 34 ms per margin error, out of proportion above d = 4096; use "
            "arow_covariance='diagonal' (d numbers per task, O(non-zeros) per step) or a smaller "
            "n_features",
        lambda: omtl_mpi.AROW(10**5, 3000, arow_covariance="full"):      # advice, as the API says it
            "reduce d (a smaller n_features), spread the tasks over more ranks, or use "
            "arow_covariance='diagonal'",
        lambda: omtl_mpi.DROM(10**6, 2): "drom keeps a 1000000 x 1000000 task-relationship matrix",
        lambda: omtl_mpi.CADMM(10**9, 2): "task(s) on one rank need about",
        lambda: omtl_mpi.CADMM(3, 2, rounds=True): "rounds must be an integer >= 1",
        lambda: omtl_mpi.CADMM(3, 2, task_key=[1]): "task_key must be a dict key",
    }
    for call, text in cases.items():
        with pytest.raises(omtl_mpi.UserError) as info:
            call()
        assert text in str(info.value), str(info.value)
        assert isinstance(info.value, ValueError) and "--" not in str(info.value)


def test_bad_instances_are_refused_and_change_nothing():
    m = omtl_mpi.CADMM(3, 2, task_key="user")
    m.learn_one([1.0, 0.0], 1, task=0)
    before = m.state_dict()["state"]
    cases = {
        lambda: m.learn_one([1.0, np.nan], 1, task=0): "NaN or inf",
        lambda: m.learn_one([1.0, 0.0], 0, task=0): "a label is -1 or +1",
        lambda: m.learn_one([1.0, 0.0], 1, task=3): "task must be an integer from 0 to 2",
        lambda: m.learn_one([1.0, 0.0, 2.0], 1, task=0): "x must have shape (2,)",
        lambda: m.clone(default_task=None).learn_one({"a": 1.0}, 1):
            "x has no 'user' (the learner's task_key), and default_task is None",
        lambda: m.learn_one({"user": 1, "a": "text"}, 1): "not a number",
        lambda: m.predict_one([1.0, 0.0]): "x has no|which task",
        lambda: m.learn_round(np.zeros((3, 1, 2)), [[1], [2], [1]]): r"y\[1, 0\] is 2$",
        lambda: m.learn_round(np.zeros((3, 1, 2)), [[1], [1], [1]], active=[1, 0, 1]): "active must be booleans",
        lambda: m.partial_fit(np.zeros((2, 2)), [1, 1], tasks=[0, 5]): r"tasks must lie in 0..2",
        lambda: m.partial_fit(np.zeros((2, 2)), [1, 1], tasks=[0.0, 1.0]): "tasks must be 2 integers",
        lambda: m.partial_fit(np.zeros((2, 2)), [1, 1], tasks=[[0], [1, 2]]): "tasks must be 2 integers",
        lambda: m.learn_one([10 ** 400, 1.0], 1, task=0): "x must be a 1-D array",
        lambda: m.learn_one({"user": 0, "a": 10 ** 400}, 1): "not a number",
        lambda: m.learn_round(np.zeros((3, 1, 2)), [[1], [1, 1], [1]]): "y must be an array of labels",
        lambda: m.learn_round(np.zeros((3, 1, 2)), [[1], [1], [1]], active=[[1], [0, 1], 1]): "active must be booleans",
        lambda: m.learn_one([1.0 + 1j, 0.0], 1, task=0): "x must be a 1-D array",
        lambda: m.learn_one(np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"), 1, task=0): "x must be a 1-D array",
        lambda: m.learn_one({"user": 0, "a": "1.5"}, 1): "x['a'] is '1.5', not a number",
        lambda: m.learn_one({"user": 1, "a": 1.0}, 1, task=2): "task=2 but x['user'] is 1",
        lambda: m.load_state_dict({**m.state_dict(), "params": [1]}): "params are not a dict",
        lambda: m.load_state_dict({**m.state_dict(), "version": True}): "of version True",
        lambda: m.load_state_dict(_with(m.state_dict(), "learner", "n_rounds", np.int64(-1))): "n_rounds holds -1, where a count from 0",
        lambda: m.load_state_dict(_with(m.state_dict(), "learner", "n_seen", np.zeros(3))): "n_seen holds float64",
        lambda: m.set_params(rho=1.0): "use clone",
    }
    from omtl_mpi.checks import _same_state
    for call, text in cases.items():
        with pytest.raises(omtl_mpi.UserError, match=text if "|" in text or "\\" in text else re.escape(text)):
            call()
        assert _same_state(before, m.state_dict()["state"]) is None, text


def _with(state, group, key, value):
    import copy
    state = copy.deepcopy(state)
    state["state"][group][key] = value
    return state


def test_a_model_that_goes_non_finite_is_an_error():
    m = omtl_mpi.Pooled(1, 1, gamma0=1e300, intercept=False)
    with pytest.raises(omtl_mpi.UserError, match="would make the model non-finite"):
        for _ in range(200):
            m.learn_one([1e300], -1, task=0)
            m.learn_one([-1e300], -1, task=0)



@pytest.mark.parametrize("name, K, kw", [("c-admm", 1000, {}), ("adagrad", 1000, {}),
                                         ("d-admm", 40, {"w_step": "euclid", "eta": 1e-300})])
def test_a_task_of_many_that_goes_non_finite_is_an_error(name, K, kw):
    """The check after each step looks at the rows it touched (a task far from the first),
    not only at the first ones."""
    m = omtl_mpi.learner(name, K, 1, intercept=False, **kw)
    with pytest.raises(omtl_mpi.UserError, match="would make the model non-finite"):
        for _ in range(400):
            m.learn_one([1e300], -1, task=K - 3)
            m.learn_one([-1e300], -1, task=K - 3)


# ------------------------------------------------------------------ river and scikit-learn
def test_sits_unchanged_in_rivers_progressive_validation():
    river = pytest.importorskip("river")
    from river import evaluate, metrics
    rng = np.random.default_rng(0)
    data = []
    for _ in range(600):
        k = int(rng.integers(3))
        a, b = rng.normal(size=2)
        data.append(({"shop": k, "a": a, "b": b}, bool(a + (0.5 if k else -0.5) * b > 0)))
    m = omtl_mpi.learner("c-admm", 3, 16, task_key="shop")
    metric = evaluate.progressive_val_score(data, m, metrics.Accuracy())
    # the same loop by hand: river changed nothing
    again, right = omtl_mpi.learner("c-admm", 3, 16, task_key="shop"), 0
    for x, y in data:
        right += again.predict_one(x) == y
        again.learn_one(x, y)
    assert metric.get() == pytest.approx(right / len(data)) and metric.get() > 0.8
    assert isinstance(m.predict_one(data[0][0]), bool)
    assert river is not None


def test_scikit_learn_conventions():
    m = omtl_mpi.CADMM(3, 2, rho=0.5)
    params = m.get_params()
    assert params["rho"] == 0.5 and params["n_tasks"] == 3 and "W_" not in params
    twin = m.clone()
    assert twin is not m and twin.get_params() == params
    assert m.clone(rho=0.7).rho == 0.7 and m.rho == 0.5
    assert m.set_params(rho=0.6) is m and m.rho == 0.6
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert m.partial_fit(X, [1, -1, 1], tasks=[0, 1, 2]) is m
    assert m.predict(X, tasks=[0, 1, 2]).dtype == np.int8
    assert m.decision_function(X, tasks=[0, 1, 2]).shape == (3,)
    assert repr(m) == "CADMM(n_tasks=3, n_features=2, rho=0.6)"


def test_dict_features_are_hashed_as_the_text_importer_hashes():
    from omtl_mpi.data.featurise import feature_column
    m = omtl_mpi.PA(1, 8, intercept=False)
    m.learn_one({"word": 2.0}, 1, task=0)
    index, sign = feature_column("word", 8)
    expected = np.zeros(8)
    expected[index] = sign * 2.0
    assert np.flatnonzero(m.W_[0]).tolist() == [index]
    assert m.decision_one({"word": 2.0}, task=0) == pytest.approx(m.W_[0] @ expected)


# ------------------------------------------------------------------ the documentation runs
def _python_block(path, after):
    """The first ```python block of a Markdown file after the line ``after``."""
    text = open(os.path.join(ROOT, path)).read()
    text = text[text.index(after):]
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```", start)]


@pytest.mark.mpi
def test_readme_example_runs_as_written_and_under_mpiexec(mpiexec, tmp_path):
    (tmp_path / "example.py").write_text(_python_block("README.md", "## From Python"))
    env = {**_env(), "PYTHONPATH": ROOT, "MPLBACKEND": "Agg"}
    one = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=TIMEOUT, env=env)
    assert one.returncode == 0, one.stderr
    assert (tmp_path / "curve.png").stat().st_size > 1000
    (tmp_path / "curve.png").unlink()
    three = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-m", "mpi4py", "example.py"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert three.returncode == 0, three.stderr
    assert three.stdout == one.stdout and one.stdout.startswith("mean error 0.")
    assert (tmp_path / "curve.png").exists()


def test_guide_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _python_block("docs/GUIDE.md", "## From Python")
    exec(compile(code, "GUIDE.md", "exec"), {})
    assert (tmp_path / "model.h5").exists()


def test_guide_reading_results_runs(small_tasks, tmp_path, monkeypatch):
    """docs/GUIDE.md, *Reading results*: its code on a results file of omtl-mpi run."""
    pytest.importorskip("pandas")
    r = omtl("run", "--data", small_tasks, "--out", tmp_path / "run.h5")
    assert r.returncode == 0, r.stderr
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(_python_block("docs/GUIDE.md", "## Reading results"), "GUIDE.md", "exec"), namespace)
    assert len(namespace["wrong"]) == 5 and len(namespace["curve0"]) == 120
    assert namespace["curve0"][-1] == pytest.approx(namespace["errors"].iloc[0])


@pytest.fixture
def perceptron():
    """The example learner of docs/DESIGN.md, written outside the package, registered."""
    sys.path.insert(0, os.path.join(ROOT, "docs", "examples"))
    try:
        import perceptron
        yield perceptron
    finally:
        sys.path.remove(os.path.join(ROOT, "docs", "examples"))
        REGISTRY.pop("perceptron", None)
        sys.modules.pop("perceptron", None)


def test_the_design_example_is_the_file():
    text = open(os.path.join(ROOT, "docs", "DESIGN.md")).read()
    text = text[text.index("**Worked example**"):]
    start = text.index("```python\n") + len("```python\n")
    shown = text[start:text.index("```", start)]
    assert shown == open(os.path.join(ROOT, "docs", "examples", "perceptron.py")).read()


@pytest.mark.mpi
def test_a_learner_written_outside_passes_every_check(perceptron, monkeypatch):
    """In one process and under mpiexec (each rank imports the example's module)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.join(ROOT, "docs", "examples"), ROOT]))
    assert omtl_mpi.check_learner("perceptron") == []
    m = omtl_mpi.learner("perceptron", 3, 4, step=0.5)
    assert m.get_params()["step"] == 0.5 and type(m).__name__ == "Perceptron"
    with pytest.raises(omtl_mpi.UserError, match="step must be a finite number > 0, got -1"):
        omtl_mpi.learner("perceptron", 3, 4, step=-1)


def test_a_broken_learner_is_named_by_its_check(perceptron, monkeypatch):
    def forgets(self, state):            # a state that does not round-trip
        pass
    monkeypatch.setattr(perceptron.PerceptronNode, "load_state", forgets)
    with pytest.raises(AssertionError, match="^check_state_round_trip: "):
        omtl_mpi.check_learner("perceptron", mpi=False)
    monkeypatch.undo()
    step = perceptron.PerceptronNode.local_step

    def writes_into_its_input(self, X, y, inv_count, active=slice(None)):
        out = step(self, X, y, inv_count, active)
        X[...] = 0.0
        return out
    monkeypatch.setattr(perceptron.PerceptronNode, "local_step", writes_into_its_input)
    with pytest.raises(AssertionError, match="^check_inputs_not_mutated: PerceptronNode.local_step "
                                             "wrote into the arrays of its round"):
        omtl_mpi.check_learner("perceptron", mpi=False)


def test_a_learner_that_raises_or_breaks_the_decide_contract_is_named_by_its_check(perceptron, monkeypatch):
    """A learner's own exception (a TypeError in its decide) comes back as the check that met
    it, the learner, the exception and where it was raised, with the exception chained; a
    decide of the wrong shape is named where it returns, where before it was a raw broadcast
    ValueError, or (a row of (na,) broadcast over the instances) passed every check."""
    decide = perceptron.PerceptronNode.decide

    def raises(self, X, active=slice(None)):
        raise TypeError("unsupported operand type(s)")
    monkeypatch.setattr(perceptron.PerceptronNode, "decide", raises)
    with pytest.raises(AssertionError, match=r"^check_predict_before_learning: Perceptron raised "
                                             r"TypeError: unsupported operand type\(s\) \(test_api.py, "
                                             r"line \d+, in raises\)$") as failed:
        omtl_mpi.check_learner("perceptron", mpi=False)
    assert isinstance(failed.value.__cause__, TypeError)
    for wrong, shown in ((lambda out: out.T, "an array of shape (3, 1)"),
                         (lambda out: out[0], "an array of shape (1,)"),
                         (lambda out: out[..., None], "an array of shape (1, 1, 1)"),
                         (lambda out: out.tolist(), "a list"), (lambda out: None, "None"),
                         (lambda out: out.astype(str), "dtype <U")):
        monkeypatch.setattr(perceptron.PerceptronNode, "decide",
                            lambda self, X, active=slice(None), w=wrong: w(decide(self, X, active)))
        with pytest.raises(AssertionError, match=r"^check_predict_before_learning: "
                                                 r"PerceptronNode.decide returned ") as failed:
            omtl_mpi.check_learner("perceptron", mpi=False)
        assert shown in str(failed.value) and "the contract's decision values are an array of " \
            "numbers of shape (B, na)" in str(failed.value), str(failed.value)
    # pytest's form names the check too
    from omtl_mpi.checks import learner_checks
    monkeypatch.setattr(perceptron.PerceptronNode, "decide", raises)
    name, run = learner_checks("perceptron")[0]
    with pytest.raises(AssertionError, match=f"^{name}: Perceptron raised TypeError"):
        run()


# ------------------------------------------------------------------ hostile calls
def test_hostile_calls_raise_only_user_errors_and_change_nothing():
    """Random garbage through every entry point: a result or omtl_mpi.UserError, nothing else,
    and a refused call leaves the learner as it was."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    from omtl_mpi.checks import _same_state
    numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3),
                        st.booleans(), st.text(max_size=3), st.none(), st.complex_numbers())
    arrays = st.one_of(numbers, st.lists(numbers, max_size=4),
                       st.lists(st.lists(numbers, max_size=3), max_size=3),
                       st.lists(st.lists(st.lists(numbers, max_size=3), max_size=3), max_size=4),
                       st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), numbers, max_size=3))
    m = omtl_mpi.CADMM(3, 2, task_key="k")
    m.learn_one([1.0, 2.0], 1, task=0)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["learn_one", "predict_one", "decision_one", "learn_round",
                            "predict_round", "partial_fit", "predict", "load_state_dict"]),
           arrays, arrays, arrays)
    def call(method, a, b, c):
        before = m.state_dict()["state"]
        try:
            if method in ("learn_one",):
                m.learn_one(a, b, task=c)
            elif method in ("predict_one", "decision_one"):
                getattr(m, method)(a, task=c)
            elif method == "learn_round":
                m.learn_round(a, b, c)
            elif method == "predict_round":
                m.predict_round(a, c)
            elif method == "partial_fit":
                m.partial_fit(a, b, tasks=c)
            elif method == "predict":
                m.predict(a, tasks=c)
            else:
                m.load_state_dict(a)
        except omtl_mpi.UserError:
            assert _same_state(before, m.state_dict()["state"]) is None, method
    call()


@pytest.mark.mpi
def test_run_streams_on_a_communicator_of_ones_own(mpiexec, tmp_path):
    """comm= injects the communicator: 4 ranks split into two jobs of 2 (a server and a
    worker each), which run side by side and each give the one-process result."""
    script = tmp_path / "split.py"
    script.write_text(
        "import sys, numpy as np, omtl_mpi\nfrom mpi4py import MPI\n"
        "from omtl_mpi.data import generate\n"
        "world = MPI.COMM_WORLD\nhalf = world.Split(world.rank // 2, world.rank)\n"
        "names, X, y = generate(tasks=3, samples=200, seed=world.rank // 2)\n"
        "res = omtl_mpi.run_streams(X, y, comm=half)\n"
        "if res is not None:\n"
        "    np.save(f'{sys.argv[1]}/{world.rank // 2}.npy', np.concatenate(res.predictions))\n"
        "    assert res.report['ranks'] == 2\n")
    r = subprocess.run([MPIEXEC, "-n", "4", sys.executable, "-m", "mpi4py", str(script), str(tmp_path)],
                       capture_output=True, text=True, timeout=TIMEOUT, env={**_env(), "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    from omtl_mpi.data import generate
    for job in (0, 1):
        _, X, y = generate(tasks=3, samples=200, seed=job)
        alone = omtl_mpi.run_streams(X, y)
        np.testing.assert_array_equal(np.load(tmp_path / f"{job}.npy"), np.concatenate(alone.predictions))


def test_a_learner_declares_the_checks_it_skips(perceptron, monkeypatch):
    from omtl_mpi.checks import learner_checks
    names = [name for name, _ in learner_checks("perceptron")]
    assert "check_mini_batches" in names and len(names) == 15
    cls = type(omtl_mpi.learner("perceptron", 3, 4))
    monkeypatch.setattr(cls, "check_skips", {"check_mini_batches"}, raising=False)
    assert "check_mini_batches" not in [name for name, _ in learner_checks("perceptron")]
    assert "check_deterministic" not in [n for n, _ in learner_checks("perceptron", skip={"check_deterministic"})]
    with pytest.raises(ValueError, match="no such check: check_everything"):
        learner_checks("perceptron", skip={"check_everything"})


@pytest.mark.mpi
def test_a_wrong_task_axis_is_caught_under_mpi(tmp_path, monkeypatch):
    """The states of the ranks' blocks join by TASK_AXIS into the fitted learner: a wrong axis
    is named by the one-process == MPI check."""
    source = open(os.path.join(ROOT, "docs", "examples", "perceptron.py")).read()
    broken = (source.replace('TASK_AXIS = {"W": 0}', 'TASK_AXIS = {"W": 1}')
              .replace('"perceptron"', '"bad-axis"'))
    assert "name=\"bad-axis\"" in broken and 'TASK_AXIS = {"W": 1}' in broken
    (tmp_path / "badaxis.py").write_text(broken)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), ROOT]))
    import badaxis  # noqa: F401
    try:
        with pytest.raises(AssertionError, match="check_one_process_equals_mpi: the MPI run failed: "
                                                 ".*UserError: the ranks' states do not join .*"
                                                 "'W' of shapes .* do not join along axis 1.* "
                                                 "TASK_AXIS must name"):
            omtl_mpi.check_learner("bad-axis")
    finally:
        REGISTRY.pop("bad-axis", None)
        sys.modules.pop("badaxis", None)


def test_predictions_that_are_not_booleans_are_named(perceptron, monkeypatch):
    step = perceptron.PerceptronNode.local_step
    monkeypatch.setattr(perceptron.PerceptronNode, "local_step",
                        lambda self, X, y, inv, active: np.where(step(self, X, y, inv, active), 1.0, -1.0))
    with pytest.raises(AssertionError, match="PerceptronNode.local_step returned predictions of "
                                             "float64; the contract's are booleans"):
        omtl_mpi.check_learner("perceptron", mpi=False)


def test_rivers_score_metrics_work():
    pytest.importorskip("river")
    from river import evaluate, metrics
    rng = np.random.default_rng(1)
    data = [({"t": int(k), "a": a}, bool(a > 0)) for k, a in zip(rng.integers(0, 2, 300), rng.normal(size=300))]
    auc = evaluate.progressive_val_score(data, omtl_mpi.PA(2, 4, task_key="t"), metrics.ROCAUC())
    assert auc.get() > 0.9
    m = omtl_mpi.PA(2, 4)
    scores = m.predict_proba_one([1.0, 0, 0, 0], task=0)      # before any label: river's keys
    assert list(scores) == [False, True] and sum(scores.values()) == pytest.approx(1.0)
    m.learn_one([1.0, 0, 0, 0], -1, task=0)                      # then the labels learned
    scores = m.predict_proba_one([1.0, 0, 0, 0], task=0)
    assert set(scores) == {1, -1} and scores[1] + scores[-1] == pytest.approx(1.0)


def test_files_of_an_older_release_are_named_as_such(tmp_path):
    """A learner saved, or results written, by an older omtl-mpi (whose layouts differ) get
    one line naming the versions, not a complaint about one of their arrays."""
    m = omtl_mpi.CADMM(n_tasks=3, n_features=2)
    m.learn_one([1.0, 0.5], 1, task=0)
    m.save(tmp_path / "m.h5")
    out = tmp_path / "r.h5"
    r = omtl("run", "--synth-tasks", "3", "--synth-samples", "4", "--out", out)
    assert r.returncode == 0, r.stderr
    for path, read, message in (
            (tmp_path / "m.h5", omtl_mpi.load, "a learner file of version 1, written by an older "
             f"omtl-mpi; this release reads version {LEARNER_VERSION}: load it with the omtl-mpi "
             "that wrote it, or learn the learner afresh"),
            (out, omtl_mpi.load_result, "results of format version 1, written by an older "
             "omtl-mpi; this release reads version 2: read it with the omtl-mpi that wrote it, "
             "or run again")):
        with h5py.File(path, "a") as f:
            f.attrs["format_version"] = 1
        with pytest.raises(omtl_mpi.UserError, match=re.escape(f"{path}: {message}")):
            read(path)
    with pytest.raises(omtl_mpi.UserError, match="a learner's state of version 1, written by an older"):
        m.load_state_dict({**m.state_dict(), "version": 1})


@pytest.mark.parametrize("damage", ["swap", "delete", "shift samples"])
def test_a_results_file_whose_offsets_disagree_is_damaged(tmp_path, damage):
    """/tasks/offsets is how h5py readers split the per-instance arrays: a file where it is
    missing, or disagrees with /tasks/samples, is refused, not read wrongly."""
    out = tmp_path / "r.h5"
    assert omtl("run", "--synth-tasks", "4", "--synth-samples", "5", "--out", out).returncode == 0
    with h5py.File(out, "a") as f:
        offsets = f["tasks/offsets"]
        if damage == "swap":
            offsets[1:3] = offsets[1:3][::-1]
        elif damage == "delete":
            del f["tasks/offsets"]
        else:                       # the total unchanged: only the offsets can tell
            f["tasks/samples"][0:2] = [4, 6]
    with pytest.raises(omtl_mpi.UserError, match="tasks/offsets"):
        omtl_mpi.load_result(out)


def test_omega_of_many_tasks_is_its_factors():
    m = omtl_mpi.CADMM(2000, 3, relationship=True)
    m.learn_one([1.0, 2.0, 3.0], 1, task=5)
    m.learn_one([1.0, -2.0, 0.5], -1, task=7)
    basis, values, rest = m.omega_basis_, m.omega_values_, float(m.omega_rest_[0])
    assert basis.shape[0] == 2000 and abs(rest * (2000 - len(values)) + values.sum() - 1) < 1e-12
    with pytest.raises(AttributeError, match="omega_ is kept as a K x K matrix up to 1,024 tasks"):
        m.omega_


# ------------------------------------------------------------------ bugs the checks must find
def _learns_the_first_tasks(self, X, y, inv_count, active=slice(None)):
    """local_step that ignores active: the round's instances learned into the block's first
    rows (learning task 2 moves task 0's weights)."""
    first = slice(0, X.shape[1])
    W = self.W[first]
    positive = np.einsum("kd,bkd->bk", W, X) >= 0.0
    wrong = (y != 0) & ((y > 0) != positive)
    self.W[first] = W + self.step * np.einsum("bk,bkd->kd", wrong * y, X) * inv_count[:, None]
    return positive


def _learns_into_every_task(self, X, y, inv_count, active=slice(None)):
    """local_step that adds the round's update to every task's row, not its active tasks'
    only (every other task moved alike: a shared part's change would look so)."""
    W = self.W[active]
    positive = np.einsum("kd,bkd->bk", W, X) >= 0.0
    wrong = (y != 0) & ((y > 0) != positive)
    self.W += (self.step * np.einsum("bk,bkd->kd", wrong * y, X) * inv_count[:, None]).sum(axis=0)
    return positive


def _decides_with_the_first_tasks(self, X, active=slice(None)):
    """decide that ignores active: task 2 predicted with task 0's model."""
    return np.einsum("kd,bkd->bk", self.W[:X.shape[1]], X)


@pytest.mark.parametrize("planted, check", [
    ({"local_step": _learns_the_first_tasks}, "check_learning_a_task_leaves_the_others"),
    ({"local_step": _learns_into_every_task}, "check_learning_a_task_leaves_the_others"),
    ({"decide": _decides_with_the_first_tasks}, "check_a_task_alone_decides_as_beside_others"),
    ("counter", "check_predicting_changes_no_attribute"),
])
def test_the_checks_find_the_bugs_the_earlier_ones_missed(perceptron, monkeypatch, planted, check):
    """Three bugs of a learner written outside the package, each of which passed every
    earlier check (whose streams made each round's active tasks 0..j and whose MPI check held a
    task a rank): each is now named by its check."""
    node = perceptron.PerceptronNode
    if planted == "counter":
        decide, step = node.decide, node.local_step

        def counts(self, X, active=slice(None)):       # a counter kept outside state()
            self.calls = getattr(self, "calls", 0) + 1
            return decide(self, X, active)

        def steps_by_it(self, X, y, inv_count, active=slice(None)):
            self.step = 1.0 + 0.01 * getattr(self, "calls", 0)
            return step(self, X, y, inv_count, active)
        planted = {"decide": counts, "local_step": steps_by_it}
    for name, method in planted.items():
        monkeypatch.setattr(node, name, method)
    with pytest.raises(AssertionError, match=f"^{check}: "):
        omtl_mpi.check_learner("perceptron", mpi=False)


def test_a_copy_that_splits_a_message_from_its_views_is_found(monkeypatch):
    """A deep copy made as Python makes one of any object (attribute by attribute: the views
    of C-ADMM's message become arrays of their own), as copies were made before
    Learner.__reduce__: it does not continue, and the check says so."""
    import copy as copying

    def attribute_by_attribute(self, memo):
        twin = object.__new__(type(self))
        for key, value in vars(self).items():
            setattr(twin, key, copying.deepcopy(value, memo))
        return twin
    monkeypatch.setattr(omtl_mpi.learners.Learner, "__deepcopy__", attribute_by_attribute, raising=False)
    with pytest.raises(AssertionError, match="^check_copies_continue: a copy.deepcopy of the "
                                             "learner (predicts|learned) otherwise"):
        omtl_mpi.check_learner(omtl_mpi.CADMM(3, 4, relationship=True), mpi=False)


@pytest.mark.mpi
def test_the_mpi_check_puts_several_tasks_on_a_rank(perceptron, monkeypatch):
    """With a task a rank, a decide that ignores active passes under MPI too: the check's
    ranks hold several tasks each."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.join(ROOT, "docs", "examples"), ROOT]))
    from omtl_mpi.checks import check_one_process_equals_mpi
    recorded = []
    real = subprocess.run

    def spy(cmd, *args, **kwargs):
        recorded.append(cmd)
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(subprocess, "run", spy)
    check_one_process_equals_mpi(omtl_mpi.learner("perceptron", 3, 4))
    ranks = int(recorded[-1][recorded[-1].index("-n") + 1])
    assert ranks < 3, f"{ranks} ranks for 3 tasks"


def test_a_results_file_loaded_and_saved_again_keeps_what_it_held(tmp_path, capsys):
    """load_result(path).save(other): the same datasets, the metrics' error by stream length and
    the asynchronous schedule included (it raised a KeyError on error_by_length before)."""
    from conftest import cli, differing
    first, again = tmp_path / "first.h5", tmp_path / "again.h5"
    assert cli(capsys, "run", "--synth-tasks", "3", "--synth-samples", "80", "--sync", "partial",
               "--out", first)[0] == 0
    omtl_mpi.load_result(first).save(again)
    assert differing(first, again) == []
    with h5py.File(first) as a, h5py.File(again) as b:
        assert sorted(a["timing"]) == sorted(b["timing"]) and sorted(a["schedule"]) == sorted(b["schedule"])
        assert a["metrics"].attrs["error_by_length"] == b["metrics"].attrs["error_by_length"]
