"""A command stopped by SIGTERM, SIGHUP or SIGINT (docs/RELIABILITY.md, "The promise"): at any
moment, start-up included, in one process, under ``--np`` and on every MPI rank, it removes its
temporary files, says so in one line and exits 128 + the signal's number; a resumed sweep
removes what its killed runs left; stopping `run --np` stops mpiexec and every rank, and
writes nothing.

Every command here is a subprocess with a timeout; the signals are sent while a temporary
file is being written (the checkpoint of a run, written every few hundred rounds, or the
output of a data command), found by polling its folder.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, MPIEXEC, TIMEOUT, _env

SCRIPT = os.path.join(BIN, "omtl-mpi")
STOPPING = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.fixture(scope="module")
def long_tasks(tmp_path_factory):
    """4 synthetic tasks of 40,000 instances: a run of several seconds."""
    path = tmp_path_factory.mktemp("long") / "long.h5"
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "data", "synth", "-o", str(path),
                        "--tasks", "4", "--samples", "40000"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=_env())
    assert r.returncode == 0, r.stderr
    return path


def _as_a_terminal_leaves_them():
    # a test run in the background of a shell inherits SIGINT ignored, which a command keeps
    # (as it should: that is how a shell protects its background jobs from Ctrl-C)
    for sig in STOPPING:
        signal.signal(sig, signal.SIG_DFL)


def start(args, cwd, script=False):
    cmd = [SCRIPT] if script else [sys.executable, "-m", "omtl_mpi"]
    return subprocess.Popen(cmd + [str(a) for a in args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_as_a_terminal_leaves_them)


def wait_for(proc, pattern, timeout=TIMEOUT):
    """Poll until a file matching ``pattern`` exists (the command still running)."""
    deadline = time.monotonic() + timeout
    while not glob.glob(str(pattern)):
        if proc.poll() is not None:
            pytest.fail(f"the command ended (exit {proc.returncode}) before {pattern} appeared:\n"
                        f"{proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {pattern} within {timeout} s")
        time.sleep(0.001)


def stop(proc, sig, timeout=60):
    """Send ``sig``; (exit code, stderr lines that are not blank)."""
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err
    return proc.returncode, [ln for ln in err.splitlines() if ln.strip()]


def temporary_files(folder):
    return sorted(glob.glob(os.path.join(folder, "**", "*.tmp*"), recursive=True))


# ------------------------------------------------------------------ one process
@pytest.mark.parametrize("sig, script", [(signal.SIGTERM, False), (signal.SIGHUP, False),
                                         (signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT", "SIGTERM-script"])
def test_a_run_stopped_while_writing_removes_its_temporary_file(long_tasks, tmp_path, sig, script):
    proc = start(["run", "--data", long_tasks, "--out", "r.h5", "--checkpoint-every", "500"],
                 tmp_path, script)
    wait_for(proc, tmp_path / "r.ckpt.h5.tmp-*")
    code, lines = stop(proc, sig)
    assert code == 128 + sig, lines
    assert lines == [f"error: interrupted by {sig.name}"]
    assert temporary_files(tmp_path) == [] and not (tmp_path / "r.h5").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("command", ["synth", "text-csv"])
def test_data_commands_stopped_while_writing_leave_nothing(tmp_path, command, sig):
    if command == "synth":
        args = ["data", "synth", "-o", "out.h5", "--tasks", "4", "--samples", "200000"]
    else:
        words = ["good", "bad", "great", "awful", "fine", "love", "hate", "nice"]
        rows = (f"{' '.join(words[(i * 7 + j) % 8] for j in range(6))},{'pos' if i % 3 else 'neg'}"
                for i in range(50000))
        (tmp_path / "t.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
        args = ["data", "import", "text-csv", "t.csv", "--label-map", "pos=1,neg=-1", "-o", "out.h5"]
    before = {p: os.stat(p).st_mtime_ns for p in glob.glob(str(tmp_path / "*"))}
    proc = start(args, tmp_path)
    wait_for(proc, tmp_path / "out.h5.tmp-*")
    code, lines = stop(proc, sig)
    assert code == 128 + sig and lines == [f"error: interrupted by {sig.name}"], lines
    assert temporary_files(tmp_path) == [] and not (tmp_path / "out.h5").exists()
    assert {p: os.stat(p).st_mtime_ns for p in glob.glob(str(tmp_path / "*"))} == before


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (the SigCgt mask of /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(mask >> (sig - 1) & 1)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupt_during_start_up_is_one_line(tmp_path, sig, delay):
    """From the moment the entry point has installed its handler (first thing, before click,
    numpy and the rest are imported), through the imports and the set-up of a run."""
    proc = start(["run", "--synth-samples", "400000", "--out", "r.h5"], tmp_path)
    deadline = time.monotonic() + TIMEOUT
    while not _catches(proc.pid, signal.SIGTERM):         # only the entry point sets that one
        assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
        time.sleep(0.0005)
    time.sleep(delay)
    code, lines = stop(proc, sig)
    assert code == 128 + sig and lines == [f"error: interrupted by {sig.name}"], lines
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ MPI
@pytest.mark.mpi
@pytest.mark.parametrize("sig", STOPPING, ids=lambda s: s.name)
def test_np_2_stopped_while_writing_leaves_no_temporary_file(mpiexec, long_tasks, tmp_path, sig):
    """The launcher passes the signal on (SIGHUP as SIGTERM: MPICH's mpiexec dies of SIGHUP
    and kills the ranks before they can clean up), each rank removes its temporary file, and
    the launcher removes any a killed rank left."""
    out = tmp_path / "r.h5"
    proc = start(["run", "--np", "2", "--data", long_tasks, "--out", out, "--checkpoint-every", "500"],
                 tmp_path)
    wait_for(proc, tmp_path / "r.ckpt.h5.tmp-*")
    code, lines = stop(proc, sig)
    assert code == 128 + sig, lines
    assert lines == [f"error: stopped by {sig.name}: every rank of the job has ended"]
    assert temporary_files(tmp_path) == [] and not out.exists()
    deadline = time.monotonic() + 5
    while _ranks_of(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ranks_of(str(out)) == []


@pytest.mark.mpi
def test_every_rank_handles_sigterm_under_mpiexec(mpiexec, long_tasks, tmp_path):
    """mpiexec started by hand passes SIGTERM on to the ranks: each one ends in one line
    naming its rank, rank 0 having removed its temporary file."""
    out = tmp_path / "r.h5"
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", "-m", "omtl_mpi",
                             "run", "--data", str(long_tasks), "--out", str(out),
                             "--checkpoint-every", "500"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=_as_a_terminal_leaves_them)
    wait_for(proc, tmp_path / "r.ckpt.h5.tmp-*")
    code, lines = stop(proc, signal.SIGTERM)
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert errors and all(ln.endswith("interrupted by SIGTERM") and "[rank " in ln for ln in errors), lines
    assert temporary_files(tmp_path) == [] and not out.exists()


# ------------------------------------------------------------------ sweeps
SWEEP = ('seeds = [0, 1, 2]\n[data.s]\nsynthetic = {{ tasks = 2, samples = {samples} }}\n'
         '[algorithms.pa]\n')


@pytest.mark.mpi
def test_a_sweep_stopped_by_sigterm_keeps_what_finished_and_exits_143(tmp_path):
    (tmp_path / "s.toml").write_text(SWEEP.format(samples=60000))
    proc = start(["sweep", "s.toml", "--out", "sw"], tmp_path)
    wait_for(proc, tmp_path / "sw" / "logs" / "*.log")
    time.sleep(0.5)
    code, lines = stop(proc, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, lines
    assert any("interrupted by SIGTERM" in ln for ln in lines), lines
    assert temporary_files(tmp_path / "sw") == []


@pytest.mark.mpi
def test_a_resumed_sweep_removes_what_killed_runs_left(tmp_path):
    (tmp_path / "s.toml").write_text(SWEEP.format(samples=30))
    from omtl_mpi.sweep import load_plan
    ids = [run.id for run in load_plan(str(tmp_path / "s.toml")).runs]
    runs = tmp_path / "sw" / "runs"
    runs.mkdir(parents=True)
    gone = subprocess.Popen(["true"])
    gone.wait()                             # a process id that no process has now
    stale = [runs / f"{ids[0]}.h5.tmp-{gone.pid}", runs / f"{ids[1]}.ckpt.h5.tmp-{gone.pid}",
             tmp_path / "sw" / f"index.json.tmp-{gone.pid}"]
    live = runs / f"{ids[2]}.h5.tmp-{os.getpid()}"             # a writer still at work: kept
    other = runs / f"unrelated.h5.tmp-{gone.pid}"              # not a file of this sweep: kept
    for path in stale + [live, other]:
        path.write_bytes(b"half-written")
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "sweep", "s.toml", "--out", "sw", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["states"] == {"done": 3}
    assert [p for p in stale if p.exists()] == [] and live.exists() and other.exists()


def test_an_interrupt_where_python_cannot_raise_still_ends_the_command(tmp_path):
    """A signal whose handler runs inside a ``__del__`` (or a weakref callback, or a callback
    from C such as h5py's conversions), where an exception would be printed and swallowed:
    the command still ends, in one line, its temporary file removed."""
    code = """if True:
        import os, signal, sys, time
        from omtl_mpi.errors import stop_on_signals
        from omtl_mpi.atomic import atomic_path
        stop_on_signals()
        class Dropped:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10 ** 5):        # the handler runs in here
                    pass
        with atomic_path("out.h5") as tmp:
            open(tmp, "w").close()
            Dropped()
            time.sleep(10)
        print("not interrupted")
    """
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=_env(), preexec_fn=_as_a_terminal_leaves_them)
    assert r.returncode == 128 + signal.SIGTERM, (r.stdout, r.stderr)
    assert r.stdout == "" and r.stderr == "error: interrupted by SIGTERM\n"
    assert os.listdir(tmp_path) == []


def test_a_signal_after_the_work_is_done_is_ignored():
    """Python's exit sets the default action back for signals with a handler, so a SIGTERM in
    a command's last milliseconds ended it with -15 and no line (its outputs complete): once
    the work is done (omtl_mpi.errors.ended) the signals are ignored instead."""
    code = ("import os, signal; from omtl_mpi.errors import ended, stop_on_signals; "
            "stop_on_signals(); ended(); os.kill(os.getpid(), signal.SIGTERM); "
            "os.kill(os.getpid(), signal.SIGHUP); print('done')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "done\n" and r.stderr == "", (r.returncode, r.stderr)


# ----------------------------------------------------------- stopping run --np stops every rank
def _ranks_of(marker: str) -> list[str]:
    """Command lines of the processes started for the run that writes ``marker`` (mpiexec and
    its ranks), from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in args and ("mpiexec" in args or "mpi4py" in args):
            found.append(args)
    return found


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopping_the_np_launcher_stops_every_rank_and_writes_nothing(tmp_path, sig):
    out = tmp_path / f"stopped-{sig.name}.h5"
    proc = subprocess.Popen([sys.executable, "-m", "omtl_mpi", "run", "--np", "3",
                             "--synth-samples", "300000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.time() + 30
        while len(_ranks_of(str(out))) < 4 and time.time() < deadline:    # mpiexec + 3 ranks
            time.sleep(0.2)
        assert len(_ranks_of(str(out))) == 4
        time.sleep(1.0)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name}" in err
    deadline = time.time() + 5
    while _ranks_of(str(out)) and time.time() < deadline:
        time.sleep(0.2)
    assert _ranks_of(str(out)) == []
    time.sleep(1.0)
    assert os.listdir(tmp_path) == []
