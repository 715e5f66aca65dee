"""More property-based hostile input: every importer fed random bytes or random records, command-line
values end to end, and random sweep files. The only failure allowed is the project's own error
(exit code 2, one line per problem, no traceback), and a failed import leaves no output file."""
import os

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import write_declared_only
from omtl_mpi.data import (import_csv, import_landmine, import_libsvm, import_mnist, import_text_csv,
                           import_tudataset, import_tweeteval, read_meta)
from omtl_mpi.errors import ConfigError, UserError
from omtl_mpi.sweep import load_plan

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


def imported_or_refused(out, call):
    """``call()`` either writes a readable task file at ``out`` or raises UserError leaving none."""
    if os.path.exists(out):
        os.remove(out)
    try:
        call()
    except UserError as exc:
        event("refused")
        assert str(exc).strip()
        assert not os.path.exists(out), "a failed import left its output behind"
        assert not [f for f in os.listdir(os.path.dirname(out)) if ".tmp" in f]
        return False
    read_meta(out)
    event("imported")
    return True


# ----------------------------------------------------------------------------- importers
@FAST
@given(blob=st.binary(max_size=1500))
def test_random_bytes_for_landmine_and_mnist(tmp_path, blob):
    src = tmp_path / "src.bin"
    src.write_bytes(blob)
    out = str(tmp_path / "o.h5")
    assert not imported_or_refused(out, lambda: import_landmine(str(src), out))
    for name in ("x.npz", "train-images-idx3-ubyte"):
        p = tmp_path / name
        p.write_bytes(blob)
    assert not imported_or_refused(out, lambda: import_mnist(str(tmp_path / "x.npz"), out))


@FAST
@given(rows=st.lists(st.lists(text, min_size=0, max_size=5), max_size=8), header=st.lists(text, max_size=5))
def test_random_csv(tmp_path, rows, header):
    import csv
    src = tmp_path / "d.csv"
    with open(src, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header or ["f0", "label", "task"])
        w.writerows(rows)
    out = str(tmp_path / "o.h5")
    imported_or_refused(out, lambda: import_csv(str(src), out))


@FAST
@given(lines=st.lists(st.one_of(text, st.from_regex(r"[+-]?1( [0-9]{1,3}:[-0-9.e]{1,6}){0,4}", fullmatch=True)),
                      max_size=10))
def test_random_libsvm(tmp_path, lines):
    folder = tmp_path / "svm"
    folder.mkdir(exist_ok=True)
    (folder / "a.txt").write_text("\n".join(lines), encoding="utf-8")
    (folder / "b.txt").write_text("1 1:0.5\n-1 2:1\n", encoding="utf-8")
    out = str(tmp_path / "o.h5")
    imported_or_refused(out, lambda: import_libsvm(str(folder), out))


@FAST
@given(texts=st.lists(text, max_size=6), labels=st.lists(st.sampled_from(["0", "1", "2", "x", "", " 1"]), max_size=6))
def test_random_tweeteval_folders(tmp_path, texts, labels):
    root = tmp_path / "tw"
    for task in ("hate", "irony", "offensive"):
        d = root / task
        d.mkdir(parents=True, exist_ok=True)
        for split in ("train", "val", "test"):
            (d / f"{split}_text.txt").write_text("\n".join(t.replace("\n", " ") for t in texts), encoding="utf-8")
            (d / f"{split}_labels.txt").write_text("\n".join(labels), encoding="utf-8")
    out = str(tmp_path / "o.h5")
    imported_or_refused(out, lambda: import_tweeteval(str(root), out, dims=16))


