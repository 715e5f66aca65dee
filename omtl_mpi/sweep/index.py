"""A sweep's index (``FOLDER/index.json``): the one record of every run, read whole and
rewritten atomically, under a lock when several processes update it (the Slurm array elements
of a sweep, each recording its own run, and the command that submitted them)."""
import contextlib
import fcntl
import json
import os

from ..atomic import atomic_path
from ..errors import UserError
from ..paths import regular_file

INDEX = "index.json"
LOCK = "index.lock"
FORMAT = "omtl-mpi-sweep"
# a run recorded as one of these is still in a scheduler's hands (the slurm launcher)
IN_FLIGHT = ("submitted", "running")


def read_index(folder: str) -> dict:
    """The sweep index of ``folder`` (an empty one if there is none yet)."""
    path = os.path.join(folder, INDEX)
    if not os.path.lexists(path):
        return {"format": FORMAT, "version": 1, "runs": {}}
    regular_file(path, "sweep index")          # a FIFO would block the sweep forever
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not a readable sweep index ({exc}); move it away to start afresh") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or not isinstance(index.get("runs"), dict):
        raise UserError(f"{path} is not an omtl-mpi sweep index; choose another --out folder")
    for rid, rec in index["runs"].items():
        if not isinstance(rec, dict) or not isinstance(rec.get("status"), str):
            raise UserError(f"{path}: the record of run {rid} has no status; the sweep index is "
                            "damaged: move it away and run the sweep again")
    return index


@contextlib.contextmanager
def locked(folder: str):
    """Hold the index's lock (``FOLDER/index.lock``, a POSIX record lock, which network file
    systems pass on) while inside; yields the index as it is now."""
    path = os.path.join(folder, LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield read_index(folder)
    finally:
        os.close(fd)            # closing releases the lock


def update(folder: str, change) -> dict:
    """Read the index under its lock, apply ``change(index)`` and write it back atomically;
    returns the index written. Other writers' records of other runs are kept."""
    with locked(folder) as index:
        change(index)
        with atomic_path(os.path.join(folder, INDEX)) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
        return index


def set_record(folder: str, rid: str, record: dict) -> dict:
    """Record run ``rid`` (replacing its earlier record) under the lock."""
    return update(folder, lambda index: index["runs"].__setitem__(rid, record))
