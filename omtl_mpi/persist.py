"""Learners on disk: a learner's parameters (JSON) and state (arrays) in one HDF5 file.

Layout: root attributes ``format`` (``omtl-mpi-learner``), ``format_version``, ``algo`` and
``params`` (JSON); the group ``state`` holds the state tree of
:meth:`omtl_mpi.learners.Learner.state_dict` as nested groups of plain arrays (the checkpoint's
encoding, :mod:`omtl_mpi.runtime.checkpoint`). Written atomically; nothing in it is ever
unpickled, and a link inside the file is refused, never followed.
"""
from __future__ import annotations

import json

import h5py

from .atomic import atomic_path
from .data.taskfile import H5_ERRORS, reason
from .errors import UserError
from .paths import regular_file

FORMAT = "omtl-mpi-learner"


def save_learner(path, state: dict) -> None:
    """Write a learner's :meth:`state_dict` to ``path`` (HDF5), atomically."""
    from .runtime.checkpoint import write_tree
    path = str(path)
    try:
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs["format"] = state["format"]
            f.attrs["format_version"] = int(state["version"])
            f.attrs["algo"] = state["algo"]
            f.attrs["params"] = json.dumps(state["params"], sort_keys=True)
            write_tree(f.create_group("state"), state["state"])
    except OSError as exc:
        raise UserError(f"cannot write the learner to {path}: {reason(exc)}") from None


def load_learner(path) -> dict:
    """A learner's state dict, read from a file :func:`save_learner` wrote.

    Raises
    ------
    UserError
        One line: not a file, not HDF5, not a learner's file, or damaged.
    """
    from .runtime.checkpoint import Damaged, read_tree
    path = regular_file(path, "learner file")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise UserError(f"{path} is not a learner file (omtl_mpi.Learner.save writes them)")
            try:
                params = json.loads(f.attrs["params"])
            except (KeyError, ValueError, TypeError):
                raise UserError(f"{path}: its parameters are damaged; save the learner again") from None
            if not isinstance(params, dict):
                raise UserError(f"{path}: its parameters are damaged; save the learner again")
            return {"format": FORMAT, "version": int(f.attrs.get("format_version", -1)),
                    "algo": str(f.attrs.get("algo", "")), "params": params,
                    "state": read_tree(f["state"]) if "state" in f else None}
    except UserError:
        raise
    except Damaged as exc:
        raise UserError(f"{path}: {exc}; the file is damaged") from None
    except H5_ERRORS as exc:
        raise UserError(f"{path}: cannot read it as a learner file ({reason(exc)})") from None
