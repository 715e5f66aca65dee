"""Ranks on separate hosts that talk over real links: the hosts of tests/cluster/hosts.sh (network
namespaces of this machine, run by tests/cluster/run.sh), MPI forced onto TCP.

Run by ``make test-cluster`` (root) after ``tests/cluster/hosts.sh up 3``; every test has a limit.
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import differing, read_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTS = os.path.join(ROOT, "tests", "cluster", "hosts.sh")
BIN = os.path.dirname(sys.executable)
LIMIT = 180

pytestmark = [pytest.mark.cluster, pytest.mark.mpi]


def _up() -> bool:
    return subprocess.run([HOSTS, "exec", "h2", "true"], capture_output=True).returncode == 0


@pytest.fixture(scope="module", autouse=True)
def hosts():
    if os.geteuid() != 0 or not _up():
        pytest.fail("the hosts of tests/cluster/hosts.sh are not up: run 'make test-cluster' as root")


def _command(n, *args, hosts="h0,h1,h2", env=None, timeout=LIMIT, python=sys.executable) -> list:
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    return [HOSTS, "exec", "h0", "env", "UCX_TLS=tcp", f"PATH={BIN}:{os.environ['PATH']}",
            f"MPIEXEC_TIMEOUT={timeout - 10}", "PYTHONUNBUFFERED=1", *extra,
            os.path.join(BIN, "mpiexec"), "-genvall", "-hosts", hosts, "-launcher", "ssh",
            "-launcher-exec", HOSTS, "-n", str(n), python, "-m", "mpi4py", "-m",
            "omtl_mpi", *map(str, args)]


def on_hosts(n, *args, hosts="h0,h1,h2", env=None, timeout=LIMIT, python=sys.executable):
    """``omtl-mpi ARGS`` under mpiexec -n N, started on h0 and spread over ``hosts`` (hydra's
    ssh launcher is hosts.sh), the ranks forced onto TCP, run by ``python``."""
    return subprocess.run(_command(n, *args, hosts=hosts, env=env, timeout=timeout, python=python),
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def here(n, *args, timeout=LIMIT):
    """The same command on this machine's own network (mpiexec -n N; in one process: n None)."""
    cmd = [sys.executable, "-m", "omtl_mpi", *map(str, args)]
    if n is not None:
        cmd = [os.path.join(BIN, "mpiexec"), "-n", str(n), sys.executable, "-m", "mpi4py", *cmd[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def link_bytes(host: str) -> int:
    """Bytes sent and received so far on ``host``'s link."""
    line = next(l for l in subprocess.run([HOSTS, "exec", host, "cat", "/proc/net/dev"],
                                          capture_output=True, text=True).stdout.splitlines()
                if l.strip().startswith("eth0:"))
    fields = line.split(":", 1)[1].split()
    return int(fields[0]) + int(fields[8])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("hosts") / "tasks.h5"
    r = here(None, "data", "synth", "-o", path, "--tasks", "4", "--samples", "300", "--seed", "3")
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.parametrize("algo, n, options", [
    ("c-admm", 5, []), ("c-admm", 5, ["--preset", "paper"]),
    ("d-admm", 4, ["--topology", "ring"]), ("d-admm", 4, ["--topology", "full"]),
])
def test_over_three_hosts_the_bits_of_one_machine(data, tmp_path, algo, n, options):
    across, local, one = tmp_path / "across.h5", tmp_path / "local.h5", tmp_path / "one.h5"
    args = ("run", "--algo", algo, "--data", data, *options, "--json")
    before = link_bytes("h1")
    r = on_hosts(n, *args, "--out", across)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(set(report["hosts"])) == ["h0", "h1", "h2"]
    assert report["transport_env"] == "UCX_TLS=tcp" and report["shared_memory_across_hosts"] == []
    # what the ranks on h1 sent and received crossed its link (and more: TCP's own bytes)
    on_h1 = [r for r, h in enumerate(report["hosts"]) if h == "h1"]
    counted = sum(sum(report["bytes_per_round"][r]) for r in on_h1) * report["rounds"]
    assert link_bytes("h1") - before >= counted > 0
    assert here(n, *args, "--out", local).returncode == 0
    assert here(None, *args, "--out", one).returncode == 0
    assert differing(across, local) == []                      # the same ranks: the same bits
    a, c = read_results(across), read_results(one)
    for key in (k for k in a if k != "attrs"):
        assert np.allclose(a[key], c[key], rtol=0, atol=1e-10), key    # one process: to 1e-10


def test_a_shaped_link_changes_the_time_and_not_the_result(data, tmp_path):
    fast, slow = tmp_path / "fast.h5", tmp_path / "slow.h5"
    args = ("run", "--preset", "paper", "--data", data, "--json")
    r = on_hosts(5, *args, "--out", fast)
    assert r.returncode == 0, r.stderr
    subprocess.run([HOSTS, "shape", "3", "1mbit"], check=True)
    try:
        r = on_hosts(5, *args, "--out", slow)
    finally:
        subprocess.run([HOSTS, "shape", "3", "none"], check=True)
    assert r.returncode == 0, r.stderr
    assert differing(fast, slow) == []
    with h5py.File(fast) as f, h5py.File(slow) as g:
        print(f"ms a round, unshaped {f.attrs['ms_per_round']:.3f}, 1 Mbit/s {g.attrs['ms_per_round']:.3f}")


def test_an_asynchronous_run_over_hosts_is_replayed_here(data, tmp_path):
    run, again = tmp_path / "run.h5", tmp_path / "again.h5"
    r = on_hosts(5, "run", "--data", data, "--sync", "partial", "--min-workers", "1",
                 "--slow", "2:3", "--out", run)
    assert r.returncode == 0, r.stderr
    assert here(None, "run", "--replay", run, "--out", again).returncode == 0
    assert differing(run, again) == []


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_a_rank_failing_on_another_host_ends_the_job(data, tmp_path, mode):
    out = tmp_path / "never.h5"
    r = on_hosts(5, "run", "--synth-samples", "20000", "--fail-at", "500", "--fail-rank", "2",
                 "--fail-mode", mode, "--out", out, timeout=90)
    assert r.returncode != 0
    if mode == "raise":
        assert [l for l in r.stderr.splitlines() if l.startswith("error:")] == [
            "error: [rank 2] InjectedFailure: injected failure at round 500 (--fail-at); ending the job"]
    assert not out.exists()


def test_lone_copies_on_three_hosts_stop_with_one_line_each_before_any_file(data, tmp_path):
    # hydra (MPICH) starts the copies on the three hosts, but this interpreter's mpi4py is Open
    # MPI's: each copy is a world of one rank, and would run the whole job alone
    python = os.environ.get("OMTL_MPI_OPENMPI_PYTHON", "")
    if not os.access(python, os.X_OK):
        pytest.fail("no Open MPI environment: run through 'make test-cluster' (it makes .venv-openmpi)")
    out = tmp_path / "run.h5"
    r = on_hosts(3, "run", "--data", data, "--out", out, python=python, timeout=90)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and len(set(errors)) == 1, r.stderr      # one line per copy
    assert "mpiexec started 3 copies" in errors[0] and "Open MPI" in errors[0]
    assert not out.exists()


def test_a_host_whose_link_goes_down_ends_the_job_within_seconds(tmp_path):
    """The link of h2 deleted mid-run: TCP would say nothing for minutes; the ranks waiting for
    h2's give up after OMTL_MPI_PEER_TIMEOUT seconds with one line each, and every rank ends,
    those on h2 too (cut off from the launcher, they end themselves). The link is cut once the
    rounds run (the first checkpoint written), not at a fixed time: set-up waits have no limit,
    and on a loaded machine set-up can outlast any fixed delay."""
    import time
    out, ckpt = tmp_path / "never.h5", tmp_path / "never.ckpt.h5"
    marker = str(out)
    cmd = _command(5, "run", "--synth-samples", "200000", "--no-progress", "--out", out,
                   "--checkpoint-every", "2000", env={"OMTL_MPI_PEER_TIMEOUT": "4"}, timeout=150)
    job = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not ckpt.exists() and job.poll() is None:
            assert time.monotonic() < deadline, "the run wrote no checkpoint in 90 s"
            time.sleep(0.1)
        subprocess.run([HOSTS, "cut", "h2"], check=True)
        t0 = time.monotonic()
        _, stderr = job.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
        subprocess.run([HOSTS, "down", "3"], check=True)       # h2 again, for the tests after
        subprocess.run([HOSTS, "up", "3"], check=True)
    assert job.returncode != 0 and took < 30, (job.returncode, took, stderr[-2000:])
    errors = [l for l in stderr.splitlines() if l.startswith("error:")]
    assert errors and all("PeerTimeout: no message from the ranks this one waits for in 4 s" in l
                          for l in errors), stderr[-2000:]
    assert not out.exists()
    deadline = time.monotonic() + 15
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a rank outlived its job"
        time.sleep(0.5)


def test_a_run_over_hosts_resumes_from_its_checkpoint_to_the_same_bits(data, tmp_path):
    whole, part, ckpt = tmp_path / "whole.h5", tmp_path / "part.h5", tmp_path / "part.ckpt.h5"
    args = ("run", "--preset", "paper", "--data", data)
    assert on_hosts(5, *args, "--out", whole).returncode == 0
    r = on_hosts(5, *args, "--checkpoint-every", "100", "--fail-at", "150", "--fail-rank", "3",
                 "--out", part)
    assert r.returncode == 1 and ckpt.exists() and not part.exists(), r.stderr
    r = on_hosts(5, *args, "--checkpoint-every", "100", "--resume", ckpt, "--out", part)
    assert r.returncode == 0, r.stderr
    assert differing(whole, part) == []


def test_stopping_the_command_ends_every_rank_on_every_host(tmp_path):
    import signal
    import time
    out = tmp_path / "never.h5"
    cmd = _command(5, "run", "--synth-samples", "500000", "--no-progress", "--out", out)
    job = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    time.sleep(6)
    os.killpg(job.pid, signal.SIGINT)           # Ctrl-C: to the command's process group
    job.wait(timeout=30)
    deadline = time.monotonic() + 15
    while subprocess.run(["pgrep", "-f", str(out)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a rank outlived the command"
        time.sleep(0.5)
    assert not out.exists()


# a sweep of two runs, C-ADMM on 5 ranks and D-ADMM on 4, each with ranks to spread
SWEEP = """
seeds = [0]
[data.small]
synthetic = { tasks = 4, samples = 200 }
[algorithms.c]
algo = "c-admm"
ranks = 5
[algorithms.d]
algo = "d-admm"
ranks = 4
"""


def test_a_sweep_whose_runs_span_the_hosts(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("h0\nh1\nh2\n")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP)
    folder = tmp_path / "out"
    cmd = [HOSTS, "exec", "h0", "env", "UCX_TLS=tcp", f"PATH={BIN}:{os.environ['PATH']}",
           f"HYDRA_HOST_FILE={hostfile}", "HYDRA_LAUNCHER=ssh", f"HYDRA_LAUNCHER_EXEC={HOSTS}",
           sys.executable, "-m", "omtl_mpi", "sweep", str(sweep), "--out", str(folder)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    for run in ("small.c.s0", "small.d.s0"):
        with h5py.File(folder / "runs" / f"{run}.h5") as f:
            assert sorted({h.decode() for h in f["timing/hosts"][()]}) == ["h0", "h1", "h2"]
