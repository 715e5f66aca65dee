"""The task-stream HDF5 format: one file, validated before learning starts.

Version 2 holds every task's instances in /X (N, d) float64 and /y (N,) int8, task after task,
with /offsets (K+1,) and the UTF-8 names in /names and /name_offsets; version 3 stores /X as
compressed sparse rows; version 1 files (a group /tasks/0000, ... per task) are still read. A
process reads only its own contiguous block of tasks (:func:`load_block`). docs/DATASETS.md
(*The task-file format*) gives every layout.
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
