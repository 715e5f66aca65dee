"""--class-weight (the ADMM learners): the weights as documented, no look-ahead, the same on every
layout of ranks and through checkpoints, one-line errors, and that it pays on imbalanced tasks."""
import numpy as np
import pytest

from conftest import omtl_forked as omtl
from omtl_mpi.algorithms.admm import AdmmParams, TaskBlock
import omtl_mpi
from support.drive import simulate

ADMM = ["c-admm", "d-admm", "admm-single", "pmsc-log"]


def test_balanced_weights_count_only_earlier_rounds():
    block = TaskBlock(AdmmParams(class_weight="balanced").resolved(10), 2, 3)
    w = block._class_weights(np.array([[-1.0, 1.0]]), slice(None))
    np.testing.assert_array_equal(w, [[1.0, 1.0]])              # nothing seen: weight 1
    for y in ([-1.0, 1.0], [-1.0, 1.0], [1.0, 1.0]):
        block._class_weights(np.array([y]), slice(None))
    # task 0 has seen 3 x -1 and 1 x +1: n / (2 n_y) with one more of each (6/8 and 6/4)
    w = block._class_weights(np.array([[-1.0, 0.0], [1.0, 0.0]]), slice(None))
    np.testing.assert_array_equal(w[:, 0], [0.75, 1.5])
    np.testing.assert_array_equal(block.class_seen[:, 0], [4, 2])    # counted after weighing
    fixed = TaskBlock(AdmmParams(class_weight="4").resolved(10), 1, 3)
    np.testing.assert_array_equal(fixed._class_weights(np.array([[1.0], [-1.0]]), slice(None)), [[4.0], [1.0]])


@pytest.mark.parametrize("name", ADMM)
@pytest.mark.parametrize("mode", ["balanced", "2.5"])
def test_generic_checks_with_class_weights(name, mode):
    omtl_mpi.check_learner(omtl_mpi.learner(name, 4, 5, rounds=40, class_weight=mode), mpi=False)


def _params(name, **kw):
    from omtl_mpi.algorithms import REGISTRY
    return REGISTRY[name].params(**kw)


def test_weights_pay_on_an_imbalanced_task():
    """10% positives: balanced weights trade plain error for a lower balanced error."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=5)
    X = [np.hstack((rng.normal(size=(2000, 5)), np.ones((2000, 1)))) for _ in range(3)]  # + intercept
    w = np.append(w, 0.0)
    cut = 1.3 * np.linalg.norm(w)                               # about 10% above it
    y = [np.where(x @ w + 0.5 * rng.normal(size=2000) > cut, 1, -1).astype(np.int8) for x in X]
    assert 0.02 < np.mean([np.mean(t > 0) for t in y]) < 0.12

    def balanced_error(params):
        preds, _ = simulate("c-admm", X, y, params=params)
        errs = []
        for p, t in zip(preds, y):
            errs.append((np.mean(p[t > 0] != 1) + np.mean(p[t < 0] != -1)) / 2)
        return np.mean(errs)
    assert balanced_error(AdmmParams(class_weight="balanced")) < balanced_error(AdmmParams()) - 0.02


def test_bad_values_are_one_line_errors(small_tasks):
    for bad in ("-2", "0", "often", "inf"):
        r = omtl("run", "--data", small_tasks, "--class-weight", bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "--class-weight must be none, balanced or a number > 0" in r.stderr
    r = omtl("run", "--data", small_tasks, "--algo", "arow", "--class-weight", "balanced")
    assert r.returncode == 2 and "--class-weight does not apply to arow" in r.stderr


# the same on every layout of ranks, and through a checkpoint under MPI, with --scale online
# in the same jobs: tests/test_equivalence.py::test_mpi_equals_in_process_with_scaling_and_class_weights
# and tests/test_checkpoint.py::test_resume_under_mpi_with_scaling_and_class_weights
