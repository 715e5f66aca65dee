"""Checkpoints: the full learning state of every rank in one HDF5 file, written atomically.

Root attributes ``format``, ``format_version``, ``round`` (rounds done), ``config`` (JSON),
``fingerprint``, ``signature`` (of the data set's names, lengths and d), ``data_digest`` and
``state_digest`` (SHA-256 of the data set's contents and of the state below) and ``ranks``; a
group ``rank_NNNN`` per rank: its learner state, predictions so far, staleness and per-round
timings, as nested groups of plain arrays, never unpickled. A checkpoint of another run is
refused, and its state is checked against its digest and every rank's learner
(:func:`check_part`) before anything is restored (docs/RELIABILITY.md).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import h5py
import numpy as np

from ..atomic import atomic_path
from ..data.taskfile import H5_ERRORS, reason
from ..data.trees import Damaged, digest_into, read_item, write_tree
from ..errors import UserError
from ..paths import regular_file
from .results import flatten

FORMAT = "omtl-mpi-checkpoint"
# bumped whenever the layout or meaning of a checkpoint's arrays changes (a state's shape, what a
# default resolves to): another release's checkpoint is refused instead of resuming into others
VERSION = 4


def default_path(out: str | None) -> str | None:
    """``run.h5`` -> ``run.ckpt.h5`` (the checkpoint sits next to the results file)."""
    if not out:
        return None
    root, ext = os.path.splitext(out)
    return f"{root}.ckpt{ext or '.h5'}"


def state_digest(done: int, ranks_state: list) -> str:
    """SHA-256 of the rounds done and of every rank's state tree, as written and as read back
    (keys in sorted order, each array's dtype, shape and bytes)."""
    h = hashlib.sha256(f"round {int(done)} ranks {len(ranks_state)}\0".encode())
    for r, state in enumerate(ranks_state):
        digest_into(h, f"rank_{r:04d}", state)
    return "sha256:" + h.hexdigest()


def data_digest(source) -> str:
    """SHA-256 of what a run learns from: the task file's bytes (computed once per process
    while the file is unchanged), or the description of the synthetic family."""
    from ..data.source import FileSource
    from ..data.taskfile import file_digest
    if isinstance(source, FileSource):
        return file_digest(source.path)
    return "sha256:" + hashlib.sha256(source.describe().encode()).hexdigest()


def write(path: str, done: int, ranks_state: list, cfg, meta, source) -> None:
    """Write every rank's state (rank order) after ``done`` rounds of the run of ``cfg`` on the
    data of ``meta`` and ``source``; the old file stays intact until the new one is complete."""
    attrs = {"format": FORMAT, "format_version": VERSION, "round": done,
             "config": cfg.to_json(), "fingerprint": cfg.fingerprint(),
             "signature": signature_of(meta), "data_digest": data_digest(source),
             "state_digest": state_digest(done, ranks_state), "ranks": len(ranks_state)}
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs.update(attrs)
        for r, state in enumerate(ranks_state):
            write_tree(f.create_group(f"rank_{r:04d}"), state)


def _differences(saved: str, current: str) -> str:
    saved = json.loads(saved)
    if not isinstance(saved, dict):
        return "its recorded configuration is not readable"
    a, b = flatten(saved), flatten(json.loads(current))
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k} was {a.get(k)!r}, now {b.get(k)!r}" for k in keys[:4])


@dataclass
class Checkpoint:
    """A checkpoint of this run, read on rank 0: what it holds and whether it is intact."""

    path: str
    done: int
    states: list            # every rank's part, in rank order
    intact: bool            # its state matches its digest (True where it has none)

    def verify(self) -> None:
        """Refuse (UserError) a checkpoint whose state does not match its digest."""
        if not self.intact:
            raise UserError(f"--resume {self.path}: its state does not match its digest: the file "
                            "is damaged; resume from another checkpoint or start the run afresh")


def read(path: str, cfg, meta, source, ranks: int, rounds: int) -> Checkpoint:
    """The checkpoint ``path`` (``--resume``), read on rank 0, if the run of ``cfg`` on the data
    of ``meta`` and ``source`` with ``ranks`` ranks and ``rounds`` rounds made it, as :func:`write`
    records them (the data's digest is computed only when the checkpoint has one). Raises a
    UserError of one line for a missing file, anything but a regular file, a damaged file, or a
    checkpoint of another run (ranks, data set, contents or configuration)."""
    where = f"--resume {path}"
    try:
        regular_file(path, "checkpoint file")
    except UserError as exc:
        raise UserError(f"--resume {exc}") from None
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise UserError(f"{where}: not a readable HDF5 checkpoint") from None
    try:
        with f:
            return _read_checkpoint(f, where, path, cfg, meta, source, ranks, rounds)
    except UserError:                          # already one line about this checkpoint
        raise
    except (Damaged, *H5_ERRORS) as exc:      # a damaged file: one line naming the checkpoint
        raise UserError(f"{where}: the checkpoint is damaged ({reason(exc)}); resume from another "
                        "checkpoint or start the run afresh") from None


