"""Asynchronous C-ADMM (--sync partial): the partial barrier and its bounded delay, the simulated
clock in one process, schedules recorded under MPI and replayed bit for bit (--replay)."""
import shutil

import h5py
import numpy as np
import pytest

from conftest import cli, differing, omtl, refused
from omtl_mpi.engine.partial import PartialBarrier, check_schedule, simulate
from omtl_mpi.errors import UserError


def _steps_kept_to_the_barrier(taken, S, TAU):
    """Rebuild each step from a schedule and check the partial barrier and the bounded delay."""
    W, T = taken.shape
    last, took = [-1] * W, [0] * W
    for s in range(int(taken.max()) + 1):
        new = [w for w in range(W) if (taken[w] == s).any()]
        waiting = [w for w in range(W) if took[w] < T]
        assert len(new) >= min(S, len(waiting)), (s, new)
        # every worker still to send that the step did not take is at most TAU steps behind
        for w in waiting:
            if w not in new:
                assert s - last[w] <= TAU, (s, w, last[w])
        for w in new:
            took[w] += int((taken[w] == s).sum())
            last[w] = s


def test_equal_workers_with_every_one_waited_for_step_in_lockstep():
    taken, used, _ = simulate(np.ones((3, 5)), S=3, TAU=0)
    assert taken.tolist() == [list(range(5))] * 3 and used.tolist() == taken.tolist()
    check_schedule(taken, used, 3, 5)


@pytest.mark.parametrize("S, TAU", [(1, 0), (1, 3), (2, 1), (3, 100), (4, 2)])
def test_the_simulated_schedule_keeps_the_barrier_and_the_delay_bound(S, TAU):
    rng = np.random.default_rng(S * 10 + TAU)
    factors = rng.uniform(0.5, 4.0, (4, 60))
    factors[1] *= 5                               # one straggler
    taken, used, _ = simulate(factors, S, TAU)
    check_schedule(taken, used, 4, 60)
    _steps_kept_to_the_barrier(taken, S, TAU)
    assert np.array_equal((taken, used), simulate(factors, S, TAU)[:2])       # deterministic
    # a worker's reply is the newest step that took one of its messages by the end of its round
    assert (used <= taken).all()
    if TAU >= 3 and S == 1:
        # the fast workers did not wait for the straggler: far more steps than rounds
        assert taken.max() + 1 > 60


def test_the_barrier_waits_for_a_worker_left_too_far_behind():
    barrier = PartialBarrier(W=2, T=10, S=1, TAU=2)
    for _ in range(2):                  # steps 0 and 1 without worker 1 (as if from step -1)
        barrier.arrive(0)
        assert barrier.ready()
        barrier.take()
    barrier.arrive(0)
    assert not barrier.ready()          # step 2 would use worker 1 three steps old: wait
    barrier.arrive(1)
    assert barrier.ready() and barrier.take() == [0, 1]
    assert barrier.taken[:, :3].tolist() == [[0, 1, 2], [2, -1, -1]]


def test_a_damaged_schedule_is_one_line():
    taken, used, _ = simulate(np.ones((2, 4)), S=2, TAU=0)
    with pytest.raises(UserError, match="is for 2 workers and 4 rounds, the run has 3 and 4"):
        check_schedule(taken, used, 3, 4)
    bad = taken.copy()
    bad[0, 2] = 0
    with pytest.raises(UserError, match="does not take every message once, in order"):
        check_schedule(bad, used, 2, 4)
    bad = used.copy()
    bad[1, 0] = 3
    with pytest.raises(UserError, match="gives worker 2 in round 1 the reply of a step that took none"):
        check_schedule(taken, bad, 2, 4)


def test_one_process_runs_on_a_simulated_clock_the_same_bits_for_the_same_seed(capsys, tmp_path):
    base = ("run", "--synth-tasks", "4", "--synth-samples", "300", "--sync", "partial",
            "--min-workers", "1", "--delays", "srad")
    a, b, c, full = (tmp_path / f"{n}.h5" for n in "abcf")
    assert cli(capsys, *base, "--out", a)[0] == 0
    assert cli(capsys, *base, "--out", b)[0] == 0
    assert cli(capsys, *base, "--delay-seed", "1", "--out", c)[0] == 0
    assert cli(capsys, "run", "--synth-tasks", "4", "--synth-samples", "300", "--out", full)[0] == 0
    assert differing(a, b) == []
    assert "predictions" in differing(a, c) and "predictions" in differing(a, full)
    with h5py.File(a) as f:
        taken, used = f["schedule/taken"][()], f["schedule/used"][()]
        assert taken.shape == used.shape == (4, 300)
        assert dict(f["schedule"].attrs) == {"min_workers": 1, "max_delay": 8, "replayed": False}
    check_schedule(taken, used, 4, 300)
    _steps_kept_to_the_barrier(taken, 1, 8)
    # and the replay of a one-process run is that run
    r = tmp_path / "replay.h5"
    assert cli(capsys, "run", "--replay", a, "--out", r)[0] == 0
    assert differing(a, r) == []
    with h5py.File(r) as f:
        assert bool(f["schedule"].attrs["replayed"])


