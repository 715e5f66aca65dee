"""Write a file under a temporary name and rename it into place, so a crash or an error never
leaves a half-written file under the final name, and never renamed over anything but a regular
file; and remove what a process that was killed left under such a name."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager, suppress

from .errors import at_stop
from .paths import as_path, refuse_special

# the temporary files atomic_path is writing now, which a signal that stops the command removes
_WRITING: set = set()


@at_stop
def _remove_writing() -> bool:
    """Remove every temporary file being written (one already renamed into place is not
    there any more: nothing to do); whether there was one."""
    for tmp in list(_WRITING):
        with suppress(OSError):
            os.remove(tmp)
    return bool(_WRITING)


@contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; on success rename it to ``path``, else delete it
    (on any exception, or when a signal stops the command). ``path`` is checked before anything
    is written and again just before the rename (:func:`replace`): one that is no file name, or
    names a device, FIFO, socket or folder (or a link to one), is one UserError line."""
    path = as_path(path, "path")
    refuse_special(path)
    tmp = f"{path}.tmp-{os.getpid()}"       # remove_stale knows it by its process id
    _WRITING.add(tmp)
    try:
        yield tmp
        replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise
    finally:
        _WRITING.discard(tmp)


def replace(tmp: str, path: str) -> None:
    """``os.replace(tmp, path)``, unless ``path`` is now something other than a regular file (a
    UserError): checked just before the rename, so that the window in which another process
    could put a device there is as small as the system allows. Every writer that renames a
    finished file into place calls this."""
    refuse_special(path)
    os.replace(tmp, path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie, which can write nothing more,
    does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:             # someone else's: alive
        return True
    with suppress(OSError, IndexError), open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    return True


def _outlives(pid: int, grace: float) -> bool:
    """Whether process ``pid`` is still alive after up to ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while _alive(pid):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


def remove_stale(paths, grace: float = 0.0) -> list[str]:
    """Remove the temporary files of ``paths`` (``PATH.tmp-PID``) whose process has ended on
    this machine: what a writer killed by SIGKILL had no chance to clean up. Only regular
    files are removed; a live writer's file is kept, after waiting up to ``grace`` seconds for
    it to end (a stopped launcher's ranks may take a moment to be gone). Returns the files
    removed."""
    wanted: dict[str, set] = {}
    for path in paths:
        folder, base = os.path.split(os.fspath(path))
        wanted.setdefault(folder, set()).add(base)
    removed = []
    for folder, bases in wanted.items():
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            base, sep, pid = name.rpartition(".tmp-")
            if not sep or base not in bases or not pid.isdigit() or _outlives(int(pid), grace):
                continue
            stale = os.path.join(folder, name)
            if os.path.isfile(stale) and not os.path.islink(stale):
                with suppress(FileNotFoundError):
                    os.remove(stale)
                    removed.append(stale)
    return removed
