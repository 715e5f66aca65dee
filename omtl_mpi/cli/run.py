"""``omtl-mpi run``: one run, in this process, under mpiexec or started by ``--np``."""
import json
import sys

import click

from ..errors import ConfigError, UserError
from .table import click_option


EPILOG_RUN = """\b
Examples:
  omtl-mpi run                                  # C-ADMM on built-in synthetic data, one process
  omtl-mpi run --np 6 --out run.h5              # same, server + 5 workers under mpiexec
  mpiexec -n 6 python -m mpi4py -m omtl_mpi run --data tasks.h5 --json
  srun --mpi=pmi2 --kill-on-bad-exit=1 -n 6 python -m mpi4py -m omtl_mpi run --data tasks.h5
  omtl-mpi run --np 6 --launcher slurm --data tasks.h5   # that srun, its --mpi chosen for you
"""


class _RunCommand(click.Command):
    """``omtl-mpi run``: the option table's options (:mod:`omtl_mpi.options`), then its own;
    the table's made when the command is parsed or shown, not at import (every learner
    registered by then has its options, and the other commands do not import the learners)."""

    def get_params(self, ctx):
        if "omtl_mpi.options" not in ctx.meta:      # the same objects for a whole invocation
            from ..options import table
            opts = table()
            ctx.meta["omtl_mpi.options"] = [click_option(o, opts["algo"].default) for o in opts.values()]
        return ctx.meta["omtl_mpi.options"] + super().get_params(ctx)

    def format_options(self, ctx, formatter):
        """The options in three sections: what is learned and from what (the option table's),
        how this run is carried out, and what only tests and measurements need."""
        rows = {title: [] for title in _RUN_SECTIONS}
        help_option = self.get_help_option(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                name = "help" if param is help_option else param.name
                title = next((t for t, names in _RUN_SECTIONS.items() if name in names),
                             "Learning options")
                rows[title].append(record)
        for title, records in rows.items():
            with formatter.section(title):
                formatter.write_dl(records)


# run --help's sections after the option table's (every option not named here): fault injection
# and the address layout are for testing deployments and measuring, not for learning
_RUN_SECTIONS = {
    "Learning options": (),
    "Run options": ("out", "as_json", "n_ranks", "launcher", "checkpoint_every", "checkpoint_path",
                    "resume", "replay", "progress", "help"),
    "Testing and tuning": ("fail_at", "fail_rank", "fail_mode", "slow", "delays", "delay_seed",
                           "aslr"),
}


@click.command(cls=_RunCommand, epilog=EPILOG_RUN)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Results file (HDF5).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the summary.")
@click.option("--np", "n_ranks", type=int, default=None, metavar="P",
              help="Launch mpiexec with P ranks, for K tasks. By the learner's pattern ('omtl-mpi "
                   "algos'): server: rank 0 the server, P-1 workers, P at most K+1; neighbours: "
                   "one node per rank, P at most K (d-psgd: exactly K); none: P at most K.")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="What --np starts: local: mpiexec on this machine; slurm: srun --mpi=PLUGIN "
                   "-n P, inside an allocation (the plugin fits the MPI that mpi4py uses: pmi2 "
                   "for MPICH, pmix for Open MPI; SLURM_MPI_TYPE chooses another).")
@click.option("--checkpoint-every", type=int, default=None, metavar="ROUNDS",
              help="Write the full learning state every ROUNDS rounds (atomically: a crash while "
                   "writing keeps the previous checkpoint).")
@click.option("--checkpoint", "checkpoint_path", type=click.Path(dir_okay=False), default=None,
              help="Checkpoint file (default: next to --out, run.h5 -> run.ckpt.h5).")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, metavar="CHECKPOINT",
              help="Continue a run from its checkpoint: same options, data and number of ranks.")
@click.option("--fail-at", default=None, metavar="ROUND|load|write",
              help="Fault injection for testing deployments: make --fail-rank fail at this round, "
                   "after loading its data (load), or while results are written (write).")
@click.option("--fail-rank", type=int, default=None, help="Rank that --fail-at fails.  [default: 0]")
@click.option("--fail-mode", type=click.Choice(["raise", "kill"]), default=None,
              help="Raise an exception, or die by SIGKILL.  [default: raise]")
