"""Step 9 (c): AROW's r in its diagonal form, the form the defaults take at large d.

    python scripts/multilingual.py --out results/text_dims/reviews
    python experiments/diag_r.py --reviews results/text_dims/reviews
    python experiments/diag_r.py --reviews results/text_dims/reviews --tweeteval DATA/tweeteval

Runs the defaults (C-ADMM, whose w-step is AROW's diagonal above the threshold of step 9 (b)) and
single-task AROW (``--algo arow``, the same form there) with r = c m for each candidate multiple
c, m a task's squared norm: every instance of a hashed-text corpus has m = 2 (unit-norm features
and the intercept), so the candidate is ``--arow-r 2c``. Each at d = 2^12, 2^14 and 2^16 on the
review corpus (the selection corpus of step 9), seeds 0, 1, 2 (``omtl-mpi run --json``), two runs
at a time; prints one table per learner and corpus: the mean per-task error at each d over the
seeds, their mean, and the spread over the seeds of the per-seed means over the d's (max - min).
With ``--tweeteval`` the same on TweetEval (reported, never used to choose). Finished runs are
kept in ``--work``/diag_r.json (shared task files with text_dims.py in ``--work``).
experiments/PROTOCOL.md, step 9 (c), has the rule and the outcome.

Step 10 (a), second round: the same two learners and candidates (and c = 2) on the text-like
selection draws of step 10 (experiments/textlike.py, imported at 2^14), each file at its own d:

    python experiments/diag_r.py --textlike results/data/textlike-100.h5 \
        results/data/textlike-101.h5 results/data/textlike-102.h5
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from text_dims import imported, omtl, run_jobs  # noqa: E402

CANDIDATES = (0.1, 0.2, 0.5, 1.0)
TEXTLIKE_CANDIDATES = (0.1, 0.2, 0.5, 1.0, 2.0)
LEARNERS = {"defaults": [], "AROW": ["--algo", "arow"]}
DIMS = (2 ** 12, 2 ** 14, 2 ** 16)
SQUARED_NORM = 2.0   # hashed text: unit-norm features plus the intercept's 1


def run(path: str, learner: str, c: float, seed: int) -> float:
    r = omtl("run", "--data", path, *LEARNERS[learner], "--arow-r", c * SQUARED_NORM,
             "--seed", seed, "--json")
    if r.returncode:
        raise SystemExit(f"run failed: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])["mean_error"]


def table(corpus: str, learner: str, done: dict, dims, seeds, candidates=CANDIDATES,
          names=None) -> str:
    """The candidates' mean error at each of ``dims`` (the keys' middle part; ``names`` their
    column heads, d = ... by default), their mean and the spread over the seeds."""
    names = names or [f"d = {d}" for d in dims]
    lines = [f"| {corpus}, {learner}: c | " + " | ".join(names)
             + " | mean | spread over seeds |", "|" + "---|" * (len(dims) + 3)]
    for c in candidates:
        errors = [[done.get(f"{corpus}/{d}/{learner}/{c}/{s}") for s in seeds] for d in dims]
        if any(None in row for row in errors):
            lines.append(f"| {c} m | " + " | ".join("-" for _ in dims) + " | - | - |")
            continue
        per_d = [sum(row) / len(row) for row in errors]
        per_seed = [sum(errors[i][j] for i in range(len(dims))) / len(dims)
                    for j in range(len(seeds))]
        lines.append(f"| {c} m | " + " | ".join(f"{e:.4f}" for e in per_d)
                     + f" | {sum(per_d) / len(per_d):.4f} | {max(per_seed) - min(per_seed):.4f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reviews", help="the review corpus's folder")
    ap.add_argument("--textlike", nargs="+", help="the text-like draws' task files (step 10)")
    ap.add_argument("--tweeteval", help="TweetEval's raw folder (reported only)")
    ap.add_argument("--work", default="results/text_dims")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.textlike:
        return textlike(args)
    if not args.reviews:
        ap.error("give --reviews (step 9 (c)) or --textlike (step 10 (a))")
    corpora = {k: v for k, v in (("reviews", args.reviews), ("tweeteval", args.tweeteval)) if v}
    os.makedirs(args.work, exist_ok=True)
    record = os.path.join(args.work, "diag_r.json")
    done = json.load(open(record)) if os.path.exists(record) else {}
    jobs = []
    for corpus, source in corpora.items():
        for d in DIMS:
            path, _ = imported(args.work, corpus, source, d)
            jobs += [(f"{corpus}/{d}/{learner}/{c}/{s}", path, learner, c, s)
                     for learner in LEARNERS for c in CANDIDATES for s in args.seeds
                     if f"{corpus}/{d}/{learner}/{c}/{s}" not in done]
    run_jobs(run, jobs, done, record, args.jobs)
    for corpus in corpora:
        for learner in LEARNERS:
            print(table(corpus, learner, done, DIMS, args.seeds))
            print()
    return 0


def textlike(args) -> int:
    """Step 10 (a), second round: every candidate on each text-like file at its own d."""
    os.makedirs(args.work, exist_ok=True)
    record = os.path.join(args.work, "diag_r_textlike.json")
    done = json.load(open(record)) if os.path.exists(record) else {}
    names = [os.path.splitext(os.path.basename(path))[0] for path in args.textlike]
    jobs = [(f"textlike/{name}/{learner}/{c}/{s}", path, learner, c, s)
            for name, path in zip(names, args.textlike) for learner in LEARNERS
            for c in TEXTLIKE_CANDIDATES for s in args.seeds
            if f"textlike/{name}/{learner}/{c}/{s}" not in done]
    run_jobs(run, jobs, done, record, args.jobs)
    for learner in LEARNERS:
        print(table("textlike", learner, done, names, args.seeds, TEXTLIKE_CANDIDATES, names))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
