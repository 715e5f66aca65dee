"""Run the runs of a sweep, each as its own job through a launcher (local mpiexec by default)
with a timeout, recorded in the folder's index.json (sweep/index.py; the folder's layout:
docs/GUIDE.md, *Sweeps*), its results in runs/ID.h5 and its output in logs/ID.log.

Re-running the same sweep skips the runs that are done with the same configuration, leaves
failed ones alone unless ``retry_failed``, and runs the rest. An interrupted sweep (Ctrl-C,
SIGTERM) stops its running jobs and keeps everything recorded so far. Through a batch
scheduler the same runs are submitted instead: sweep/batch.py.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from ..atomic import remove_stale
from ..errors import UserError
from ..paths import make_folder, refuse_inputs, refuse_special
from ..runtime.launch import Stopped, signals_raise, stop_group
from ..runtime.launchers import get as get_launcher
from .index import IN_FLIGHT, INDEX, LOCK, read_index, set_record, update
from .plan import Plan, Run

_KEEP = ("mean_error", "overall_error", "balanced_error", "f1", "ms_per_round", "seconds", "rounds",
         "tasks", "ranks")


class Interrupted(Exception):
    """The sweep was stopped by a signal (``signum``); what finished is recorded."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as for every command a signal stops."""
        return 128 + self.signum


def outputs_of(run: Run, folder: str) -> tuple[str, str]:
    """The files ``run`` writes itself: its results file and its checkpoint."""
    return os.path.join(folder, "runs", run.id + ".h5"), checkpoint_of(run, folder)


def checkpoint_of(run: Run, folder: str) -> str:
    """Where ``run`` keeps its checkpoint when the sweep runs with --checkpoint-every."""
    return os.path.join(folder, "runs", run.id + ".ckpt.h5")


def resumable(run: Run, record: dict | None, folder: str) -> bool:
    """Whether ``run`` goes on from its checkpoint: one is there, written by a run of the same
    configuration (a checkpoint of another one would be refused by --resume)."""
    return bool(record and record.get("checkpoint_hash") == run.config_hash
                and os.path.isfile(checkpoint_of(run, folder)))


def command_of(run: Run, folder: str, launcher=None, checkpoint_every: int | None = None,
               resume: bool = False) -> list[str]:
    """The command that runs ``run`` through ``launcher`` (default: local, where one rank is
    one process without mpiexec); with ``checkpoint_every``, checkpointed next to its results,
    and with ``resume``, going on from that checkpoint."""
    launcher = launcher or get_launcher("local")
    args = list(run.args) + ["--out", outputs_of(run, folder)[0], "--json", "--no-progress"]
    if checkpoint_every:
        args += ["--checkpoint-every", str(checkpoint_every), "--checkpoint", checkpoint_of(run, folder)]
        if resume:
            args += ["--resume", checkpoint_of(run, folder)]
    if run.ranks == 1 and launcher.name == "local":
        return [sys.executable, "-m", "omtl_mpi", "run"] + args
    return launcher.command(run.ranks, ["run"] + args)


def status_of(run: Run, index: dict, folder: str) -> str:
    """'done' (finished with this configuration), 'failed', 'timeout', 'cancelled' (stopped
    before it finished, not by its own fault), 'submitted' or 'running' (in a scheduler's
    hands), 'changed' or 'new'."""
    rec = index["runs"].get(run.id)
    if rec is None:
        return "new"
    if rec["status"] in IN_FLIGHT:          # whatever its configuration: it is being run
        return rec["status"]
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
        if state in ("new", "changed", "cancelled") or (retry_failed and state in ("failed", "timeout")):
            todo.append(run)
    return todo, counts


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if errors:
        return " / ".join(dict.fromkeys(e[len("error:"):].strip() for e in errors))[:500]
    return (lines[-1] if lines else "no output")[:500]