def _read_checkpoint(f, where, path, cfg, meta, source, ranks, rounds) -> Checkpoint:
    attrs = f.attrs
    if attrs.get("format") != FORMAT:
        raise UserError(f"{where}: not an omtl-mpi checkpoint")
    version = int(attrs.get("format_version", 1))
    if version != VERSION:
        raise UserError(f"{where}: checkpoint format version {version}; this release of omtl-mpi "
                        f"reads version {VERSION}: resume with the omtl-mpi that wrote it, or "
                        "start the run afresh")
    if int(attrs["ranks"]) != ranks:
        raise UserError(f"{where}: made with {int(attrs['ranks'])} ranks, this run has "
                        f"{ranks}; resume with the same number of ranks")
    if attrs["signature"] != signature_of(meta):
        raise UserError(f"{where}: made on a different data set (task names, lengths or "
                        "dimension differ); resume with the same --data")
    if "data_digest" in attrs:
        then, now = str(attrs["data_digest"]), data_digest(source)
        if then != now:
            raise UserError(f"{where}: made on a data set with different contents: its digest "
                            f"was {_short(then)}, the data's is now {_short(now)}; resume with "
                            "the same --data")
    if attrs["fingerprint"] != cfg.fingerprint():
        raise UserError(f"{where}: made with a different configuration "
                        f"({_differences(attrs['config'], cfg.to_json())}); resume with the same "
                        "options as the original run")
    done = int(attrs["round"])
    if not 0 <= done <= rounds:
        raise Damaged(f"it says {done} rounds were done, the run has {rounds}")
    states = []
    for r in range(ranks):
        if f.get(f"rank_{r:04d}", getlink=True) is None:
            raise Damaged(f"it holds no state for rank {r}")
        states.append(read_item(f, f"rank_{r:04d}"))
    intact = ("state_digest" not in attrs
              or str(attrs["state_digest"]) == state_digest(done, states))
    return Checkpoint(path=path, done=done, states=states, intact=intact)


def _short(digest: str) -> str:
    return digest[:19] + "..." if len(digest) > 19 else digest


@dataclass(frozen=True)
class Expect:
    """What a leaf of a rank's checkpoint part must be: its shape and its dtype kinds
    (``"f"``: floats; ``"biu"``: booleans or integers)."""

    shape: tuple
    kinds: str


# dtype kinds that hold the same values: a count saved as int32 or int64, unsigned or not
_SAME_KINDS = {"b": "b", "i": "iu", "u": "iu", "f": "f", "c": "c"}


def check_part(path: str, rank: int, saved, expected) -> None:
    """Refuse rank ``rank``'s part of a checkpoint unless it has the keys, shapes and dtype
    kinds of ``expected`` (this run's part: arrays, or :class:`Expect` leaves): a UserError of
    one line naming the file, the rank, the array and how it differs."""
    problem = _mismatch(saved, expected, [])
    if problem is not None:
        raise UserError(f"--resume {path}: rank {rank}'s {problem}; the checkpoint is damaged or "
                        "from another version: resume from another checkpoint or start afresh")


def _name(parts: list) -> str:
    """``["state", "holder0", "W"]`` -> ``state holder0/W``."""
    return parts[0] + (" " + "/".join(parts[1:]) if len(parts) > 1 else "")


def _mismatch(saved, expected, parts: list) -> str | None:
    if isinstance(expected, (dict, list)):
        group = isinstance(expected, dict)
        if not isinstance(saved, dict if group else list) or (
                not group and len(saved) != len(expected)):
            shape = "a group" if group else f"a list of {len(expected)}"
            return f"{_name(parts)} is {_what(saved)}, this run's is {shape}"
        extra = sorted(set(saved) - set(expected)) if group else []
        if extra:
            return f"{_name(parts + [extra[0]])} is not part of this run's state"
        for key in expected if group else range(len(expected)):
            if group and key not in saved:
                return f"{_name(parts + [key])} is missing"
            problem = _mismatch(saved[key], expected[key], parts + [str(key)])
            if problem is not None:
                return problem
        return None
    if expected is None:
        return None if saved is None else f"{_name(parts)} is {_what(saved)}, this run's is empty"
    if isinstance(saved, (dict, list)) or saved is None:
        return f"{_name(parts)} is {_what(saved)}, this run's is an array"
    if not isinstance(expected, Expect):
        a = np.asarray(expected)
        expected = Expect(a.shape, _SAME_KINDS.get(a.dtype.kind, a.dtype.kind))
    a = np.asarray(saved)
    if a.shape != tuple(expected.shape):
        return f"{_name(parts)} has shape {a.shape}, this run's is {tuple(expected.shape)}"
    if a.dtype.kind not in expected.kinds:
        return f"{_name(parts)} has dtype {a.dtype}, this run's holds {_kinds(expected.kinds)}"
    return None


def _what(value) -> str:
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "a group"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"an array of shape {np.shape(value)}"


def _kinds(kinds: str) -> str:
    names = {"b": "booleans", "i": "integers", "u": "integers", "f": "floats", "c": "complex numbers"}
    return " or ".join(dict.fromkeys(names.get(k, k) for k in kinds))


def signature_of(meta) -> str:
    """A digest of the data set's task names, lengths and d (compared before its contents):
    a digest, not the list, which at 10^6 tasks would not fit in an HDF5 attribute."""
    h = hashlib.sha256(json.dumps({"names": list(meta.names), "dim": int(meta.dim)}).encode())
    h.update(np.ascontiguousarray(meta.lengths, dtype=np.int64).tobytes())
    return "sha256:" + h.hexdigest()
