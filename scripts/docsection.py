"""Replace one generated section of a Markdown file, leaving the rest as it is."""
import os
import platform
from datetime import datetime, timezone


def run_on() -> str:
    """When and where a table is generated: ``2026-11-23 12:34 UTC (2 cores, Linux 6.x)``."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"{stamp} ({os.cpu_count()} cores, {platform.system()} {platform.release()})"


def gauge_us() -> float:
    """How fast the machine is now: microseconds of one 9-element numpy add (best of 7 x 100000).

    Figures on these shared VMs drift by 3x from one session to the next, and this call moved
    with them (0.3 us on fast days, 0.9 on slow ones), so every table states it."""
    import timeit
    import numpy as np
    a, b, out = np.ones(9), np.ones(9), np.empty(9)
    return min(timeit.repeat(lambda: np.add(a, b, out=out), number=100000, repeat=7)) / 0.1


def speed_note(before_us: float) -> str:
    """A sentence giving :func:`gauge_us` at the start (``before_us``) and now."""
    return (f"A 9-element numpy add took {before_us:.2f} us at the start and {gauge_us():.2f} us "
            "at the end (the machine's speed that hour; about 0.3 on fast days, 0.9 on slow "
            "ones).")


def check_section(path: str, name: str) -> None:
    """Stop with one line unless ``path`` has both markers of section ``name``, in order.

    The markers are ``<!-- begin NAME -->`` and ``<!-- end NAME -->``, each on a line of its own.
    """
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    old = open(path).read() if os.path.exists(path) else ""
    if not (begin in old and end in old.split(begin, 1)[1]):
        raise SystemExit(f"{path}: no section '{name}': put the lines '{begin}' and '{end}' "
                         "where its table goes")


def replace_section(path: str, name: str, text: str, append: bool = True) -> None:
    """Put ``text`` between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``.

    A section that is absent is appended, unless ``append`` is false: then :func:`check_section`
    stops the script. A file with only one of the two markers always stops it (appending would
    leave a third marker that the next run could pair with the wrong one). The file is written to
    a temporary name and renamed, so a crash never leaves half a document.
    """
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    old = open(path).read() if os.path.exists(path) else "# Performance\n"
    if not append or begin in old or end in old:
        check_section(path, name)
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def failed_runs(sweep) -> list:
    """Markdown lines saying why a sweep's unfinished runs left their cells blank (none if every
    run finished): one line per learner and set, with the seeds and the first seed's message."""
    groups = {}
    for rid, status, error in sweep.not_done:
        name, _, seed = rid.rpartition(".s")
        groups.setdefault(name, []).append((seed, status, error))
    lines = [f"- `{name}`, seeds {', '.join(s for s, _, _ in runs)}: {runs[0][1]}: "
             f"{(runs[0][2] or 'no message').rstrip('.')}." for name, runs in groups.items()]
    return ["Runs that did not finish (their cells are blank):", "", *lines, ""] if lines else []
