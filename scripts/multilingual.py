"""Write a synthetic five-language review corpus in the text-CSV layout (one CSV per language,
columns ``text`` and ``label``, labels ``positive``/``negative``): a stand-in for the paper's
multilingual review corpus, which its publisher withdrew (docs/DATASETS.md).

    python scripts/multilingual.py --out reviews/            # about 27,000 reviews, seed 0
    omtl-mpi data import text-csv reviews/ -o reviews.h5     # one task per language

The reviews are synthetic. What makes the hashing dimension and its collisions matter as they
do for real text is built in:

* five languages with their own alphabets and syllables (so their character n-grams differ;
  one writes in kana), each with a vocabulary of ``--vocabulary`` words drawn with Zipfian
  frequencies (rank r with weight 1 / r^1.07), and a Markov structure: a word is often
  followed by one of a few collocates of its own, so word bigrams repeat;
* per language, a few hundred label-bearing words (positive and negative, at middle
  frequencies), negators that flip the word after them (the bigram carries the label, the
  unigram misleads), and mixed reviews (a fifth of the opinion words go against the label);
* a signal shared by every language: loanwords and tokens that mean the same everywhere
  (``super``, ``top``, ``fail``, ...), so that the tasks are related as well as different;
* review lengths log-normal (median about 30 words), the positive ratio per language between
  0.50 and 0.60, 8% of the labels flipped.

Everything is drawn from ``numpy.random.default_rng(seed)``: the same seed writes the same files.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np

# (name, onsets, vowels, codas): the syllables of each language's words
LANGUAGES = (
    ("en", "b c d f g h k l m n p r s t w th sh ch st".split(), "a e i o u ea oo ai".split(),
     ["", "", "n", "t", "s", "r", "ng", "ck"]),
    ("de", "b d f g h k l m n p r s t w z sch st pf kr".split(), "a e i o u ä ö ü ei au ie".split(),
     ["", "n", "r", "t", "ch", "s", "ng", "lt"]),
    ("fr", "b d f g j l m n p r s t v ch qu gr pl".split(), "a e i o u é è ou eau oi".split(),
     ["", "", "", "s", "t", "r", "nt", "x"]),
    ("es", "b c d g l m n p r s t v ll ñ rr j".split(), "a e i o u ia ue io".split(),
     ["", "", "s", "n", "r", "l", "z"]),
    ("ja", list("かきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもらりるれろ"),
     [""], ["", "", "", "ん", "っ"]),
)
SHARES = (0.24, 0.22, 0.20, 0.18, 0.16)                 # of the reviews, by language
POSITIVE = (0.55, 0.60, 0.52, 0.57, 0.50)               # positive ratio, by language
# tokens that carry the same opinion in every language (loanwords, brands of praise or blame)
SHARED = {"super": 1, "top": 1, "wow": 1, "perfect": 1, "mega": 1, "ok": 0.4, "xd": 0.6,
          "fail": -1, "bof": -1, "meh": -0.6, "scam": -1, "zero": -1, "broken": -1}
ZIPF = 1.07
NOISE = 0.08                     # labels flipped
OPINION, AGAINST, NEGATED, LOANWORD, COLLOCATE = 0.11, 0.2, 0.03, 0.025, 0.5


def make_words(rng, onsets, vowels, codas, count: int) -> list:
    """``count`` distinct words of 1 to 4 syllables."""
    words, seen = [], set()
    while len(words) < count:
        n = int(rng.choice([1, 2, 2, 3, 3, 3, 4]))
        word = "".join(onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))]
                       + (codas[rng.integers(len(codas))] if i == n - 1 else "") for i in range(n))
        if word not in seen and word not in SHARED:
            seen.add(word)
            words.append(word)
    return words


class Language:
    """One language's vocabulary, its Zipfian frequencies, collocates, opinion words and
    negators."""

    def __init__(self, rng, onsets, vowels, codas, vocabulary: int):
        self.words = make_words(rng, onsets, vowels, codas, vocabulary + 700)
        self.background = self.words[:vocabulary]
        weights = 1.0 / np.arange(1, vocabulary + 1) ** ZIPF
        self.cdf = np.cumsum(weights / weights.sum())
        # every word's few collocates, the words that often follow it
        self.collocates = rng.integers(0, min(vocabulary, 3000), size=(vocabulary, 4))
        extra = self.words[vocabulary:]
        self.positive, self.negative = extra[:300], extra[300:600]
        self.negators = extra[600:603]
        ow = 1.0 / np.arange(1, 301) ** 0.8
        self.opinion_cdf = np.cumsum(ow / ow.sum())

    def background_word(self, rng, previous: int | None) -> int:
        if previous is not None and rng.random() < COLLOCATE:
            return int(self.collocates[previous, rng.integers(4)])
        return int(np.searchsorted(self.cdf, rng.random()))

    def opinion(self, rng, sign: int) -> str:
        words = self.positive if sign > 0 else self.negative
        return words[int(np.searchsorted(self.opinion_cdf, rng.random()))]


SHARED_WORDS = list(SHARED)


def review(rng, lang: Language, sign: int) -> str:
    """One review whose opinion is ``sign`` (+1 or -1)."""
    length = int(np.clip(np.round(rng.lognormal(np.log(30), 0.6)), 3, 300))
    words, previous = [], None
    while len(words) < length:
        u = rng.random()
        if u < OPINION:
            words.append(lang.opinion(rng, -sign if rng.random() < AGAINST else sign))
            previous = None
        elif u < OPINION + NEGATED:
            words += [lang.negators[rng.integers(3)], lang.opinion(rng, -sign)]
            previous = None
        elif u < OPINION + NEGATED + LOANWORD:
            fitting = [w for w in SHARED_WORDS if SHARED[w] * sign > 0]
            words.append(fitting[rng.integers(len(fitting))])
            previous = None
        else:
            previous = lang.background_word(rng, previous)
            words.append(lang.background[previous])
    return " ".join(words)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write <language>.csv into (created)")
    ap.add_argument("--reviews", type=int, default=27000, help="reviews in all (default 27000)")
    ap.add_argument("--vocabulary", type=int, default=20000,
                    help="background words per language (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.reviews < len(LANGUAGES) or args.vocabulary < 3000:
        print(f"error: --reviews must be at least {len(LANGUAGES)} and --vocabulary at least 3000",
              file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    counts = np.floor(np.array(SHARES) * args.reviews).astype(int)
    counts[0] += args.reviews - counts.sum()
    for (name, onsets, vowels, codas), n, positive in zip(LANGUAGES, counts, POSITIVE):
        lang = Language(rng, onsets, vowels, codas, args.vocabulary)
        path = os.path.join(args.out, f"{name}.csv")
        with open(path + ".part", "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["text", "label"])
            for _ in range(int(n)):
                sign = 1 if rng.random() < positive else -1
                label = -sign if rng.random() < NOISE else sign
                out.writerow([review(rng, lang, sign), "positive" if label > 0 else "negative"])
        os.replace(path + ".part", path)
    print(f"wrote {int(counts.sum())} reviews in {len(LANGUAGES)} languages to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
