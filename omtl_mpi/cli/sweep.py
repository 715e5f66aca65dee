"""``omtl-mpi sweep``: grids of runs, each its own MPI job, here or as Slurm job arrays."""
import json
import os
import sys
from collections import Counter

import click

from ..errors import ConfigError


EPILOG_SWEEP = """\b
Examples:
  omtl-mpi sweep scripts/paper.toml --dry-run         # list the runs and their commands
  omtl-mpi sweep scripts/paper.toml --out results/paper --jobs 2
  omtl-mpi sweep scripts/paper.toml --out results/paper --retry-failed   # after fixing a cause
  omtl-mpi report results/paper                       # tables and figures in results/paper/report

\b
On a Slurm cluster (the sweep file's [slurm] table: partition, account, time, mpi, options):
  omtl-mpi sweep my.toml --out sw --launcher slurm --dry-run   # print the sbatch scripts
  omtl-mpi sweep my.toml --out sw --launcher slurm --checkpoint-every 5000
  omtl-mpi sweep my.toml --out sw --status            # done / pending / running / failed / timeout
  omtl-mpi sweep my.toml --out sw --launcher slurm --retry-failed   # resubmit (resumes checkpoints)
"""


@click.command(epilog=EPILOG_SWEEP)
@click.argument("config", type=click.Path(dir_okay=False), metavar="SWEEP.toml")
@click.option("--out", "folder", type=click.Path(file_okay=False), default=None,
              help="Sweep folder: index.json, runs/ID.h5, logs/ID.log (default results/sweeps/NAME).")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: every run a subprocess here (mpiexec), --jobs at a time, until all "
                   "are done; slurm: submit the runs as sbatch job arrays (one per group of "
                   "runs with the same ranks and time limit) and return.")
@click.option("--jobs", type=int, default=None,
              help="Runs side by side: local, each its own mpiexec job (default 1); slurm, the "
                   "most elements of each array running at once (default: no limit).")
@click.option("--max-ranks", type=int, default=None,
              help="Cap on the ranks of every run (overrides the file's max_ranks).")
@click.option("--checkpoint-every", type=int, default=None, metavar="ROUNDS",
              help="Checkpoint every run every ROUNDS rounds (runs/ID.ckpt.h5): a run that is "
                   "stopped (timeout, Slurm's time limit, scancel) goes on from it when it runs "
                   "again.")
@click.option("--retry-failed", is_flag=True, help="Run failed and timed-out runs again.")
@click.option("--status", "show_status", is_flag=True,
              help="Say the state of every run (done, pending, running, failed, timeout, to "
                   "run), from the index and, for submitted runs, from Slurm; run nothing.")
@click.option("--wait", is_flag=True,
              help="slurm: after submitting, follow the runs until none is pending or running.")
@click.option("--dry-run", is_flag=True,
              help="List the runs, their state and commands (slurm: print the sbatch scripts); "
                   "run and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object at the end.")
