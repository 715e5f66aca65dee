"""Human-readable run summary: per-task errors and per-rank phase timings."""
from __future__ import annotations

import numpy as np

from ..comm.clock import PHASES
from ..data.taskfile import INFO_ALL, INFO_EDGES


def timing_table(timing: np.ndarray, roles, last=None) -> list[str]:
    """Per rank and phase: mean, p50 and p99 milliseconds per round; with ``last`` (rounds per
    rank in which it was the last worker to arrive), that count and its share of the rounds."""
    rounds = max(timing.shape[1], 1)
    last = last if last is not None and np.sum(last) else None
    lines = [f"{'rank':>4}  {'role':<22}" + "".join(f"{p + ' mean/p50/p99 ms':>34}" for p in PHASES)
             + (f"{'last at barrier':>22}" if last is not None else "")]
    for r in range(timing.shape[0]):
        cells = [f"{ms.mean():10.4f} {np.percentile(ms, 50):10.4f} {np.percentile(ms, 99):10.4f}"
                 if ms.size else " " * 32 for ms in timing[r].T * 1000.0]     # phase by phase
        tail = f"{int(last[r]):>12} {100.0 * last[r] / rounds:7.1f}%" if last is not None else ""
        lines.append(f"{r:>4}  {roles[r]:<22}" + "".join(f"{c:>34}" for c in cells) + tail)
    return lines


def format_summary(report: dict) -> str:
    """The readable end-of-run summary printed by ``omtl-mpi run`` (without ``--json``)."""
    eta = f", eta={report['eta']:.4g}" if report.get("eta") is not None else ""
    where = f", topology {report['topology']} on {report['nodes']} nodes" if "topology" in report else ""
    if report.get("intercept"):
        eta += ", intercept"
    if report.get("scale", "none") != "none":
        eta += f", {report['scale']} feature scaling"
    lines = [
        f"{report['algo']} ({report['variant']}, {report['loss']} loss"
        f"{', no relationship learning' if not report['relationship'] else ''}) on {report['data']}",
        f"{report['tasks']} tasks, d={report['dim']}, {report['rounds']} rounds of batch "
        f"{report['batch']}, {report['ranks']} rank(s){where}{eta}",
        "",
        f"{'task':<24}{'cumulative error':>18}",
    ]
    names, errors = report["task_names"], report["per_task_error"]
    shown = range(len(names))
    if len(names) > INFO_ALL:         # as 'data info': thousands of lines would scroll it away
        shown = [*range(INFO_EDGES), None, *range(len(names) - INFO_EDGES, len(names))]
    for k in shown:
        if k is None:
            lines.append(f"  ... {len(names) - 2 * INFO_EDGES} more tasks (every task's error: "
                         "--json, or the results file's /metrics/per_task_error)")
        else:
            lines.append(f"{names[k][:23]:<24}{errors[k]:>18.4f}")
    lines += [
        f"{'mean':<24}{report['mean_error']:>18.4f}",
        f"{'over all instances':<24}{report['overall_error']:>18.4f}",
    ]
    classes = [c for c in report.get("error_by_length", []) if c["tasks"]]
    if len(classes) > 1:                  # streams of different lengths: each class's errors
        lines.append(f"{'by stream length':<24}{'tasks':>8}{'mean error':>12}{'over instances':>16}")
        lines += [f"{'  ' + c['lengths'] + ' instances':<24}{c['tasks']:>8}{c['mean_error']:>12.4f}"
                  f"{c['overall_error']:>16.4f}" for c in classes]
    lines += [
        f"balanced error {report['balanced_error']:.4f}   F1 (positive class) {report['f1']:.4f}",
        f"{report['seconds']:.3f} s, {report['ms_per_round']:.4f} ms per round"
        + (" (transport mpi: MPI messages, waiting ranks yield, then sleep)"
           if report.get("transport") == "mpi" else ""),
        "",
        "per-rank time per round:",
    ]
    lines += timing_table(report["_timing"], report["_roles"], report.get("_last"))
    if report.get("stragglers", "none") != "none":
        lines.append(f"stragglers injected: {report['stragglers']}, sleeping "
                     + ", ".join(f"rank {r} {s:.3f} s" for r, s in enumerate(report["injected_s"]) if s))
    if report.get("cpu_ms_per_round") and report.get("ms_per_round"):
        cpu = sum(report["cpu_ms_per_round"])
        lines.append(f"CPU per round, all ranks together: {cpu:.4f} ms, "
                     f"{cpu / report['ms_per_round']:.2f} x the time per round")
    if report.get("ranks", 1) > 1 and report.get("hosts"):
        per_host = ", ".join(f"{h} ({n})" for h, n in report["ranks_per_host"].items())
        lines.append(f"hosts (ranks): {per_host}; {report['mpi_library']}"
                     + (f"; {report['transport_env']}" if report["transport_env"] != "none" else ""))
        lines.append("bytes a round, sent / received: " + ", ".join(
            f"rank {r} {sent:.0f} / {got:.0f}" for r, (sent, got) in enumerate(report["bytes_per_round"])))
        for group in report["shared_memory_across_hosts"]:
            lines.append(f"ranks on hosts {', '.join(group)} shared memory (one machine)")
    if report.get("aslr") == "off" and report.get("ranks", 1) > 1:
        lines.append("ranks ran without address-space layout randomisation (--aslr off, more "
                     "ranks than CPUs)")
    if "mean_staleness" in report:
        lines.append(f"mean staleness of the gossiped rows: {report['mean_staleness']:.3f} rounds")
    if report.get("results"):
        lines += ["", f"results: {report['results']}"]
    return "\n".join(lines)
