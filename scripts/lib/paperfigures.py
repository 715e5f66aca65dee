"""The paper's published figures (Li et al. 2025, Tables 2-4, as docs/PAPER.md gives them),
keyed by the row labels of scripts/paper.toml and the data set labels, and the helper that sets
them beside ours in a report table (report.tables.Table)."""
from __future__ import annotations

DATA = ("Synthetic", "TweetEval", "Multi-Lingual", "Chem", "Landmine", "MNIST")
# where our features are not the paper's (docs/DATASETS.md): its figure is for other features
SUBSTITUTES = ("MNIST", "TweetEval", "Chem")


def _by_data(*values) -> dict:
    return {d: v for d, v in zip(DATA, values) if v is not None}


# Table 2: final mean cumulative error
TABLE2 = {
    "ADMM-Single": _by_data(0.214, 0.341, 0.206, 0.304, 0.379, 0.154),
    "DROM (reconstruction)": _by_data(0.299, 0.497, 0.253, 0.347, 0.431, 0.183),
    "PMSC-Log (reconstruction)": _by_data(0.212, 0.452, 0.208, 0.369, 0.389, 0.252),
    "D-PSGD ring": _by_data(0.204, 0.283, 0.168, 0.320, 0.377, 0.137),
    "D-PSGD full": _by_data(0.209, 0.245, 0.168, 0.320, 0.394, 0.124),
    "C-ADMM": _by_data(0.138, 0.232, 0.077, 0.319, 0.304, 0.079),
    "D-ADMM ring": _by_data(0.173, 0.161, 0.128, 0.276, 0.332, 0.070),
    "D-ADMM full": _by_data(0.173, 0.160, 0.098, 0.277, 0.256, 0.051),
}
# Table 3: rounds to the paper's target accuracy / ms per round ("-": never reached)
TARGETS = _by_data(0.75, 0.60, 0.70, 0.60, 0.55, 0.70)
TABLE3 = {
    "ADMM-Single": _by_data("267 / 0.24", "485 / 0.04", "507 / 0.04", "121 / 0.03", "139 / 0.03", "204 / 0.04"),
    "DROM (reconstruction)": _by_data("- / 4.29", "- / 0.19", "139 / 0.44", "502 / 0.44", "247 / 0.23", "1057 / 0.67"),
    "PMSC-Log (reconstruction)": _by_data("188 / 0.26", "- / 1.90", "232 / 3.03", "187 / 0.76", "132 / 0.18", "220 / 3.21"),
    "D-PSGD ring": _by_data("206 / 3.28", "155 / 267.37", "105 / 1259.42", "109 / 26.34", "233 / 35.87", "185 / 184.27"),
    "D-PSGD full": _by_data("204 / 5.79", "157 / 293.05", "110 / 1479.16", "37 / 48.90", "276 / 65.01", "184 / 233.85"),
    "C-ADMM": _by_data("261 / 2.01", "190 / 1.93", "114 / 2.44", "116 / 2.56", "97 / 6.26", "196 / 2.61"),
    "D-ADMM ring": _by_data("277 / 1.03", "189 / 17.63", "344 / 35.83", "94 / 15.05", "78 / 20.99", "188 / 17.76"),
    "D-ADMM full": _by_data("275 / 1.05", "190 / 32.60", "249 / 59.57", "86 / 17.57", "32 / 47.01", "189 / 30.49"),
}
# Table 4: (independent, W/O RL, with RL) per data set and architecture
TABLE4 = {
    "Synthetic": {"C-ADMM": (0.215, 0.162, 0.138), "D-ADMM full": (0.215, 0.183, 0.173), "D-ADMM ring": (0.215, 0.191, 0.173)},
    "TweetEval": {"C-ADMM": (0.341, 0.356, 0.232), "D-ADMM full": (0.341, 0.320, 0.160), "D-ADMM ring": (0.341, 0.324, 0.161)},
    "Multi-Lingual": {"C-ADMM": (0.206, 0.099, 0.077), "D-ADMM full": (0.206, 0.114, 0.097), "D-ADMM ring": (0.206, 0.165, 0.128)},
    "Chem": {"C-ADMM": (0.352, 0.344, 0.319), "D-ADMM full": (0.352, 0.373, 0.277), "D-ADMM ring": (0.352, 0.343, 0.276)},
    "Landmine": {"C-ADMM": (0.379, 0.348, 0.304), "D-ADMM full": (0.379, 0.391, 0.256), "D-ADMM ring": (0.379, 0.393, 0.332)},
    "MNIST": {"C-ADMM": (0.154, 0.106, 0.079), "D-ADMM full": (0.154, 0.150, 0.051), "D-ADMM ring": (0.154, 0.097, 0.070)},
}
# the W/O RL rows of scripts/paper.toml, in Table 2's form
TABLE2.update({f"{arch} W/O RL": {d: TABLE4[d][arch][1] for d in TABLE4}
               for arch in ("C-ADMM", "D-ADMM full", "D-ADMM ring")})


def _paper(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def beside(table, figures: dict, rows: dict | None = None) -> None:
    """Set the paper's figure beside ours, in place: ``cell (paper X)`` in every cell of a
    learners x data sets table whose row label (mapped by ``rows`` when our label differs) and
    data set have one. Table 3's cells (rounds, then ms per round per data set) get the
    paper's "rounds / ms" beside the rounds."""
    rows = rows or {}
    data = [c.split(":")[0] for c in table.columns[1:]]
    for row in table.rows:
        paper = figures.get(rows.get(row[0], row[0]), {})
        for i, d in enumerate(data, start=1):
            if d in paper and (i == 1 or data[i - 2] != d):     # Table 3: the first column of a set
                row[i] = f"{row[i] or '-'} (paper {_paper(paper[d])})"


def beside_ablation(table) -> None:
    """Table 4 (rows: data set, architecture, independent, W/O RL, RL), in place."""
    for row in table.rows:
        paper = TABLE4.get(row[0], {}).get(row[1])
        if paper:
            row[2:5] = [f"{ours or '-'} (paper {p:.3f})" for ours, p in zip(row[2:5], paper)]