@pytest.mark.parametrize("args, message", [
    (["--sync", "partial", "--algo", "drom"], "drom cannot run with --sync partial: its server "
                                              "takes every worker's message of the same round"),
    (["--sync", "partial", "--coordinates", "nonzero", "--w-step", "adagrad"],
     "c-admm cannot run with --sync partial: its messages are entries"),
    (["--min-workers", "2"], "--min-workers does nothing for this run: it applies to --sync partial"),
    (["--sync", "partial", "--min-workers", "6"], "--min-workers 6 is more than the run's 5 workers"),
    (["--sync", "partial", "--nodes", "6"], "has at most 5 workers"),
    (["--sync", "partial", "--max-delay", "-1"], "--max-delay must be an integer >= 0"),
])
def test_what_cannot_run_asynchronously_says_so_in_one_line(capsys, tmp_path, args, message):
    out = tmp_path / "never.h5"
    refused(capsys, "run", "--synth-samples", "50", "--out", out, *args, needle=message)
    assert not out.exists()


def test_replay_refusals(capsys, tmp_path):
    sync = tmp_path / "sync.h5"
    assert cli(capsys, "run", "--synth-samples", "50", "--out", sync)[0] == 0
    partial = tmp_path / "partial.h5"
    assert cli(capsys, "run", "--synth-samples", "50", "--sync", "partial", "--out", partial)[0] == 0
    before = partial.read_bytes()
    for args, message in [
            (["--replay", sync], "it holds no schedule; only the results of a run with --sync partial"),
            (["--replay", partial, "--rho", "2"], "leave out --rho"),
            (["--replay", partial, "--np", "3"], "leave out --np"),
            (["--replay", partial, "--out", partial], "is the results to replay"),
            (["--replay", tmp_path / "none.h5"], "no such results file")]:
        refused(capsys, "run", *args, needle=message)
    assert partial.read_bytes() == before
    # a schedule damaged in the file: one line, nothing written
    damaged = tmp_path / "damaged.h5"
    shutil.copy(partial, damaged)
    with h5py.File(damaged, "a") as f:
        taken = f["schedule/taken"]
        taken[0, 3] = 0
    out = tmp_path / "never.h5"
    code, _, err = cli(capsys, "run", "--replay", damaged, "--out", out)
    assert code == 2 and "does not take every message once" in err and not out.exists()


@pytest.mark.mpi
def test_lockstep_in_one_process_is_the_synchronous_mpi_run(mpiexec, capsys, tmp_path):
    """--min-workers W --max-delay 0 at an equal pace: every step takes every worker's message
    of the round, as a synchronous round does, so the bits are those of mpiexec -n W+1."""
    data = ("--synth-tasks", "4", "--synth-samples", "300")
    one, mpi = tmp_path / "one.h5", tmp_path / "mpi.h5"
    assert cli(capsys, "run", *data, "--sync", "partial", "--nodes", "4", "--min-workers", "4",
               "--max-delay", "0", "--out", one)[0] == 0
    r = omtl("run", *data, "--out", mpi, np_ranks=5, timeout=120)
    assert r.returncode == 0, r.stderr
    assert differing(one, mpi) == []


@pytest.mark.mpi
@pytest.mark.parametrize("tasks, extra", [(4, []), (4, ["--preset", "paper"]),
                                         (12, [])])
