"""Does it learn? C-ADMM against each task learned alone, on the paper's synthetic data (5 x 10000):
the paper's model (``--preset paper``), and the defaults."""
import numpy as np
import pytest

from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.config import RunConfig
from omtl_mpi.data import generate, write_tasks
from omtl_mpi.runtime.run import run

PAPER = RunConfig(intercept=False, params=AdmmParams.paper())


@pytest.fixture(scope="module")
def single_task_error(tmp_path_factory):
    """Mean over tasks of each task learned alone: the C-ADMM math with K = 1, no lambda4 term."""
    folder = tmp_path_factory.mktemp("single")
    names, X, y = generate(tasks=5, samples=10000, seed=0)
    errors = []
    for k in range(5):
        path = folder / f"task{k}.h5"
        write_tasks(path, [names[k]], [X[k]], [y[k]])
        report = run(RunConfig(data=str(path), intercept=False,
                                params=AdmmParams.paper(lambda4=0.0, relationship=False)))
        errors.append(report["mean_error"])
    return float(np.mean(errors))


@pytest.fixture(scope="module")
def paper_error():
    """The mean error of C-ADMM as the paper has it (exact, hinge, its settings), run once."""
    return run(PAPER)["mean_error"]


def test_relationship_learning_beats_learning_alone(single_task_error, paper_error):
    # Measured: 0.0947 against 0.0965 (docs/results/synthetic.md). The gap is small but deterministic.
    assert paper_error < single_task_error - 0.001, (paper_error, single_task_error)


def test_without_relationship_learning_is_no_better(paper_error):
    ablation = run(RunConfig(intercept=False, params=AdmmParams.paper(relationship=False)))["mean_error"]
    assert paper_error < ablation


def test_easy_separable_problem_is_learned(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=6)
    X = [rng.normal(size=(3000, 6)) for _ in range(3)]
    y = [np.where(x @ w >= 0, 1, -1) for x in X]
    write_tasks(tmp_path / "easy.h5", ["a", "b", "c"], X, y)
    report = run(RunConfig(data=str(tmp_path / "easy.h5")))
    assert report["mean_error"] < 0.05
