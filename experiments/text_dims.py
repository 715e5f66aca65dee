"""The hashing dimension of text, measured: every learner of the comparison on hashed text from
2^9 to 2^20 dimensions, on TweetEval and on the synthetic five-language review corpus
(scripts/multilingual.py), three stream orders each.

    python scripts/multilingual.py --out results/text_dims/reviews
    python experiments/text_dims.py --tweeteval DATA/tweeteval --reviews results/text_dims/reviews

Imports each corpus at each dimension (``omtl-mpi data import``) into ``--work`` (default
results/text_dims), runs the defaults (C-ADMM with no option) and the single-task learners
(AROW, AdaGrad, PA-I, ADMM-Single) with ``--seed 0, 1, 2`` (``omtl-mpi run --json``), two runs
at a time, and prints one Markdown table per corpus: each learner's mean final cumulative error
over the seeds, the defaults' spread over the seeds (max - min), the defaults minus the best
single-task learner, and on how many seeds the defaults erred less than it (paired by stream
order). Finished runs are kept in ``--work``/runs.json and not run again (delete it
after a code change). experiments/PROTOCOL.md, step 9, says how the default was chosen from it.
With ``--docs`` the tables also become the section 'text-dims' of docs/results/text.md, the
evidence table of docs/RESULTS.md, *Hashed text at large d*.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEARNERS = {"defaults": [], "AROW": ["--algo", "arow"], "AdaGrad": ["--algo", "adagrad"],
            "PA-I": ["--algo", "pa"], "ADMM-Single": ["--algo", "admm-single"]}
SINGLE = ("AROW", "AdaGrad", "PA-I", "ADMM-Single")
DIMS = (512, 2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16, 2 ** 18, 2 ** 20)


def omtl(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omtl_mpi", *map(str, args)],
                          capture_output=True, text=True)


def imported(work: str, corpus: str, source: str, dims: int) -> tuple:
    """The task file of ``corpus`` at ``dims`` (imported once), and the import's seconds."""
    path = os.path.join(work, f"{corpus}-{dims}.h5")
    if os.path.exists(path):
        return path, None
    command = (["data", "import", "tweeteval", source] if corpus == "tweeteval"
               else ["data", "import", "text-csv", source])
    t0 = time.perf_counter()
    r = omtl(*command, "--dims", dims, "-o", path)
    if r.returncode:
        raise SystemExit(f"import failed: {r.stderr.strip()}")
    return path, time.perf_counter() - t0


def run(path: str, learner: str, seed: int) -> dict:
    r = omtl("run", "--data", path, *LEARNERS[learner], "--seed", seed, "--json")
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1]}
    report = json.loads(r.stdout.strip().splitlines()[-1])
    return {"mean_error": report["mean_error"], "seconds": report["seconds"]}


