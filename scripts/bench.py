#!/usr/bin/env python
"""Time the ``omtl-mpi run`` commands of one benchmark table (scripts/bench/*.toml).

Usage: python scripts/bench.py TABLE.toml [--repeats N] [--samples N] [--base REV] [--docs] [--json]

Every row is one ``omtl-mpi run ... --json --no-progress`` on random tasks, under ``mpiexec -n
RANKS python -m mpi4py -m omtl_mpi`` when the row has ``ranks``; a row with ``script`` runs
``python SCRIPT --data FILE OPTIONS --json --no-progress`` instead (e.g. scripts/bench/api.py,
the Python API), whose last line of stdout is its JSON report. A row with ``hosts`` spreads its
ranks over that many hosts of tests/cluster/hosts.sh (network namespaces; root only), started
on h0 as tests/cluster/on_hosts.py starts them, MPI kept to TCP, the links shaped to the row's
``rate``; the bench brings the hosts up once and always takes them down. A row with
``ratio_to`` gets a column *ratio*, its median over that row's (its ``target`` then applies to
the ratio). The rows take turns run by run, after one unrecorded warm-up run each; the table
gives the median of --repeats runs, the fastest and the slowest. ``--base REV`` also runs every
row with the package of git revision REV (a temporary worktree on PYTHONPATH), the trees
alternating too, with a column base / this tree.
The Markdown table goes to stdout (``--json``: the figures as JSON instead); ``--docs`` writes it
between ``<!-- begin SECTION -->`` and ``<!-- end SECTION -->`` in docs/PERFORMANCE.md
(``--docs-file FILE``: in FILE), opening with the stamp that ``make docs-check`` reads.
The keys of a table file: scripts/bench/README.md. `make bench` runs the tables of
docs/PERFORMANCE.md with --docs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib.docsection import check_section, gauge_us, replace_section, speed_note, stamp  # noqa: E402
from lib.omtlrun import MPIEXEC, command, report_of  # noqa: E402

DOC = os.path.join(ROOT, "docs", "PERFORMANCE.md")
# what the timings depend on besides the table file and the rows' scripts: all of the package
# (start-up, imports and the learning loop) and the scripts that launch and time the runs
DEPENDS = ("omtl_mpi", "scripts/bench.py", "scripts/lib/omtlrun.py")
# rows with ``hosts`` run over the network namespaces of this script (root only), their links
# shaped to the row's ``rate`` (tc tbf's units, or none); the prefix of their names keeps them
# apart from the cluster tests' (omtlt)
HOSTS = os.path.join(ROOT, "tests", "cluster", "hosts.sh")
HOSTS_PREFIX = os.environ.get("OMTL_HOSTS_PREFIX", "omtlb")
RATE = re.compile(r"^(none|[0-9]+(\.[0-9]+)?[kmgt]?(bit|bps))$")
TIMEOUT = 900                                   # seconds for one run
TABLE_KEYS = {"title": str, "section": str, "description": str, "metric": str, "also": list,
              "data": dict, "rows": list}
DATA_KEYS = {"K": int, "d": int, "samples": int}
ROW_KEYS = {"label": str, "ranks": int, "options": list, "env": dict, "K": int, "d": int,
            "synth": list, "file": str, "metric": str, "target": (int, float), "script": str,
            "ratio_to": str, "hosts": int, "rate": str}
KINDS = {str: "a string", int: "an integer of at least 1", list: "a list", dict: "a table",
         (int, float): "a number"}


# name: (column heading, what it is, its value from (report, wall seconds, the command's start
# as a UNIX time), format); a report's cpu_ms_per_round and peak_rss_mib have one number per rank
METRICS = {
    "ms_per_round": ("ms per round", "the learning loop's wall time per round on rank 0, "
                     "start-up excluded (the run's `ms_per_round`)",
                     lambda report, wall, start: report["ms_per_round"], ".4f"),
    "wall_s": ("wall s", "the wall seconds of the whole command (start-up, learning, results)",
               lambda report, wall, start: wall, ".2f"),
    "cpu_ms_per_round": ("CPU ms per round", "the CPU time per round of all ranks together "
                         "(the run's `cpu_ms_per_round`, summed)",
                         lambda report, wall, start: float(np.sum(report["cpu_ms_per_round"])), ".4f"),
    "cpu_ms_per_round_max": ("CPU ms per round, busiest rank", "the CPU time per round of the "
                             "busiest rank (the run's `cpu_ms_per_round`, largest)",
                             lambda report, wall, start: float(np.max(report["cpu_ms_per_round"])),
                             ".4f"),
    "first_round_s": ("s to first round", "the seconds from the command's start to rank 0's "
                      "first round (reading and laying out the data included; the run's "
                      "`learning_started` less the time the command was started)",
                      lambda report, wall, start: report["learning_started"] - start, ".2f"),
    "peak_mib": ("peak MiB, largest rank", "the largest peak resident memory of any rank "
                 "(the run's `peak_rss_mib`)",
                 lambda report, wall, start: float(np.max(report["peak_rss_mib"])), ".0f"),
    "peak_total_mib": ("peak MiB, all ranks", "the peak resident memory of every rank, summed "
                       "(the run's `peak_rss_mib`; each rank's peak, whenever it was)",
                       lambda report, wall, start: float(np.sum(report["peak_rss_mib"])), ".0f"),
    "mean_error": ("mean error", "the run's mean cumulative error over its tasks (`mean_error`)",
                   lambda report, wall, start: report["mean_error"], ".6f"),
    "last_worker_s": ("last worker done, s", "the seconds from the start of the rounds at which "
                      "the last worker ended its stream (the run's `worker_finish_s`, largest)",
                      lambda report, wall, start: float(np.max(report["worker_finish_s"])), ".3f"),
    "fast_workers_s": ("fast workers done, s", "the seconds from the start of the rounds at "
                       "which the last worker that `--slow` did not slow ended its stream (the "
                       "run's `worker_finish_s` less the `--slow` ranks'; all of them without)",
                       lambda report, wall, start: _fast_workers(report), ".3f"),
    "first_worker_s": ("first worker done, s", "the seconds from the start of the rounds at "
                       "which the first worker ended its stream (`worker_finish_s`, smallest)",
                       lambda report, wall, start: float(np.min(report["worker_finish_s"])), ".3f"),
    "rank0_bytes": ("rank 0 bytes a round", "the bytes rank 0 sent and received a round, "
                    "together (the run's `bytes_per_round`, rank 0's)",
                    lambda report, wall, start: float(sum(report["bytes_per_round"][0])), ".0f"),
    "node_bytes": ("other rank's bytes a round, largest", "the bytes a round the busiest other "
                   "rank sent and received, together (the run's `bytes_per_round`, the largest "
                   "of ranks 1 on)",
                   lambda report, wall, start: max((float(sum(b)) for b in
                                                    report["bytes_per_round"][1:]), default=0.0),
                   ".0f"),
}


def _fast_workers(report: dict) -> float:
    """The latest ``worker_finish_s`` of the workers that no ``--slow RANK:FACTOR`` named: a
    server's job has a worker per rank from 1 (the server, rank 0, has no stream), a graph's one
    per rank."""
    finish = np.asarray(report["worker_finish_s"], dtype=float)
    slowed = {int(part.split(":")[0]) for spec in re.findall(r"--slow (\S+)", report.get("stragglers") or "")
              for part in spec.split(",") if part}
    first = 1 if len(finish) == report["ranks"] - 1 else 0
    fast = [w for w in range(len(finish)) if w + first not in slowed]
    if not fast:
        fail("the metric fast_workers_s needs a worker that --slow does not slow: "
             f"this row slows all of them ({report.get('stragglers')})")
    return float(finish[fast].max())


def fail(message: str):
    """Stop with ``bench: MESSAGE`` on stderr and exit status 1."""
    raise SystemExit(f"bench: {message}")


def check_keys(where: str, table: dict, known: dict, required: tuple) -> None:
    """Stop unless ``table`` has the ``required`` keys and only ``known`` ones, of their types."""
    for key, value in table.items():
        if key not in known:
            fail(f"{where}: unknown key '{key}' (known: {', '.join(known)})")
        if (not isinstance(value, known[key]) or isinstance(value, bool)
                or (known[key] is int and value < 1)):
            fail(f"{where}: {key} = {value!r}, but it must be {KINDS[known[key]]}")
    for key in required:
        if key not in table:
            fail(f"{where}: '{key}' is missing")


def load_table(path: str) -> dict:
    """Read and check a table; every row gets the table's data and metric where it has none."""
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")
    except tomllib.TOMLDecodeError as exc:
        fail(f"{path}: not valid TOML: {exc}")
    check_keys(path, table, TABLE_KEYS, ("title", "section", "data", "rows"))
    check_keys(f"{path}: data", table["data"], DATA_KEYS, tuple(DATA_KEYS))
    if not table["rows"] or not all(isinstance(row, dict) for row in table["rows"]):
        fail(f"{path}: 'rows' must be one or more [[rows]] tables")
    for i, row in enumerate(table["rows"]):
        where = f"{path}: rows[{i}]"
        check_keys(where, row, ROW_KEYS, ("label",))
        if not all(isinstance(v, str) for v in [*row.get("options", []),
                                                *row.get("env", {}).values()]):
            fail(f"{where}: options and env values must be strings")
        row.update({"K": table["data"]["K"], "d": table["data"]["d"],
                    "metric": table.get("metric", "ms_per_round"), **row})
        row["also"] = list(table.get("also", []))
        for metric in [row["metric"], *row["also"]]:
            if metric not in METRICS:
                fail(f"{where}: unknown metric '{metric}' (known: {', '.join(METRICS)})")
        if "synth" in row and not all(isinstance(v, str) for v in row["synth"]):
            fail(f"{where}: synth values must be strings (options of omtl-mpi data synth)")
        if "synth" in row and row["K"] != table["data"]["K"]:
            fail(f"{where}: synth gives the row's data: it goes without K")
        if "file" in row and "synth" in row:
            fail(f"{where}: give the row's data by synth or by file, not both")
        if "file" in row and not os.path.isfile(os.path.join(ROOT, row["file"])):
            fail(f"{where}: no task file {row['file']} (the table's description says how to "
                 "make it)")
        if "script" in row:
            check_script(where, row)
        if "hosts" in row or "rate" in row:
            check_hosts(where, row)
        if "ranks" in row and not os.access(MPIEXEC, os.X_OK):
            fail(f"{where}: needs {MPIEXEC}: run this script with the virtualenv's python")
    for i, row in enumerate(table["rows"]):
        if "ratio_to" in row:
            check_ratio_to(f"{path}: rows[{i}]", row, table["rows"])
    return table


