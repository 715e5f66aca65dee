"""Run the runs of a sweep, each as its own mpiexec job with a timeout, recorded in an index.

The sweep folder holds::

    index.json      every run ever recorded: status (done / failed / timeout), error, command,
                    seconds, summary figures; rewritten atomically after each run
    runs/ID.h5      each finished run's results file (written atomically by the run itself)
    logs/ID.log     each run's standard output and error

Re-running the same sweep skips the runs that are done with the same configuration, leaves
failed ones alone unless ``retry_failed``, and runs the rest. An interrupted sweep (Ctrl-C,
SIGTERM) stops its running jobs and keeps everything recorded so far.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from ..atomic import atomic_path
from ..errors import UserError
from ..paths import make_folder, refuse_inputs, regular_file
from ..runtime.launch import FORWARDED, ROOT_NOTICE, mpi_command, root_override, stop_group
from .plan import Plan, Run

INDEX = "index.json"
FORMAT = "omtl-mpi-sweep"
_KEEP = ("mean_error", "overall_error", "balanced_error", "f1", "ms_per_round", "seconds", "rounds", "tasks", "ranks")


class Interrupted(Exception):
    """The sweep was stopped by a signal; what finished is recorded."""


def read_index(folder: str) -> dict:
    """The sweep index of ``folder`` (an empty one if there is none yet)."""
    path = os.path.join(folder, INDEX)
    if not os.path.lexists(path):
        return {"format": FORMAT, "version": 1, "runs": {}}
    regular_file(path, "sweep index")          # a FIFO would block the sweep forever
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not a readable sweep index ({exc}); move it away to start afresh") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or not isinstance(index.get("runs"), dict):
        raise UserError(f"{path} is not an omtl-mpi sweep index; choose another --out folder")
    for rid, rec in index["runs"].items():
        if not isinstance(rec, dict) or not isinstance(rec.get("status"), str):
            raise UserError(f"{path}: the record of run {rid} has no status; the sweep index is "
                            "damaged: move it away and run the sweep again")
    return index


def write_index(folder: str, index: dict) -> None:
    path = os.path.join(folder, INDEX)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, sort_keys=False)


def command_of(run: Run, folder: str) -> list[str]:
    """The command that runs ``run``: one process for one rank, else mpiexec."""
    args = list(run.args) + ["--out", os.path.join(folder, "runs", run.id + ".h5"), "--json", "--no-progress"]
    if run.ranks == 1:
        return [sys.executable, "-m", "omtl_mpi", "run"] + args
    return mpi_command(run.ranks, ["run"] + args)


def status_of(run: Run, index: dict, folder: str) -> str:
    """'done' (finished with this configuration), 'failed', 'timeout', 'changed' or 'new'."""
    rec = index["runs"].get(run.id)
    if rec is None:
        return "new"
    if rec.get("config_hash") != run.config_hash:
        return "changed"
    if rec["status"] == "done" and not os.path.exists(os.path.join(folder, rec["results"])):
        return "new"
    return rec["status"]


def plan_status(plan: Plan, folder: str, retry_failed: bool) -> tuple[list, dict]:
    """The runs to launch now, and how many runs are in each state."""
    index = read_index(folder) if os.path.isdir(folder) else {"runs": {}}
    todo, counts = [], {}
    for run in plan.runs:
        state = status_of(run, index, folder)
        counts[state] = counts.get(state, 0) + 1
        if state in ("new", "changed") or (retry_failed and state in ("failed", "timeout")):
            todo.append(run)
    return todo, counts


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if errors:
        return " / ".join(dict.fromkeys(e[len("error:"):].strip() for e in errors))[:500]
    return (lines[-1] if lines else "no output")[:500]


class _Launcher:
    """Starts runs as their own process groups and can stop all of them at once."""

    def __init__(self, folder: str):
        self.folder = folder
        self.running: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.stopping = False

    def execute(self, run: Run) -> dict:
        cmd = command_of(run, self.folder)
        log_path = os.path.join(self.folder, "logs", run.id + ".log")
        # Open MPI's permission to run as root, where run_sweep announced it (root_override)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **root_override())
        # mpiexec's own limit as a second line of defence, a little after ours
        env["MPIEXEC_TIMEOUT"] = str(int(run.timeout) + 30)
        t0 = time.perf_counter()
        with open(log_path, "w", encoding="utf-8") as log:
            log.write("$ " + shlex.join(cmd) + "\n")
            log.flush()
            with self.lock:
                if self.stopping:
                    raise Interrupted()
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env,
                                        start_new_session=True, text=True)
                self.running[run.id] = proc
            try:
                stdout, _ = proc.communicate(timeout=run.timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                stop_group(proc)
                stdout, _ = proc.communicate()
                timed_out = True
            finally:
                with self.lock:
                    self.running.pop(run.id, None)
            log.write(stdout or "")
        seconds = time.perf_counter() - t0
        if self.stopping:
            raise Interrupted()
        record = {"status": "done", "returncode": proc.returncode, "seconds": round(seconds, 3),
                  "error": None, "summary": None}
        if timed_out:
            record.update(status="timeout", error=f"no result after the {run.timeout:g} s timeout; "
                                                  "raise timeout in the sweep file")
        elif proc.returncode != 0:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                record.update(status="failed", error=_last_error(f.read()))
        else:
            try:
                report = json.loads(stdout.strip().splitlines()[-1])
                record["summary"] = {k: report.get(k) for k in _KEEP}
            except (ValueError, IndexError):
                record.update(status="failed", error="the run printed no JSON report")
        return record

    def stop_all(self) -> None:
        with self.lock:
            self.stopping = True
            procs = list(self.running.values())
        for proc in procs:
            stop_group(proc)


def run_sweep(plan: Plan, folder: str, *, jobs: int = 1, retry_failed: bool = False,
              echo=print, tty: bool = False) -> dict:
    """Run what is left of ``plan`` into ``folder``; return counts of the final states.

    Raises
    ------
    Interrupted
        On SIGINT/SIGTERM, after stopping the running jobs and saving the index.
    """
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    for sub in ("runs", "logs"):
        make_folder(os.path.join(folder, sub), "--out")
    _refuse_inputs(plan, folder)
    index = _opened_index(plan, folder)
    todo, counts = plan_status(plan, folder, retry_failed)
    _announce(plan, todo, counts, retry_failed, echo)
    write_index(folder, index)
    progress = _Progress(plan.name, len(todo), echo, tty)
    _launch(todo, index, folder, jobs, progress)
    final = {}
    for run in plan.runs:
        state = status_of(run, index, folder)
        final[state] = final.get(state, 0) + 1
    return final


def _opened_index(plan: Plan, folder: str) -> dict:
    """The folder's index, refused if it is another sweep's, with this plan's description."""
    index = read_index(folder)
    if index.get("name") not in (None, plan.name):
        raise UserError(f"{folder} holds sweep '{index['name']}', not '{plan.name}'; choose another --out")
    index.update(name=plan.name, sweep_file=plan.path,
                 data={d.key: {"label": d.label, "tasks": d.tasks, "target": d.target,
                               "describe": d.describe} for d in plan.data},
                 algorithms=plan.algorithms, plan=[r.id for r in plan.runs])
    return index


