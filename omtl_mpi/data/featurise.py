"""Text features without extra dependencies: signed feature hashing of word and character n-grams.

The hash is BLAKE2b of the n-gram (stable across processes and machines, unlike Python's
``hash``); its first bytes choose the coordinate and the sign. Rows are L2-normalised. The
importers hash into a sparse matrix (:func:`hash_texts_sparse`), so a dimension of 2^18 costs
no more memory than 512.
"""
from __future__ import annotations

import hashlib
import numbers
import re

import numpy as np

_TOKEN = re.compile(r"\w+", re.UNICODE)


def feature_column(gram: str, dims: int):
    """(column, sign) of a feature's name among ``dims``: the hash of every importer and the API."""
    h = int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dims, 1.0 if (h >> 63) & 1 else -1.0


# texts hashed together (their grams' columns held at once): bounds the temporaries
_CHUNK_TEXTS = 2048


class _Codes(dict):
    """n-gram -> its column + 1, signed by its hash's sign (hashed on first lookup)."""

    def __init__(self, dims: int):
        super().__init__()
        self.dims = dims

    def __missing__(self, gram: str) -> int:
        index, sign = feature_column(gram, self.dims)
        code = self[gram] = (int(index) + 1) * (1 if sign > 0 else -1)
        return code


class _WordCodes(dict):
    """word -> the codes of its unigram and its character n-grams (made once per word)."""

    def __init__(self, codes: _Codes, char_ngrams: tuple):
        super().__init__()
        self.codes, self.char_ngrams = codes, char_ngrams

    def __missing__(self, word: str) -> tuple:
        padded = f"<{word}>"
        grams = ["w:" + word]
        for n in range(self.char_ngrams[0], self.char_ngrams[1] + 1):
            grams += ["c:" + padded[j:j + n] for j in range(len(padded) - n + 1)]
        entry = self[word] = tuple(map(self.codes.__getitem__, grams))
        return entry


def _text_codes(text: str, words_of: _WordCodes, codes: _Codes, word_ngrams: int, out: list) -> int:
    """Append the codes of one text's n-grams to ``out``; returns how many."""
    words = _TOKEN.findall(text.lower())
    before = len(out)
    for entry in map(words_of.__getitem__, words):
        out.extend(entry)
    for n in range(2, word_ngrams + 1):
        out.extend(map(codes.__getitem__, ["w:" + " ".join(words[j:j + n])
                                           for j in range(len(words) - n + 1)]))
    return len(out) - before


def hash_texts_sparse(texts, dims: int = 512, word_ngrams: int = 2, char_ngrams: tuple = (3, 4)):
    """Hashed bag of word 1..``word_ngrams``-grams and in-word character n-grams of the str
    ``texts``: a (len(texts), ``dims``) scipy.sparse CSR matrix of unit-norm float64 rows (none for
    an empty text), bit for bit :func:`hash_texts`'s (the sums are of whole numbers)."""
    from scipy.sparse import csr_matrix
    cache = _Codes(dims)
    words_of = _WordCodes(cache, char_ngrams)
    parts, starts = [], [0]
    for a in range(0, len(texts), _CHUNK_TEXTS):
        codes: list = []
        counts = [_text_codes(text, words_of, cache, word_ngrams, codes)
                  for text in texts[a:a + _CHUNK_TEXTS]]
        codes = np.array(codes, dtype=np.int64)
        rows = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        keys, inverse = np.unique(rows * dims + (np.abs(codes) - 1), return_inverse=True)
        values = np.bincount(inverse, weights=np.sign(codes).astype(np.float64),
                             minlength=len(keys)).astype(np.float64)       # (int64 when empty)
        keep = values != 0.0                # n-grams whose signs cancel leave no entry
        keys, values = keys[keep], values[keep]
        rows = keys // dims
        norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=len(counts)))
        values /= norms[rows]
        parts.append((values, (keys % dims).astype(np.int32)))
        indptr = np.searchsorted(rows, np.arange(1, len(counts) + 1))
        starts += (indptr + sum(len(p[0]) for p in parts[:-1])).tolist()
    data = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    indices = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int32)
    return csr_matrix((data, indices, np.array(starts, dtype=np.int64)), shape=(len(texts), dims))


def hash_texts(texts, dims: int = 512, word_ngrams: int = 2, char_ngrams: tuple = (3, 4)) -> np.ndarray:
    """:func:`hash_texts_sparse` as a dense array (len(texts), dims), all-zero rows for empty texts.

    Examples
    --------
    >>> X = hash_texts(["the cat sat", ""], dims=64)
    >>> X.shape, float(np.linalg.norm(X[0])), float(np.abs(X[1]).sum())
    ((2, 64), 1.0, 0.0)
    """
    return hash_texts_sparse(texts, dims, word_ngrams, char_ngrams).toarray()


def hash_entries(features, dims: int):
    """A dict of feature -> value as the (columns, values) of its non-zero entries, names hashed as
    :func:`hash_texts` hashes n-grams (not normalised; features of one column add up, in order).

    Examples
    --------
    >>> cols, values = hash_entries({"colour=red": 1.0, "size": 2.5}, 2 ** 18)
    >>> len(cols), float(np.abs(values).sum())
    (2, 3.5)
    """
    sums: dict[int, float] = {}
    for name, value in features.items():
        if not isinstance(value, numbers.Real):         # "1.5" is text, not a number
            raise TypeError(f"{name!r}: {value!r}")
        column, sign = feature_column(str(name), dims)
        sums[column] = sums.get(column, 0.0) + sign * float(value)     # in order, from 0.0
    cols = sorted(c for c, v in sums.items() if v != 0.0)
    return np.array(cols, dtype=np.int64), np.array([sums[c] for c in cols], dtype=np.float64)