def check_script(where: str, row: dict) -> None:
    """Stop unless a row's ``script`` is a file of the repository, named from its root, and the
    row runs it in one process."""
    script = row["script"]
    if "ranks" in row:
        fail(f"{where}: ranks and script together: a script runs in one process, without mpiexec")
    if os.path.isabs(script) or os.path.normpath(script).startswith(".."):
        fail(f"{where}: script = {script!r}, but it must be a path from the repository's root, "
             "e.g. \"scripts/bench/api.py\"")
    if not os.path.isfile(os.path.join(ROOT, script)):
        fail(f"{where}: script {script!r} is not a file of {ROOT}")


def check_hosts(where: str, row: dict) -> None:
    """Stop unless a row's ``hosts`` (and ``rate``, which goes only with it) can run: ranks
    spread over 2 or more hosts, a rate tc knows, and root to make the hosts."""
    if "hosts" not in row:
        fail(f"{where}: rate goes only with hosts (a rate shapes the links between hosts)")
    if row["hosts"] < 2:
        fail(f"{where}: hosts = {row['hosts']}, but it must be at least 2 (one host is mpiexec "
             "without hosts)")
    if "ranks" not in row or row["ranks"] < row["hosts"]:
        fail(f"{where}: hosts = {row['hosts']} needs ranks, at least one a host")
    if "rate" in row and not RATE.match(row["rate"]):
        fail(f"{where}: rate = {row['rate']!r}, but it must be a tc rate such as \"10mbit\" or "
             "\"1gbit\", or \"none\"")
    if os.geteuid() != 0:
        fail(f"{where}: hosts needs root ({os.path.relpath(HOSTS, ROOT)} makes network "
             "namespaces): run the bench as root")