def test_an_asynchronous_mpi_run_is_replayed_bit_for_bit(mpiexec, capsys, tmp_path, tasks, extra):
    """Also with more tasks than features, where the vote's empirical-Bayes expert takes the
    prior the server estimates, its mixture's EM steps spread over the server's steps."""
    run, again = tmp_path / "run.h5", tmp_path / "again.h5"
    r = omtl("run", "--synth-tasks", tasks, "--synth-samples", "400", "--sync", "partial",
             "--min-workers", "1", "--max-delay", "3", "--slow", "1:4", *extra, "--out", run,
             "--json", np_ranks=5, timeout=120)
    assert r.returncode == 0, r.stderr
    with h5py.File(run) as f:
        taken, used = f["schedule/taken"][()], f["schedule/used"][()]
        finish = f["timing/finish_seconds"][()]
    check_schedule(taken, used, 4, 400)
    _steps_kept_to_the_barrier(taken, 1, 3)
    # the workers did not wait for the slowed one (rank 1): they finished their streams first
    assert finish.shape == (5,) and max(finish[2:]) < finish[1]
    code, _, err = cli(capsys, "run", "--replay", run, "--out", again)
    assert code == 0, err
    assert differing(run, again) == []


def test_the_time_of_every_prediction_is_recorded_and_the_report_draws_it(tmp_path):
    from omtl_mpi.report import build_report
    from omtl_mpi.report.figures import error_in_time
    sweep = tmp_path / "sweep.toml"
    sweep.write_text("""
seeds = [0]
[data.small]
synthetic = { tasks = 3, samples = 120 }
[algorithms.c]
algo = "c-admm"
ranks = 1
grid = { sync = ["full", "partial"], delays = ["srad"] }
""")
    folder = tmp_path / "out"
    r = omtl("sweep", sweep, "--out", folder, timeout=300)
    assert r.returncode == 0, r.stderr
    for run, unit in (("small.c.sync=full.delays=srad.s0", "seconds from the start of the rounds"),
                      ("small.c.sync=partial.delays=srad.s0", "simulated time units")):
        with h5py.File(folder / "runs" / f"{run}.h5") as f:
            at = f["timing/predicted_at"]
            assert str(at.attrs["unit"]).startswith(unit)
            assert at.shape == ((1, 120) if "full" in run else (3, 120))
            assert (np.diff(at[()], axis=1) > 0).all()        # every round starts later
            when, error, _ = error_in_time(f)
            assert when.shape == (360,) and (np.diff(when) >= 0).all()
            assert error[-1] == pytest.approx(f.attrs["overall_error"])
    summary = build_report(str(folder))
    assert any(p.endswith("time-small.png") for p in summary["figures"])
    assert (folder / "report" / "time-small.png").stat().st_size > 10000


@pytest.mark.parametrize("name", sorted(n for n, a in __import__(
    "omtl_mpi.algorithms.registry", fromlist=["REGISTRY"]).REGISTRY.items() if a.pattern == "server"))
def test_every_server_learner_runs_asynchronously_or_says_why_in_one_line(capsys, tmp_path, name):
    out = tmp_path / "run.h5"
    code, _, err = cli(capsys, "run", "--algo", name, "--synth-tasks", "3", "--synth-samples", "60",
                       "--sync", "partial", "--out", out)
    if code == 0:
        with h5py.File(out) as f:
            check_schedule(f["schedule/taken"][()], f["schedule/used"][()], 3, 60)
    else:
        refused(capsys, "run", "--algo", name, "--synth-tasks", "3", "--synth-samples", "60",
                "--sync", "partial", "--out", out, needle=f"error: {name} cannot run with --sync partial: ")
        assert not out.exists()


# ------------------------------------------------------------------ D-ADMM: gossip that lags
RING = [[1, 3], [0, 2], [1, 3], [0, 2]]


@pytest.mark.parametrize("TAU", [0, 1, 4])
def test_a_simulated_graph_schedule_keeps_every_table_within_the_delay_bound(TAU):
    from omtl_mpi.engine.partial_graph import check_graph_schedule, simulate_graph
    rng = np.random.default_rng(TAU)
    factors = rng.uniform(0.5, 3.0, (4, 50))
    factors[2] *= 4
    used = simulate_graph(factors, RING, TAU)[0]
    check_graph_schedule(used, RING, 4, 50, TAU)
    rounds = np.arange(50)[:, None]
    assert (used >= rounds - TAU).all()                     # never older than TAU rounds
    assert (np.diff(used, axis=1) >= 0).all()               # never older than the last one
    assert np.array_equal(used, simulate_graph(factors, RING, TAU)[0])
    if TAU:
        assert (used > rounds).any()         # a fast node's table from ahead of the reader
    # at an equal pace with TAU = 0: the neighbours' tables of the same round, as in lockstep
    assert (simulate_graph(np.ones((4, 5)), RING, 0)[0] == np.arange(5)[None, :, None]).all()


