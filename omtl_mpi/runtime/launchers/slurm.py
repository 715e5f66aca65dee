"""The Slurm launcher: ``srun --mpi=PLUGIN -n P`` for one run (inside an allocation, or making
its own), and ``sbatch --array`` scripts, their submission and their jobs' states for sweeps
(docs/DESIGN.md, *Launchers*). The plugin must be the one the MPI library that mpi4py loads
speaks (without one srun starts lone copies, which :mod:`.launched` stops); it is, in this
order: the sweep file's ``[slurm] mpi``, Slurm's own ``SLURM_MPI_TYPE`` (srun reads it: nothing
is added), or the one that fits the library ``python -m mpi4py --mpi-lib-version`` names.
"""
from __future__ import annotations

import functools
import math
import os
import re
import shlex
import shutil
import subprocess
import sys

from ...errors import ConfigError, UserError
from .launched import srun_plugin
from .local import rank_command

# seconds before its time limit when an element is told to stop (sbatch --signal=B:USR1@S);
# Slurm sends it up to a minute early
DEFAULT_SIGNAL = 60
# sbatch options the sweep writes itself (a [slurm] options entry may not set them)
_OWN = ("--array", "-a", "--ntasks", "-n", "--time", "-t", "--signal", "--output", "-o",
        "--error", "-e", "--job-name", "-J", "--parsable", "--wrap")
_KEYS = {"partition", "account", "time", "mpi", "options", "signal"}
_WORD = re.compile(r"^[A-Za-z0-9_.+-]+$")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_UNITS = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}      # seconds of MM, MM:SS and HH:MM:SS
_CALL_TIMEOUT = 60      # seconds for one sbatch/squeue/sacct call
# seconds for 'scontrol ping' before anything is started or submitted: a controller that is up
# answers in milliseconds, and srun or sbatch would wait about 10 s for one that is down
_PING_TIMEOUT = 5


def minutes_of(value, where: str) -> int:
    """A Slurm time limit (minutes as a number, or "MM", "HH:MM:SS", "D-HH:MM", "D-HH:MM:SS")
    as whole minutes, rounded up."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{where}: time must be minutes or \"HH:MM:SS\", got {value!r}")
    match = _TIME.match(value.strip()) if isinstance(value, str) else None
    if isinstance(value, int):
        seconds = value * 60
    elif match is None:
        raise ConfigError(f"{where}: time {value!r} is not a Slurm time limit; write minutes, "
                          "\"HH:MM:SS\" or \"D-HH:MM:SS\"")
    else:
        days, *parts = match.groups()
        parts = [int(x) for x in parts if x is not None]
        units = _UNITS[len(parts)] if days is None else (3600, 60, 1)   # D-HH[:MM[:SS]]
        seconds = int(days or 0) * 86400 + sum(u * x for u, x in zip(units, parts))
    if seconds <= 0:
        raise ConfigError(f"{where}: time must be at least one minute, got {value!r}")
    return math.ceil(seconds / 60)


def settings(table, where: str) -> dict:
    """A sweep file's ``[slurm]`` table, checked: partition, account, time (minutes, or None:
    from each run's timeout), mpi (a plugin name, or None: chosen as the module says), options
    (extra sbatch options) and signal (seconds before the limit); ConfigError, one line naming
    the key and what to write."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table such as {{ partition = \"short\" }}")
    extra = sorted(set(table) - _KEYS)
    if extra:
        raise ConfigError(f"{where}: unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}; "
                          f"allowed: {', '.join(sorted(_KEYS))}")
    out = {"partition": None, "account": None, "time": None, "mpi": None}
    for key in ("partition", "account", "mpi"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not _WORD.match(value)):
            raise ConfigError(f"{where}: {key} must be a name such as \"debug\", got {value!r}")
        out[key] = value
    if "time" in table:
        out["time"] = minutes_of(table["time"], where)
    options = table.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"{where}: options must be a list of sbatch options such as "
                          "[\"--qos=normal\", \"--mem-per-cpu=2G\"]")
    for option in options:
        name = re.split(r"[=\s]", option.strip(), maxsplit=1)[0]
        name = name if name.startswith("--") else name[:2]          # -n4, -n 4
        if not option.startswith("-") or "\n" in option or "\r" in option:
            raise ConfigError(f"{where}: {option!r} is not an sbatch option (one option per "
                              "string, starting with -)")
        if name in _OWN:
            raise ConfigError(f"{where}: {name} is set by the sweep itself (one array per group "
                              "of runs, time from time/timeout, logs per run); remove it from options")
    signal = table.get("signal", DEFAULT_SIGNAL)
    if isinstance(signal, bool) or not isinstance(signal, int) or not 10 <= signal <= 3600:
        raise ConfigError(f"{where}: signal is the seconds before the time limit when a run is "
                          f"stopped to be resumed later, 10 to 3600; got {signal!r}")
    return {**out, "options": list(options), "signal": signal}