@click.option("--replay", type=click.Path(dir_okay=False), default=None, metavar="RESULTS",
              help="Run again, in this process, the --sync partial run whose results file this is: "
                   "its options and its schedule (which messages each server step took, which "
                   "reply each round used), to the same predictions and model, bit for bit. Give "
                   "no learning option beside it.")
@click.option("--slow", multiple=True, metavar="RANK:FACTOR",
              help="Straggler injection: RANK's rounds take FACTOR times as long (a sleep after "
                   "its work, before it sends). Repeat for more ranks. The results are those of "
                   "the same run without it; the timing table says whom the others waited for.")
@click.option("--delays", type=click.Choice(["srad", "stall"]), default=None,
              help="Straggler injection on every rank, drawn per rank and round: srad: a round "
                   "takes 1-1.5 times its work, or with probability 0.3 3.75-10 times; stall: "
                   "1.5% of rounds take 21 times their work (docs/RELIABILITY.md).")
@click.option("--delay-seed", type=click.IntRange(min=0), default=None,
              help="Seed of the --delays draws.  [default: 0]")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr, with or without --json (default: when stderr is a "
                   "terminal).")
def run(n_ranks, launcher, as_json, out, progress, fail_at, fail_rank, fail_mode, replay, slow,
        delays, delay_seed, checkpoint_every, checkpoint_path, resume, aslr, **values):
    """Run a learner over multi-task streams and report its online (cumulative) error.

    Without --np and outside mpiexec, the server and all workers run in this one process
    through the same code as under MPI. With no hyper-parameter flag, the defaults of
    docs/GUIDE.md (intercept, AROW w-step, squared hinge, the experts' vote); --preset paper
    runs the paper's model and settings (rho = lambda2 = 0.1, lambda1 = lambda3 = lambda4 =
    0.01, eta = sqrt(T)).
    """
    from ..runtime import launch
    if n_ranks is None:
        launch.reexec_if_sharing(aslr)          # before MPI starts; returns if nothing to do
    if progress is None:        # on stderr, so --json's stdout stays one object either way
        progress = sys.stderr.isatty()
    from ..options import run_config
    from ..runtime.run import run as run_learner
    from ..runtime.summary import format_summary

    schedule = None
    if replay is not None:
        given = [k for k, v in values.items() if v is not None]
        extra = ([f"--{given[0].replace('_', '-')}"] if given else []) + [
            flag for flag, v in (("--np", n_ranks), ("--slow", slow), ("--delays", delays),
                                 ("--resume", resume), ("--checkpoint-every", checkpoint_every))
            if v]
        if extra:
            raise ConfigError(f"--replay runs the recorded run as it was, in this process; leave "
                              f"out {extra[0]}")
        from ..paths import regular_file
        cfg, schedule = _replay_of(regular_file(replay, "results file"))
    else:
        cfg = run_config(values)
    checkpoint_path = _check_run_outputs(cfg, out, checkpoint_every, checkpoint_path, resume,
                                         replay)
    if fail_at is None and (fail_rank is not None or fail_mode is not None):
        raise ConfigError(f"{'--fail-rank' if fail_rank is not None else '--fail-mode'} does "
                          "nothing without --fail-at; leave it out")
    fail_rank, fail_mode = fail_rank or 0, fail_mode or "raise"
    if delay_seed is not None and delays is None:
        raise ConfigError("--delay-seed does nothing without --delays; leave it out")
    from ..engine.stragglers import Stragglers, parse_slow
    stragglers = Stragglers(parse_slow(slow), delays, delay_seed or 0)
    from ..runtime.faults import Fault
    if n_ranks is None and launcher != "local":
        raise ConfigError(f"--launcher {launcher} starts the ranks of --np P; give --np, or "
                          "leave out --launcher")
    if n_ranks is not None:
        from ..runtime.launchers import get as get_launcher
        from ..runtime.launchers.launched import check_not_copied
        from ..runtime.run import preflight
        if n_ranks < 1:
            raise ConfigError(f"--np must be >= 1, got {n_ranks}")
        check_not_copied()
        Fault(fail_at, fail_rank, fail_mode).check_world(n_ranks)
        stragglers.check_world(n_ranks)
        # Check what can be checked here, so a bad option or file is one message, not P.
        preflight(cfg, n_ranks, out)
        args = _strip_option(_strip_option(sys.argv[1:], "--np"), "--launcher")
        if progress and "--progress" not in args:
            args.append("--progress")
        return launch.launch(get_launcher(launcher), n_ranks, args,
                             before=launch.for_launch(aslr, n_ranks),
                             echo=lambda line: click.echo(line, err=True),
                             outputs=(out, checkpoint_path))
    Fault(fail_at, fail_rank, fail_mode)                  # validate the options on every rank
    report = run_learner(cfg, out=out, progress=progress,
                         notice=lambda line: click.echo(f"notice: {line}", err=True),
                         fault=lambda rank: Fault(fail_at, fail_rank, fail_mode, my_rank=rank),
                         checkpoint_every=checkpoint_every or 0, checkpoint_path=checkpoint_path,
                         resume=resume, stragglers=stragglers, schedule=schedule)
    if report is None:          # not rank 0
        return 0
    if as_json:
        click.echo(json.dumps({k: v for k, v in report.items() if not k.startswith("_")}))
    else:
        click.echo(format_summary(report))
    return 0


