"""What the tables made from a sweep share (paper, wstep, quality, personal, minilm of
scripts/results.py): their command line, the steps that import or draw the data a sweep file
reads, the sweep and its report, and the pieces of text every such section has.

Every step is an omtl-mpi command, printed before it runs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib

from .docsection import ROOT

OMTL = [sys.executable, "-m", "omtl_mpi"]
# data set -> (its raw files under --data, the first found of the alternatives, as
# `omtl-mpi data fetch` lays them out; import arguments); the output file is NAME.h5
IMPORTS = {
    "landmine": (("landmine/LandmineData.mat",), ["landmine", "{src}"]),
    # the mirrors' npz, or the folder of the four idx files the canonical source serves
    "mnist": (("mnist/mnist_restored.npz", "mnist/train-images-idx3-ubyte.gz"),
              ["mnist", "{src}", "--dims", "512"]),
    # the paper's 512 features, whatever the importer's default dimension
    "tweeteval": (("tweeteval",), ["tweeteval", "{src}", "--dims", "512"]),
    "chem": (("chem/tudataset",), ["tudataset", "{src}"]),
}
# report figures copied next to the docs (the rest stay in results/paper/report)
# two errors closer than this are the same: a mean over tasks of counts can differ from another
# of the same counts in the last bits, and with one seed the spread is 0
TIE = 1e-9


def step(cmd: list, check: bool = True) -> int:
    """Run ``cmd`` from the repository's root, printed first (``omtl-mpi`` for this Python's
    package); stop with its exit status if it fails and ``check``."""
    shown = ["omtl-mpi"] + cmd[len(OMTL):] if cmd[:len(OMTL)] == OMTL else cmd
    print("$ " + " ".join(shown), flush=True)
    code = subprocess.run(cmd, cwd=ROOT).returncode
    if check and code != 0:
        raise SystemExit(code)
    return code


def synth_unless_exists(out: str, args) -> None:
    """``omtl-mpi data synth -o out ARGS``, unless ``out`` exists (a drawn file is kept: delete
    it to draw again)."""
    if os.path.exists(out):
        print(f"{out} exists; not drawn again (delete it to draw again)")
        return
    os.makedirs(os.path.dirname(out), exist_ok=True)
    step(OMTL + ["data", "synth", "-o", out, *map(str, args)])


def sweep_files(config: str) -> dict:
    """File name -> absolute path of every data file the sweep file ``config`` reads (its
    ``path`` keys, relative to the sweep file); empty if the file is not valid TOML (the sweep
    itself then says why)."""
    try:
        with open(config, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError:
        return {}
    base = os.path.dirname(os.path.abspath(config))
    paths = [os.path.normpath(os.path.join(base, entry["path"]))
             for entry in doc.get("data", {}).values()
             if isinstance(entry, dict) and isinstance(entry.get("path"), str)]
    return {os.path.basename(p): p for p in paths}


def raw_source(data: str, name: str) -> str | None:
    """The path to import data set ``name`` from: the first of its alternatives found under
    ``data`` (an idx file stands for its folder); None if there is none."""
    for rel in IMPORTS[name][0]:
        path = os.path.join(data, rel)
        if os.path.exists(path):
            return os.path.dirname(path) if path.endswith("-ubyte.gz") else path
    return None


def import_data(data: str, wanted: dict) -> None:
    """Import each real set of :data:`IMPORTS` that ``wanted`` (:func:`sweep_files`) names,
    into the path named there, unless that file exists or the raw files are not under ``data``."""
    for name, (rels, args) in IMPORTS.items():
        out = wanted.get(f"{name}.h5")
        if out is None:
            continue
        src = raw_source(data, name)
        if os.path.exists(out):
            print(f"{out} exists; not imported again (delete it to re-import)")
        elif src is None:
            print(f"{os.path.join(data, rels[0])} not found: {name} is left out of the sweep")
        else:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            step(OMTL + ["data", "import"] + [a.format(src=src) for a in args] + ["-o", out])


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default shown, the description and epilog as written."""