def run_jobs(run, jobs, done: dict, record: str, workers: int) -> None:
    """``run(*args)`` for every ``(key, *args)`` of ``jobs``, ``workers`` at a time, each result
    into ``done[key]`` and, as it comes, into the JSON file ``record`` (written whole, then
    renamed), so that an interrupted invocation keeps what finished."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(run, *job[1:]): job[0] for job in jobs}
        for future in concurrent.futures.as_completed(futures):
            done[futures[future]] = future.result()
            print(futures[future], done[futures[future]], file=sys.stderr, flush=True)
            with open(record + ".part", "w") as f:
                json.dump(done, f, indent=1)
            os.replace(record + ".part", record)


def table(corpus: str, done: dict, dims, seeds) -> str:
    head = (f"| {corpus}: d | " + " | ".join(LEARNERS) + " | spread of the defaults | defaults "
            "minus the best single-task learner | seeds where the defaults err less than it |")
    lines = [head, "|" + "---|" * (len(LEARNERS) + 4)]
    for d in dims:
        means, per_seed, cells, spread = {}, {}, [], ""
        for learner in LEARNERS:
            errors = [done.get(f"{corpus}/{d}/{learner}/{s}", {}).get("mean_error") for s in seeds]
            if None in errors:
                cells.append("-")
                continue
            means[learner], per_seed[learner] = sum(errors) / len(errors), errors
            cells.append(f"{means[learner]:.4f}")
            if learner == "defaults":
                spread = f"{max(errors) - min(errors):.4f}"
        singles = {k: means[k] for k in SINGLE if k in means}
        gap = wins = "-"
        if "defaults" in means and singles:
            best = min(singles, key=singles.get)
            gap = f"{means['defaults'] - singles[best]:+.4f} ({best})"
            # paired by stream order: the same seed presents both learners the same streams
            below = sum(a < b for a, b in zip(per_seed["defaults"], per_seed[best]))
            wins = f"{below} of {len(seeds)}"
        lines.append(f"| {d} | " + " | ".join(cells) + f" | {spread} | {gap} | {wins} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tweeteval", help="TweetEval's raw folder (omtl-mpi data fetch tweeteval)")
    ap.add_argument("--reviews", help="the review corpus's folder (scripts/multilingual.py)")
    ap.add_argument("--work", default="results/text_dims")
    ap.add_argument("--dims", type=int, nargs="+", default=list(DIMS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--docs", action="store_true",
                    help="also write the tables into docs/results/text.md (section 'text-dims')")
    args = ap.parse_args(argv)
    corpora = {k: v for k, v in (("reviews", args.reviews), ("tweeteval", args.tweeteval)) if v}
    if not corpora:
        ap.error("give --tweeteval or --reviews (or both)")
    os.makedirs(args.work, exist_ok=True)
    record = os.path.join(args.work, "runs.json")
    done = json.load(open(record)) if os.path.exists(record) else {}
    jobs = []
    for corpus, source in corpora.items():
        for d in args.dims:
            path, seconds = imported(args.work, corpus, source, d)
            if seconds is not None:
                done[f"{corpus}/{d}/import_s"] = seconds
            jobs += [(f"{corpus}/{d}/{learner}/{s}", path, learner, s) for learner in LEARNERS
                     for s in args.seeds if f"{corpus}/{d}/{learner}/{s}" not in done]
    run_jobs(run, jobs, done, record, args.jobs)
    tables = [table(corpus, done, args.dims, args.seeds) for corpus in corpora]
    for text in tables:
        print(text)
        print()
    if args.docs:
        write_docs(corpora, tables, args)
    return 0


def write_docs(corpora, tables, args) -> None:
    """The tables as the section 'text-dims' of docs/results/text.md, under a stamp."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from lib.docsection import LEARNING, invocation, replace_section, stamp
    depends = LEARNING + ("omtl_mpi/data", "experiments/text_dims.py")
    names = {"reviews": "the synthetic five-language review corpus (`python scripts/multilingual.py`, "
                        "27,000 reviews; the selection corpus of the protocol's step 9)",
             "tweeteval": "TweetEval (hate, irony, offensive; reported, never used to choose)"}
    argv = [("DATA/tweeteval" if before == "--tweeteval" else arg)       # a path of this machine
            for before, arg in zip([None] + sys.argv[:-1], sys.argv)]
    text = [stamp(invocation(None, (), argv), depends)
            + " Each corpus is imported by `omtl-mpi data import` at every d (word 1-2-grams and "
            "character 3-4-grams, signed hashing), and every learner runs with `--seed 0, 1, 2` (three "
            "stream orders) in one process. Each cell is the mean per-task error over the seeds; "
            "the defaults' spread is max - min over the seeds; the last column is the defaults' "
            "mean minus the best single-task learner's at the same d, and the last the seeds on which "
            "the defaults erred less than that learner (paired: a seed presents both the same "
            "streams). A dash: no finished run. "
            "Corpora: " + "; ".join(names[c] for c in corpora) + ".", ""]
    for text_table in tables:
        text += [text_table, ""]
    path = os.path.join(ROOT, "docs", "results", "text.md")
    replace_section(path, "text-dims", "\n".join(text))
    print(f"updated {path} (section 'text-dims')")


if __name__ == "__main__":
    sys.exit(main())
