"""What may be read and what may be written: inputs are regular files, and no output is an input.

Every command resolves its outputs before it writes anything and refuses, in one line, an output
that is the same file as one of its inputs (the same path once links are resolved, or the same
device and inode: a hard link), so that no mistake on the command line can destroy a data set,
a checkpoint or a sweep file. Outputs are then written atomically (:mod:`omtl_mpi.atomic`).
"""
from __future__ import annotations

import os
import stat
import tempfile

from .errors import UserError


def _identity(path: str):
    """(device, inode) of the file at ``path`` once links are followed, None if there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def same_file(a, b) -> bool:
    """True when ``a`` and ``b`` name the same file: the same path after resolving links, or the
    same device and inode (a hard link)."""
    a, b = os.fspath(a), os.fspath(b)
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def refuse_inputs(output, inputs, option: str) -> None:
    """Refuse ``output`` (the value of ``option``) if it would replace one of ``inputs``.

    Parameters
    ----------
    output : str or path, optional
        A file the command is about to write (None: nothing to check).
    inputs : iterable of (path, what)
        Files (or folders) the command reads and what they are ("the data set", "the
        checkpoint to resume"...). For a folder, an output that is a file in it, or another
        name (a hard link) of one, is refused too.
    option : str
        The option that names the output (``--out``), as the user typed it.

    Raises
    ------
    UserError
        One line naming the output, the input it would replace and what to do.
    """
    if output is None:
        return
    out = os.fspath(output)
    for path, what in inputs:
        if path is None:
            continue
        path = os.fspath(path)
        clash = path if same_file(out, path) else None
        if clash is None and os.path.isdir(path) and os.path.lexists(out):
            clash = path if inside(out, path) else _hard_link_under(path, out)
        if clash is not None:
            name = path if clash == path else f"{clash}, in {path}"
            raise UserError(f"{option} {out} is {what} ({name}); writing there would destroy it: "
                            f"choose another {option}")


def inside(path, folder) -> bool:
    """True when ``path`` lies in ``folder`` or below (links resolved)."""
    folder = os.path.realpath(folder)
    return os.path.commonpath([folder, os.path.realpath(path)]) == folder


def _hard_link_under(folder: str, out: str) -> str | None:
    """The file under ``folder`` that ``out`` is another name of (a hard link), if any."""
    try:
        st = os.stat(out)
    except OSError:
        return None
    if st.st_nlink < 2:                   # no other name: nothing to search for
        return None
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if _identity(path) == (st.st_dev, st.st_ino):
                return path
    return None


def refuse_each_other(outputs) -> None:
    """Refuse two outputs of one command that are the same file (``--out`` and
    ``--checkpoint``): one would overwrite the other. ``outputs``: iterable of (path, option)."""
    seen = []
    for path, option in outputs:
        if path is None:
            continue
        for other, other_option in seen:
            if same_file(path, other):
                raise UserError(f"{option} {path} and {other_option} {other} are the same file; "
                                f"give them different names")
        seen.append((os.fspath(path), option))


def regular_file(path, what: str = "file") -> str:
    """``path`` if it is a regular file (links followed), else one clear error line.

    A FIFO or a device would block or stream forever, and a folder is not a file: nothing but
    a regular file is opened.

    Raises
    ------
    UserError
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{path}: a link to {os.readlink(path)}, which does not exist") from None
        raise UserError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what} ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file (a pipe, socket or device); give a {what} "
                        "on disk")
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: permission denied; make the {what} readable")
    return path


def writable_folder(path, option: str) -> None:
    """Refuse, before any work, an output whose folder is missing or not writable, or that is
    a folder itself.

    Raises
    ------
    UserError
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"{option} {path}: is a folder; give a file name such as "
                        f"{os.path.join(path, 'out.h5')}")
    if not os.path.isdir(folder):
        raise UserError(f"{option} {path}: folder {folder} does not exist; create it first, or "
                        f"choose another {option}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: folder {folder} is not writable; choose another {option}")
    why = cannot_create_in(folder)
    if why:
        raise UserError(f"{option} {path}: cannot create a file in folder {folder} ({why}); "
                        f"choose another {option}")


def cannot_create_in(folder: str) -> str | None:
    """Why no file can be created in ``folder`` (the system's words), None if one can: found by
    creating and removing an empty hidden file (a unique name: ranks that check at once do not
    meet), since ``os.access`` does not tell for root on NFS with root squashing, or in /proc
    and /sys, where it says yes and creating says no."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".omtl-mpi-probe-")
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    try:
        os.remove(probe)
    except OSError as exc:
        return f"a file made there could not be removed: {exc.strerror or exc}"
    return None


def make_folder(path, option: str) -> None:
    """Create the output folder ``path`` (and its parents) or say in one line why not.

    Raises
    ------
    UserError
        When ``path`` is a file, or the system refuses (permissions, a read-only disk).
    """
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(f"{option} {path}: is a file, not a folder; choose another {option}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create this folder ({exc.strerror}); "
                        f"choose another {option}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: folder is not writable; choose another {option}")
