"""A text-like selection set: unrelated, noisy tasks of short texts, hashed into sparse features.

Written for step 10 of PROTOCOL.md (before any candidate ran on it) to stand for what the
defaults lose on, TweetEval's languages, without looking at TweetEval: K tasks, each with its
own vocabulary order (a word frequent in one task is rare in another, as across languages) and
its own independent word weights (the tasks are unrelated), texts of a few to twenty words
drawn by Zipf frequencies, and labels with heavy noise. The texts go through the package's
text importer, so the features are those of `omtl-mpi data import text-csv` (signed hashing of
words and character n-grams at 2^14 dimensions).

Recipe (seed S): vocabulary of V words w0..w(V-1); task k draws a permutation pi_k of the
words and weights a_k(w) ~ N(0, 1); a text of task k has 3 + Poisson(9) words, word j of it
being pi_k(r) with P(r) proportional to 1 / (r + 1)^1.1; its label is the sign of
sum_w a_k(w) / sqrt(len) + noise * e, e ~ N(0, 1).

Usage: python experiments/textlike.py --seed S --out DIR
writes DIR/textlike-S.csv (columns task, text, label); then
    omtl-mpi data import text-csv DIR/textlike-S.csv --task-col task -o DIR/textlike-S.h5
"""
import argparse
import csv
import os

import numpy as np

TASKS, TEXTS, VOCABULARY, NOISE = 8, 1500, 3000, 1.5


def texts(seed: int, tasks: int = TASKS, n: int = TEXTS, vocabulary: int = VOCABULARY,
          noise: float = NOISE):
    """(task, text, label) rows, task after task."""
    rng = np.random.default_rng([seed, 10])
    p = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    p /= p.sum()
    rows = []
    for k in range(tasks):
        order = rng.permutation(vocabulary)
        weight = rng.standard_normal(vocabulary)
        for _ in range(n):
            words = order[rng.choice(vocabulary, size=3 + rng.poisson(9), p=p)]
            margin = weight[words].sum() / np.sqrt(len(words)) + noise * rng.standard_normal()
            rows.append((f"task{k}", " ".join(f"w{w}" for w in words), 1 if margin >= 0 else -1))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True, help="folder for textlike-SEED.csv")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"textlike-{args.seed}.csv")
    with open(path + ".part", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["task", "text", "label"])
        out.writerows(texts(args.seed))
    os.replace(path + ".part", path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
