"""Whether a change of the code changed what the learners compute, to the bit.

    python experiments/bits.py --out results/bits/ref            # digests of this checkout
    python experiments/bits.py --compare results/bits/ref        # this checkout against them

For a change meant to compute the same numbers another way (a faster round, a module split),
this runs `omtl-mpi run` over a fixed list of configurations (every registered learner's
defaults, the paper's model on the star and on a ring, a learned Omega below and above the
dense-step limit, mini-batches, one process and mpiexec) on data it draws itself, and keeps a
SHA-256 of every array a results file holds but the timings (the predictions, the metrics, the
model, Omega). `--compare` runs the same list and names every run and array whose bits moved.
`--only SUBSTRING` keeps the runs whose name holds it. Nothing here is part of the package or
its tests; the digests hold only on the processor and numpy build that made them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)

# (name, data, ranks, options)
DATA = {
    "paper5": ["--tasks", "5", "--samples", "1500", "--seed", "0"],
    "paper70": ["--tasks", "70", "--samples", "200", "--seed", "1"],
    "personal": ["--family", "personal", "--tasks", "300", "--seed", "2", "--normalize"],
    "clustered": ["--family", "clustered", "--tasks", "8", "--samples", "300", "--seed", "3"],
}


def runs(algos) -> list:
    out = [(f"{a}-defaults", "paper5", None, ["--algo", a]) for a in algos]
    out += [
        ("c-admm-paper", "paper5", None, ["--algo", "c-admm", "--preset", "paper"]),
        ("c-admm-paper-variant", "paper5", None,
         ["--algo", "c-admm", "--preset", "paper", "--variant", "paper"]),
        ("c-admm-paper-k70", "paper70", None, ["--algo", "c-admm", "--preset", "paper"]),
        ("c-admm-relationship", "clustered", None, ["--algo", "c-admm", "--relationship"]),
        ("c-admm-omega-every", "clustered", None,
         ["--algo", "c-admm", "--relationship", "--omega-every", "7", "--batch", "4"]),
        ("c-admm-personal", "personal", None, ["--algo", "c-admm"]),
        ("c-admm-paper-mpi3", "paper5", 3, ["--algo", "c-admm", "--preset", "paper"]),
        ("c-admm-defaults-mpi3", "clustered", 3, ["--algo", "c-admm", "--seed", "4"]),
        ("d-admm-ring-paper-mpi5", "paper5", 5,
         ["--algo", "d-admm", "--topology", "ring", "--preset", "paper"]),
        ("d-admm-ring-defaults-mpi3", "clustered", 3, ["--algo", "d-admm", "--topology", "ring"]),
    ]
    return out


def digests(path: str) -> dict:
    """{array name: sha256} of a results file, timings left out."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith("timing"):
                value = obj[()]
                data = (np.ascontiguousarray(value).tobytes() if isinstance(value, np.ndarray)
                        and value.dtype != object else repr(value).encode())
                out[name] = hashlib.sha256(data).hexdigest()
        f.visititems(visit)
        for key in ("mean_error", "overall_error", "balanced_error", "f1"):
            if key in f.attrs:
                out["attr:" + key] = repr(float(f.attrs[key]))
    return out


def run_all(only: str | None) -> dict:
    algos = json.loads(subprocess.run(
        [os.path.join(BIN, "omtl-mpi"), "algos", "--json"], capture_output=True, text=True,
        check=True).stdout)
    names = [a["name"] for a in algos]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, args in DATA.items():
            files[name] = os.path.join(tmp, name + ".h5")
            subprocess.run([os.path.join(BIN, "omtl-mpi"), "data", "synth", "-o", files[name],
                            *args], check=True, capture_output=True)
        for name, data, ranks, options in runs(names):
            if only and only not in name:
                continue
            res = os.path.join(tmp, name + ".h5")
            cmd = [os.path.join(BIN, "omtl-mpi"), "run", "--data", files[data], "--out", res,
                   "--no-progress", *options]
            if ranks:
                cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), sys.executable, "-m",
                       "mpi4py", "-m", "omtl_mpi", *cmd[1:]]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                out[name] = {"error": done.stderr.strip().splitlines()[-1:]}
            else:
                out[name] = digests(res)
            print(f"{name}: {'failed' if 'error' in out[name] else 'done'}", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="folder to write digests.json into")
    ap.add_argument("--compare", help="folder of an earlier --out")
    ap.add_argument("--only", help="only the runs whose name holds this")
    args = ap.parse_args()
    if not (args.out or args.compare):
        ap.error("give --out FOLDER or --compare FOLDER")
    now = run_all(args.only)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "digests.json"), "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
    if args.compare:
        with open(os.path.join(args.compare, "digests.json")) as f:
            ref = json.load(f)
        moved = 0
        for name, arrays in now.items():
            if name not in ref:
                print(f"{name}: not in the reference")
                continue
            diff = sorted(k for k in set(arrays) | set(ref[name])
                          if arrays.get(k) != ref[name].get(k))
            if diff:
                moved += 1
                print(f"{name}: moved: {', '.join(diff)}")
        print(f"{len(now) - moved} of {len(now)} runs the same to the bit")
        return 1 if moved else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