class Executor:
    """Starts runs through a launcher as their own process groups, each with its timeout, and
    can stop all of them at once; :meth:`execute` gives the record of one run."""

    def __init__(self, folder: str, launcher=None, checkpoint_every: int | None = None):
        self.folder = folder
        self.launcher = launcher or get_launcher("local")
        self.checkpoint_every = checkpoint_every
        self.running: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.stopping = False

    def execute(self, run: Run, previous: dict | None = None, log_name: str | None = None) -> dict:
        """Run ``run``; its record. ``previous``: its earlier record (a checkpoint to resume);
        ``log_name``: its log under logs/ (default ID.log). In the main thread, a
        :class:`~omtl_mpi.runtime.launch.Stopped` signal stops the run's process group and
        records it: SIGUSR1 (Slurm's warning before the time limit) as a timeout, others as
        cancelled."""
        resume = bool(self.checkpoint_every) and resumable(run, previous, self.folder)
        cmd = command_of(run, self.folder, self.launcher, self.checkpoint_every, resume)
        log_rel = os.path.join("logs", log_name or run.id + ".log")
        log_path = os.path.join(self.folder, log_rel)
        # Open MPI's permission to run as root, where run_sweep announced it (root_override)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.launcher.environment(os.environ)[0])
        # mpiexec's own limit as a second line of defence, a little after ours
        env["MPIEXEC_TIMEOUT"] = str(int(run.timeout) + 30)
        t0 = time.perf_counter()
        stopped = None
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
            except Stopped as stop:
                stopped = stop
                stop_group(proc)
                stdout, _ = proc.communicate()
                timed_out = stop.signum == signal.SIGUSR1
            finally:
                with self.lock:
                    self.running.pop(run.id, None)
            log.write(stdout or "")
        if proc.returncode != 0:
            # a run stopped (timeout, signal: SIGKILL after the grace) or crashed in its
            # write: its temporary files are its no more
            remove_stale(outputs_of(run, self.folder))
        seconds = time.perf_counter() - t0
        if self.stopping:
            raise Interrupted()
        record = {"status": "done", "returncode": proc.returncode, "seconds": round(seconds, 3),
                  "error": None, "summary": None, "log": log_rel, "resumed": resume}
        if timed_out and stopped is not None:
            record.update(status="timeout", error="stopped before the Slurm time limit; raise "
                                                  "time in the sweep file's [slurm] table")
        elif timed_out:
            record.update(status="timeout", error=f"no result after the {run.timeout:g} s timeout; "
                                                  "raise timeout in the sweep file")
        elif stopped is not None:
            record.update(status="cancelled", error=f"stopped by {stopped} before it finished")
        elif proc.returncode != 0:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                record.update(status="failed", error=_last_error(f.read()))
        else:
            try:
                report = json.loads(stdout.strip().splitlines()[-1])
                record["summary"] = {k: report.get(k) for k in _KEEP}
            except (ValueError, IndexError):
                record.update(status="failed", error="the run printed no JSON report")
        self.keep_checkpoint(run, record)
        return record

    def keep_checkpoint(self, run: Run, record: dict) -> None:
        """A run that did not finish keeps its checkpoint for the next attempt (said in its
        record and error); a finished one's is removed."""
        path = checkpoint_of(run, self.folder)
        if not self.checkpoint_every or not os.path.isfile(path):
            return
        if record["status"] == "done":
            os.remove(path)
            return
        record.update(checkpoint=os.path.relpath(path, self.folder), checkpoint_hash=run.config_hash)
        record["error"] += f"; its checkpoint {record['checkpoint']} is resumed when it runs again"

    def stop_all(self) -> None:
        with self.lock:
            self.stopping = True
            procs = list(self.running.values())
        for proc in procs:
            stop_group(proc)


def run_sweep(plan: Plan, folder: str, *, jobs: int = 1, retry_failed: bool = False,
              echo=print, tty: bool = False, launcher=None, checkpoint_every: int | None = None) -> dict:
    """Run what is left of ``plan`` into ``folder``, each run through ``launcher`` (default:
    local mpiexec); return counts of the final states. Raises :class:`Interrupted` on
    SIGINT/SIGTERM (once the running jobs are stopped and the index saved), and a UserError
    while runs of the sweep are still in a scheduler's queue."""
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    executor = Executor(folder, launcher, checkpoint_every)
    index = open_sweep(plan, folder, retry_failed)
    refuse_in_flight(folder)
    todo, counts = plan_status(plan, folder, retry_failed)
    _announce(plan, todo, counts, retry_failed, echo, executor.launcher)
    progress = _Progress(plan.name, len(todo), echo, tty)
    _launch(todo, index, folder, jobs, progress, executor)
    return dict(Counter(status_of(run, index, folder) for run in plan.runs))


