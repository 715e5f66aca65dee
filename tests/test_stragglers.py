"""Stragglers injected on purpose (--slow, --delays): seeded, recorded, and changing no result."""
import json

import h5py
import numpy as np
import pytest

from conftest import cli, differing, omtl, refused
from omtl_mpi.engine import stragglers
from omtl_mpi.engine.stragglers import Delay, Stragglers, last_at_barrier, parse_slow
from omtl_mpi.errors import ConfigError
from omtl_mpi.sweep import load_plan


def test_slow_specs_parse_and_bad_ones_are_one_line():
    assert parse_slow(["1:3", "2:1.5"]) == {1: 3.0, 2: 1.5}
    assert parse_slow(["1:3,4:2"]) == {1: 3.0, 4: 2.0}
    assert parse_slow([]) == {}
    for bad in ("1", "x:2", "1:0.5", "-1:2", "1:nan", "1:"):
        with pytest.raises(ConfigError, match="--slow takes RANK:FACTOR"):
            parse_slow([bad])
    with pytest.raises(ConfigError, match="names rank 1 twice"):
        parse_slow(["1:2", "1:3"])
    with pytest.raises(ConfigError, match="names no rank of this job"):
        Stragglers({5: 2.0}).check_world(5)
    with pytest.raises(ConfigError, match="--delays must be one of srad, stall"):
        Stragglers(model="often")


def test_the_models_draw_the_same_factors_for_the_same_seed_and_rank_only():
    s = Stragglers(model="srad", seed=3)
    a = s.factors(1, 20000)
    assert np.array_equal(a, Stragglers(model="srad", seed=3).factors(1, 20000))
    assert not np.array_equal(a, s.factors(2, 20000))
    assert not np.array_equal(a, Stragglers(model="srad", seed=4).factors(1, 20000))
    # SRAD-ADMM's model in units of the work at its fastest (0.8): [1, 1.5] or, 30%, [3.75, 10]
    slow = a > 2.0
    assert abs(slow.mean() - 0.3) < 0.02
    assert a[~slow].min() >= 1.0 and a[~slow].max() <= 1.5
    assert a[slow].min() >= 3.75 and a[slow].max() <= 10.0
    stall = Stragglers(model="stall").factors(0, 20000)
    assert set(np.unique(stall)) == {1.0, 21.0} and abs((stall > 1).mean() - 0.015) < 0.005
    # --slow multiplies the model's factor on its rank; the others keep their pace
    both = Stragglers({1: 2.0}, "srad", 3)
    assert np.array_equal(both.factors(1, 100), 2.0 * a[:100])
    assert Stragglers({1: 2.0}).delay(0, 10) is None
    assert both.describe() == "--slow 1:2, --delays srad (seed 3)" and Stragglers().describe() == "none"


def test_a_delay_sleeps_factor_minus_one_times_the_work(monkeypatch):
    slept = []
    monkeypatch.setattr(stragglers.time, "sleep", slept.append)
    delay = Delay(np.array([1.0, 3.0, 1.5]))
    for t in range(3):
        delay.after(t, 0.002)
    assert slept == pytest.approx([0.004, 0.001])
    assert delay.injected == pytest.approx(0.005)


def test_the_last_at_a_barrier_is_the_worker_that_waited_least():
    seconds = np.zeros((4, 5, 3))
    seconds[1:, :, 2] = [[3, 3, 1, 3, 3], [1, 2, 3, 2, 2], [2, 1, 2, 1, 1]]
    assert last_at_barrier(seconds, [1, 2, 3]).tolist() == [0, 1, 1, 3]
    assert last_at_barrier(seconds, [0]).tolist() == [0, 0, 0, 0]          # one process: none


def test_one_process_slowed_learns_the_same_and_records_what_it_injected(capsys, tmp_path):
    plain, slowed = tmp_path / "plain.h5", tmp_path / "slowed.h5"
    base = ("run", "--synth-tasks", "3", "--synth-samples", "200")
    assert cli(capsys, *base, "--out", plain)[0] == 0
    code, out, _ = cli(capsys, *base, "--slow", "0:2", "--delays", "stall", "--delay-seed", "1",
                       "--out", slowed)
    assert code == 0
    assert "stragglers injected: --slow 0:2, --delays stall (seed 1), sleeping rank 0" in out
    assert differing(plain, slowed) == []
    with h5py.File(slowed) as f:
        assert f["timing"].attrs["stragglers"] == "--slow 0:2, --delays stall (seed 1)"
        assert f["timing/injected_seconds"][0] > 0.0
        assert f["timing/finish_seconds"].shape == (1,)
        assert f["timing/last_at_barrier"][()].tolist() == [0]
    with h5py.File(plain) as f:
        assert f["timing"].attrs["stragglers"] == "none"
        assert f["timing/injected_seconds"][()].tolist() == [0.0]