@FAST
@given(rows=st.lists(st.tuples(text, st.sampled_from(["positive", "negative", "neutral", "5", ""])), max_size=8))
def test_random_text_csv(tmp_path, rows):
    import csv
    folder = tmp_path / "tc"
    folder.mkdir(exist_ok=True)
    for name in ("en.csv", "de.csv"):
        with open(folder / name, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(rows)
    out = str(tmp_path / "o.h5")
    imported_or_refused(out, lambda: import_text_csv(str(folder), out, dims=16))


@FAST
@given(edges=st.lists(st.tuples(st.integers(-2, 12), st.integers(-2, 12)), max_size=12),
       indicator=st.lists(st.integers(-1, 4), max_size=10),
       graph_labels=st.lists(st.integers(-2, 2), max_size=5),
       node_labels=st.lists(st.integers(-1, 5), max_size=10), junk=st.booleans())
def test_random_tu_graphs(tmp_path, edges, indicator, graph_labels, node_labels, junk):
    root = tmp_path / "tu" / "G"
    root.mkdir(parents=True, exist_ok=True)
    (root / "G_A.txt").write_text("\n".join(f"{a}, {b}" for a, b in edges) + ("\nx, y" if junk else ""))
    (root / "G_graph_indicator.txt").write_text("\n".join(map(str, indicator)))
    (root / "G_graph_labels.txt").write_text("\n".join(map(str, graph_labels)))
    (root / "G_node_labels.txt").write_text("\n".join(map(str, node_labels)))
    out = str(tmp_path / "o.h5")
    imported_or_refused(out, lambda: import_tudataset(str(tmp_path / "tu"), out, sets=("G",), dims=8))


@FAST
@given(cut=st.floats(0.0, 0.999))
def test_truncated_landmine_and_mnist_files(tmp_path, cut):
    from test_importers import write_landmine
    rng = np.random.default_rng(0)
    good_mat, good_npz = tmp_path / "good.mat", tmp_path / "good.npz"
    if not good_mat.exists():
        write_landmine(good_mat, [rng.normal(size=(20, 9)) for _ in range(3)],
                       [rng.integers(0, 2, size=(20, 1)) for _ in range(3)])
        np.savez(good_npz, x_train=rng.integers(0, 255, size=(50, 28, 28), dtype=np.uint8),
                 y_train=np.arange(50) % 10)
    out = str(tmp_path / "o.h5")
    for good, importer in ((good_mat, import_landmine), (good_npz, import_mnist)):
        blob = good.read_bytes()
        bad = tmp_path / ("cut" + good.suffix)
        bad.write_bytes(blob[: int(cut * len(blob))])
        assert not imported_or_refused(out, lambda: importer(str(bad), out))


# ----------------------------------------------------------------------------- the command line
def cli_exit(args) -> int:
    """Exit code of ``omtl-mpi ARGS`` run in this process."""
    from omtl_mpi.cli import main
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return 0


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**6),
                    st.sampled_from(["abc", "", "1e309", "-0", "nan"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(algo=st.sampled_from(["c-admm", "d-admm", "d-psgd", "drom", "pa", "nope"]),
       option=st.sampled_from(["--rho", "--eta", "--lambda1", "--lambda4", "--omega-every", "--omega-eps",
                               "--gamma0", "--mu", "--tau", "--C", "--batch", "--nodes", "--seed",
                               "--synth-tasks", "--synth-samples", "--cap"]),
       value=st.one_of(st.floats(0.001, 100), st.integers(1, 40), numbers),
       topology=st.sampled_from(["ring", "full", "star", "torus", "moebius", "erdos-renyi"]))
def test_random_command_line_values(tmp_path, capsys, algo, option, value, topology):
    # keep each example quick: thousands of tasks are a valid run, but one eigendecomposition
    # of a K x K Omega per round takes minutes (and K = 20000 needs most of the machine's
    # memory). The drawn value is capped, not the fixed --synth-tasks 3 before it.
    cap = {"--synth-samples": 2000, "--synth-tasks": 50}.get(option)
    if cap is not None and isinstance(value, (int, float)) and value > cap:
        value = cap
    args = ["run", "--algo", algo, "--synth-tasks", "3", "--synth-samples", "30", "--topology", topology,
            option, value, "--out", tmp_path / "r.h5", "--json"]
    code = cli_exit(args)
    event(f"exit {code}")
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert err.strip(), "an error exit printed nothing"
        assert not (tmp_path / "r.h5").exists()
    else:
        read = __import__("h5py").File(tmp_path / "r.h5")
        assert np.isfinite(read["metrics/mean_curve"][()]).all()
        read.close()
        os.remove(tmp_path / "r.h5")


# ----------------------------------------------------------------------------- sweep files
toml_values = st.one_of(st.integers(-3, 50), st.floats(-1, 5, allow_nan=False), st.booleans(),
                        st.sampled_from(["tasks", "tasks+1", "tasks*", "ring", "c-admm", "x", "min(tasks,2)"]),
                        st.lists(st.integers(0, 3), max_size=3))


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(top=st.dictionaries(st.sampled_from(["seeds", "timeout", "max_ranks", "name", "other"]), toml_values, max_size=3),
       data=st.dictionaries(st.sampled_from(["target", "batch", "optional", "label", "path"]), toml_values, max_size=3),
       synth=st.dictionaries(st.sampled_from(["tasks", "samples", "seed", "normalize", "size"]), toml_values, max_size=3),
       algo=st.dictionaries(st.sampled_from(["algo", "ranks", "topology", "timeout", "label", "grid", "options"]),
                            toml_values, max_size=3),
       options=st.dictionaries(st.sampled_from(["rho", "no-relationship", "seed", "gamma0", "bogus", "batch"]),
                               toml_values, max_size=2),
       garbage=st.sampled_from(["", "[[", "= 1", "\x00"]))
def test_random_sweep_files(tmp_path, top, data, synth, algo, options, garbage):
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    lines += ["[data.d]"] + [f"{k} = {_toml(v)}" for k, v in data.items() if k != "path"]
    if "path" in data:
        lines.append(f"path = {_toml(data['path'])}")
    else:
        lines.append("synthetic = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in synth.items()) + " }")
    lines += ["[algorithms.c-admm]"] + [f"{k} = {_toml(v)}" for k, v in algo.items() if k not in ("grid", "options")]
    if options:
        lines.append("options = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in options.items()) + " }")
    lines.append(garbage)
    path = tmp_path / "s.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        plan = load_plan(str(path))
    except ConfigError as exc:
        event("refused")
        assert str(exc).strip() and "Traceback" not in str(exc)
        return
    event("accepted")
    assert all(r.ranks >= 1 and r.timeout > 0 for r in plan.runs)
    assert len({r.id for r in plan.runs}) == len(plan.runs)


def test_huge_dimensions_are_refused_before_reading(tmp_path, capsys):
    """A small file (compressed, never written) that declares 2 x 3 x 4e9 float64 features."""
    path = write_declared_only(tmp_path / "huge.h5", rows=3, dim=4 * 10**9)
    assert path.stat().st_size < 100_000
    code = cli_exit(["run", "--data", path, "--preset", "paper"])   # AROW's own check is first
    err = capsys.readouterr().err
    assert code == 2 and "d = 4000000000) need about" in err and "GiB" in err
    assert "Traceback" not in err


def test_a_learner_too_large_is_refused_before_learning(capsys):
    """What the chosen learner needs that cannot fit is refused at start, naming it, not by
    the allocator: DROM's K x K task-relationship matrix (the defaults need none)."""
    code = cli_exit(["run", "--algo", "drom", "--synth-tasks", "99999", "--synth-samples", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "99999 x 99999 task-relationship matrix" in err and "Traceback" not in err


def test_the_hashed_baseline_too_large_blames_the_part_that_is(tmp_path, capsys, monkeypatch):
    """Its table of 2^bits weights is small; at a large d its tasks' rows are what cannot fit
    (the file and its streams do), so the line must not advise fewer --bits."""
    from omtl_mpi.data import footprint
    monkeypatch.setattr(footprint, "available_memory", lambda: 5 * 10**9)
    path = write_declared_only(tmp_path / "big.h5", rows=1, dim=10**8)
    code = cli_exit(["run", "--data", path, "--algo", "hashed", "--bits", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "2 task(s) of 100000001 weights on one rank (the hashed learner's rows " \
        "of each task) need about" in err and "--bits" not in err and "Traceback" not in err


def test_drom_with_an_omega_it_cannot_invert_is_one_line(capsys):
    """What the property test above found: Frank-Wolfe makes DROM's Omega nearly rank one, and
    a tiny --omega-eps leaves Omega + eps I singular."""
    code = cli_exit(["run", "--algo", "drom", "--omega-eps", "5.476761068851331e-113",
                     "--synth-samples", "300"])
    err = capsys.readouterr().err
    assert code == 2 and "Omega + eps I is singular" in err and "--omega-eps" in err
    assert "Traceback" not in err and err.count("\n") == 1
