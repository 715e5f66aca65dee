"""Learners on disk: a learner's parameters (JSON) and state (arrays) in one HDF5 file.

Layout: root attributes ``format`` (``omtl-mpi-learner``), ``format_version``, ``algo``,
``params`` (JSON) and ``digest`` (SHA-256 of all of them and of the state, as checkpoints
carry: a flipped byte anywhere is found); the group ``state`` holds the state tree of
:meth:`omtl_mpi.learners.Learner.state_dict` as nested groups of plain arrays (the checkpoint's
encoding, :mod:`omtl_mpi.runtime.checkpoint`). Written atomically; nothing in it is ever
unpickled, and a link inside the file is refused, never followed.
"""
from __future__ import annotations

import json

import h5py
import numpy as np

from .atomic import atomic_path
from .data.taskfile import H5_ERRORS, own_item, reason
from .errors import UserError
from .paths import output_file, regular_file

FORMAT = "omtl-mpi-learner"


def save_learner(path, state: dict) -> None:
    """Write a learner's :meth:`state_dict` to ``path`` (HDF5), atomically."""
    from .data.trees import write_tree
    path = output_file(path, "path")        # a file name, of a regular file or none, in a folder that takes it, before any work
    params = json.dumps(state["params"], sort_keys=True)
    try:
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs["format"] = state["format"]
            f.attrs["format_version"] = int(state["version"])
            f.attrs["algo"] = state["algo"]
            f.attrs["params"] = params
            f.attrs["digest"] = _digest(int(state["version"]), state["algo"], params, state["state"])
            write_tree(f.create_group("state"), state["state"])
    except OSError as exc:
        raise UserError(f"cannot write the learner to {path}: {reason(exc)}") from None


def load_learner(path, expected=None) -> dict:
    """A learner's state dict, read from a file :func:`save_learner` wrote; one UserError line
    for one that is not a file, not HDF5, not a learner's, damaged, or a link (never followed).
    ``expected(algo, params, version)``, when given, returns the state tree the learner these
    describe would have: every dataset is checked against it (name, shape, kind of number)
    before any of its data is read, so a hostile file cannot make the reader allocate what it
    declares."""
    path = regular_file(path, "learner file")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise UserError(f"{path} is not a learner file (omtl_mpi.Learner.save writes them)")
            try:
                params = json.loads(f.attrs["params"])
                version = int(f.attrs["format_version"])
                algo = str(f.attrs["algo"])
            except (KeyError, ValueError, TypeError):
                raise UserError(f"{path}: its attributes are damaged; save the learner again") from None
            if not isinstance(params, dict):
                raise UserError(f"{path}: its parameters are damaged; save the learner again")
            want = expected(algo, params, version) if expected is not None else None
            tree = _read(f, "state", want, f"{path}: state")
            digest = f.attrs.get("digest")
            if not isinstance(digest, str):
                raise UserError(f"{path}: a learner file without a digest (an older omtl-mpi's, "
                                "or damaged): its contents cannot be checked; save the learner "
                                "again")
            if digest != _digest(version, algo, str(f.attrs["params"]), tree):
                raise UserError(f"{path}: its contents do not match its digest: the file is "
                                "damaged (a changed or truncated byte); save the learner again")
            return {"format": FORMAT, "version": version, "algo": algo, "params": params,
                    "state": tree}
    except UserError:
        raise
    except H5_ERRORS as exc:
        raise UserError(f"{path}: cannot read it as a learner file ({reason(exc)})") from None


def _digest(version: int, algo: str, params: str, tree) -> str:
    """The digest a learner file carries: of its version, learner, parameters (their JSON as
    stored) and state."""
    from .data.trees import tree_digest
    return tree_digest(f"{FORMAT} {version} {algo} {params}", tree)


def _read(group, key: str, want, where: str):
    """``group[key]`` as the tree of dicts, lists, None and arrays :func:`save_learner` wrote,
    checked against ``want`` (that tree's shape) where given, links refused."""
    try:
        item = own_item(group, key)
    except LookupError as what:
        raise UserError(f"{where} is {what}, which a learner file never is (it is not followed); "
                        "the file is damaged") from None
    if isinstance(item, h5py.Group):
        if item.attrs.get("none", False):
            return None
        if "list" in item.attrs:
            n = int(item.attrs["list"])
            if want is not None and (not isinstance(want, list) or len(want) != n):
                raise UserError(f"{where} is not this learner's (a list of {n})")
            return [_read(item, str(i), want[i] if want is not None else None, f"{where}/{i}")
                    for i in range(n)]
        keys = list(item.keys())
        if want is not None and (not isinstance(want, dict) or set(keys) != set(map(str, want))):
            missing = sorted(set(map(str, want)) - set(keys)) if isinstance(want, dict) else []
            raise UserError(f"{where} is not this learner's"
                            + (f": it lacks {missing[0]!r}" if missing else ""))
        return {k: _read(item, k, None if want is None else want[k], f"{where}/{k}") for k in keys}
    if want is not None:
        w = np.asarray(want)
        if item.shape != w.shape or item.dtype.kind not in "biuf":
            raise UserError(f"{where} has shape {item.shape} of {item.dtype}, this learner's "
                            f"{w.shape} of {w.dtype}")
    return item[()]
