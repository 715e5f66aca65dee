"""What `omtl-mpi run` refuses, in one line and exit 2, before any work where it can: options
that do nothing or cannot work, synthetic options with a data file, a --fail-rank outside the
job; a model gone non-finite is an error, never a result; and whatever values its options are
given (hypothesis: random values run end to end, the hostile corpus's values, runs under two
ranks), the only outcomes are the project's own one-line error or a finite result.

Outputs over inputs are tests/test_outputs.py's; damaged input files tests/test_files.py's."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import CASES, HOSTILE, allowed, cli_exit, damaged, forked, omtl_forked as omtl, one_line_error

SMALL = ("--synth-tasks", "3", "--synth-samples", "60")


@pytest.fixture
def data(tasks_3x60):
    return tasks_3x60


# ----------------------------------------------------------------------------- options that do nothing
@pytest.mark.parametrize("args, needle", [
    (["--topology", "ring"], "--topology does nothing"),
    (["--algo", "arow", "--nodes", "3"], "--nodes does nothing"),
    (["--w-step", "euclid", "--arow-r", "2"], "--arow-r does nothing"),
    (["--delta", "2"], "--delta does nothing"),
    (["--omega-every", "3"], "--omega-every does nothing"),
    (["--algo", "admm-single", "--omega-eps", "0.1"], "--omega-eps does nothing"),
    (["--checkpoint", "c.h5"], "--checkpoint does nothing without --checkpoint-every"),
    (["--fail-rank", "1"], "--fail-rank does nothing without --fail-at"),
    (["--fail-mode", "kill"], "--fail-mode does nothing without --fail-at"),
    (["--fail-at", "3", "--fail-rank", "1"], "--fail-rank 1 is not a rank of this job (ranks 0..0)"),
    (["--fail-at", "3", "--fail-rank", "2", "--np", "2"], "--fail-rank 2 is not a rank"),
    (["--eta", "0"], "--eta must be > 0"),
    (["--batch", "61"], "--batch 61 is more than the longest stream (60 instances)"),
])
def test_options_that_do_nothing_or_cannot_work_are_refused(tmp_path, args, needle):
    one_line_error(omtl("run", *SMALL, *args, cwd=tmp_path), needle)
    assert os.listdir(tmp_path) == []


def test_synthetic_options_with_a_data_file_are_refused(data):
    one_line_error(omtl("run", "--data", data, "--synth-samples", "30"), "--synth-samples does nothing")


def test_the_options_that_do_act_are_accepted(tmp_path):
    r = omtl("run", *SMALL, "--w-step", "adagrad", "--delta", "2", "--relationship",
             "--omega-every", "3", "--json")
    assert r.returncode == 0, r.stderr
    r = omtl("run", *SMALL, "--algo", "d-admm", "--topology", "full", "--nodes", "3", "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.mpi
def test_fail_rank_beyond_the_world_under_mpiexec(mpiexec):
    one_line_error(omtl("run", *SMALL, "--fail-at", "3", "--fail-rank", "5", np_ranks=2),
                   "--fail-rank 5 is not a rank of this job (ranks 0..1)")


# ----------------------------------------------------------------------------- non-finite models
@pytest.mark.parametrize("args", [
    [],
    ["--np", "2"],
    ["--np", "3", "--algo", "d-admm"],
    ["--w-step", "euclid"],
    ["--checkpoint-every", "50"],
])
@pytest.mark.mpi
def test_a_model_gone_non_finite_is_an_error_not_a_result(tmp_path, args):
    out = tmp_path / "run.h5"
    r = omtl("run", "--synth-samples", "300", "--class-weight", "1e12", "--out", out, *args)
    line = one_line_error(r, "went non-finite (NaN or inf) by round", "--class-weight")
    # found by a periodic check (every 100 rounds, or before a checkpoint every 50) before the
    # last round's: these settings overflow within the first 200 rounds of 300
    found = int(line.split("by round ")[1].split()[0])
    assert found <= 200, line
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]



# ------------------------------------------------------ random command-line values (hypothesis)
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**6),
                    st.sampled_from(["abc", "", "1e309", "-0", "nan"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(algo=st.sampled_from(["c-admm", "d-admm", "d-psgd", "drom", "pa", "nope"]),
       option=st.sampled_from(["--rho", "--eta", "--lambda1", "--lambda4", "--omega-every", "--omega-eps",
                               "--gamma0", "--mu", "--tau", "--C", "--batch", "--nodes", "--seed",
                               "--synth-tasks", "--synth-samples", "--cap"]),
       value=st.one_of(st.floats(0.001, 100), st.integers(1, 40), numbers),
       topology=st.sampled_from(["ring", "full", "star", "torus", "moebius", "erdos-renyi"]))
def test_random_command_line_values(tmp_path, capsys, algo, option, value, topology):
    # keep each example quick: thousands of tasks are a valid run, but one eigendecomposition
    # of a K x K Omega per round takes minutes (and K = 20000 needs most of the machine's
    # memory). The drawn value is capped, not the fixed --synth-tasks 3 before it.
    cap = {"--synth-samples": 2000, "--synth-tasks": 50}.get(option)
    if cap is not None and isinstance(value, (int, float)) and value > cap:
        value = cap
    args = ["run", "--algo", algo, "--synth-tasks", "3", "--synth-samples", "30", "--topology", topology,
            option, value, "--out", tmp_path / "r.h5", "--json"]
    code = cli_exit(args)
    event(f"exit {code}")
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert err.strip(), "an error exit printed nothing"
        assert not (tmp_path / "r.h5").exists()
    else:
        read = __import__("h5py").File(tmp_path / "r.h5")
        assert np.isfinite(read["metrics/mean_curve"][()]).all()
        read.close()
        os.remove(tmp_path / "r.h5")


def test_drom_with_an_omega_it_cannot_invert_is_one_line(capsys):
    """What the property test above found: Frank-Wolfe makes DROM's Omega nearly rank one, and
    a tiny --omega-eps leaves Omega + eps I singular."""
    code = cli_exit(["run", "--algo", "drom", "--omega-eps", "5.476761068851331e-113",
                     "--synth-samples", "300"])
    err = capsys.readouterr().err
    assert code == 2 and "Omega + eps I is singular" in err and "--omega-eps" in err
    assert "Traceback" not in err and err.count("\n") == 1


# ------------------------------ hostile option values (hypothesis, the same cases on every run)


RUN_OPTIONS = ["--rho", "--eta", "--lambda1", "--lambda2", "--lambda3", "--lambda4", "--batch",
               "--seed", "--class-weight", "--arow-r", "--w-step", "--loss", "--variant", "--scale",
               "--omega-every", "--omega-eps", "--delta", "--synth-seed", "--checkpoint-every",
               "--fail-at", "--topology", "--nodes", "--algo", "--preset", "--aslr"]


TINY = ["--synth-tasks", "3", "--synth-samples", "40"]


@CASES
@given(picked=st.lists(st.tuples(st.sampled_from(RUN_OPTIONS), HOSTILE), min_size=1, max_size=3,
                       unique_by=lambda t: t[0]),
       extra=st.sampled_from([[], ["--relationship"], ["--w-step", "euclid"], ["--algo", "d-admm"]]))
def test_hostile_run_options(tmp_path, picked, extra):
    results = tmp_path / "r.h5"
    results.unlink(missing_ok=True)          # hypothesis runs every example in one tmp_path
    args = ["run", *TINY, *extra, *[x for pair in picked for x in pair], "--json", "--out", results]
    code, out, err = forked(*args)
    if allowed(code, out, err, args) == "refused":
        assert not results.exists()



@pytest.mark.parametrize("args", [
    ["--class-weight", "1e12", "--synth-samples", "300"],      # the model goes non-finite
    ["--eta", "0"],
    ["--topology", "ring"],
    ["--data", "{bad}"],
    ["--resume", "{bad}"],
])
@pytest.mark.mpi
def test_hostile_runs_under_two_ranks(files, tmp_path, args):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(damaged(files["data"].read_bytes(), "truncate", 0.5, 1))
    args = ["run", "--np", "2", *[str(a).format(bad=bad) for a in args], "--json",
            "--out", tmp_path / "r.h5"]
    code, out, err = forked(*args)
    err = "\n".join(ln for ln in err.splitlines() if not ln.startswith("Abort("))   # MPICH's own
    assert allowed(code, out, err, args) == "refused"
    assert not (tmp_path / "r.h5").exists()
