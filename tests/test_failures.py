"""A rank that raises or dies ends the whole job, with its message, never a hang (--fail-at)."""
import subprocess
import time

import pytest

from conftest import omtl


def leftover(marker, within=5.0):
    """Processes whose command line holds ``marker`` still alive ``within`` seconds after the job
    returned (a rank killed by the abort may take a moment to be reaped: "within seconds")."""
    end = time.monotonic() + within
    while True:
        out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        if not out or time.monotonic() > end:
            return out
        time.sleep(0.2)


@pytest.mark.parametrize("algo, ranks, fail_rank", [("c-admm", 4, 0), ("c-admm", 4, 2),
                                                      ("d-admm", 3, 1), ("pa", 3, 2)])
@pytest.mark.mpi
def test_exception_on_one_rank_ends_the_job(mpiexec, tmp_path, algo, ranks, fail_rank):
    out = tmp_path / "never.h5"
    r = omtl("run", "--algo", algo, "--synth-samples", "5000", "--fail-at", "300",
             "--fail-rank", fail_rank, "--out", out, np_ranks=ranks, timeout=60)
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert lines == [f"error: [rank {fail_rank}] InjectedFailure: injected failure at round 300 "
                     "(--fail-at); ending the job"]
    assert not out.exists()
    assert not leftover(str(out))


@pytest.mark.mpi
@pytest.mark.parametrize("when, what", [("load", "while loading data"), ("write", "while writing results")])
@pytest.mark.parametrize("algo, ranks, fail_rank", [("c-admm", 4, 0), ("c-admm", 4, 3), ("d-admm", 3, 1)])
def test_failure_while_loading_or_writing_ends_the_job(mpiexec, tmp_path, when, what, algo, ranks, fail_rank):
    out = tmp_path / "never.h5"
    r = omtl("run", "--algo", algo, "--synth-samples", "200", "--fail-at", when,
             "--fail-rank", fail_rank, "--out", out, np_ranks=ranks, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert lines == [f"error: [rank {fail_rank}] InjectedFailure: injected failure {what} "
                     "(--fail-at); ending the job"]
    # rank 0 failing in the write had the file half-written under its temporary name: gone too
    assert not out.exists() and not list(tmp_path.glob("never.h5.tmp*"))
    assert not leftover(str(out))


def test_killed_rank_ends_the_job(mpiexec, tmp_path):
    out = tmp_path / "killed.h5"
    r = omtl("run", "--synth-samples", "5000", "--fail-at", "300", "--fail-rank", "2",
             "--fail-mode", "kill", "--out", out, np_ranks=4, timeout=60)
    # the signal that killed rank 2, as each mpiexec says it: hydra's status 9, Open MPI's 128 + 9
    assert r.returncode in (9, 128 + 9), (r.returncode, r.stderr)
    assert not out.exists()
    assert not leftover(str(out))


def test_in_process_failure_is_one_line(tmp_path):
    r = omtl("run", "--synth-samples", "500", "--fail-at", "5")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "injected failure at round 5" in r.stderr


@pytest.mark.parametrize("args, message", [(["--fail-at", "0"], "--fail-at must be a round number >= 1"),
                                           (["--fail-at", "later"], "'load' or 'write'")])
def test_bad_fault_options(args, message):
    r = omtl("run", "--synth-samples", "50", *args)
    assert r.returncode == 2 and message in r.stderr


@pytest.mark.parametrize("first,others", [(["--rho", "0.1"], ["--rho", "0.2"]),
                                          (["--algo", "pa"], ["--algo", "c-admm"])],
                         ids=["option", "learner"])
@pytest.mark.mpi
def test_ranks_started_differently_are_stopped_before_learning(mpiexec, tmp_path, first, others):
    """MPMD launch: rank 0 with one option value (or learner), ranks 1-2 with another. A learner
    of another kind take the same collective steps up to the agreement."""
    import sys
    from conftest import _env
    base = [sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run", "--synth-samples", "100",
            "--out", str(tmp_path / "r.h5")]
    cmd = [mpiexec, "-n", "1", *base, *first, ":", "-n", "2", *base, *others]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 2
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "ranks disagree on the configuration or the data set" in errors[0]
    assert not (tmp_path / "r.h5").exists()
