"""The generic checks, run for every learner in the registry (a new learner cannot skip them)."""
import numpy as np
import pytest

import omtl_mpi
from conftest import assert_in_process_equals_mpiexec, omtl_forked as omtl
from omtl_mpi.algorithms import REGISTRY
from support.drive import simulate

ALL = sorted(REGISTRY)
# the generic checks of every learner (omtl_mpi.check_learner) run in tests/test_api.py


def test_state_round_trip_check_can_fail(monkeypatch):
    """The state check must catch a learner that forgets part of its state."""
    from omtl_mpi.algorithms.cadmm import CAdmmServer
    monkeypatch.setattr(CAdmmServer, "load_state", lambda self, state: None)
    with pytest.raises(AssertionError, match="check_state_round_trip"):     # Omega is the server's
        omtl_mpi.check_learner(omtl_mpi.CADMM(4, 5, relationship=True), mpi=False)


def test_state_round_trip_check_catches_a_vote_that_forgets(monkeypatch):
    from omtl_mpi.algorithms.experts import ExpertVote
    monkeypatch.setattr(ExpertVote, "load_state", lambda self, state: None)
    with pytest.raises(AssertionError, match="check_state_round_trip"):
        omtl_mpi.check_learner(omtl_mpi.CADMM(4, 5), mpi=False)


@pytest.mark.parametrize("name", ALL)
def test_easy_separable_problem_is_learned(name):
    rng = np.random.default_rng(0)
    w = rng.normal(size=6)
    X = [rng.normal(size=(3000, 6)) for _ in range(5)]
    y = [np.where(x @ w >= 0, 1, -1).astype(np.int8) for x in X]
    preds, _ = simulate(name, X, y)
    assert np.mean([np.mean(p != t) for p, t in zip(preds, y)]) < 0.05
    assert np.mean([np.mean(p[-1000:] != t[-1000:]) for p, t in zip(preds, y)]) < 0.03


def ranks_for(name):
    algo = REGISTRY[name]
    if algo.one_task_per_node:
        return 5, ["--nodes", "5"]
    if algo.pattern == "neighbours":
        return 3, ["--nodes", "3"]
    return 3, []


@pytest.mark.mpi
@pytest.mark.parametrize("name", ALL)
def test_in_process_equals_mpiexec(name, mpiexec, small_tasks, tmp_path):
    """Unequal streams and mini-batches, in one process and under mpiexec: the same
    predictions and mistakes, and every array of the learned model to 1e-10 (D-ADMM's and
    D-PSGD's on the default ring)."""
    from omtl_mpi.config import RunConfig
    assert RunConfig().topology == "ring"
    ranks, local_args = ranks_for(name)
    assert_in_process_equals_mpiexec(["--algo", name, "--data", small_tasks, "--batch", "2"],
                                     local_args, ranks, tmp_path, models=None)


def test_algos_lists_every_learner():
    import json
    r = omtl("algos", "--json")
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert set(rows) == set(REGISTRY)
    assert rows["drom"]["reconstruction"] and rows["pmsc-log"]["reconstruction"]
    assert rows["d-admm"]["pattern"] == "neighbours" and rows["pa"]["pattern"] == "none"
    assert rows["pa"]["defaults"] == {"C": 1.0}


def test_option_of_another_learner_is_refused():
    r = omtl("run", "--algo", "pa", "--rho", "0.5", "--synth-samples", "50")
    assert r.returncode == 2 and "--rho does not apply to pa" in r.stderr
