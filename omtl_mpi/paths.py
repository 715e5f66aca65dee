"""What may be read and what may be written: inputs are regular files, and no output is an input.

Every command resolves its outputs before it writes anything and refuses, in one line, an output
that is the same file as one of its inputs (the same path once links are resolved, or the same
device and inode: a hard link), so that no mistake on the command line can destroy a data set,
a checkpoint or a sweep file. Outputs are then written atomically (:mod:`omtl_mpi.atomic`).
"""
import os
import stat
import tempfile
from contextlib import suppress

from .errors import UserError, one_line, printable


def _identity(path: str):
    """(device, inode) of the file at ``path`` once links are followed, None if there is none."""
    with suppress(OSError, ValueError):
        st = os.stat(path)
        return st.st_dev, st.st_ino
    return None


def same_file(a, b) -> bool:
    """True when ``a`` and ``b`` name the same file: the same path after resolving links, or the
    same device and inode (a hard link)."""
    a, b = os.fspath(a), os.fspath(b)
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def refuse_inputs(output, inputs, option: str) -> None:
    """Refuse, in one UserError line naming both and what to do, ``output`` (a file the
    command is about to write, named by ``option`` as the user typed it, ``--out``; None:
    nothing to check) if it would replace one of ``inputs``: (path, what) pairs of the files or
    folders the command reads ("the data set"...). For a folder, an output that is a file in
    it, or another name (a hard link) of one, is refused too."""
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
            raise UserError(f"{option} {printable(out)} is {what} ({printable(name)}); writing "
                            f"there would destroy it: choose another {option}")


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
                raise UserError(f"{option} {printable(path)} and {other_option} "
                                f"{printable(other)} are the same file; give them different names")
        seen.append((os.fspath(path), option))


def regular_file(path, what: str = "file") -> str:
    """``path`` if it is a regular file (links followed), else one UserError line: a FIFO or a
    device would block or stream forever, and a folder is not a file."""
    path = as_path(path, what)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{printable(path)}: a link to {printable(os.readlink(path))}, which "
                            "does not exist") from None
        raise UserError(f"{printable(path)}: no such {what}") from None
    except OSError as exc:
        raise UserError(f"{printable(path)}: cannot read this {what} ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{printable(path)}: is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{printable(path)}: not a regular file (a pipe, socket or device); give a "
                        f"{what} on disk")
    if not os.access(path, os.R_OK):
        raise UserError(f"{printable(path)}: permission denied; make the {what} readable")
    return path


def as_path(path, option: str) -> str:
    """``path`` (a str or os.PathLike, named by ``option`` in the message: ``--out``,
    "learner file") as the str the system is given; a UserError for None, a number or anything
    else that is not a path (``str(None)`` would write a file named ``None``), an empty name,
    or one holding a NUL character (the system would cut it there, writing another file)."""
    try:
        name = os.fspath(path)
    except TypeError:
        raise UserError(f"{option} must be a file name (a str or os.PathLike), got "
                        f"{printable(repr(path))[:80]} of type {type(path).__name__}") from None
    name = one_line(os.fsdecode(name))
    if not name:
        raise UserError(f"{option} is empty; give a file name")
    if "\0" in name:
        raise UserError(f"{option} {printable(name)}: a file name cannot hold a NUL character")
    return name


def _kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def refuse_special(path, option: str | None = None) -> None:
    """Refuse an output ``path`` where something other than a regular file is (a device, a
    FIFO, a socket, a folder, or a link to one of them); an absent one, a regular file or a
    dangling link passes. Renaming a finished file into place replaces whatever the name held
    (as root, ``--out /dev/null`` would replace the device; a FIFO blocks): called by
    :func:`output_file` before any work, and by :func:`omtl_mpi.atomic.replace` just before
    the rename, as the last guard."""
    name = os.fspath(path)
    try:
        st = os.stat(name)              # through links: a link to a device is refused too
    except (OSError, ValueError):       # absent (or unreadable: the write says why)
        return
    if stat.S_ISREG(st.st_mode):
        return
    what = _kind(st.st_mode)
    if os.path.islink(name):
        what = f"a link to {printable(os.path.realpath(name))}, which is {what}"
    where = f"{option} {printable(name)}" if option else printable(name)
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{where}: is {what}; give a file name such as "
                        f"{printable(os.path.join(name, 'out.h5'))}")
    raise UserError(f"{where}: is {what}, not a regular file, and writing there would replace "
                    "it; give the name of a file on disk")


# the temporary name a writer adds to the file's (omtl_mpi.atomic: ".tmp-" and a process id)
_TEMPORARY_SUFFIX = len(".tmp-") + 7


def output_name(path, option: str) -> str:
    """``path`` as a str if it is a file name (:func:`as_path`) where nothing but a regular
    file is (:func:`refuse_special`), short enough for its file system once the temporary
    suffix of an atomic write is added (else the system would say so only after the work): the
    checks of an output that need no look at its folder; else a UserError."""
    path = as_path(path, option)
    refuse_special(path, option)
    try:
        longest = os.pathconf(os.path.dirname(os.path.abspath(path)), "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255                   # the usual limit, where the folder does not say
    size = len(os.fsencode(os.path.basename(path)))
    if size + _TEMPORARY_SUFFIX > longest:
        raise UserError(f"{option} {printable(path)[:60]}...: a file name of {size} bytes; this "
                        f"file system takes {longest}, and a name is written under a "
                        f"temporary one {_TEMPORARY_SUFFIX} bytes longer first: give a name of "
                        f"at most {longest - _TEMPORARY_SUFFIX} bytes")
    return path


def output_file(path, option: str) -> str:
    """``path``, a file about to be written (named by ``option`` in the messages), as a str
    once checked before any work, else a UserError: a path, absent or a regular file
    (:func:`output_name`), in a folder that exists and takes a new file. The one check of a
    command's output file (``run --out``, ``--checkpoint``, every ``-o``, ``topo show --png``,
    ``Result.save``, rank 0's for ``run_streams(out=)``); the files of a folder a command
    fills (a sweep's, a report's) are checked by :func:`refuse_special` each."""
    path = output_name(path, option)
    folder = os.path.dirname(os.path.abspath(path))
    shown = f"{option} {printable(path)}"
    if not os.path.isdir(folder):
        if os.path.lexists(folder):
            mode = os.stat(folder).st_mode if os.path.exists(folder) else 0
            what = "a regular file" if stat.S_ISREG(mode) else _kind(mode) if mode else "a dangling link"
            raise UserError(f"{shown}: {printable(folder)} is not a folder ({what}); choose "
                            f"another {option}")
        raise UserError(f"{shown}: folder {printable(folder)} does not exist; create it first, "
                        f"or choose another {option}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{shown}: folder {printable(folder)} is not writable; choose another "
                        f"{option}")
    why = cannot_create_in(folder)
    if why:
        raise UserError(f"{shown}: cannot create a file in folder {printable(folder)} ({why}); "
                        f"choose another {option}")
    return path


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
    """Create the output folder ``path`` (and its parents), or say in one UserError line why
    not: ``path`` is a file, or the system refuses (permissions, a read-only disk)."""
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(f"{option} {printable(path)}: is a file, not a folder; choose another {option}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {printable(path)}: cannot create this folder ({exc.strerror}); "
                        f"choose another {option}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{option} {printable(path)}: folder is not writable; choose another {option}")
