"""Text features without extra dependencies: signed feature hashing of word and character n-grams.

The hash is BLAKE2b of the n-gram (stable across processes and machines, unlike Python's
``hash``); its first bytes choose the coordinate and the sign. Rows are L2-normalised.
"""
from __future__ import annotations

import hashlib
import numbers
import re

import numpy as np

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _bucket(gram: str, dims: int):
    h = int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dims, 1.0 if (h >> 63) & 1 else -1.0


def hash_texts(texts, dims: int = 512, word_ngrams: int = 2, char_ngrams: tuple = (3, 4)) -> np.ndarray:
    """Hashed bag of word 1..``word_ngrams``-grams and character n-grams (inside words).

    Parameters
    ----------
    texts : sequence of str
    dims : int
        Output dimension.

    Returns
    -------
    ndarray, shape (len(texts), dims), float64, rows of unit L2 norm (all-zero for empty text)
    """
    X = np.zeros((len(texts), dims))
    cache: dict = {}
    for i, text in enumerate(texts):
        words = _TOKEN.findall(text.lower())
        grams = []
        for n in range(1, word_ngrams + 1):
            grams += ["w:" + " ".join(words[j:j + n]) for j in range(len(words) - n + 1)]
        for w in words:
            padded = f"<{w}>"
            for n in range(char_ngrams[0], char_ngrams[1] + 1):
                grams += ["c:" + padded[j:j + n] for j in range(len(padded) - n + 1)]
        row = X[i]
        for g in grams:
            b = cache.get(g)
            if b is None:
                b = cache[g] = _bucket(g, dims)
            row[b[0]] += b[1]
        # row by row, not np.linalg.norm(X): that would hold a second matrix of X's size
        norm = np.sqrt(np.add.reduce(row * row))
        if norm > 0:
            row /= norm
    return X


def hash_features(features, dims: int) -> np.ndarray:
    """A dict of feature -> value as a vector of ``dims`` numbers, each feature's name hashed
    to a coordinate and a sign as :func:`hash_texts` hashes n-grams (not normalised).

    Examples
    --------
    >>> v = hash_features({"colour=red": 1.0, "size": 2.5}, 16)
    >>> v.shape, float(np.abs(v).sum())
    ((16,), 3.5)
    """
    out = np.zeros(dims)
    for name, value in features.items():
        if not isinstance(value, numbers.Real):         # "1.5" is text, not a number
            raise TypeError(f"{name!r}: {value!r}")
        index, sign = _bucket(str(name), dims)
        out[index] += sign * float(value)
    return out
