"""The paper's Tables 2, 3 and 4 from a sweep's finished runs, as rows that render to Markdown
and CSV. Cells hold the mean and standard deviation over seeds (population std, 0 for one seed)."""
import csv
import io
from dataclasses import dataclass

import numpy as np

from ..metrics import rounds_to_accuracy
from .collect import Sweep


@dataclass
class Table:
    """A titled table: ``columns`` and ``rows`` of display strings, plus ``records``, the same
    figures as numbers (one dict per cell, for CSV and JSON)."""

    name: str
    title: str
    columns: list
    rows: list
    records: list
    notes: list

    def markdown(self) -> str:
        out = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
               "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        if self.notes:
            out += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        keys = list(dict.fromkeys(k for r in self.records for k in r))
        writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.records)
        return buf.getvalue()


def _stats(values) -> tuple[float, float, int]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std()), int(a.size)


def _cell(values, digits: int = 4) -> str:
    if not len(values):
        return ""
    mean, std, n = _stats(values)
    return f"{mean:.{digits}f}" if n == 1 else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _rows(sweep: Sweep):
    """Variants in the sweep file's order: (variant, label) pairs."""
    order = {k: i for i, k in enumerate(sweep.algorithms)}
    seen = {}
    for o in sweep.outcomes:
        seen.setdefault(o.variant, (order.get(o.algorithm, len(order)), len(seen), o.label))
    return [(v, lab) for v, (_, _, lab) in sorted(seen.items(), key=lambda kv: kv[1][:2])]


def _data_sets(sweep: Sweep) -> list:
    present = {o.data for o in sweep.outcomes}
    return [k for k in sweep.data if k in present]


def _group(sweep: Sweep, data: str, variant: str) -> list:
    return [o for o in sweep.outcomes if o.data == data and o.variant == variant]


# metric -> (what it is, the suffix of its tables' file names, Table 2's letter for it)
METRICS = {"mean_error": ("mean cumulative error", "", ""),
           "overall_error": ("error over all instances", "-overall", "d"),
           "balanced_error": ("mean balanced error", "-balanced", "b"),
           "f1": ("F1 of the positive class", "-f1", "c")}


def metric_table(sweep: Sweep, metric: str = "mean_error") -> Table:
    """Table 2: final mean cumulative error (``metric="mean_error"``), or its companions with
    the balanced error (``"balanced_error"``) or the positive class's F1 (``"f1"``), learners x
    data sets."""
    data = _data_sets(sweep)
    rows, records = [], []
    for variant, label in _rows(sweep):
        row = [label]
        for d in data:
            values = [getattr(o, metric) for o in _group(sweep, d, variant)]
            row.append(_cell(values))
            if values:
                mean, std, n = _stats(values)
                records.append({"learner": label, "variant": variant, "data": sweep.data[d]["label"],
                                metric: mean, "std": std, "seeds": n})
        rows.append(row)
    what, suffix, letter = METRICS[metric]
    return Table(f"table2{suffix}", f"Table 2{letter}: final {what} (mean ± std over seeds)",
                 ["learner"] + [sweep.data[d]["label"] for d in data], rows, records, [_seed_note(sweep)])


def _seed_note(sweep: Sweep) -> str:
    seeds = sorted({o.seed for o in sweep.outcomes}, key=lambda s: (s is None, s or 0))
    return ("seeds: " + ", ".join("file order" if s is None else str(s) for s in seeds)
            + "; each seed presents every task's stream in its own random order")


def table3(sweep: Sweep, targets: dict) -> Table:
    """Rounds until the mean cumulative accuracy first reaches the data set's target (from round
    10 on), and milliseconds per round: learners x data sets."""
    data = _data_sets(sweep)
    columns = ["learner"]
    for d in data:
        lab = sweep.data[d]["label"]
        target = targets.get(d)
        columns += [f"{lab}: rounds to {target:g}" if target else f"{lab}: rounds (no target)",
                    f"{lab}: ms/round"]
    rows, records = [], []
    for variant, label in _rows(sweep):
        row = [label]
        for d in data:
            group = _group(sweep, d, variant)
            target = targets.get(d)
            reached = [rounds_to_accuracy(o.curve, target) for o in group] if target else []
            hits = [r for r in reached if r is not None]
            if not group:
                row += ["", ""]
                continue
            if not target:
                rounds_text = ""
            elif not hits:
                rounds_text = "not reached"
            else:
                rounds_text = _cell(hits, 0) + (f" ({len(hits)}/{len(group)} seeds)" if len(hits) < len(group) else "")
            ms = [o.ms_per_round for o in group]
            row += [rounds_text, f"{np.median(ms):.3f} ({group[0].ranks})"]
            records.append({"learner": label, "variant": variant, "data": sweep.data[d]["label"],
                            "target": target, "rounds_mean": float(np.mean(hits)) if hits else None,
                            "reached": len(hits), "seeds": len(group),
                            "ms_per_round_median": float(np.median(ms)),
                            "ranks": group[0].ranks})
        rows.append(row)
    notes = ["rounds: first round t >= 10 whose mean cumulative accuracy (1 - error, averaged "
             "over tasks) reaches the target; mean over the seeds that reached it",
             "ms/round: median over seeds of the run's wall-clock time per round, on the number of "
             "ranks in brackets (1: one process); comparable only within one machine"]
    return Table("table3", "Table 3: rounds to the target accuracy, and time per round",
                 columns, rows, records, notes)