def add_sweep_arguments(ap: argparse.ArgumentParser, name: str, jobs: str, jobs_help: str,
                        figures: bool = False) -> None:
    """The options every sweep-made table takes (``figures``: with --figures); the sweep file
    is scripts/NAME.toml, its folder results/NAME and its section 'NAME' of
    docs/results/NAME.md unless the options say otherwise. :func:`finish_sweep_arguments`
    completes them once parsed."""
    ap.formatter_class = _Help
    ap.add_argument("--data", default=os.environ.get("DATA") or os.path.join(ROOT, "data"),
                    help="folder of the raw real data sets, as `omtl-mpi data fetch NAME --dest "
                         "DIR` fills it ($DATA when set)")
    ap.add_argument("--config", default=os.path.join(ROOT, "scripts", f"{name}.toml"),
                    help="the sweep file")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", name),
                    help="the sweep's folder (its report goes to OUT/report)")
    ap.add_argument("--jobs", default=jobs, help=jobs_help)
    ap.add_argument("--docs", action="store_true",
                    help=f"write the section '{name}' of docs/results/{name}.md")
    ap.add_argument("--docs-file", metavar="FILE",
                    help=f"write the section '{name}' into FILE instead (implies --docs)")
    if figures:
        ap.add_argument("--figures", default=os.path.join(ROOT, "docs", "figures"),
                        help="folder the section's figures are copied into")


def finish_sweep_arguments(args: argparse.Namespace, name: str) -> argparse.Namespace:
    """Stop unless the sweep file exists; ``docs_file`` is None without --docs or --docs-file,
    and every path absolute."""
    if not os.path.isfile(args.config):
        raise SystemExit(f"error: sweep file {args.config} not found")
    if args.docs_file is None and args.docs:
        args.docs_file = os.path.join(ROOT, "docs", "results", f"{name}.md")
    for key in ("data", "config", "out", "figures", "docs_file"):
        if getattr(args, key, None) is not None:
            setattr(args, key, os.path.abspath(getattr(args, key)))
    return args


def with_config(depends: tuple, config: str) -> tuple:
    """``depends`` and the sweep file ``config`` (from the repository's root) when it is in the
    repository: what a generated section's figures depend on."""
    rel = os.path.relpath(config, ROOT)
    return depends + (() if rel.startswith("..") else (rel,))


def import_sweep_report(data: str, config: str, out: str, jobs: str) -> int:
    """Import the local real sets that the sweep file ``config`` reads, run the sweep into
    ``out`` and build its report; the sweep's exit code."""
    import_data(data, sweep_files(config))
    return sweep_and_report(config, out, jobs)


def sweep_and_report(config: str, out: str, jobs: str) -> int:
    """Run the sweep file ``config`` into ``out`` and build its report; the sweep's exit code."""
    code = step(OMTL + ["sweep", config, "--out", out, "--jobs", jobs], check=False)
    if code == 130:                     # interrupted: no report of half a sweep
        raise SystemExit(code)
    step(OMTL + ["report", out])
    return code


def shown_path(path: str) -> str:
    """``path`` as the docs name it: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def seeds_of(sweep) -> str:
    """How many seeds the sweep's finished runs used, in words: ``3 seeds``, ``1 seed``."""
    n = len({o.seed for o in sweep.outcomes})
    return f"{n} seed{'s' if n != 1 else ''}"


def seed_list(sweep) -> str:
    """The seeds (stream orders) of the sweep's finished runs: ``0, 1, 2``."""
    return ", ".join(str(s) for s in sorted({o.seed for o in sweep.outcomes}, key=lambda s: s or 0))


def layout_of(sweep) -> str:
    """Where the finished runs ran, in words: one process, or the range of ranks."""
    ranks = sorted({o.ranks for o in sweep.outcomes}) or [1]
    return ("every run in one process" if ranks == [1]
            else f"runs on {ranks[0]} to {ranks[-1]} ranks")


def table_text(md: str) -> str:
    """A report table without its '###' title line."""
    return "\n".join(line for line in md.splitlines() if not line.startswith("### ")).strip()


def metric_sections(sweep, err, bal, f1) -> list:
    """Lines of a generated section: the error, balanced error and F1 tables (report tables of
    the same runs), each under its heading."""
    return [f"## Final mean cumulative error (mean ± std over {seeds_of(sweep)})", "",
            table_text(err.markdown()), "", "## Balanced error", "", table_text(bal.markdown()), "",
            "## F1 of the positive class", "", table_text(f1.markdown()), ""]


