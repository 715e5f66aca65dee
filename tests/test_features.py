"""What learners see of an instance (--intercept, --scale online): no look-ahead, the same on
every layout of ranks, through checkpoints, and for every learner."""
import json

import numpy as np
import pytest

from conftest import omtl_forked as omtl
from omtl_mpi.algorithms import REGISTRY
from omtl_mpi.data.features import model_dim, online_scale, prepare
import omtl_mpi

FEATURES = ["--scale", "online"]          # with the intercept, which is on by default


def test_online_scaling_never_looks_ahead():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * [1.0, 100.0, 1e-3, 0.0]
    full = online_scale(X)
    for t in (1, 7, 30):
        np.testing.assert_array_equal(online_scale(X[:t]), full[:t])
    assert np.abs(full).max() <= 1.0
    np.testing.assert_array_equal(full[:, 3], 0.0)                    # a column of zeros stays 0
    np.testing.assert_array_equal(np.abs(full).max(axis=0)[:3], 1.0)  # the largest value so far is +-1
    # row t is divided by the largest |x| of rows 0..t, column by column
    t = 20
    np.testing.assert_allclose(full[t, :3], X[t, :3] / np.abs(X[: t + 1, :3]).max(axis=0))


def test_intercept_is_a_last_constant_feature_and_inputs_stay():
    X = [np.arange(6.0).reshape(3, 2), np.zeros((0, 2))]
    before = [x.copy() for x in X]
    out = prepare(X, intercept=True, scale="online")
    assert [o.shape for o in out] == [(3, 3), (0, 3)]
    np.testing.assert_array_equal(out[0][:, -1], 1.0)
    for x, b in zip(X, before):
        np.testing.assert_array_equal(x, b)
    assert prepare(X)[0] is X[0]                                      # nothing asked, nothing done
    assert model_dim(9, True) == 10 and model_dim(9, False) == 9
    with pytest.raises(ValueError, match="unknown scale"):
        prepare(X, scale="zscore")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_generic_checks_with_an_intercept_and_online_scaling(name):
    rounds = {"rounds": 40} if "eta" in omtl_mpi.parameters(name) else {}
    m = omtl_mpi.learner(name, 4, 5, intercept=True, scale="online", **rounds)
    omtl_mpi.check_learner(m, mpi=False)


def test_the_run_reports_and_learns_with_them(small_tasks):
    r = omtl("run", "--data", small_tasks, *FEATURES, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (report["intercept"], report["scale"]) == (True, "online")
    plain = json.loads(omtl("run", "--data", small_tasks, "--no-intercept", "--json").stdout)
    assert report["dim"] == plain["dim"] + 1
    r = omtl("run", "--data", small_tasks, "--scale", "zscore")
    assert r.returncode == 2 and "'zscore' is not one of 'none', 'online'" in r.stderr


# the same on every layout of ranks, and through a checkpoint under MPI, with --class-weight
# in the same jobs: tests/test_equivalence.py::test_mpi_equals_in_process_with_scaling_and_class_weights
# and tests/test_checkpoint.py::test_resume_under_mpi_with_scaling_and_class_weights


def test_table_4_counts_only_runs_without_them():
    """The ablation compares the paper's model: a run with an intercept or scaling is not one
    of its cells, however default its hyper-parameters."""

    from omtl_mpi.config import RunConfig
    from omtl_mpi.report.collect import _has_default_params
    from omtl_mpi import options
    plain = options.run_config({"preset": "paper"}).to_dict()
    assert _has_default_params("c-admm", plain) and not _has_default_params("c-admm", RunConfig().to_dict())
    for change in ({"intercept": True}, {"scale": "online"}):
        assert not _has_default_params("c-admm", {**plain, **change})
    older = {k: v for k, v in plain.items() if k not in ("intercept", "scale")}   # files of 0.1
    assert _has_default_params("c-admm", older)
    assert not _has_default_params("c-admm", {**plain, "params": {**plain["params"], "rho": 1.0}})


def test_table_4_follows_the_paper_preset_not_the_defaults(monkeypatch):
    """Once the defaults move away from the paper's, the ablation still compares the paper's
    model: the runs the preset describes, not the defaults."""
    from omtl_mpi import options
    from omtl_mpi.config import RunConfig
    from omtl_mpi.report.collect import _has_default_params
    monkeypatch.setitem(options.PRESETS, "paper", {**options.PRESETS["paper"], "rho": 0.5})
    defaults = RunConfig().to_dict()
    assert not _has_default_params("c-admm", defaults)
    as_paper = options.run_config({"preset": "paper"}).to_dict()
    assert as_paper["params"]["rho"] == 0.5 and _has_default_params("c-admm", as_paper)