_FULL = {"full", "fully-connected", "complete"}


def ablation_learners(part: str) -> list:
    """The names of the learners that play ``part`` (``"independent"``, ``"relationship"``) in
    the paper's ablation: their registry entry's ``ablation``."""
    from ..algorithms.registry import REGISTRY
    return [a.name for a in REGISTRY.values() if a.ablation == part]


def _ablation_cell(sweep: Sweep, data: str, algos, topology, relationship) -> list:
    """Runs with the paper's settings (``--preset paper``) that make one cell of Table 4: of
    ``algos``, with the relationship learned or not (None: each task alone, either), on
    ``topology`` (None: any)."""
    chosen = []
    for o in sweep.outcomes:
        if o.data != data or not o.default_params or o.algo not in algos:
            continue
        topo = "full" if o.topology in _FULL else (o.topology or "ring")
        if relationship is None or (o.relationship == relationship and topology in (None, topo)):
            chosen.append(o)
    return chosen


def table4(sweep: Sweep, metric: str = "mean_error") -> Table:
    """Ablation: each task alone (admm-single), without relationship learning (Omega = I/K), and
    with it, for C-ADMM, D-ADMM on the full graph and D-ADMM on a ring; by the final mean
    cumulative error, or by one of its companions (:data:`METRICS`)."""
    from ..algorithms.registry import REGISTRY
    rows, records = [], []
    independent = ablation_learners("independent")
    # the architectures: each learner that learns the task relationship, one of the neighbours
    # pattern on the full graph and on a ring
    architectures = [(f"{name.upper()} {t}" if t else name.upper(), name, t)
                     for name in ablation_learners("relationship") for t in (
                         ("full", "ring") if REGISTRY[name].pattern == "neighbours" else (None,))]
    for d in _data_sets(sweep):
        alone = _ablation_cell(sweep, d, independent, None, None)
        for name, algo, topo in architectures:
            without = _ablation_cell(sweep, d, (algo,), topo, False)
            with_rl = _ablation_cell(sweep, d, (algo,), topo, True)
            if not (without or with_rl):
                continue
            cells = [[getattr(o, metric) for o in c] for c in (alone, without, with_rl)]
            rows.append([sweep.data[d]["label"], name] + [_cell(c) for c in cells])
            rec = {"data": sweep.data[d]["label"], "architecture": name}
            for key, c in zip(("independent", "without_rl", "with_rl"), cells):
                mean, std, _ = _stats(c) if c else (None, None, 0)
                rec[key], rec[key + "_std"] = mean, std
            records.append(rec)
    notes = [f"independent: {', '.join(independent)} (each task on its own, the same for every "
             "architecture); W/O RL: --no-relationship (Omega fixed at I/K); RL: the learned "
             "Omega. Only runs with the paper's settings (what --preset paper gives each learner) "
             "count."]
    if not rows:
        notes.append(f"no ablation runs in this sweep: add {', '.join(independent)}, and "
                     f"{' / '.join(ablation_learners('relationship'))} with and without "
                     "options = { no-relationship = true }")
    what, suffix, _ = METRICS[metric]
    return Table(f"table4{suffix}", f"Table 4: ablation, final {what} (mean ± std over seeds)",
                 ["data set", "architecture", "independent", "W/O RL", "RL"], rows, records, notes)


def runs_table(sweep: Sweep) -> Table:
    """One row per finished run: the tidy data behind every table."""
    records = [{"id": o.id, "data": o.data, "learner": o.label, "algo": o.algo, "topology": o.topology or "",
                "seed": "" if o.seed is None else o.seed, "ranks": o.ranks, "mean_error": o.mean_error,
                "overall_error": o.overall_error,
                "balanced_error": o.balanced_error, "f1": o.f1, "ms_per_round": o.ms_per_round,
                "rounds": len(o.curve)} for o in sweep.outcomes]
    rows = [[r["id"], f"{r['mean_error']:.4f}", f"{r['overall_error']:.4f}", f"{r['balanced_error']:.4f}",
             f"{r['f1']:.4f}", f"{r['ms_per_round']:.3f}", r["ranks"]] for r in records]
    return Table("runs", "Every finished run", ["id", "mean error", "overall error", "balanced error",
                                                "F1", "ms/round", "ranks"],
                 rows, records, [])
