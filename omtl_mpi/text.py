"""Raw text as the text importers featurise it, for the Python API: a learner trained on a file
of ``omtl-mpi data import text-csv`` (or ``tweeteval``) sees new texts as the import would have
written them only if they are hashed the same way, n-gram prefixes, signs and norm included."""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Set

from .data.embed import DEFAULT_HASH_DIMS
from .data.featurise import hash_texts_sparse
from .data.taskfile import SPARSE_MAX_DIM
from .errors import UserError


def hash_texts(texts, n_features: int = DEFAULT_HASH_DIMS):
    """The rows the text importers write for ``texts``, bit for bit.

    Each text's word 1- and 2-grams and character 3- and 4-grams (inside words) are hashed to
    a column of ``n_features`` and a sign, summed, and the row divided by its L2 norm: what
    ``omtl-mpi data import text-csv --dims N`` stores for each review, as a sparse row. A dict
    of words given to a learner is hashed as feature names, not as text: it matches no
    imported row, so hash new text with this function.

    Parameters
    ----------
    texts : sequence of str
        The texts (a single str is refused: it would be read as a sequence of characters).
    n_features : int, default 16384
        The import's ``--dims`` (the text importers' default); a learner's ``n_features``.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (len(texts), n_features)
        Rows of unit norm (an empty text's row has no entry).

    Raises
    ------
    UserError
        ``texts`` not a sequence of str, or ``n_features`` not an integer from 1 to
        2**31 - 1.

    Examples
    --------
    >>> import omtl_mpi
    >>> X = omtl_mpi.hash_texts(["a great film", "awful, just awful"], n_features=2**18)
    >>> X.shape, round(float(X[0].multiply(X[0]).sum()), 12)
    ((2, 262144), 1.0)
    >>> m = omtl_mpi.learner("c-admm", n_tasks=2, n_features=2**18)
    >>> m.learn_one(X[0], 1, task=0)
    >>> m.learn_one(X[1], -1, task=0)
    >>> int(m.predict_one(omtl_mpi.hash_texts(["great"], 2**18), task=0))
    1
    """
    if isinstance(texts, (str, bytes)):
        raise UserError("hash_texts takes a sequence of texts; for one text pass [text]")
    # rows come back in the order of texts: a dict (its keys) or a set has no order of its own
    if isinstance(texts, (Mapping, Set)):
        raise UserError(f"hash_texts takes a sequence of texts, got a {type(texts).__name__} "
                        f"(its rows would follow no order of yours): pass a list")
    try:
        texts = list(texts)
    except TypeError:           # a number, None: not iterable at all
        raise UserError(f"hash_texts takes a sequence of str texts, got "
                        f"{type(texts).__name__} {texts!r:.40}") from None
    # the position, not the item, marks the first bad one: the item itself may be None
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise UserError(f"hash_texts takes str texts; texts[{bad}] is "
                        f"{type(texts[bad]).__name__} {texts[bad]!r:.40}")
    # n-grams are hashed as UTF-8: a text it cannot write (a lone surrogate) would hash to less
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"texts[{i}] is not text that UTF-8 can write (a lone surrogate): "
                            f"{text!r:.40}; decode its bytes with errors='replace'") from None
    # the columns are int32, as in a sparse task file: a larger n_features would wrap them
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) \
            or not 1 <= n_features <= SPARSE_MAX_DIM:
        raise UserError(f"n_features must be an integer from 1 to {SPARSE_MAX_DIM} (the columns "
                        f"a sparse task file holds), got {n_features!r}")
    return hash_texts_sparse(texts, int(n_features))