def check_ratio_to(where: str, row: dict, rows: list) -> None:
    """Stop unless a row's ``ratio_to`` is the label of exactly one other row, of its metric."""
    named = [r for r in rows if r["label"] == row["ratio_to"]]
    labels = ", ".join(repr(r["label"]) for r in rows if r is not row)
    if not named:
        fail(f"{where}: ratio_to {row['ratio_to']!r} is not the label of a row of the table "
             f"(labels: {labels})")
    if len(named) > 1:
        fail(f"{where}: ratio_to {row['ratio_to']!r} is the label of {len(named)} rows; give "
             "the row it compares with a label of its own")
    if named[0] is row:
        fail(f"{where}: ratio_to {row['ratio_to']!r} is the row's own label; name another row "
             f"({labels})")
    if named[0]["metric"] != row["metric"]:
        fail(f"{where}: ratio_to {row['ratio_to']!r}, whose metric is {named[0]['metric']}, "
             f"but this row's is {row['metric']}: a ratio compares one metric")


# written by the package of the tree that reads it, so that a base revision reads a file of
# its own task-file format; the same seed gives the same tasks in every tree
_RANDOM_TASKS = """
import sys
import numpy as np
from omtl_mpi.data import write_tasks
path, K, d, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
w = rng.normal(size=d)
X = [rng.normal(size=(samples, d)) for _ in range(K)]
y = [np.where(x @ (w + 0.3 * rng.normal(size=d)) >= 0, 1, -1) for x in X]
write_tasks(path, [f"t{k}" for k in range(K)], X, y)
"""


