"""A sweep through a batch scheduler (``omtl-mpi sweep --launcher slurm``; docs/GUIDE.md,
*Running on a cluster*).

The runs that are not done are submitted as job arrays, one per group of runs with the same
ranks and time limit, each with a manifest (``slurm/NNN-rP-tM.json``: its runs, in element
order) and a script whose every element runs ``omtl-mpi sweep-element MANIFEST``: it takes its
run by SLURM_ARRAY_TASK_ID, starts it with srun exactly as a local sweep starts it with
mpiexec, and records the outcome in the sweep's index under its lock (submitted, running,
then done, failed, timeout or cancelled). :func:`settle` asks Slurm about the runs in flight
and records those whose element died without recording.
"""
import dataclasses
import json
import math
import os
import signal
import socket
import sys
import time
from collections import Counter

from ..atomic import atomic_path
from ..errors import UserError
from ..paths import make_folder, regular_file
from ..runtime.launch import Stopped, signals_raise
from ..runtime.launchers import get as get_launcher
from .index import IN_FLIGHT, read_index, set_record, update
from .plan import Plan, Run
from .runner import Executor, check_outputs, describe_run, open_sweep, plan_status

MANIFEST = "omtl-mpi-sweep-array"
# Slurm's states of a job that is still queued or running (squeue's long names)
_ALIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}
# what --status calls each state of the index
SHOWN = {"done": "done", "submitted": "pending", "running": "running", "failed": "failed",
         "timeout": "timeout", "cancelled": "to run", "new": "to run", "changed": "to run"}
# seconds between two looks at Slurm while --wait follows a sweep
POLL = 5.0


@dataclasses.dataclass
class Array:
    """One job array to submit: its runs (in element order), their ranks and time limit."""

    name: str
    ranks: int
    minutes: int
    runs: list
    manifest: str
    script: str
    text: str = ""
    job: str = ""               # its job id, once submitted


def minutes_for(run: Run, settings: dict) -> int:
    """A run's Slurm time limit in minutes: the [slurm] table's ``time``, else long enough for
    the run's own timeout to stop it first (its timeout, the warning's lead and a minute to
    start)."""
    return settings.get("time") or math.ceil((run.timeout + settings["signal"] + 60) / 60)


def arrays_for(plan: Plan, folder: str, todo: list, settings: dict, launcher, *,
               throttle: int | None = None) -> list[Array]:
    """The arrays that submit ``todo``: one per (ranks, minutes), in the plan's order, with
    their scripts' text; manifests numbered after those already in FOLDER/slurm."""
    folder = os.path.abspath(folder)
    groups: dict[tuple, list] = {}
    for run in todo:
        groups.setdefault((run.ranks, minutes_for(run, settings)), []).append(run)
    where = os.path.join(folder, "slurm")
    first = 1 + max([int(n[:3]) for n in (os.listdir(where) if os.path.isdir(where) else [])
                     if n[:3].isdigit()] or [0])
    arrays = []
    for k, ((ranks, minutes), runs) in enumerate(groups.items()):
        stem = os.path.join(where, f"{first + k:03d}-r{ranks}-t{minutes}")
        array = Array(name=f"{plan.name}-r{ranks}", ranks=ranks, minutes=minutes, runs=runs,
                      manifest=stem + ".json", script=stem + ".sbatch")
        array.text = launcher.array_script(
            name=array.name, count=len(runs), ranks=ranks, minutes=minutes, settings=settings,
            # every element runs this Python, so the same installation
            element=[sys.executable, "-m", "omtl_mpi", "sweep-element", array.manifest],
            throttle=throttle, log=os.path.join(folder, "logs", "slurm-%A_%a.out"))
        arrays.append(array)
    return arrays