@pytest.mark.parametrize("args, message", [
    (["--slow", "1"], "--slow takes RANK:FACTOR"),
    (["--slow", "3:2"], "--slow 3:... names no rank of this job (ranks 0..0)"),
    (["--delay-seed", "2"], "--delay-seed does nothing without --delays"),
    (["--np", "3", "--slow", "3:2"], "--slow 3:... names no rank of this job (ranks 0..2)"),
])
def test_bad_straggler_options_are_one_line(capsys, tmp_path, args, message):
    out = tmp_path / "never.h5"
    refused(capsys, "run", "--synth-samples", "50", "--out", out, *args, needle=message)
    assert not out.exists()


def test_a_sweep_takes_stragglers_as_a_grid_axis(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text("""
seeds = [0]
[data.small]
synthetic = { tasks = 2, samples = 100 }
[algorithms.c]
algo = "c-admm"
grid = { slow = ["1:2", "1:4,2:2"], delays = ["srad"] }
""")
    runs = load_plan(str(path)).runs
    assert [r.id for r in runs] == ["small.c.slow=1_2.delays=srad.s0",
                                    "small.c.slow=1_4_2_2.delays=srad.s0"]
    assert "--slow" in runs[1].args and "1:4,2:2" in runs[1].args
    assert len({r.config_hash for r in runs}) == 2
    path.write_text(path.read_text().replace('"1:4,2:2"', '"7:2"'))
    with pytest.raises(ConfigError, match="names no rank of this job"):
        load_plan(str(path))


@pytest.mark.mpi
def test_under_mpi_the_slowed_worker_is_the_one_waited_for_and_nothing_else_changes(
        mpiexec, tmp_path):
    plain, slowed = tmp_path / "plain.h5", tmp_path / "slowed.h5"
    base = ("run", "--synth-tasks", "3", "--synth-samples", "300", "--json")
    r = omtl(*base, "--out", plain, np_ranks=4, timeout=120)
    assert r.returncode == 0, r.stderr
    r = omtl(*base, "--slow", "2:6", "--out", slowed, np_ranks=4, timeout=120)
    assert r.returncode == 0, r.stderr
    assert differing(plain, slowed) == []
    with h5py.File(slowed) as f:
        last = f["timing/last_at_barrier"][()]
        assert f["timing/last_at_barrier"].attrs["workers"].tolist() == [1, 2, 3]
        injected = f["timing/injected_seconds"][()]
        finish = f["timing/finish_seconds"][()]
    # the workers waited for rank 2 in most rounds (not all: a busy machine delays others too)
    assert last[0] == 0 and last.sum() == 300 and int(np.argmax(last)) == 2 and last[2] > 150
    assert injected[2] > 0 and injected[[0, 1, 3]].tolist() == [0, 0, 0]
    assert finish.shape == (4,) and (finish > 0).all()


@pytest.mark.mpi
def test_nodes_that_never_wait_for_a_slowed_neighbour_end_their_streams_before_it(mpiexec,
                                                                                   tmp_path):
    """finish_seconds is when a rank's last round ended, its stream's end, not when its loop
    closed: asynchronous D-ADMM without a delay bound never waits for the slowed node (rank 1)
    within the rounds, and only its neighbours (0 and 2) take its last table afterwards, which
    made their end the slowed node's."""
    out = tmp_path / "run.h5"
    r = omtl("run", "--algo", "d-admm", "--topology", "ring", "--synth-tasks", "4",
             "--synth-samples", "400", "--sync", "partial", "--max-delay", "100000",
             "--slow", "1:10", "--out", out, "--json", np_ranks=4, timeout=120)
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        finish = f["timing/finish_seconds"][()]
    assert finish.shape == (4,) and max(finish[[0, 2, 3]]) < finish[1]
    assert json.loads(r.stdout)["worker_finish_s"] == finish.tolist()