def _announce(plan: Plan, todo: list, counts: dict, retry_failed: bool, echo) -> None:
    """The notices before the first run: skipped data sets, running as root, what is recorded."""
    for line in plan.skipped:
        echo(f"notice: {line}")
    if any(run.ranks > 1 for run in todo) and root_override():    # once, not once per run
        echo(f"notice: {ROOT_NOTICE}")
    kept = {k: v for k, v in counts.items() if k in ("done", "failed", "timeout")}
    if kept:
        echo("already recorded: " + ", ".join(f"{n} {k}" for k, n in sorted(kept.items()))
             + ("" if retry_failed or not (kept.keys() - {"done"}) else " (--retry-failed runs those again)"))


@contextlib.contextmanager
def _signals_interrupt():
    """While inside, SIGINT and SIGTERM raise KeyboardInterrupt in the main thread (a thread
    other than the main one cannot set handlers: there the signals keep theirs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in FORWARDED}

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    for sig in FORWARDED:
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _launch(todo: list, index: dict, folder: str, jobs: int, progress) -> None:
    """Run ``todo``, ``jobs`` at a time, recording each run in the index as it finishes."""
    launcher = _Launcher(folder)
    pool = ThreadPoolExecutor(max_workers=jobs)
    pending = list(todo)
    futures = {}
    with _signals_interrupt():
        try:
            while pending or futures:
                while pending and len(futures) < jobs:
                    run = pending.pop(0)
                    futures[pool.submit(launcher.execute, run)] = run
                    progress.started()
                done, _ = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    run = futures.pop(fut)
                    record = fut.result()
                    record.update(_describe(run), results=os.path.join("runs", run.id + ".h5"),
                                  log=os.path.join("logs", run.id + ".log"),
                                  finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
                    index["runs"][run.id] = record
                    write_index(folder, index)
                    progress.finished(run, record)
                progress.tick()
        except (KeyboardInterrupt, Interrupted):
            launcher.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            write_index(folder, index)
            progress.close()
            raise Interrupted() from None
    pool.shutdown(wait=True)
    progress.close()


def _refuse_inputs(plan: Plan, folder: str) -> None:
    """No file of the sweep folder is the sweep file or a data set (a run's own --out is
    checked by the run command too, but its log would be written first)."""
    inputs = [(plan.path, "the sweep file")]
    inputs += [(d.values["data"], f"data set {d.key}") for d in plan.data
               if d.values.get("data", "synthetic") != "synthetic"]
    refuse_inputs(os.path.join(folder, "index.json"), inputs, "--out")
    for run in plan.runs:
        for sub, ext in (("runs", ".h5"), ("logs", ".log")):
            refuse_inputs(os.path.join(folder, sub, run.id + ext), inputs, "--out")


def _describe(run: Run) -> dict:
    return {"id": run.id, "data": run.data, "algorithm": run.algorithm, "algo": run.algo,
            "topology": run.topology, "shown_topology": run.shown_topology, "grid": run.grid, "seed": run.seed, "ranks": run.ranks,
            "variant": run.variant, "timeout": run.timeout, "config_hash": run.config_hash,
            "args": list(run.args)}


class _Progress:
    """One line for the whole sweep: rewritten in place on a terminal, one line per finished
    run otherwise (logs, CI)."""

    def __init__(self, name: str, total: int, echo, tty: bool):
        self.name, self.total, self.echo, self.tty = name, total, echo, tty
        self.done = self.failed = self.running = 0
        self.t0 = time.perf_counter()
        self.last = ""
        self._shown = 0.0

    def _line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        left = ""
        if self.done and self.done < self.total:
            left = f", ~{_clock(elapsed / self.done * (self.total - self.done))} left"
        return (f"[{self.name}] {self.done}/{self.total} runs, {self.failed} failed, {self.running} running, "
                f"{_clock(elapsed)} elapsed{left}" + (f" | {self.last}" if self.last else ""))

    def started(self) -> None:
        self.running += 1

    def finished(self, run: Run, record: dict) -> None:
        self.running -= 1
        self.done += 1
        if record["status"] == "done":
            self.last = f"{run.id}: error {record['summary']['mean_error']:.4f}"
        else:
            self.failed += 1
            self.last = f"{run.id}: {record['status'].upper()} {record['error']}"
        if not self.tty:
            self.echo(self._line())
        self.tick(force=True)

    def tick(self, force: bool = False) -> None:
        if self.tty and (force or time.perf_counter() - self._shown > 1.0):
            self._shown = time.perf_counter()
            sys.stderr.write("\r\033[K" + self._line()[:160])
            sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"