def _check_run_outputs(cfg, out, checkpoint_every, checkpoint_path, resume,
                       replay=None) -> str | None:
    """The checkpoint file (None without --checkpoint-every), once the outputs are checked before
    anything starts: not the inputs (the results to replay among them) nor each other, writable,
    the checkpoint options agreeing."""
    from ..paths import output_file, refuse_each_other, refuse_inputs
    from ..runtime.checkpoint import default_path
    if checkpoint_every is None:
        if checkpoint_path is not None:
            raise ConfigError("--checkpoint does nothing without --checkpoint-every ROUNDS; give "
                              "both, or leave --checkpoint out")
    elif checkpoint_every < 1:
        raise ConfigError(f"--checkpoint-every must be >= 1 (rounds), got {checkpoint_every}")
    elif checkpoint_path is None and not out:
        raise ConfigError("--checkpoint-every needs --checkpoint PATH or --out (the checkpoint "
                          "then goes next to the results file)")
    from ..topology import topology_file
    data = None if cfg.data == "synthetic" else cfg.data
    inputs = [(data, "the data set"), (topology_file(cfg.topology), "the topology file"),
              (resume, "the checkpoint to resume"), (replay, "the results to replay")]
    refuse_inputs(out, inputs, "--out")
    if checkpoint_every is not None:
        checkpoint_path = checkpoint_path if checkpoint_path is not None else default_path(out)
        # resuming from a checkpoint and writing the next ones to it is the usual way to go on
        refuse_inputs(checkpoint_path, inputs[:2], "--checkpoint")
        refuse_each_other([(out, "--out"), (checkpoint_path, "--checkpoint")])
        output_file(checkpoint_path, "--checkpoint")
    return checkpoint_path


def _replay_of(path: str) -> tuple:
    """``--replay RESULTS``: the run's configuration, for its W workers in one process, and
    its schedule ``(taken, used)``; UserError with one line if ``path`` is not the results of
    a run with --sync partial that this version can run again."""
    import dataclasses

    from ..algorithms import registry
    from ..config import RunConfig
    from ..streams import load_result
    _, config, _, measured = load_result(path)._written
    if measured.schedule is None:
        raise UserError(f"--replay {path}: it holds no schedule; only the results of a run with "
                        "--sync partial can be replayed")
    try:
        top = {f.name: config[f.name] for f in dataclasses.fields(RunConfig) if f.name != "params"}
        algo = registry.get(top["algo"])
        cfg = RunConfig(**top, params=algo.params(**config["params"]))
    except (KeyError, TypeError, ConfigError) as exc:
        raise UserError(f"--replay {path}: its configuration is not one this version runs "
                        f"({exc}); replay it with the omtl-mpi that wrote it") from None
    taken, used = measured.schedule["taken"], measured.schedule["used"]
    return dataclasses.replace(cfg, nodes=used.shape[0]), (taken, used)


def _strip_option(args: list[str], name: str) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out
