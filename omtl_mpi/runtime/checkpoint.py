"""Checkpoints: the full learning state of every rank in one HDF5 file, written atomically.

Layout: root attributes ``format``, ``round`` (rounds done), ``config`` (JSON), ``fingerprint``,
``signature`` (JSON of the data set's names, lengths and d) and ``ranks``; one group
``rank_NNNN`` per rank holding that rank's learner state, its predictions so far, its
staleness and its per-round timings, as nested groups of plain arrays.
"""
from __future__ import annotations

import json
import os

import h5py
import numpy as np

from ..atomic import atomic_path
from ..errors import UserError

FORMAT = "omtl-mpi-checkpoint"


def default_path(out: str | None) -> str | None:
    """``run.h5`` -> ``run.ckpt.h5`` (the checkpoint sits next to the results file)."""
    if not out:
        return None
    root, ext = os.path.splitext(out)
    return f"{root}.ckpt{ext or '.h5'}"


def _write(group, value) -> None:
    for key, item in value.items():
        key = str(key)
        if isinstance(item, dict):
            _write(group.create_group(key), item)
        elif isinstance(item, list):
            sub = group.create_group(key)
            sub.attrs["list"] = len(item)
            _write(sub, {str(i): v for i, v in enumerate(item)})
        elif item is None:
            group.create_group(key).attrs["none"] = True
        else:
            group.create_dataset(key, data=np.asarray(item))


def _read(group):
    if group.attrs.get("none", False):
        return None
    if "list" in group.attrs:
        return [_read_item(group[str(i)]) for i in range(int(group.attrs["list"]))]
    return {key: _read_item(item) for key, item in group.items()}


def _read_item(item):
    return _read(item) if isinstance(item, h5py.Group) else item[()]


def write(path: str, done: int, ranks_state: list, *, config: str, fingerprint: str,
          signature: str) -> None:
    """Write every rank's state (rank order) after ``done`` rounds; the old file stays intact
    until the new one is complete."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs.update({"format": FORMAT, "round": done, "config": config,
                        "fingerprint": fingerprint, "signature": signature,
                        "ranks": len(ranks_state)})
        for r, state in enumerate(ranks_state):
            _write(f.create_group(f"rank_{r:04d}"), state)


def _differences(saved: str, current: str) -> str:
    def flat(d, prefix=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out
    a, b = flat(json.loads(saved)), flat(json.loads(current))
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k} was {a.get(k)!r}, now {b.get(k)!r}" for k in keys[:4])


def read(path: str, *, config: str, fingerprint: str, signature: str, ranks: int):
    """(rounds done, every rank's state) of a checkpoint made by the same run; refuses others."""
    if not os.path.isfile(path):
        raise UserError(f"--resume {path}: no such checkpoint file")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise UserError(f"--resume {path}: not a readable HDF5 checkpoint") from None
    with f:
        if f.attrs.get("format") != FORMAT:
            raise UserError(f"--resume {path}: not an omtl-mpi checkpoint")
        if int(f.attrs["ranks"]) != ranks:
            raise UserError(f"--resume {path}: made with {int(f.attrs['ranks'])} ranks, this run has "
                            f"{ranks}; resume with the same number of ranks")
        if f.attrs["signature"] != signature:
            raise UserError(f"--resume {path}: made on a different data set (task names, lengths or "
                            "dimension differ); resume with the same --data")
        if f.attrs["fingerprint"] != fingerprint:
            raise UserError(f"--resume {path}: made with a different configuration "
                            f"({_differences(f.attrs['config'], config)}); resume with the same "
                            "options as the original run")
        return int(f.attrs["round"]), [_read(f[f"rank_{r:04d}"]) for r in range(ranks)]


def signature_of(meta) -> str:
    return json.dumps({"names": list(meta.names), "lengths": [int(n) for n in meta.lengths],
                       "dim": int(meta.dim)})