def open_sweep(plan: Plan, folder: str, retry_failed: bool = False) -> dict:
    """Make the sweep folder (runs/, logs/), refuse outputs of the runs it launches over inputs
    or what is not a regular file, record the plan in the index (refused if the folder holds
    another sweep) and remove what killed runs and writers left; the index."""
    for sub in ("runs", "logs"):
        make_folder(os.path.join(folder, sub), "--out")
    check_outputs(plan, folder, [])         # the index and its lock, before the index is read
    # then the runs this sweep launches (not a failed one left alone: a folder at its results
    # must not stop the sweep from following the others); those that settling a scheduler's
    # records makes runs to launch are checked by the submission, after it settles them
    check_outputs(plan, folder, plan_status(plan, folder, retry_failed)[0])

    def describe(index: dict) -> None:
        if index.get("name") not in (None, plan.name):
            raise UserError(f"{folder} holds sweep '{index['name']}', not '{plan.name}'; choose another --out")
        # under the index's lock, so no process is writing the index; a run still in a
        # scheduler's hands may be writing its files on another machine: left alone
        remove_stale([os.path.join(folder, INDEX)] + [
            path for run in plan.runs
            if index["runs"].get(run.id, {}).get("status") not in IN_FLIGHT
            for path in outputs_of(run, folder)])
        index.update(name=plan.name, sweep_file=plan.path,
                     data={d.key: {"label": d.label, "tasks": d.tasks, "target": d.target,
                                   "describe": d.describe} for d in plan.data},
                     algorithms=plan.algorithms, plan=[r.id for r in plan.runs])
    return update(folder, describe)


def refuse_in_flight(folder: str) -> None:
    """Refuse to start runs while some of this sweep's are still queued or running under a
    scheduler (after asking it which of them still are: :func:`.batch.settle`)."""
    index = read_index(folder)
    if not any(rec["status"] in IN_FLIGHT for rec in index["runs"].values()):
        return
    from .batch import settle
    index = settle(folder)
    busy = sorted({rec.get("job", "?").split("_")[0] for rec in index["runs"].values()
                   if rec["status"] in IN_FLIGHT})
    if busy:
        raise UserError(f"{folder}: runs of this sweep are still queued or running under Slurm "
                        f"(job {', '.join(busy)}); wait for them ('omtl-mpi sweep FILE --out "
                        f"{folder} --status'), or cancel them with scancel")


def _announce(plan: Plan, todo: list, counts: dict, retry_failed: bool, echo, launcher) -> None:
    """The notices before the first run: skipped data sets, what the launcher overrides (Open
    MPI as root), what is recorded."""
    for line in plan.skipped:
        echo(f"notice: {line}")
    if any(run.ranks > 1 for run in todo):                      # once, not once per run
        for line in launcher.environment(os.environ)[1]:
            echo(f"notice: {line}")
    kept = {k: v for k, v in counts.items() if k in ("done", "failed", "timeout")}
    if kept:
        echo("already recorded: " + ", ".join(f"{n} {k}" for k, n in sorted(kept.items()))
             + ("" if retry_failed or not (kept.keys() - {"done"}) else " (--retry-failed runs those again)"))


def _launch(todo: list, index: dict, folder: str, jobs: int, progress, launcher: Executor) -> None:
    """Run ``todo``, ``jobs`` at a time, recording each run in the index as it finishes."""
    pool = ThreadPoolExecutor(max_workers=jobs)
    pending = list(todo)
    futures = {}
    # in the main thread, the first of SIGINT, SIGTERM and SIGHUP raises Stopped (a second
    # one must not interrupt the stopping of the running jobs)
    with signals_raise():
        try:
            while pending or futures:
                while pending and len(futures) < jobs:
                    run = pending.pop(0)
                    futures[pool.submit(launcher.execute, run, index["runs"].get(run.id))] = run
                    progress.started()
                done, _ = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    run = futures.pop(fut)
                    record = fut.result()
                    record.update(describe_run(run), finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
                    index["runs"][run.id] = record
                    set_record(folder, run.id, record)
                    progress.finished(run, record)
                progress.tick()
        except (Stopped, KeyboardInterrupt, Interrupted) as exc:
            launcher.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            progress.close()
            raise Interrupted(getattr(exc, "signum", signal.SIGINT)) from None
    pool.shutdown(wait=True)
    progress.close()


def check_outputs(plan: Plan, folder: str, runs: list) -> None:
    """No file of the sweep folder is the sweep file or a data set, nor anything but a regular
    file (a FIFO as a log or the index's lock would block the sweep, a device be written to or
    replaced): a run's own --out is checked by the run command too, but its log would be
    written first."""
    inputs = [(plan.path, "the sweep file")]
    inputs += [(d.values["data"], f"data set {d.key}") for d in plan.data
               if d.values.get("data", "synthetic") != "synthetic"]
    outputs = [os.path.join(folder, INDEX), os.path.join(folder, LOCK)]
    for run in runs:
        outputs += [*outputs_of(run, folder), os.path.join(folder, "logs", run.id + ".log")]
    for path in outputs:
        refuse_inputs(path, inputs, "--out")
        refuse_special(path, "--out")


def describe_run(run: Run) -> dict:
    """What a run's record says of it beside its outcome."""
    return {"results": os.path.join("runs", run.id + ".h5"), "id": run.id, "data": run.data, "algorithm": run.algorithm, "algo": run.algo,
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