def make_random_tasks(folder: str, K: int, d: int, samples: int, tree: str, name: str) -> str:
    """Write K tasks of ``samples`` Gaussian instances, labelled by perturbed copies of one random
    linear model, to an HDF5 file in ``folder`` with the package of ``tree``; return its path."""
    path = os.path.join(folder, f"random-K{K}-d{d}-{name}.h5")
    done = subprocess.run([sys.executable, "-c", _RANDOM_TASKS, path, str(K), str(d), str(samples)],
                          cwd=folder, env=environment(tree, {}), capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"writing the random tasks with {name}'s package failed: {done.stderr.strip()[-500:]}")
    return path


def make_synth(folder: str, options: list, tree: str, name: str) -> str:
    """``omtl-mpi data synth OPTIONS`` with the package of ``tree``, into ``folder``; its path."""
    path = os.path.join(folder, f"synth-{abs(hash(tuple(options)))}-{name}.h5")
    done = subprocess.run([sys.executable, "-m", "omtl_mpi", "data", "synth", *options, "-o", path],
                          cwd=folder, env=environment(tree, {}), capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"omtl-mpi data synth {shlex.join(options)} with {name}'s package failed: "
             f"{done.stderr.strip()[-500:]}")
    return path


def environment(tree: str, extra: dict) -> dict:
    # only the tree on PYTHONPATH, so that no other omtl_mpi comes first; MPICH's mpiexec hands
    # the environment on to every rank
    return dict(os.environ, PYTHONPATH=tree, PYTHONUNBUFFERED="1", **extra)