@functools.cache
def library_version() -> str:
    """The MPI library that mpi4py loads in a fresh interpreter (without initialising MPI)."""
    try:
        out = subprocess.run([sys.executable, "-m", "mpi4py", "--mpi-lib-version"],
                             capture_output=True, text=True, timeout=_CALL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def plugin(chosen: str | None = None) -> str | None:
    """The ``--mpi`` plugin to pass to srun, or None where ``SLURM_MPI_TYPE`` already says it."""
    if chosen or os.environ.get("SLURM_MPI_TYPE"):
        return chosen or None
    return srun_plugin(library_version())


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise UserError(f"{name} was not found: the slurm launcher needs Slurm's commands (run on "
                        "a cluster's login node, or use the local launcher)")
    return found


def _why_down(text: str) -> str:
    """The line of 'scontrol ping' (or of its failure) that says why the controller cannot be
    reached: its fatal error, else the controller said DOWN, else its first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("*")]
    hits = [line for mark in ("fatal", " is DOWN") for line in lines if mark in line]
    return (hits or lines or ["no answer"])[0]


def controller_reachable(tool: str) -> None:
    """Refuse (UserError: why, and what to do), within seconds, to start ``tool`` (srun, sbatch,
    squeue) where 'scontrol ping' says Slurm's controller cannot be reached: the tool would retry
    for about 10 s, then fail in its own words. Reachable: 'scontrol ping' says one is UP (a
    backup, where the primary is down), or exits 0 without saying one is DOWN; without scontrol
    nothing is asked (the tool says what it finds)."""
    scontrol = shutil.which("scontrol")
    if not scontrol:
        return
    fix = (f"{tool} can do nothing until it is (is slurmctld running? sinfo, or ask the "
           "cluster's administrators), or use --launcher local")
    try:
        out = subprocess.run([scontrol, "ping"], capture_output=True, text=True,
                             timeout=_PING_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise UserError(f"Slurm's controller did not answer 'scontrol ping' within "
                        f"{_PING_TIMEOUT} s: {fix}") from None
    except OSError:
        return
    said = out.stdout + "\n" + out.stderr
    if " is UP" in said or (out.returncode == 0 and " is DOWN" not in said):
        return
    raise UserError(f"Slurm's controller cannot be reached (scontrol ping: {_why_down(said)}): {fix}")


def _call(args: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=_CALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise UserError(f"{os.path.basename(args[0])} did not answer within {_CALL_TIMEOUT} s; "
                        "is Slurm's controller up? (sinfo)") from None


class Slurm:
    """srun for one run's ranks; sbatch arrays for sweeps."""

    name = "slurm"
    batch = True

    def __init__(self, mpi: str | None = None):
        self.mpi = mpi

    def configured(self, settings: dict) -> "Slurm":
        """This launcher with a sweep file's ``[slurm]`` settings (its srun plugin)."""
        return Slurm(settings.get("mpi"))

    def ready(self, tool: str = "srun") -> None:
        """Refuse, before anything is started or written, where ``tool`` (srun for a run,
        sbatch for a sweep's submission) is missing or Slurm's controller cannot be reached
        (UserError)."""
        _tool(tool)
        controller_reachable(tool)

    def command(self, n_ranks: int, args: list[str]) -> list[str]:
        """``srun [--mpi=PLUGIN] -n P --kill-on-bad-exit=1 python -m mpi4py -m omtl_mpi ARGS``:
        a rank that dies ends the step at once. Where srun is not installed the command names
        it by its name: a dry run prints it anywhere; :meth:`ready` refuses to start it."""
        chosen = plugin(self.mpi)
        return ([shutil.which("srun") or "srun"] + ([f"--mpi={chosen}"] if chosen else [])
                + ["-n", str(n_ranks), "--kill-on-bad-exit=1"] + rank_command(args))

    def environment(self, env) -> tuple[dict, list[str]]:
        return {}, []

    def array_script(self, *, name: str, count: int, ranks: int, minutes: int, settings: dict,
                     element: list[str], log: str, throttle: int | None = None) -> str:
        """An sbatch script of ``count`` elements of ``ranks`` tasks and ``minutes`` each; every
        element runs ``element`` (which reads SLURM_ARRAY_TASK_ID) as the batch shell itself
        (exec), so that the warning before the time limit (USR1, ``settings["signal"]`` seconds
        before it) reaches it."""
        array = f"0-{count - 1}" + (f"%{throttle}" if throttle else "")
        lines = ["#!/bin/bash",
                 f"# {count} run{'s' if count > 1 else ''} of {ranks} rank{'s' if ranks > 1 else ''}, "
                 f"at most {minutes} min each; written by 'omtl-mpi sweep --launcher slurm'",
                 f"#SBATCH --job-name={name}", f"#SBATCH --array={array}",
                 f"#SBATCH --ntasks={ranks}", f"#SBATCH --time={minutes}",
                 f"#SBATCH --signal=B:USR1@{settings['signal']}", f"#SBATCH --output={log}"]
        lines += [f"#SBATCH --{key}={settings[key]}" for key in ("partition", "account") if settings.get(key)]
        lines += [f"#SBATCH {option}" for option in settings.get("options", [])]
        lines += ["", "exec " + shlex.join(element), ""]
        return "\n".join(lines)

    def submit(self, script_path: str) -> str:
        out = _call([_tool("sbatch"), "--parsable", script_path])
        if out.returncode != 0:
            why = " / ".join(line.strip() for line in out.stderr.splitlines() if line.strip())
            raise UserError(f"sbatch refused {script_path}: {why or f'exit {out.returncode}'}")
        job = out.stdout.strip().split(";")[0]
        if not job.isdigit():
            raise UserError(f"sbatch answered {out.stdout.strip()!r}, not a job id")
        return job

    def states(self, job_ids: list[str]) -> dict:
        """{job id: Slurm state} of the jobs (array elements as ``A_I``) that squeue still lists
        (PENDING, RUNNING, ...) and, for the others, those that sacct knows (COMPLETED, FAILED,
        TIMEOUT, CANCELLED, NODE_FAIL, ...); jobs that neither knows are left out."""
        wanted = set(job_ids)
        if not wanted:
            return {}
        found = {}
        user = os.environ.get("USER") or str(os.getuid())
        squeue = _tool("squeue")
        controller_reachable("squeue")
        out = _call([squeue, "-h", "-r", "-u", user, "-o", "%i|%T"])
        if out.returncode != 0:
            raise UserError(f"squeue failed: {out.stderr.strip() or out.returncode}")
        for line in out.stdout.splitlines():
            job, _, state = line.strip().partition("|")
            if job in wanted:
                found[job] = state
        rest = sorted(wanted - set(found))
        sacct = shutil.which("sacct")
        if rest and sacct:
            parents = sorted({job.split("_")[0] for job in rest})
            out = _call([sacct, "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(parents)])
            if out.returncode == 0:         # no accounting storage: sacct says so and fails
                for line in out.stdout.splitlines():
                    job, _, state = line.strip().partition("|")
                    if job in wanted and job not in found:
                        found[job] = state.split()[0] if state else state
        return found

    def element_id(self) -> tuple[str, int] | None:
        array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        if not (array and task and task.isdigit()):
            return None
        return f"{array}_{task}", int(task)


LAUNCHER = Slurm()
