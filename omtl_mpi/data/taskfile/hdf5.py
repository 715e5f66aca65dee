"""Opening a task file safely: nothing but a regular file, h5py's errors as one line, and links
inspected without being followed (a soft link that dangles or loops, an external link)."""
from __future__ import annotations

import os
from contextlib import contextmanager

import h5py
import numpy as np

from ...errors import DataError, UserError
from ...paths import regular_file
from .schema import VERSIONS

# what h5py (and reading what it returns) raises for a damaged file: each becomes one line
# naming the file, never a traceback (the checkpoint and the report readers use the same)
H5_ERRORS = (OSError, KeyError, ValueError, TypeError, AttributeError, IndexError, RuntimeError)
# soft links followed before a chain is taken for a loop
_MAX_LINK_DEPTH = 16


def own_item(group, key: str):
    """``group[key]`` where it is this file's own item (a hard link; links are refused, never
    followed): a LookupError ("missing" or "a link") for the caller's own one-line error."""
    link = group.get(key, getlink=True)
    if link is None:
        raise LookupError("missing")
    if not isinstance(link, h5py.HardLink):
        raise LookupError("a link")
    return group[key]


def reason(exc: BaseException) -> str:
    """An h5py error's message on one line (HDF5 messages may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def _open(path: str):
    """The task file at ``path``, open for reading (a context manager): nothing but a regular file
    (a FIFO would block), an h5py error in the ``with`` block a DataError naming the file."""
    path = str(path)
    if not os.path.lexists(path):
        raise DataError(f"{path}: no such file")
    try:
        regular_file(path, "task-stream HDF5 file")
    except UserError as exc:
        raise DataError(str(exc)) from None
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({str(exc).split('(')[0].strip()}); "
                        "create one with 'omtl-mpi data synth' or 'omtl-mpi data import'") from None
    with f:
        try:
            yield f
        except UserError:           # the reader's own line (UserError is a ValueError)
            raise
        except H5_ERRORS as exc:
            raise DataError(f"{path}: cannot read the file ({reason(exc)}); it is damaged: "
                            "import or copy it again") from None


def _read_values(group, name: str, where: str) -> np.ndarray:
    """All values of ``group[name]``; a damaged dataset (a bad compressed chunk) is one line."""
    try:
        return group[name][()]
    except H5_ERRORS as exc:
        raise DataError(f"{where}: cannot read {name} ({reason(exc)}); the file is damaged: "
                        "import or copy it again") from None


def _check_version(path: str, f) -> int:
    """The file's format version: 1 without one (older files); another version is refused."""
    version = f.attrs.get("format_version")
    if version is None:
        return 1
    value = np.asarray(version)
    if value.shape == () and value.dtype.kind in "iuf":
        for known in VERSIONS:
            if value == known:
                return known
    shown = value.item() if value.shape == () else value.tolist()
    if isinstance(shown, bytes):
        shown = shown.decode(errors="replace")
    known = f"{', '.join(map(str, VERSIONS[:-1]))} and {VERSIONS[-1]}"
    raise DataError(f"{path}: task-file format version {shown}; this release of omtl-mpi reads "
                    f"versions {known}: use the omtl-mpi that wrote it, or import the data again")


def _link_problem(f, group, name: str, depth: int = 0) -> str | None:
    """Why the link ``group[name]`` may not be followed (it dangles, loops or leaves the file), as
    the rest of a sentence about it; None for a link in the file (inspected, never followed)."""
    link = group.get(name, getlink=True)
    via = f"is a soft link to {link.path}, which" if isinstance(link, h5py.SoftLink) else ""
    for _ in range(_MAX_LINK_DEPTH - depth):
        if not isinstance(link, h5py.SoftLink):
            break
        link, group, why = _walk(f, group, link.path, depth + 1)
        if why is not None:
            return f"{via} {why}"
    else:
        return f"{via} leads back to itself; the file is damaged"
    if isinstance(link, h5py.ExternalLink):
        return (f"{via + ' is' if via else 'is'} an external link to {link.path} in "
                f"{link.filename}; links leaving the file are refused: copy the data into the file")
    return None


def _has(group, name: str) -> bool:
    """Whether ``group`` has a member ``name``, asked without following any link."""
    return isinstance(group, h5py.Group) and group.get(name, getlink=True) is not None


def _walk(f, group, target: str, depth: int):
    """(last link of the path ``target``, its group, None), or (None, None, why not followable)."""
    here = f if target.startswith("/") else group
    parts = [p for p in target.split("/") if p]
    for i, part in enumerate(parts):
        if not _has(here, part):
            return None, None, "does not exist in the file"
        link = here.get(part, getlink=True)
        if i == len(parts) - 1:
            return link, here, None
        # a link in the middle of the path is followed only if it stays in the file
        if not isinstance(link, h5py.HardLink) and _link_problem(f, here, part, depth) is not None:
            return None, None, f"goes through {part}, a link that dangles or leaves the file"
        here = here[part]
    return h5py.HardLink(), here, None