def test_a_damaged_graph_schedule_is_one_line():
    from omtl_mpi.engine.partial_graph import check_graph_schedule, simulate_graph
    used = simulate_graph(np.ones((4, 6)), RING, 1)[0]
    bad = used.copy()
    bad[1, 4, 0] = 1                                        # 3 rounds old, TAU 1
    with pytest.raises(UserError, match="older than --max-delay 1 allows"):
        check_graph_schedule(bad, RING, 4, 6, 1)
    with pytest.raises(UserError, match="is for 4 nodes and 6 rounds of 2 neighbours"):
        check_graph_schedule(used, RING, 4, 7, 1)


def test_d_admm_in_lockstep_is_synchronous_d_admm_and_lags_otherwise(capsys, tmp_path):
    data = ("--algo", "d-admm", "--synth-tasks", "4", "--synth-samples", "200")
    sync, lock, lag, lag2 = (tmp_path / f"{n}.h5" for n in ("sync", "lock", "lag", "lag2"))
    assert cli(capsys, "run", *data, "--out", sync)[0] == 0
    assert cli(capsys, "run", *data, "--sync", "partial", "--max-delay", "0", "--out", lock)[0] == 0
    assert differing(sync, lock) == []
    for out in (lag, lag2):
        assert cli(capsys, "run", *data, "--sync", "partial", "--slow", "2:5", "--out", out)[0] == 0
    assert differing(lag, lag2) == [] and "predictions" in differing(sync, lag)
    with h5py.File(lag) as f:
        used = f["schedule/used"][()]
        assert used.shape == (4, 200, 2) and "taken" not in f["schedule"]
        assert f["timing/staleness"].shape == (4, 200)
    again = tmp_path / "again.h5"
    assert cli(capsys, "run", "--replay", lag, "--out", again)[0] == 0
    assert differing(lag, again) == []


# d-admm with the vote's mixture prior runs: tests/test_gossiped_prior.py
@pytest.mark.parametrize("args, message", [
    (["--algo", "d-psgd"], "d-psgd cannot run with --sync partial: its nodes average"),
    (["--algo", "d-admm", "--min-workers", "2"], "--min-workers does nothing for this run"),
    (["--algo", "pa"], "--sync does nothing for this run: pa learns every task alone"),
])
def test_what_cannot_gossip_asynchronously_says_so_in_one_line(capsys, args, message):
    refused(capsys, "run", "--synth-samples", "50", "--sync", "partial", *args, needle=message)


@pytest.mark.mpi
def test_an_asynchronous_d_admm_run_is_replayed_bit_for_bit(mpiexec, capsys, tmp_path):
    run, again = tmp_path / "run.h5", tmp_path / "again.h5"
    r = omtl("run", "--algo", "d-admm", "--topology", "ring", "--synth-tasks", "4",
             "--synth-samples", "300", "--sync", "partial", "--max-delay", "3", "--slow", "1:4",
             "--out", run, np_ranks=4, timeout=120)
    assert r.returncode == 0, r.stderr
    with h5py.File(run) as f:
        used = f["schedule/used"][()]
    from omtl_mpi.engine.partial_graph import check_graph_schedule
    check_graph_schedule(used, RING, 4, 300, 3)
    code, _, err = cli(capsys, "run", "--replay", run, "--out", again)
    assert code == 0, err
    assert differing(run, again) == []


@pytest.mark.mpi
def test_asynchronous_d_admm_with_tables_above_the_eager_limit_never_waits_on_itself(
        mpiexec, tmp_path):
    """A table of ~64 KiB (400 tasks' rows of the paper's table) is sent only once its receiver
    has posted a receive: nodes that waited for their sends, or for one neighbour, without
    taking the other neighbours' tables hung now and then (PeerTimeout in about 2 runs of 5)."""
    for _ in range(4):
        r = omtl("run", "--algo", "d-admm", "--topology", "ring", "--preset", "paper",
                 "--synth-tasks", "400", "--synth-samples", "100", "--sync", "partial",
                 "--out", tmp_path / "run.h5", np_ranks=3, timeout=120)
        assert r.returncode == 0, r.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("algo, fail_rank", [("c-admm", 0), ("c-admm", 2), ("d-admm", 1)])
