"""How much memory this process may still allocate: the least of the machine's MemAvailable and
the headroom under every memory limit of its control groups (cgroup v2 ``memory.max``, v1
``memory.limit_in_bytes``), so that the checks made before reading data hold inside a Slurm job
or a container (docs/RELIABILITY.md). Linux only; elsewhere, or where nothing can be read, the
figure is unknown (None) and the checks that use it are skipped.
"""
from __future__ import annotations

import os
from contextlib import suppress

# cgroup v1 writes "no limit" as the largest page-aligned int64 (2^63 - 4096 on 4 KiB pages);
# any figure from 2^62 up is taken for it
_NO_LIMIT = 2 ** 62


def meminfo_available(path: str = "/proc/meminfo") -> int | None:
    """Bytes the kernel estimates are available to a new allocation (MemAvailable)."""
    # UnicodeDecodeError is a ValueError
    with suppress(OSError, ValueError, IndexError), open(path) as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def _read_int(path: str) -> int | None:
    with suppress(OSError, ValueError), open(path) as f:
        text = f.read().strip()
        return None if text == "max" else int(text)     # "max": cgroup v2's no limit
    return None


def _inactive_file(path: str, key: str) -> int:
    """The page cache the kernel reclaims before it goes over the limit (memory.stat)."""
    with suppress(OSError, ValueError), open(path) as f:
        for line in f:
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _headroom(folder: str, limit: str, usage: str, stat_key: str) -> int | None:
    cap = _read_int(os.path.join(folder, limit))
    if cap is None or cap >= _NO_LIMIT:
        return None
    used = _read_int(os.path.join(folder, usage))
    if used is None:
        return None
    reclaimable = _inactive_file(os.path.join(folder, "memory.stat"), stat_key)
    return max(cap - max(used - reclaimable, 0), 0)


def _ancestors(root: str, relative: str):
    """``root``/``relative`` and each folder above it up to ``root``, those that exist (a
    process in a cgroup namespace sees its own group as "/", so its path may not exist below
    the mount; the mount's root is then its group)."""
    parts = [p for p in relative.strip("/").split("/") if p not in ("", ".", "..")]
    for n in range(len(parts), -1, -1):
        folder = os.path.join(root, *parts[:n])
        if os.path.isdir(folder):
            yield folder


def cgroup_headroom(proc_cgroup: str = "/proc/self/cgroup",
                    mount: str = "/sys/fs/cgroup") -> int | None:
    """Bytes this process may still allocate under the tightest memory limit of its control
    group and of the groups above it (a limit set on a Slurm job binds its steps and tasks);
    None where no limit is set or none can be read."""
    try:
        with open(proc_cgroup, errors="surrogateescape") as f:   # a group's name is any bytes
            lines = f.read().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, relative = rest.partition(":")
        if hierarchy == "0" and controllers == "":          # cgroup v2 (unified)
            for root in (mount, os.path.join(mount, "unified")):
                if os.path.exists(os.path.join(root, "cgroup.controllers")):
                    rooms += [_headroom(folder, "memory.max", "memory.current", "inactive_file")
                              for folder in _ancestors(root, relative)]
                    break
        elif "memory" in controllers.split(","):              # cgroup v1
            root = os.path.join(mount, "memory")
            rooms += [_headroom(folder, "memory.limit_in_bytes", "memory.usage_in_bytes",
                                "total_inactive_file")
                      for folder in _ancestors(root, relative)]
    rooms = [r for r in rooms if r is not None]
    return min(rooms) if rooms else None


def available() -> int | None:
    """Bytes this process may still allocate: the least of MemAvailable and its control
    groups' headroom; None if neither is known."""
    known = [b for b in (meminfo_available(), cgroup_headroom()) if b is not None]
    return min(known) if known else None


def size_text(nbytes: float) -> str:
    """``nbytes`` for a message: MiB below 1000 MiB (so that 180 MiB needed against 230 free
    does not read "0.2 GiB ... only 0.2 GiB"; to a tenth below 10), else GiB to a tenth."""
    mib = nbytes / 2 ** 20
    if mib < 10:
        return f"{mib:.1f} MiB"
    if mib < 1000:
        return f"{mib:.0f} MiB"
    return f"{nbytes / 2 ** 30:,.1f} GiB"