def sweep(config, folder, launcher, jobs, max_ranks, checkpoint_every, retry_failed, show_status,
          wait, dry_run, as_json):
    """Run every combination a sweep file names, each run as its own MPI job.

    The file lists data sets, algorithms (with options, topologies and hyper-parameter grids),
    seeds and ranks per run (a number or an expression such as "tasks+1"); see
    scripts/paper.toml. Each run gets a stable id, a timeout, its own results file and an entry
    in FOLDER/index.json. A failed or timed-out run is recorded with its error and the sweep
    goes on. Running the same command again skips finished runs (an interrupted sweep
    continues where it stopped). Exit status: 0 when every run is done (slurm: submitted),
    1 when some failed.
    """
    from ..sweep import load_plan
    for name, value in (("--max-ranks", max_ranks), ("--jobs", jobs),
                        ("--checkpoint-every", checkpoint_every)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if wait and launcher != "slurm":
        raise ConfigError("--wait follows submitted runs: it goes with --launcher slurm (the "
                          "local launcher always waits)")
    plan = load_plan(config, max_ranks=max_ranks)
    folder = folder or os.path.join("results", "sweeps", plan.name)
    if show_status:
        return _sweep_status(plan, folder, as_json)
    if dry_run:
        return _sweep_dry_run(plan, folder, launcher, retry_failed, checkpoint_every, jobs, as_json)
    if not plan.runs:
        raise ConfigError(f"{config}: no runs (every data set was skipped)")
    if launcher == "slurm":
        return _sweep_submit(plan, folder, retry_failed, checkpoint_every, jobs, wait, as_json)
    from ..sweep import Interrupted, run_sweep
    try:
        final = run_sweep(plan, folder, jobs=jobs or 1, retry_failed=retry_failed,
                          echo=lambda line: click.echo(line, err=True),
                          tty=sys.stderr.isatty() and not as_json, checkpoint_every=checkpoint_every)
    except Interrupted as exc:
        click.echo(f"error: interrupted by {exc}: finished runs are kept in "
                   f"{folder}; run the same command again to continue", err=True)
        return exc.exit_code
    failed = final.get("failed", 0) + final.get("timeout", 0)
    if as_json:
        click.echo(json.dumps({"sweep": plan.name, "folder": folder, "states": final,
                               "index": os.path.join(folder, "index.json")}))
    else:
        click.echo(f"{plan.name}: {final.get('done', 0)} of {len(plan.runs)} runs done, {failed} "
                   f"failed or timed out (index: {os.path.join(folder, 'index.json')}); next: "
                   f"omtl-mpi report {folder}")
    return 1 if failed else 0


def _sweep_dry_run(plan, folder, launcher, retry_failed, checkpoint_every, jobs, as_json) -> int:
    """--dry-run: the runs, their state and commands; with slurm, the sbatch scripts."""
    from ..runtime.launchers import get as get_launcher
    from ..sweep.runner import command_of, plan_status
    todo, counts = plan_status(plan, folder, retry_failed)
    pending = {r.id for r in todo}
    chosen = get_launcher(launcher)
    if launcher == "slurm":
        chosen = chosen.configured(plan.slurm)
    rows = [{"id": r.id, "ranks": r.ranks, "state": "to run" if r.id in pending else "kept",
             "command": command_of(r, os.path.abspath(folder) if launcher == "slurm" else folder,
                                   chosen, checkpoint_every)} for r in plan.runs]
    scripts = []
    if launcher == "slurm":
        from ..sweep.batch import arrays_for
        scripts = [{"script": a.script, "runs": [r.id for r in a.runs], "text": a.text}
                   for a in arrays_for(plan, folder, todo, plan.slurm, chosen, throttle=jobs)]
    if as_json:
        click.echo(json.dumps({"sweep": plan.name, "folder": folder, "runs": rows,
                               "skipped": plan.skipped, "to_run": len(todo), "scripts": scripts}))
        return 0
    for line in plan.skipped:
        click.echo(f"notice: {line}", err=True)
    for r in rows:
        click.echo(f"{r['state']:>6}  {r['id']}  ({r['ranks']} ranks)")
    for s in scripts:
        click.echo(f"\n# {s['script']}: {len(s['runs'])} runs ({', '.join(s['runs'])})")
        click.echo(s["text"], nl=False)
    click.echo(f"{len(todo)} of {len(plan.runs)} runs to run into {folder}"
               + (f", as {len(scripts)} job arrays" if launcher == "slurm" else ""))
    return 0


def _sweep_submit(plan, folder, retry_failed, checkpoint_every, jobs, wait, as_json) -> int:
    """--launcher slurm: submit what is not done; with --wait, follow it to the end."""
    from ..sweep.batch import follow, submit
    echo = lambda line: click.echo(line, err=True)   # noqa: E731
    arrays = submit(plan, folder, settings=plan.slurm, retry_failed=retry_failed,
                    checkpoint_every=checkpoint_every, throttle=jobs, echo=echo)
    for a in arrays:
        echo(f"submitted job {a.job}: {len(a.runs)} run{'s' if len(a.runs) > 1 else ''} of "
             f"{a.ranks} rank{'s' if a.ranks > 1 else ''}, at most {a.minutes} min each ({a.script})")
    if not arrays:
        echo("nothing to submit")
    counts = None
    if wait:
        import signal
        from ..runtime.launch import Stopped, signals_raise
        try:
            with signals_raise():       # Ctrl-C stops the following, not the jobs
                counts = follow(plan, folder, echo=echo)
        except (Stopped, KeyboardInterrupt) as exc:
            echo(f"stopped following; the jobs go on (omtl-mpi sweep {plan.path} --out {folder} "
                 "--status; scancel JOB cancels them)")
            return 128 + getattr(exc, "signum", signal.SIGINT)
    if as_json:
        click.echo(json.dumps({"sweep": plan.name, "folder": folder, "states": counts,
                               "jobs": [{"job": a.job, "runs": [r.id for r in a.runs],
                                         "script": a.script} for a in arrays],
                               "index": os.path.join(folder, "index.json")}))
    elif counts is not None:
        failed = counts.get("failed", 0) + counts.get("timeout", 0)
        click.echo(f"{plan.name}: {counts.get('done', 0)} of {len(plan.runs)} runs done, {failed} "
                   f"failed or timed out; next: omtl-mpi report {folder}")
    else:
        click.echo(f"{plan.name}: {sum(len(a.runs) for a in arrays)} runs submitted; follow them "
                   f"with: omtl-mpi sweep {plan.path} --out {folder} --status")
    unfinished = counts and counts.get("failed", 0) + counts.get("timeout", 0) + counts.get("to run", 0)
    return 1 if unfinished else 0


def _sweep_status(plan, folder, as_json) -> int:
    """--status: every run's state, from the index and Slurm."""
    from ..sweep.batch import status_rows
    rows = status_rows(plan, folder)
    counts = dict(Counter(row["state"] for row in rows))
    if as_json:
        click.echo(json.dumps({"sweep": plan.name, "folder": folder, "states": counts, "runs": rows}))
        return 0
    for row in rows:
        if row["state"] == "done":
            continue
        extra = [f"job {row['job']}" if row["job"] else "", row["slurm"] or "",
                 row["error"] or "", f"log {row['log']}" if row["log"] and row["state"] != "pending" else ""]
        click.echo(f"{row['state']:>8}  {row['id']}" + "".join(f"  {e}" for e in extra if e))
    click.echo(f"{plan.name}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
               + f" of {len(rows)} runs ({folder})")
    return 0


@click.command("sweep-element", hidden=True)
@click.argument("manifest", type=click.Path(dir_okay=False))
def sweep_element(manifest):
    """One element of a sweep's Slurm job array (what the sbatch scripts of 'omtl-mpi sweep
    --launcher slurm' run): its run of MANIFEST by SLURM_ARRAY_TASK_ID, recorded in the index."""
    from ..sweep.batch import element
    return element(manifest, echo=lambda line: click.echo(line, err=True))
