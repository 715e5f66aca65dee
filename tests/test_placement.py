"""Rank placement (--bind): the plan, when it applies, and what a run records."""
import json
import os

import h5py
import pytest

from conftest import omtl
from omtl_mpi.comm.local import LocalWorld
from omtl_mpi.runtime import placement
from omtl_mpi.runtime.placement import bind, decide, plan


def test_plan_gives_the_server_a_lightly_shared_cpu():
    # C-ADMM on 6 ranks, 2 CPUs: the server (weight 3) with one worker, four workers together
    assert plan([0, 1], [3, 1, 1, 1, 1, 1]) == [0, 1, 1, 1, 0, 1]
    # 3 ranks: the server alone, both workers on the other CPU
    assert plan([0, 1], [3, 1, 1]) == [0, 1, 1]
    # CPU ids need not start at 0 or be contiguous; ties go to the first CPU listed
    assert plan([2, 5], [1, 1, 1]) == [2, 5, 2]
    # loads end up balanced on more CPUs
    cpus = plan([0, 1, 2, 3], [3] + [1] * 9)
    load = {c: 0 for c in range(4)}
    for c, w in zip(cpus, [3] + [1] * 9):
        load[c] += w
    assert max(load.values()) - min(load.values()) <= 1


@pytest.mark.parametrize("mode, masks, weights", [
    ("none", [[0, 1]] * 6, [3, 1, 1, 1, 1, 1]),                  # asked not to
    ("auto", [[0, 1]] * 2, [3, 1]),                               # no more ranks than CPUs
    ("auto", [[0]] * 6, [3, 1, 1, 1, 1, 1]),                      # one CPU: nothing to choose
    ("auto", [[0], [1], [0], [1], [0], [1]], [3, 1, 1, 1, 1, 1]),  # the launcher placed them
    ("auto", [[0, 1]] * 5, [1] * 5),                              # equal weights: spread is right
    ("auto", [], []),
])
def test_decide_leaves_placement_alone(mode, masks, weights):
    assert decide(mode, masks, weights) is None


def test_decide_pins_an_oversubscribed_node_with_a_heavy_server():
    assert decide("auto", [[1, 0]] * 6, [3, 1, 1, 1, 1, 1]) == [0, 1, 1, 1, 0, 1]
    with pytest.raises(ValueError, match="--bind must be one of auto, none"):
        decide("sometimes", [[0, 1]] * 6, [3, 1, 1, 1, 1, 1])


def test_bind_in_one_process_does_nothing():
    assert bind(LocalWorld(), "auto", 3.0) is None


class _Node:
    """A fake world of ``size`` ranks on one node, all with this process's affinity mask."""

    def __init__(self, size, index, weights):
        self.size, self.index, self.weights = size, index, weights

    def node_peers(self, value):
        mask, _ = value
        return self.index, [(mask, w) for w in self.weights]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_bind_pins_this_process_as_planned_and_none_leaves_it():
    before = os.sched_getaffinity(0)
    cpus = sorted(before)
    if len(cpus) < 2:
        pytest.skip("needs at least 2 CPUs")
    weights = [3.0] + [1.0] * len(cpus) * 2
    world = _Node(len(weights), 1, weights)
    try:
        assert bind(world, "none", 1.0) is None and os.sched_getaffinity(0) == before
        cpu = bind(world, "auto", 1.0)
        assert cpu == plan(cpus, weights)[1]
        assert os.sched_getaffinity(0) == {cpu}
    finally:
        os.sched_setaffinity(0, before)


def _expected_cpus(ranks, server_weight):
    """What --bind auto should do to ``ranks`` ranks started on this machine."""
    mask = sorted(os.sched_getaffinity(0))
    weights = [server_weight] + [1.0] * (ranks - 1)
    return decide("auto", [mask] * ranks, weights)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_mpi_run_records_its_placement(mpiexec, tmp_path):
    # placement by weight is for ranks that poll while they wait (--transport mpi); ranks that
    # sleep (shm, test_transport.py) are left to the operating system
    args = ["run", "--data", "synthetic", "--synth-samples", "300", "--json", "--no-progress",
            "--transport", "mpi"]
    expected = _expected_cpus(6, 3.0)          # pinned only where 6 ranks exceed the CPUs
    r = omtl(*args, "--out", tmp_path / "a.h5", np_ranks=6)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["cpus"] == expected
    with h5py.File(tmp_path / "a.h5", "r") as f:
        if expected is None:
            assert "cpu" not in f["timing"]
        else:
            assert f["timing/cpu"][()].tolist() == expected
    # the same run left to the operating system, and a light server (no relationship learning)
    r = omtl(*args, "--bind", "none", np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cpus"] is None
    r = omtl(*args, "--no-relationship", np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cpus"] is None
    # the summary says where ranks went
    r = omtl(*[a for a in args if a != "--json"], np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert ("ranks pinned to CPUs" in r.stdout) == (expected is not None)


def test_bad_bind_value_through_the_python_api_is_a_config_error():
    from omtl_mpi.config import RunConfig
    from omtl_mpi.errors import ConfigError
    from omtl_mpi.runtime.run import run
    with pytest.raises(ConfigError, match="--bind must be one of auto, none"):
        run(RunConfig(synth_samples=10), bind="always")


def test_bad_bind_value_is_one_clear_line():
    r = omtl("run", "--bind", "sometimes")
    assert r.returncode == 2
    assert "--bind" in r.stderr and "'auto'" in r.stderr and "Traceback" not in r.stderr


def test_concurrent_sweep_runs_leave_placement_to_the_system(tmp_path):
    # several runs at once would all pin their servers to the same first CPU
    from omtl_mpi.sweep.plan import Run
    from omtl_mpi.sweep.runner import command_of
    fields = {f: None for f in Run.__dataclass_fields__}
    run = Run(**{**fields, "id": "x", "ranks": 6, "args": ["--data", "synthetic"]})
    assert command_of(run, str(tmp_path))[-2:] != ["--bind", "none"]
    assert command_of(run, str(tmp_path), concurrent=True)[-2:] == ["--bind", "none"]
    own = Run(**{**fields, "id": "x", "ranks": 6, "args": ["--data", "synthetic", "--bind", "auto"]})
    assert command_of(own, str(tmp_path), concurrent=True).count("--bind") == 1


def test_server_weights():
    from omtl_mpi.algorithms.admm import AdmmParams
    from omtl_mpi.algorithms.cadmm import CAdmmServer
    blocks = [(0, 5)]
    assert CAdmmServer(AdmmParams(eta=1.0), 5, 3, blocks).cpu_weight == 3.0
    assert CAdmmServer(AdmmParams(eta=1.0, omega_every=4), 5, 3, blocks).cpu_weight == 1.5
    assert CAdmmServer(AdmmParams(eta=1.0, relationship=False), 5, 3, blocks).cpu_weight == 1.0
    assert placement.MODES == ("auto", "none")