def test_a_rank_that_fails_in_asynchronous_rounds_ends_the_job(mpiexec, tmp_path, algo, fail_rank):
    out = tmp_path / "never.h5"
    r = omtl("run", "--algo", algo, "--synth-samples", "3000", "--sync", "partial", "--fail-at",
             "300", "--fail-rank", fail_rank, "--out", out, np_ranks=4, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert lines == [f"error: [rank {fail_rank}] InjectedFailure: injected failure at round 300 "
                     "(--fail-at); ending the job"]
    assert not out.exists()


@pytest.mark.parametrize("tasks", [4, 12])
def test_an_asynchronous_run_resumed_from_its_checkpoint_is_the_uninterrupted_run(
        capsys, tmp_path, tasks):
    """A checkpoint's cut (every worker ends the round, the server takes every message left)
    is part of the schedule: in one process the run resumed there is the uninterrupted run
    with the same --checkpoint-every, bit for bit (12 tasks: with the served prior's state,
    an EM step's sums sent or still to send among it)."""
    base = ("run", "--synth-tasks", tasks, "--synth-samples", "300", "--sync", "partial",
            "--min-workers", "1", "--delays", "srad", "--checkpoint-every", "100")
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    assert cli(capsys, *base, "--out", whole)[0] == 0
    code, _, err = cli(capsys, *base, "--fail-at", "250", "--out", part)
    assert code == 1 and not part.exists(), err
    ckpt = tmp_path / "part.ckpt.h5"
    assert cli(capsys, *base, "--resume", ckpt, "--out", part)[0] == 0
    assert differing(whole, part) == []
    with h5py.File(whole) as f:
        taken = f["schedule/taken"][()]
    for cut in (100, 200):          # nothing before a cut is taken with anything after it
        assert taken[:, :cut].max() < taken[:, cut:].min()


@pytest.mark.mpi
def test_an_asynchronous_mpi_run_resumed_from_its_checkpoint_replays_bit_for_bit(
        mpiexec, capsys, tmp_path):
    part, again = tmp_path / "part.h5", tmp_path / "again.h5"
    base = ("run", "--synth-tasks", "4", "--synth-samples", "400", "--sync", "partial",
            "--min-workers", "1", "--slow", "1:3", "--checkpoint-every", "150")
    r = omtl(*base, "--fail-at", "250", "--fail-rank", "2", "--out", part, np_ranks=5, timeout=120)
    assert r.returncode == 1 and not part.exists(), r.stderr
    r = omtl(*base, "--resume", tmp_path / "part.ckpt.h5", "--out", part, np_ranks=5, timeout=120)
    assert r.returncode == 0, r.stderr
    with h5py.File(part) as f:
        taken, used = f["schedule/taken"][()], f["schedule/used"][()]
    check_schedule(taken, used, 4, 400)
    assert taken[:, :150].max() < taken[:, 150:].min()
    assert cli(capsys, "run", "--replay", part, "--out", again)[0] == 0
    assert differing(part, again) == []


def test_asynchronous_d_admm_resumed_from_its_checkpoint_is_the_uninterrupted_run(capsys, tmp_path):
    base = ("run", "--algo", "d-admm", "--synth-tasks", "4", "--synth-samples", "300", "--sync",
            "partial", "--max-delay", "3", "--delays", "srad", "--checkpoint-every", "100")
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    assert cli(capsys, *base, "--out", whole)[0] == 0
    assert cli(capsys, *base, "--fail-at", "250", "--out", part)[0] == 1
    assert cli(capsys, *base, "--resume", tmp_path / "part.ckpt.h5", "--out", part)[0] == 0
    assert differing(whole, part) == []


@pytest.mark.mpi
def test_asynchronous_d_admm_over_mpi_resumed_replays_bit_for_bit(mpiexec, capsys, tmp_path):
    part, again = tmp_path / "part.h5", tmp_path / "again.h5"
    base = ("run", "--algo", "d-admm", "--topology", "ring", "--synth-tasks", "4",
            "--synth-samples", "400", "--sync", "partial", "--max-delay", "3", "--slow", "1:3",
            "--checkpoint-every", "150")
    r = omtl(*base, "--fail-at", "250", "--fail-rank", "2", "--out", part, np_ranks=4, timeout=120)
    assert r.returncode == 1 and not part.exists(), r.stderr
    r = omtl(*base, "--resume", tmp_path / "part.ckpt.h5", "--out", part, np_ranks=4, timeout=120)
    assert r.returncode == 0 and "pending" not in r.stderr, r.stderr
    assert cli(capsys, "run", "--replay", part, "--out", again)[0] == 0
    assert differing(part, again) == []