def run_once(row: dict, tree: str, data: str, folder: str) -> tuple:
    """Run one row with the package in ``tree``; return (metric value, report)."""
    args = ["--data", data, *row.get("options", []), "--json", "--no-progress"]
    # a row's script is this tree's, whichever tree's package it imports (an older revision may
    # not have the script)
    cmd = ([sys.executable, os.path.join(ROOT, row["script"]), *args] if "script" in row
           else command(args, row.get("ranks")))
    extra = dict(row.get("env", {}))
    if "hosts" in row:
        cmd, extra = on_hosts(row, cmd), {**extra, **hosts_env()}
        hosts("shape", str(row["hosts"]), row.get("rate", "none"))
    # in the scratch folder, as `python -m` imports a package found in the cwd first; in a
    # session of its own, so that a timeout or Ctrl-C can end mpiexec and its ranks together
    start = time.perf_counter()
    launched = time.time()
    proc = subprocess.Popen(cmd, cwd=folder, env=environment(tree, extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except BaseException as exc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:              # it ended on its own meanwhile
            pass
        proc.wait()
        if isinstance(exc, subprocess.TimeoutExpired):
            fail(f"'{row['label']}' ran past {TIMEOUT} s: {shlex.join(cmd)}")
        raise
    wall = time.perf_counter() - start
    said = f"{shlex.join(cmd)}\n" + "\n".join(err.strip().splitlines()[-15:])
    if proc.returncode != 0:
        fail(f"'{row['label']}' failed (exit {proc.returncode}, PYTHONPATH={tree}): {said}")
    try:
        report = report_of(out)
        values = {m: METRICS[m][2](report, wall, launched) for m in [row["metric"], *row["also"]]}
    except (ValueError, IndexError):
        fail(f"'{row['label']}' printed no JSON report: {said}")
    except KeyError as exc:
        made = f"{row['script']} (with the package in {tree})" if "script" in row else \
            f"the package in {tree}"
        fail(f"'{row['label']}': the report of {made} has no {exc}")
    if "hosts" in row and (len(set(report["hosts"])) != row["hosts"]
                           or report["shared_memory_across_hosts"]):
        fail(f"'{row['label']}' ran on hosts {sorted(set(report['hosts']))}, sharing memory "
             f"across {report['shared_memory_across_hosts']}: not over {row['hosts']} hosts' links")
    return values, report


def hosts(*args: str) -> None:
    """``tests/cluster/hosts.sh ARGS`` with the bench's prefix; stop if it fails."""
    done = subprocess.run([HOSTS, *args], env=dict(os.environ, **hosts_env()),
                          capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"{os.path.relpath(HOSTS, ROOT)} {' '.join(args)} failed: "
             f"{' '.join(done.stderr.split())[-300:]}")


def hosts_env() -> dict:
    """What a run over the hosts needs in its environment: the hosts' prefix (hosts.sh reads it
    as hydra's launcher too), MPI kept to TCP (UCX would share memory between the namespaces of
    one machine, and no byte would cross a link) and the virtualenv's mpiexec and proxy first."""
    return {"OMTL_HOSTS_PREFIX": HOSTS_PREFIX, "UCX_TLS": "tcp",
            "PATH": f"{os.path.dirname(MPIEXEC)}:{os.environ.get('PATH', '')}"}


def on_hosts(row: dict, cmd: list) -> list:
    """``mpiexec -n RANKS ...`` started on host h0 and spread over the row's hosts (hydra's ssh
    launcher is hosts.sh), every rank with mpiexec's environment."""
    assert cmd[0] == MPIEXEC and cmd[1] == "-n"
    names = ",".join(f"h{i}" for i in range(row["hosts"]))
    return [HOSTS, "exec", "h0", MPIEXEC, "-genvall", "-hosts", names, "-launcher", "ssh",
            "-launcher-exec", HOSTS, *cmd[1:]]


def check_import(tree: str, folder: str, mpi: bool) -> None:
    """Stop unless processes started as the runs are (under mpiexec too if ``mpi``) import
    omtl_mpi from ``tree``."""
    cmd = [sys.executable, "-c", "import omtl_mpi; print(omtl_mpi.__file__)"]
    out = subprocess.run([MPIEXEC, "-n", "2", *cmd] if mpi else cmd, cwd=folder,
                         env=environment(tree, {}), capture_output=True, text=True)
    found = {os.path.realpath(line) for line in out.stdout.split()} or {out.stderr.strip()}
    where = " and ".join(sorted(found))
    if out.returncode or not all(f.startswith(os.path.realpath(tree) + os.sep) for f in found):
        fail(f"runs with PYTHONPATH={tree} import omtl_mpi from {where}")
    print(f"bench: PYTHONPATH={tree} imports {where}", file=sys.stderr)


def measure(rows: list, trees: dict, repeats: int, samples: int, folder: str) -> list:
    """Run every row with every tree, ``repeats`` times after one warm-up run.

    Returns
    -------
    list of dict
        One per row (what ``--json`` prints): the row's label, ranks, K, d, metric, target,
        script, ratio_to, hosts, rate, options and env, and ``trees``: tree name ("this", or
        the base's short hash) -> median, fastest, slowest, runs (every recorded value), chose (the
        reports' transport) and, for a row with ratio_to, ratio (its median over that row's
        median of the same tree).
    """
    sizes = dict.fromkeys((r["K"], r["d"]) for r in rows if "synth" not in r and "file" not in r)
    data = {(K, d, name): make_random_tasks(folder, K, d, samples, tree, name)
            for K, d in sizes for name, tree in trees.items()}
    for r in rows:
        for name, tree in trees.items():
            if "synth" in r:
                data[tuple(r["synth"]), name] = make_synth(folder, r["synth"], tree, name)
            elif "file" in r:               # a task file made beforehand, the same for every tree
                data[r["file"], name] = os.path.join(ROOT, r["file"])
    runs = [{name: [] for name in trees} for _ in rows]
    also = [{name: {m: [] for m in row["also"]} for name in trees} for row in rows]
    chose = [{name: set() for name in trees} for _ in rows]
    shape = [{} for _ in rows]
    # the warm-up (repeat -1) fills the file cache (and an older tree's caches). Rows
    # and trees take turns, so that a slow spell of the machine hits them all alike; the trees
    # swap places every repeat, so that neither always runs right after the other
    for repeat in range(-1, repeats):
        for i, row in enumerate(rows):
            for name in (list(trees) if repeat % 2 == 0 else list(trees)[::-1]):
                key = ((tuple(row["synth"]), name) if "synth" in row else (row["file"], name)
                       if "file" in row else (row["K"], row["d"], name))
                values, report = run_once(row, trees[name], data[key], folder)
                if repeat >= 0:
                    runs[i][name].append(values[row["metric"]])
                    for m in row["also"]:
                        also[i][name][m].append(values[m])
                    chose[i][name].add(str(report.get("transport")))
                    shape[i] = {"K": report.get("tasks", report.get("K", row["K"])),
                                "d": report.get("dim", report.get("d", row["d"]))}
        print(f"bench: {f'repeat {repeat + 1} of {repeats}' if repeat >= 0 else 'warm-up'} done",
              file=sys.stderr, flush=True)
    out = [{**{key: row.get(key) for key in ("label", "ranks", "K", "d", "metric", "target",
                                             "script", "ratio_to", "synth", "file", "also", "hosts",
                                             "rate")},
            **(shape[i] if "synth" in row or "file" in row else {}),
            "options": row.get("options", []), "env": row.get("env", {}),
            "trees": {name: {"median": statistics.median(values), "fastest": min(values),
                             "slowest": max(values), "runs": values,
                             "also": {m: statistics.median(v) for m, v in also[i][name].items()},
                             "chose": " / ".join(sorted(chose[i][name]))}
                      for name, values in runs[i].items()}}
           for i, row in enumerate(rows)]
    by_label = {row["label"]: row for row in out}    # ratio_to names a label of one row only
    for row in out:
        if row["ratio_to"] is not None:
            for name, tree in row["trees"].items():
                tree["ratio"] = tree["median"] / by_label[row["ratio_to"]]["trees"][name]["median"]
    return out


def markdown(table: dict, rows: list, base: str | None, header: str) -> str:
    """The section: title, description, how the figures were made, one line per row."""
    metrics = list(dict.fromkeys(row["metric"] for row in rows))
    heading = METRICS[metrics[0]][0] if len(metrics) == 1 else "median"
    targets = any(row["target"] is not None for row in rows)
    ratios = any(row["ratio_to"] is not None for row in rows)
    cols = ["run", "ranks", "K, d", "options", "transport chosen"]
    cols += ["metric"] if len(metrics) > 1 else []
    for name in ["this tree", base] if base else ["this tree"]:
        cols += [f"{name}: {heading}", f"{name}: fastest - slowest"]
    cols += [f"{base} / this tree"] if base else []
    extra = list(dict.fromkeys(m for row in rows for m in row["also"]))
    for name in ["this tree", base] if base else ["this tree"]:
        cols += [f"{name}: {METRICS[m][0]}" for m in extra]
    cols += ["ratio"] if ratios else []
    cols += ["target", "met"] if targets else []
    what = "; ".join(f"*{METRICS[m][0]}* is {METRICS[m][1]}" for m in [*metrics, *extra])
    if extra:
        what += f" ({', '.join(METRICS[m][0] for m in extra)}: the median of the same runs)"
    if ratios:
        named = list(dict.fromkeys(row["ratio_to"] for row in rows if row["ratio_to"] is not None))
        what += ("; *ratio* is " + (f"the row's median over the median of *{named[0]}*"
                                    if len(named) == 1 else
                                    "a row's median over another's: " + ", ".join(
                                        f"*{r['label']}* over *{r['ratio_to']}*" for r in rows
                                        if r["ratio_to"] is not None))
                 + (", this tree's" if base else "")
                 + ("; a target *ratio N* is met when the ratio is at most N"
                    if any(r["target"] is not None and r["ratio_to"] is not None for r in rows)
                    else ""))
    lines = [f"## {table['title']}", ""]
    lines += [table["description"].strip(), ""] if table.get("description") else []
    lines += [f"{header} {what}.", "", "| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for row in rows:
        fmt, this = METRICS[row["metric"]][3], row["trees"]["this"]
        options = " ".join([*(f"{k}={v}" for k, v in row["env"].items()),
                            *([row["script"]] if row["script"] else []), *row["options"]])
        shown = f"`{options}`" if options else "(defaults)"
        if row.get("synth"):
            shown += f" on `data synth {' '.join(row['synth'])}`"
        if row.get("file"):
            shown += f" on `{row['file']}`"
        ranks = str(row["ranks"] or "1 process")
        if row.get("hosts"):
            ranks += f" over {row['hosts']} hosts, links {row['rate'] or 'none'}"
        cells = [row["label"], ranks, f"{row['K']}, {row['d']}",
                 shown, this["chose"]]
        cells += [METRICS[row["metric"]][0]] if len(metrics) > 1 else []
        for t in row["trees"].values():
            cells += [f"{t['median']:{fmt}}", f"{t['fastest']:{fmt}} - {t['slowest']:{fmt}}"]
        cells += [f"{row['trees'][base]['median'] / this['median']:.2f}"] if base else []
        for t in row["trees"].values():
            cells += [f"{t['also'][m]:{METRICS[m][3]}}" if m in t["also"] else "" for m in extra]
        if ratios:
            cells += [f"{this['ratio']:.2f}" if "ratio" in this else ""]
        if targets and row["target"] is not None and row["ratio_to"] is not None:
            cells += [f"ratio {row['target']}", "yes" if this["ratio"] <= row["target"] else "no"]
        elif targets and row["target"] is not None:
            cells += [f"{row['target']}", "yes" if this["median"] <= row["target"] else "no"]
        elif targets:
            cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", help="a table, e.g. scripts/bench/default-path.toml")
    ap.add_argument("--repeats", type=int, default=5, help="recorded runs of every row (5)")
    ap.add_argument("--samples", type=int, help="rounds (instances per task): the table's if absent")
    ap.add_argument("--base", metavar="REV", help="also run every row with git revision REV")
    ap.add_argument("--docs", action="store_true", help="write the section of docs/PERFORMANCE.md")
    ap.add_argument("--docs-file", metavar="FILE",
                    help="write the section into FILE instead of docs/PERFORMANCE.md (implies --docs)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if args.repeats < 1 or (args.samples is not None and args.samples < 1):
        fail("--repeats and --samples must be at least 1")
    return args


def resolve_base(rev: str | None) -> str | None:
    """The short hash of ``rev`` (None without --base); stops if it is not a revision."""
    if not rev:
        return None
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "--short", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else fail(
        f"--base {rev}: not a revision of the git repository {ROOT}")


def measure_trees(table: dict, base: str | None, repeats: int, samples: int) -> list:
    """:func:`measure` with this tree and, with ``base``, a temporary worktree of it, which is
    removed however the runs end."""
    spread = max((row.get("hosts", 0) for row in table["rows"]), default=0)
    with tempfile.TemporaryDirectory(prefix="omtl-bench-") as folder:
        trees = {"this": ROOT, **({base: os.path.join(folder, f"tree-{base}")} if base else {})}
        up = False
        try:
            if spread:
                # another user's hosts of this prefix are theirs: stop, touching nothing
                listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
                if f"{HOSTS_PREFIX}-sw" in listed.stdout.split():
                    fail(f"the hosts {HOSTS_PREFIX}-* are up already (another bench, or one that "
                         f"was killed: OMTL_HOSTS_PREFIX={HOSTS_PREFIX} "
                         f"{os.path.relpath(HOSTS, ROOT)} down {spread}); or set "
                         "OMTL_HOSTS_PREFIX to another name")
                up = True
                hosts("up", str(spread))
            if base:
                add = subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach",
                                      trees[base], base], capture_output=True, text=True)
                if add.returncode:
                    fail(f"git worktree add {base} failed: {add.stderr.strip()}")
            for tree in trees.values():
                check_import(tree, folder, any("ranks" in row for row in table["rows"]))
            return measure(table["rows"], trees, repeats, samples, folder)
        except KeyboardInterrupt:
            fail("interrupted")
        finally:
            if up:                              # always, so that no namespace outlives the bench
                subprocess.run([HOSTS, "down", str(spread)], env=dict(os.environ, **hosts_env()),
                               capture_output=True)
            if base:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", trees[base]],
                               capture_output=True)
                subprocess.run(["git", "-C", ROOT, "worktree", "prune"], capture_output=True)


def main():
    args = arguments()
    table = load_table(args.table)
    samples = args.samples or table["data"]["samples"]
    doc = args.docs_file or (DOC if args.docs else None)
    if doc:
        check_section(doc, table["section"])    # now, not after the minutes of runs
    shown = shlex.join(["python", "scripts/bench.py", os.path.relpath(os.path.abspath(args.table), ROOT),
                        "--repeats", str(args.repeats), "--samples", str(samples),
                        *(["--base", args.base] if args.base else []), *(["--docs"] if args.docs else []),
                        *(["--docs-file", args.docs_file] if args.docs_file else [])])
    base = resolve_base(args.base)
    # the code as it is when the runs start; the comment opens the section, its "Generated by"
    # line follows the table's description
    table_path = os.path.relpath(os.path.abspath(args.table), ROOT)
    depends = DEPENDS + (() if table_path.startswith("..") else (table_path,))   # if versioned
    depends += tuple(dict.fromkeys(row["script"] for row in table["rows"] if "script" in row))
    depends += ("tests/cluster/hosts.sh",) if any("hosts" in row for row in table["rows"]) else ()
    comment, generated = stamp(shown, depends).split("\n", 1)
    # SIGTERM leaves through the same clean-up as Ctrl-C: the worktree is removed
    signal.signal(signal.SIGTERM, lambda *_: fail("terminated"))
    before = gauge_us()
    rows = measure_trees(table, base, args.repeats, samples)
    random = any("synth" not in row and "file" not in row for row in table["rows"])
    header = (f"{generated} {speed_note(before)} "
              + (f"Random data: K tasks of {samples} instances (= rounds) with d features. "
                 if random else "Each row's data is named under *options*. ")
              + f"Median of {args.repeats} runs, with the fastest and slowest, every row "
              f"{'and both trees ' if base else ''}taking turns run by run after one unrecorded "
              "warm-up run each.")
    if base:
        header += (f" {base} is `--base {args.base}`, run from a git worktree; "
                   f"*{base} / this tree* above 1 means this tree is faster.")
    text = markdown(table, rows, base, header)
    print(json.dumps({"command": shown, "title": table["title"], "samples": samples,
                      "repeats": args.repeats, "base": base, "rows": rows}, indent=1)
          if args.json else text)
    if doc:
        replace_section(doc, table["section"], f"{comment}\n{text}", append=False)
        print(f"bench: wrote section '{table['section']}' of {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
