"""The defaults of this checkout against another revision's, on the protocol's selection sets.

    python experiments/revisions.py REV [--raw ../shared/data] [--seeds 0 1 2] [-- OPTION...]

For a change of the code that is meant to change no choice (a cheaper way of computing what
the defaults compute, or of handling streams of unequal length), this is the protocol's
comparison (experiments/PROTOCOL.md): `omtl-mpi run` with no option (or the OPTIONs given
after `--`) of this checkout and of revision REV (a temporary git worktree), on the nine
selection sets, each drawn or imported by the tree's own command line (so that each reads a
file of its own task-file format), over the stream orders `--seeds`. It prints a Markdown
table: one row per tree, the mean final cumulative error on every set over the seeds, the
mean over the sets, and the spread (the largest difference between the two trees' per-seed
means on any set, and the spread of each tree's per-seed means over the sets).

Landmine is imported from `--raw` (the folder `omtl-mpi data fetch landmine` fills, or
../shared/data); without it, the set is left out with a note.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the selection sets (experiments/selection.py's): how each tree makes them
TESTBEDS = ("identical", "clustered", "unrelated")
SETS = ([(f, ["data", "synth", "--family", f, "--seed", "0"], []) for f in TESTBEDS]
        + [("Synthetic", None, [])]
        + [("Landmine", ["data", "import", "landmine", "{raw}/landmine/LandmineData.mat"], [])]
        + [(f"{f}, unit norm", ["data", "synth", "--family", f, "--seed", "0", "--normalize"], [])
           for f in TESTBEDS]
        + [("Synthetic, unit norm", None, ["--synth-normalize"])])


def omtl(tree: str, args: list, cwd: str) -> str:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, "-m", "omtl_mpi", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"omtl-mpi {' '.join(args)} with {tree} failed:\n{done.stderr.strip()}")
    return done.stdout


def measure(tree: str, folder: str, raw: str, seeds: list, options: list) -> dict:
    """{set: [mean error of each seed]} of ``tree``'s defaults."""
    out = {}
    for label, make, extra in SETS:
        if make is None:
            data = ["--data", "synthetic", *extra]
        else:
            source = [a.format(raw=raw) for a in make]
            if "{raw}" in " ".join(make) and not os.path.exists(source[-1]):
                print(f"(left out {label}: {source[-1]} not found)", file=sys.stderr)
                continue
            path = os.path.join(folder, label.replace(", ", "-").replace(" ", "-") + ".h5")
            omtl(tree, [*source, "-o", path], folder)
            data = ["--data", path]
        out[label] = [json.loads(omtl(tree, ["run", *data, "--seed", str(s), *options, "--json",
                                             "--no-progress"], folder))["mean_error"]
                      for s in seeds]
        print(f"{os.path.basename(tree)} {label}: {np.mean(out[label]):.4f}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the revision to compare with (a git revision of this repository)")
    ap.add_argument("--raw", default=os.path.join(ROOT, "..", "shared", "data"),
                    help="folder of the raw real data sets (for Landmine)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("options", nargs="*", help="options of omtl-mpi run, after --")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = os.path.join(scratch, "base")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", base, args.rev],
                       check=True, capture_output=True)
        try:
            results = {}
            for name, tree in (("this checkout", ROOT), (args.rev, base)):
                folder = os.path.join(scratch, name.replace(" ", "-"))
                os.mkdir(folder)
                results[name] = measure(tree, folder, os.path.abspath(args.raw), args.seeds,
                                        args.options)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base],
                           capture_output=True)
    sets = [label for label, _, _ in SETS if all(label in r for r in results.values())]
    print("| revision | " + " | ".join(sets) + " | mean | spread over seeds |")
    print("|---" * (len(sets) + 3) + "|")
    for name, r in results.items():
        per_seed = np.mean([r[s] for s in sets], axis=0)          # the mean over sets, per seed
        print(f"| {name} | " + " | ".join(f"{np.mean(r[s]):.4f}" for s in sets)
              + f" | {per_seed.mean():.4f} | {per_seed.max() - per_seed.min():.4f} |")
    a, b = results.values()
    gap = max(abs(np.mean(a[s]) - np.mean(b[s])) for s in sets)
    print(f"\nlargest difference of the two on any set: {gap:.5f}")


if __name__ == "__main__":
    main()
