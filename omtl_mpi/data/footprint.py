"""How much memory (or disk) the data layer's work needs, estimated before it starts, so that
every check refuses with the same figures (the learners' own arrays are
:mod:`omtl_mpi.algorithms.footprint`'s)."""
from __future__ import annotations

import zipfile

import numpy as np

from .. import memory
from ..errors import DataError

# bytes of features read at a time while a rank lays its streams out in rounds (a task at least)
READ_CHUNK_BYTES = 1 << 24
# the n-grams of a text per character, about (word 1-2-grams and character 3-4-grams), each at
# most one stored entry of the text's hashed row
_GRAMS_PER_CHAR = 2
# bytes a character of the source takes once read (a Python string per text, the lists)
_BYTES_PER_CHAR = 3


def available_memory() -> int | None:
    """Bytes this process may still allocate (:func:`omtl_mpi.memory.available`); None: unknown."""
    return memory.available()


def features_bytes(meta, rows: int) -> int:
    """Bytes ``rows`` instances of the data set (``meta``) take in memory: 8 per feature dense;
    sparse, 12 per entry (at the data set's mean) and 8 per row."""
    if meta.sparse:
        total = int(meta.lengths.sum())
        return int(12 * meta.nnz * rows / max(total, 1)) + 8 * (rows + 1)
    return rows * meta.dim * 8


def check_fits(meta, indices) -> None:
    """Refuse, before reading, tasks whose features cannot fit in this machine's memory."""
    if isinstance(indices, range) and indices.step == 1:
        rows = int(meta.lengths[indices.start:indices.stop].sum())
    else:
        rows = int(meta.lengths[np.asarray(indices, dtype=np.int64).reshape(-1)].sum())
    need = features_bytes(meta, rows)
    free = available_memory()
    # the features are read once and copied at most once more (validation, batching)
    if free is not None and 2 * need > free:
        raise DataError(f"{meta.path}: the {len(indices)} task(s) this process would hold need "
                        f"{memory.size_text(need)} of features (d = {meta.dim}), more than half the "
                        f"{memory.size_text(free)} of memory available: start more ranks (or nodes) so "
                        "that each holds fewer tasks, or reduce the dimension when importing")


def check_declared(path: str, what: str, nbytes: int) -> None:
    """Refuse, before reading, an array of more than half the free memory (a damaged file's)."""
    free = available_memory()
    if free is not None and 2 * nbytes > free:
        raise DataError(f"{path}: {what} would need {memory.size_text(nbytes)}, more than half the "
                        f"{memory.size_text(free)} of memory available; the file is damaged, or too "
                        "large for this machine")