def submit(plan: Plan, folder: str, *, settings: dict, retry_failed: bool = False,
           checkpoint_every: int | None = None, throttle: int | None = None, echo=print) -> list[Array]:
    """Submit the runs of ``plan`` that are not done (and the failed ones with
    ``retry_failed``); runs still queued or running are left to their jobs. Returns the arrays
    submitted, each recorded in the index run by run as it is accepted."""
    launcher = get_launcher("slurm").configured(settings)
    # before the sweep's folder is made or anything written: sbatch missing, or Slurm's
    # controller down, is one line within seconds
    launcher.ready("sbatch")
    open_sweep(plan, folder, retry_failed)
    settle(folder)
    todo, counts = plan_status(plan, folder, retry_failed)
    check_outputs(plan, folder, todo)       # runs that settling made runs to submit, too
    kept = {k: v for k, v in counts.items() if k in ("done", "failed", "timeout", "submitted", "running")}
    if kept:
        echo("already recorded: " + ", ".join(f"{n} {SHOWN[k]}" for k, n in sorted(kept.items()))
             + (" (--retry-failed submits those again)"
                if not retry_failed and kept.keys() & {"failed", "timeout"} else ""))
    arrays = arrays_for(plan, folder, todo, settings, launcher, throttle=throttle)
    if arrays:
        make_folder(os.path.join(folder, "slurm"), "--out")
    for array in arrays:
        accepted = []

        def submitted(index: dict, array=array, accepted=accepted) -> None:
            accepted.append(launcher.submit(array.script))
            _submitted(index, array, accepted[0])
        try:
            manifest = {"format": MANIFEST, "version": 1, "sweep": plan.name,
                        "folder": os.path.abspath(folder), "mpi": settings.get("mpi"),
                        "checkpoint_every": checkpoint_every,
                        "runs": [dataclasses.asdict(run) for run in array.runs]}
            with atomic_path(array.manifest) as tmp, open(tmp, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
            with atomic_path(array.script) as tmp, open(tmp, "w", encoding="utf-8") as f:
                f.write(array.text)
            # under the lock: an element that starts at once finds its run recorded as submitted
            update(folder, submitted)
        except BaseException:
            # an array sbatch did not accept leaves no files: the next attempt writes its own
            # under the same number
            if not accepted:
                for path in (array.manifest, array.script):
                    if os.path.lexists(path):
                        os.remove(path)
            raise
    return arrays


def _submitted(index: dict, array: Array, job: str) -> None:
    array.job = job
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    for i, run in enumerate(array.runs):
        previous = index["runs"].get(run.id) or {}
        record = {"status": "submitted", "error": None, "launcher": "slurm", "job": f"{job}_{i}",
                  "array": job, "manifest": os.path.join("slurm", os.path.basename(array.manifest)),
                  "submitted": now, **describe_run(run), "config_hash": run.config_hash}
        # a checkpoint of this configuration goes on to the next attempt
        for key in ("checkpoint", "checkpoint_hash"):
            if key in previous:
                record[key] = previous[key]
        index["runs"][run.id] = record


def read_manifest(path: str) -> dict:
    """An array's manifest, checked (a JSON file this package wrote; nothing is unpickled)."""
    regular_file(path, "array manifest")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not a readable array manifest ({exc})") from None
    fields = {f.name for f in dataclasses.fields(Run)}
    if (not isinstance(manifest, dict) or manifest.get("format") != MANIFEST
            or not isinstance(manifest.get("runs"), list) or not isinstance(manifest.get("folder"), str)
            or not all(isinstance(r, dict) and set(r) == fields for r in manifest["runs"])):
        raise UserError(f"{path} is not an omtl-mpi array manifest; submit the sweep again")
    return manifest


def element(manifest_path: str, echo=print) -> int:
    """Run this array element's run (SLURM_ARRAY_TASK_ID) and record it; its exit code: 0 when
    the run is done, 1 otherwise (the index says why)."""
    launcher = get_launcher("slurm")
    here = launcher.element_id()
    if here is None:
        raise UserError("sweep-element runs one element of a Slurm job array (it needs "
                        "SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID); submit with 'omtl-mpi sweep "
                        "--launcher slurm'")
    job, task = here
    manifest = read_manifest(manifest_path)
    if not 0 <= task < len(manifest["runs"]):
        raise UserError(f"{manifest_path} holds {len(manifest['runs'])} runs; element {task} has none")
    fields, folder = manifest["runs"][task], manifest["folder"]
    run = Run(**{**fields, "args": tuple(fields["args"]), "hashed_args": tuple(fields["hashed_args"])})
    launcher = launcher.configured({"mpi": manifest.get("mpi")})
    executor = Executor(folder, launcher, manifest.get("checkpoint_every"))
    previous = {}
    # SIGUSR1: Slurm's warning before the time limit; the others: scancel, a stopped job
    with signals_raise((signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)):
        try:
            mine = []
            update(folder, lambda index: mine.append(_started(index, run.id, job, previous)))
            if not mine[0]:
                echo(f"run {run.id} is no longer job {job}'s (submitted again since): nothing to do")
                return 0
            record = executor.execute(run, previous, log_name=f"{run.id}.{job}.log")
        except Stopped as stop:         # before the run started or after it ended
            timed_out = stop.signum == signal.SIGUSR1
            record = {"status": "timeout" if timed_out else "cancelled", "seconds": 0.0,
                      "summary": None, "error": f"stopped by {stop} before the run started"}
            executor.keep_checkpoint(run, record)
    record.update(describe_run(run), launcher="slurm", job=job, array=job.split("_")[0],
                  manifest=previous.get("manifest"), host=socket.gethostname(),
                  started=previous.get("started"), finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
    set_record(folder, run.id, record)
    echo(f"{run.id}: {record['status']}" + (f" ({record['error']})" if record.get("error") else ""))
    return 0 if record["status"] == "done" else 1


def _started(index: dict, rid: str, job: str, previous: dict) -> bool:
    """Mark run ``rid`` running as job ``job``; False if its record names another job."""
    rec = index["runs"].get(rid)
    if rec is None or rec.get("job") != job:
        return False
    previous.update(rec)
    rec.update(status="running", started=time.strftime("%Y-%m-%dT%H:%M:%S"), host=socket.gethostname())
    previous["started"] = rec["started"]
    return True


def settle(folder: str) -> dict:
    """Ask Slurm about every run the index has in flight and record those whose job ended
    without recording (killed, node lost, cancelled before it started); the index."""
    index = read_index(folder)
    flying = {rid: rec.get("job") for rid, rec in index["runs"].items() if rec["status"] in IN_FLIGHT}
    if not flying:
        return index
    states = get_launcher("slurm").states([j for j in flying.values() if j])

    def change(index: dict) -> None:
        for rid, rec in index["runs"].items():
            job = rec.get("job")
            if rec["status"] not in IN_FLIGHT or flying.get(rid) != job:
                continue            # recorded meanwhile, or submitted again
            state = states.get(job)
            if state in _ALIVE:
                rec["slurm_state"] = state
                continue
            _ended(folder, rec, job, state)
    return update(folder, change)


def _ended(folder: str, rec: dict, job: str, state: str | None) -> None:
    """The record of a run whose job ``job`` ended (Slurm's last ``state``, None where Slurm
    no longer knows it) without recording an outcome."""
    said = f"Slurm job {job} ended ({state or 'squeue and sacct no longer know it'})"
    if rec["status"] == "submitted" and state in (None, "CANCELLED"):
        rec.update(status="cancelled", error=f"{said} before the run started")
    elif state == "TIMEOUT":
        rec.update(status="timeout", error=f"{said} at its time limit without recording a result")
    else:
        rec.update(status="failed", error=f"{said} without recording a result; see its log")
    rec.pop("slurm_state", None)
    path = os.path.join(folder, "runs", rec.get("id", "") + ".ckpt.h5")
    if rec["status"] != "cancelled" and os.path.isfile(path) and rec.get("config_hash"):
        rec.update(checkpoint=os.path.relpath(path, folder), checkpoint_hash=rec["config_hash"])


def status_rows(plan: Plan, folder: str) -> list[dict]:
    """Every run of ``plan``: its id, state as --status shows it (done, pending, running,
    failed, timeout, to run), Slurm job, error and log."""
    from .runner import status_of
    index = settle(folder) if os.path.isfile(os.path.join(folder, "index.json")) else {"runs": {}}
    rows = []
    for run in plan.runs:
        rec = index["runs"].get(run.id) or {}
        state = status_of(run, index, folder)
        rows.append({"id": run.id, "state": SHOWN[state], "recorded": rec.get("status"),
                     "job": rec.get("job"), "slurm": rec.get("slurm_state"),
                     "error": rec.get("error") if state not in ("new", "changed") else None,
                     "log": rec.get("log"), "checkpoint": rec.get("checkpoint")})
    return rows


def follow(plan: Plan, folder: str, echo=print, poll: float = POLL) -> dict:
    """Wait until no run of the sweep is queued or running, saying each change of the counts
    once; the final counts by shown state."""
    last = None
    while True:
        counts = dict(Counter(row["state"] for row in status_rows(plan, folder)))
        line = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        if line != last:
            echo(f"[{plan.name}] {line}")
            last = line
        if not counts.keys() & {"pending", "running"}:
            return counts
        time.sleep(poll)

