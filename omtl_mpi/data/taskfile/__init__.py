"""The task-stream HDF5 format: one file, validated before learning starts.

Version 2 (written by every writer of this release)::

    /              attrs: format = "omtl-mpi-tasks", format_version = 2, source, description
    /X             (N, d) float64: every task's instances, task 0's rows first, then task 1's, ...
                   (chunked by rows, about 1 MiB of features per chunk, not compressed)
    /y             (N,) int8 in {-1, +1}
    /offsets       (K+1,) int64: task k is rows offsets[k]:offsets[k+1]; offsets[0] = 0,
                   strictly increasing (no empty task), offsets[K] = N
    /names         (B,) uint8: the task names, UTF-8, one after another
    /name_offsets  (K+1,) int64: task k's name is names[name_offsets[k]:name_offsets[k+1]]

Version 3 is version 2 with the features stored as compressed sparse rows (/X a group of
data, indices and indptr, with attributes shape and max_row_nnz), written only for data whose
features are mostly zero. Version 1 files (a group /tasks/0000, ... per task, holding X and y
and a name attribute) are still read. A process reads only its own contiguous block of tasks:
one slice of /X and one of /y (:func:`load_block`). docs/DATASETS.md (*The task-file format*)
gives every layout and the measurements behind them.
"""
from __future__ import annotations

from .hdf5 import H5_ERRORS, own_item, reason
from .info import INFO_ALL, INFO_EDGES, file_digest, info
from .meta import read_meta
from .reader import load_block, load_tasks
from .schema import (CHUNK_BYTES, FORMAT, SHOWN, SPARSE_MAX_DIM, SPARSE_VERSION, VERSION, VERSIONS,
                     FlatStreams, TaskMeta, TaskStreams, check_values, store_sparse)
from .writer import TaskFileWriter, _stack, block_spans, write_tasks

__all__ = ["CHUNK_BYTES", "FORMAT", "SHOWN", "SPARSE_MAX_DIM", "SPARSE_VERSION", "VERSION",
           "VERSIONS", "H5_ERRORS", "INFO_ALL", "INFO_EDGES", "FlatStreams", "TaskFileWriter",
           "TaskMeta", "TaskStreams", "block_spans", "check_values", "file_digest", "info",
           "load_block", "load_tasks", "own_item", "read_meta", "reason", "store_sparse",
           "write_tasks"]