def layout_bytes(lengths, batch: int, dim: int, entries: int | None = None) -> int:
    """Bytes a :class:`~omtl_mpi.data.rounds.RoundLayout` of streams of these ``lengths`` holds for
    ``dim`` weights (sparse: ``entries`` of them, twice while laid out), with its index."""
    lengths = np.asarray(lengths, dtype=np.int64)
    pairs = int((-(-lengths // batch)).sum())
    features = 8 * dim * pairs * batch if entries is None else 2 * (12 * entries + 8 * pairs * batch)
    # features, label and prediction per slot; task, position, count and their sort per pair
    return features + pairs * batch * 2 + pairs * (8 + (8 if batch > 1 else 0)) + pairs * 16


def entries(meta, rows: int, intercept: bool) -> int:
    """Entries of ``rows`` instances of a sparse data set (at its mean), the intercept's too."""
    total = max(int(meta.lengths.sum()), 1)
    return int(-(-meta.nnz * rows // total)) + (rows if intercept else 0)


def chunk_rows(meta) -> int:
    """Instances in one chunk read (``meta``: the TaskMeta, or a number of dense features)."""
    if isinstance(meta, (int, np.integer)):
        return max(1, READ_CHUNK_BYTES // (8 * max(int(meta), 1)))
    if meta.sparse:
        per_row = 12 * meta.nnz / max(int(meta.lengths.sum()), 1) + 8
        return max(1, int(READ_CHUNK_BYTES // per_row))
    return max(1, READ_CHUNK_BYTES // (8 * max(meta.dim, 1)))


def rank_streams_bytes(meta, blocks, batch: int, dim: int, intercept: bool) -> tuple:
    """(bytes, stream lengths) of the rank that holds the most of a run (``blocks``: each rank's
    (a, b) spans): its streams in rounds for ``dim`` weights, and three chunks read."""
    most, lengths = 0, None
    for rank_blocks in blocks:
        n = np.concatenate([meta.lengths[a:b] for a, b in rank_blocks] or [np.zeros(0, np.int64)])
        stored = entries(meta, int(n.sum()), intercept) if meta.sparse else None
        need = layout_bytes(n, batch, dim, stored) if len(n) else 0
        if need >= most:
            most, lengths = need, n
    return most + 3 * features_bytes(meta, min(int(lengths.sum()), chunk_rows(meta))), lengths


def matrix_bytes(rows: int, dims: int) -> float:
    """Peak bytes of a float64 feature matrix while written (and validated: an eighth more)."""
    return 1.125 * 8.0 * rows * dims


def parsed_bytes(stored: int, rows: int, dims: int, sparse: bool) -> float:
    """Peak bytes of ``rows`` parsed instances of ``dims`` features, ``stored`` entries (twice), a
    row pointer and label a row, and the dense matrix unless ``sparse``."""
    return 24.0 * stored + 16.0 * rows + (0 if sparse else matrix_bytes(rows, dims))


def text_bytes(chars: int, n: int, dims: int) -> float:
    """Peak bytes of importing ``n`` texts of ``chars`` characters hashed to ``dims``."""
    from .taskfile import store_sparse
    stored = min(_GRAMS_PER_CHAR * chars, n * dims)
    sparse = store_sparse(int(stored), n, dims)
    return _BYTES_PER_CHAR * chars + 24.0 * stored + 16.0 * n + (0 if sparse else matrix_bytes(n, dims))


def npz_bytes(src: str) -> float:
    """Bytes an .npz archive's arrays take loaded and written as float64, from their headers alone
    (0 where one cannot be read: loading it will say what is wrong)."""
    total = 0.0
    try:
        with zipfile.ZipFile(src) as z:
            for member in z.infolist():
                if not member.filename.endswith(".npy"):
                    continue
                with z.open(member) as f:
                    version = np.lib.format.read_magic(f)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(f)
                n = float(np.prod(shape, dtype=np.float64))
                total += n * (dtype.itemsize + 9)          # as stored, as float64, validated
    except Exception:                   # damaged archives are reported by np.load
        return 0.0
    return total


def images_bytes(n: int, pixels: int, dims: int | None) -> float:
    """Peak bytes of converting ``n`` images of ``pixels`` pixels (projected to ``dims``)."""
    d = dims or pixels
    return 8.0 * n * pixels + (8.0 * (pixels + n) * dims if dims else 0) + matrix_bytes(n, d)


def block_bytes(rows: int, dims: int) -> float:
    """Peak bytes of generating and writing a block of ``rows`` instances of ``dims`` features: the
    features twice, about thirty float temporaries an instance, and the writer's chunk cache."""
    from .taskfile import CHUNK_BYTES
    return float(rows) * (16.0 * dims + 240) + 4 * CHUNK_BYTES


def synthetic_bytes(tasks: int, samples: int, dims: int = 9) -> float:
    """Peak bytes of generating ``tasks`` x ``samples`` instances of ``dims`` features block by
    block as 'omtl-mpi data synth' does: one block, the chunk cache and a few values per task."""
    from .synthetic import BLOCK_ROWS
    rows = min(int(tasks), max(1, BLOCK_ROWS // int(samples))) * float(samples)
    return block_bytes(rows, dims) + tasks * (8.0 * (dims + 6) + 200)


def personal_bytes(lengths, dims: int) -> float:
    """Peak bytes of generating and writing personal streams of ``lengths`` block by block."""
    from .synthetic import block_rows
    return block_bytes(block_rows(lengths), dims + 1) + len(lengths) * (8.0 * dims + 220)


def file_bytes(instances: int, dims: int, tasks: int) -> float:
    """Bytes of a task file of so many instances, features and tasks (names of ~10 bytes)."""
    return float(instances) * (8 * dims + 1) + tasks * 26.0
