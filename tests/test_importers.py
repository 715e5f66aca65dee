"""Every importer on small files of the real formats made here, and on ../shared/data when present;
random bytes and records fed to every importer (hypothesis: refused in one line, no file left);
the importers' refusals of bad options, of a FIFO in a source folder, and their label rule and
--label-map, through the command line."""
import gzip
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import cli, omtl_forked as omtl, refused, sources
from omtl_mpi.data import (import_csv, import_landmine, import_libsvm, import_mnist, import_text_csv,
                           import_tudataset, import_tweeteval, info, load_tasks, read_meta)
from omtl_mpi.data import taskfile
from omtl_mpi.data.featurise import hash_texts
from omtl_mpi.errors import ConfigError, DataError, UserError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def no_output(tmp_path):
    return not any(p.suffix == ".h5" or ".tmp-" in p.name for p in tmp_path.rglob("*"))


# ---------------------------------------------------------------- landmine
def write_landmine(path, feats, labels):
    from scipy.io import savemat
    fc = np.empty((1, len(feats)), dtype=object)
    lc = np.empty((1, len(labels)), dtype=object)
    for k, (f, l) in enumerate(zip(feats, labels)):
        fc[0, k], lc[0, k] = f, l
    savemat(path, {"feature": fc, "label": lc})


def test_landmine(tmp_path):
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(6, 9)), rng.normal(size=(4, 9))]
    write_landmine(tmp_path / "l.mat", feats,
                   [np.array([[0], [1], [0], [0], [0], [1]]), np.array([[0], [0], [1], [0]])])
    meta = import_landmine(tmp_path / "l.mat", tmp_path / "l.h5")
    assert meta.n_tasks == 2 and list(meta.lengths) == [6, 4] and meta.dim == 9
    got = load_tasks(meta, [0, 1])
    np.testing.assert_array_equal(got.y[1], [-1, -1, 1, -1])
    np.testing.assert_array_equal(got.y[0], [-1, 1, -1, -1, -1, 1])
    for k in range(2):
        np.testing.assert_array_equal(got.X[k], feats[k])


def test_landmine_bad_inputs(tmp_path):
    (tmp_path / "x.mat").write_bytes(b"MATLAB 5.0 MAT-file garbage" * 3)
    with pytest.raises(DataError, match="not a readable MATLAB file"):
        import_landmine(tmp_path / "x.mat", tmp_path / "o.h5")
    write_landmine(tmp_path / "m.mat", [np.ones((3, 9))], [np.array([[0], [1]])])
    with pytest.raises(DataError, match="task 0 has features of shape"):
        import_landmine(tmp_path / "m.mat", tmp_path / "o.h5")
    nan = np.ones((3, 9))
    nan[2, 4] = np.nan
    write_landmine(tmp_path / "n.mat", [nan], [np.array([[0], [1], [1]])])
    with pytest.raises(DataError, match="first at row 2"):
        import_landmine(tmp_path / "n.mat", tmp_path / "o.h5")
    write_landmine(tmp_path / "b.mat", [np.ones((3, 9))], [np.array([[0], [1], [2]])])
    with pytest.raises(DataError, match="labels must take two values"):
        import_landmine(tmp_path / "b.mat", tmp_path / "o.h5")
    assert no_output(tmp_path)


# ---------------------------------------------------------------- mnist
def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_idx_and_npz(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 28, 28))
    labels = np.arange(40) % 10
    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte.gz", images)
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels)
    meta = import_mnist(folder, tmp_path / "a.h5")
    assert meta.names == ("0v5", "1v6", "2v7", "3v8", "4v9") and meta.dim == 784
    t = load_tasks(meta, [0])
    assert t.X[0].max() <= 1.0 and list(t.y[0][:2]) == [1, -1]          # 0 is positive, 5 negative
    np.savez(tmp_path / "m.npz", x_train=images.astype(np.uint8), y_train=labels)
    meta2 = import_mnist(tmp_path / "m.npz", tmp_path / "b.h5", dims=16, seed=1)
    assert meta2.dim == 16
    again = import_mnist(tmp_path / "m.npz", tmp_path / "c.h5", dims=16, seed=1)
    np.testing.assert_array_equal(load_tasks(meta2, [2]).X[0], load_tasks(again, [2]).X[0])


def test_mnist_truncated_idx(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte.gz", np.zeros((4, 28, 28)))
    data = gzip.open(folder / "train-images-idx3-ubyte.gz").read()[:500]
    with gzip.open(folder / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(data)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(4))
    with pytest.raises(DataError, match="truncated idx file"):
        import_mnist(folder, tmp_path / "o.h5")
    assert no_output(tmp_path)


# ---------------------------------------------------------------- text
def write_tweeteval(root, tasks):
    for task, splits in tasks.items():
        (root / task).mkdir(parents=True)
        for split, (texts, labels) in splits.items():
            (root / task / f"{split}_text.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
            (root / task / f"{split}_labels.txt").write_text("\n".join(map(str, labels)) + "\n")


def test_tweeteval(tmp_path):
    split = (["I love this", "so bad 😡", "meh"], [1, 0, 0])
    write_tweeteval(tmp_path / "te", {"irony": {"train": split, "val": split, "test": split}})
    meta = import_tweeteval(tmp_path / "te", tmp_path / "t.h5", tasks=("irony",), dims=32)
    assert meta.n_tasks == 1 and list(meta.lengths) == [9] and meta.dim == 32
    np.testing.assert_allclose(np.linalg.norm(load_tasks(meta, [0]).X[0], axis=1), 1.0)


def test_tweeteval_mismatched_lines(tmp_path):
    write_tweeteval(tmp_path / "te", {"hate": {"train": (["a", "b"], [1]), "val": (["a"], [1]),
                                               "test": (["a"], [0])}})
    with pytest.raises(DataError, match="2 lines but .* has 1 labels"):
        import_tweeteval(tmp_path / "te", tmp_path / "t.h5", tasks=("hate",))
    assert no_output(tmp_path)


def test_hashing_is_stable_and_signed():
    a = hash_texts(["the cat sat", "the cat sat", ""], dims=64)
    np.testing.assert_array_equal(a[0], a[1])
    assert (a[0] < 0).any() and (a[0] > 0).any() and not a[2].any()


def test_text_csv_folder_and_task_column(tmp_path):
    folder = tmp_path / "reviews"
    folder.mkdir()
    (folder / "de.csv").write_text("text,label\ngut,positive\nschlecht,negative\nok,neutral\n", encoding="utf-8")
    (folder / "fr.csv").write_text("text,label\nbien,positive\nmal,negative\n", encoding="utf-8")
    meta = import_text_csv(folder, tmp_path / "r.h5", dims=16)
    assert meta.names == ("de", "fr") and list(meta.lengths) == [2, 2]
    got = load_tasks(meta, [0, 1])
    assert [v.tolist() for v in got.y] == [[1, -1], [1, -1]]          # neutral left out
    np.testing.assert_array_equal(got.X[0], hash_texts(["gut", "schlecht"], dims=16))
    (tmp_path / "one.csv").write_text("lang,body,stars\nen,great,good\nen,awful,bad\nes,bueno,good\n")
    meta = import_text_csv(tmp_path / "one.csv", tmp_path / "o.h5", text_col="body", label_col="stars",
                           task_col="lang", mapping="good=1,bad=-1", dims=16)
    assert meta.names == ("en", "es")
    got = load_tasks(meta, [0, 1])
    assert [v.tolist() for v in got.y] == [[1, -1], [1]]
    np.testing.assert_array_equal(got.X[1], hash_texts(["bueno"], dims=16))


def test_text_csv_unmapped_label(tmp_path):
    (tmp_path / "a.csv").write_text("text,label\nx,positive\ny,meh\n")
    with pytest.raises(DataError, match="line 3: label 'meh' is not in the label map"):
        import_text_csv(tmp_path / "a.csv", tmp_path / "o.h5")
    assert no_output(tmp_path)


def test_text_csv_broken_rows_are_named_by_their_lines(tmp_path):
    """A row with too few or too many fields, or a quote left open (which swallows the lines
    after it), is refused with its lines and the header's count, not read as a missing label."""
    cases = {"short": ("text,label\nx,positive\njust text\ny,negative\n", "line 3: 1 fields"),
             "extra": ("text,label\nx,positive,oops\n", "line 2: 3 fields"),
             "comma": ("text,label\ngreat, really,positive\n", "line 2: 3 fields"),
             "quote": ('text,label\nx,positive\n"open quote,negative\ny,positive\nz,negative\n',
                       "lines 3-5: 1 fields, the header has 2; a quote opened there and not closed?")}
    for name, (text, needle) in cases.items():
        (tmp_path / f"{name}.csv").write_text(text)
        with pytest.raises(DataError, match=re.escape(f"{name}.csv: {needle}")):
            import_text_csv(tmp_path / f"{name}.csv", tmp_path / "o.h5")
        assert not (tmp_path / "o.h5").exists()
    # a quoted field that spans lines is one text, blank lines are skipped, and so are empty
    # fields past the header's (a trailing comma)
    (tmp_path / "ok.csv").write_text('text,label\n"two\nlines",positive,\n\nz,negative\n')
    meta = import_text_csv(tmp_path / "ok.csv", tmp_path / "ok.h5", dims=16)
    assert list(meta.lengths) == [2]
    (tmp_path / "empty.csv").write_text("text,label\nx,positive\ny,\n")
    with pytest.raises(DataError, match=r"empty.csv: line 3: the label is empty; give the row a "
                                        r"label, or remove it"):
        import_text_csv(tmp_path / "empty.csv", tmp_path / "o.h5")


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    (tmp_path / "t.csv").write_text("text,label\ngood,positive\nbad,negative\n", encoding="utf-8-sig")
    assert import_text_csv(tmp_path / "t.csv", tmp_path / "t.h5", dims=16).names == ("t",)
    (tmp_path / "n.csv").write_text("task,label,f1\na,1,0.5\na,-1,2\n", encoding="utf-8-sig")
    assert import_csv(tmp_path / "n.csv", tmp_path / "n.h5").names == ("a",)
    (tmp_path / "svm").mkdir()
    (tmp_path / "svm" / "s.txt").write_text("+1 1:0.5\n-1 2:1\n", encoding="utf-8-sig")
    assert list(import_libsvm(tmp_path / "svm", tmp_path / "s.h5").lengths) == [2]


def test_a_libsvm_row_that_names_its_task_twice_is_refused(tmp_path):
    (tmp_path / "q.txt").write_text("+1 qid:a 1:0.5\n-1 qid:a 2:1 qid:b\n")
    with pytest.raises(DataError, match=r"q.txt: line 2: 'qid:' appears twice in the row; name "
                                        r"its task once"):
        import_libsvm(tmp_path / "q.txt", tmp_path / "o.h5", task_field="qid")
    assert no_output(tmp_path)


def test_a_column_named_twice_is_refused(tmp_path):
    (tmp_path / "n.csv").write_text("task,label,f1,label\na,1,0.5,1\na,-1,2,3\n")
    with pytest.raises(DataError, match="n.csv: the header names column.s. label more than once"):
        import_csv(tmp_path / "n.csv", tmp_path / "o.h5")
    (tmp_path / "t.csv").write_text("text,label,text\ngood,positive,x\n")
    with pytest.raises(DataError, match="t.csv: the header names column.s. text more than once"):
        import_text_csv(tmp_path / "t.csv", tmp_path / "o.h5")
    assert no_output(tmp_path)
    # columns read by position (features), or not read at all, may repeat or be unnamed
    (tmp_path / "f.csv").write_text("task,label,f1,f1\na,1,0.5,1\na,-1,2,3\n")
    assert import_csv(tmp_path / "f.csv", tmp_path / "f.h5").dim == 2
    (tmp_path / "e.csv").write_text("text,label,,\ngood,positive,,\nbad,negative,,\n")
    assert list(import_text_csv(tmp_path / "e.csv", tmp_path / "e.h5", dims=16).lengths) == [2]


def test_tasks_of_one_class_and_an_unread_task_column_are_told(tmp_path):
    (tmp_path / "t.csv").write_text("task,text,label\nde,gut,positive\nde,toll,positive\n")
    r = omtl("data", "import", "text-csv", tmp_path / "t.csv", "--dims", "16", "-o", tmp_path / "t.h5")
    assert r.returncode == 0, r.stderr
    assert "t.csv: the column 'task' is not read (each file is one task, named after it); " \
        "--task-col task makes a task of each value" in r.stderr
    assert "1 of 1 task(s) hold one class only (t), so their learners never see the other" in r.stderr
    (tmp_path / "n.csv").write_text("task,label,f1\na,1,0.5\na,-1,2\nb,1,1\n")
    r = omtl("data", "import", "csv", tmp_path / "n.csv", "-o", tmp_path / "n.h5")
    assert r.returncode == 0 and "1 of 2 task(s) hold one class only (b)" in r.stderr
    # a folder of such files: one notice for all; none where 'task' is a column read
    (tmp_path / "f").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "f" / f"{name}.csv").write_text("task,text,label\nx,gut,positive\nx,nein,negative\n")
    r = omtl("data", "import", "text-csv", tmp_path / "f", "--dims", "16", "-o", tmp_path / "f.h5")
    assert r.returncode == 0 and r.stderr.count("'task' is not read") == 1
    assert "3 of 3 files of" in r.stderr
    (tmp_path / "l.csv").write_text("text,task\ngut,positive\nnein,negative\n")
    r = omtl("data", "import", "text-csv", tmp_path / "l.csv", "--label-col", "task", "--dims", "16",
             "-o", tmp_path / "l.h5")
    assert r.returncode == 0 and "not read" not in r.stderr


def _refused(*args, needle: str, inputs=()):
    """``omtl-mpi ARGS`` exits 2 with one line holding ``needle``, no traceback, no output file
    (every -o of the tests below ends in .h5) and each of ``inputs`` byte for byte as before."""
    paths = [p for root in inputs for p in ([root] if root.is_file() else sorted(root.rglob("*")))
             if p.is_file()]
    before = {p: p.read_bytes() for p in paths}
    r = omtl(*args)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert needle in lines[0] and "Traceback" not in r.stderr, r.stderr
    out = Path(args[args.index("-o") + 1])
    assert not out.exists() and not list(out.parent.glob(out.name + ".tmp-*"))
    assert {p: p.read_bytes() for p in paths} == before
    return lines[0]


def test_a_libsvm_index_beyond_a_task_files_columns_names_its_line(tmp_path):
    """An index past 2^31 - 1 (a task file's int32 columns) is refused at its line, where
    10^20 overflowed numpy's int64 as a traceback; more than 4300 digits too (int() refuses
    them as a ValueError)."""
    for name, index in (("big", "100000000000000000000"), ("edge", str(2 ** 31)),
                        ("digits", "9" * 5000), ("padded", "0" * 30 + "100000000000000000000")):
        (tmp_path / f"{name}.txt").write_text(f"1 qid:a 1:0.5\n-1 qid:a {index}:1\n")
        line = _refused("data", "import", "libsvm", tmp_path / f"{name}.txt", "--task-field", "qid",
                        "-o", tmp_path / "o.h5", needle=f"{name}.txt: line 2: feature index ",
                        inputs=[tmp_path / f"{name}.txt"])
        assert "is beyond 2147483647, the most columns a task file holds" in line
    (tmp_path / "svm").mkdir()
    (tmp_path / "svm" / "a.txt").write_text("1 100000000000000000000:1\n")
    _refused("data", "import", "libsvm", tmp_path / "svm", "-o", tmp_path / "o.h5",
             needle="a.txt: line 1: feature index 100000000000000000000 is beyond", inputs=[tmp_path / "svm"])
    # the largest index a task file holds is imported
    (tmp_path / "svm" / "a.txt").write_text(f"1 {2 ** 31 - 1}:1\n-1 1:1\n")
    assert import_libsvm(tmp_path / "svm", tmp_path / "ok.h5").dim == 2 ** 31 - 1


def _folders(tmp_path):
    """A LIBSVM, a Vowpal Wabbit and a text CSV folder of one task each: (kind, folder, the
    extension its task files have, options)."""
    made = []
    for kind, ext, text, options in (
            ("libsvm", ".txt", "1 1:0.5\n-1 2:1\n", []),
            ("vw", ".vw", "1 |w good\n-1 |w bad\n", ["--dims", "16"]),
            ("text-csv", ".csv", "text,label\ngood,positive\nbad,negative\n", ["--dims", "16"])):
        folder = tmp_path / kind
        folder.mkdir()
        (folder / f"de{ext}").write_text(text)
        made.append((kind, folder, ext, options))
    return made


@pytest.mark.parametrize("what", ["fifo", "device", "dangling"])
def test_a_pipe_device_or_dangling_link_in_a_source_folder_is_refused_alike(tmp_path, what):
    """One rule for every folder importer (importers.common.folder_files): a task file that
    is not a regular file is refused, naming it, where LIBSVM and VW folders left a FIFO or a
    link to /dev/zero out unseen (text CSV refused them)."""
    import os
    for kind, folder, ext, options in _folders(tmp_path):
        odd = folder / f"odd{ext}"
        if what == "fifo":
            os.mkfifo(odd)
        else:
            odd.symlink_to("/dev/zero" if what == "device" else tmp_path / "gone")
        needle = "which does not exist" if what == "dangling" else "not a regular file"
        line = _refused("data", "import", kind, folder, *options, "-o", tmp_path / "o.h5",
                        needle=needle, inputs=[folder / f"de{ext}"])
        assert f"odd{ext}" in line, line


def test_what_a_folder_import_leaves_out_is_told(tmp_path):
    """A task file that gives no row (empty, comments or a header only) is no task of the
    output: one notice names it, as one does a subfolder left out; hidden files stay unread."""
    for kind, folder, ext, options in _folders(tmp_path):
        (folder / f"empty{ext}").write_text("")
        if kind == "libsvm":
            (folder / "comments.txt").write_text("# a comment only\n\n")
        if kind == "text-csv":
            (folder / "header.csv").write_text("text,label\n")
        (folder / f".hidden{ext}").write_text("not read")
        (folder / f"old{ext if kind == 'text-csv' else ''}").mkdir()
        r = omtl("data", "import", kind, folder, *options, "-o", tmp_path / f"{kind}.h5")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        said = [line for line in r.stderr.splitlines() if "no data row" in line or "left out" in line]
        empty = {"libsvm": "2 file(s)", "vw": "1 file(s)", "text-csv": "2 file(s)"}[kind]
        assert said[0].startswith("notice: ") and "1 folder(s) inside it left out (old" in said[0], said
        assert said[1] == (f"notice: {folder}: {empty} hold no data row (empty, comments or a "
                           "header only) and are no task: " + {
                               "libsvm": "comments.txt, empty.txt", "vw": "empty.vw",
                               "text-csv": "empty.csv, header.csv"}[kind]), said
        assert info(tmp_path / f"{kind}.h5")["tasks"] == 1
    # a single file holding no row stays an error: there is nothing to import
    _refused("data", "import", "text-csv", tmp_path / "text-csv" / "header.csv", "-o",
             tmp_path / "h.h5", needle="header.csv: no data rows")


def test_options_that_do_nothing_for_a_folder_and_ambiguous_lines_are_refused(tmp_path):
    """--task-field / --task-namespace name each line's task in one file: with a folder, whose
    files are its tasks, they would do nothing (refused, as every option that does nothing); a
    VW line naming two tasks, and a text column that is the label column, are refused too."""
    made = {kind: folder for kind, folder, _, _ in _folders(tmp_path)}
    _refused("data", "import", "libsvm", made["libsvm"], "--task-field", "qid", "-o",
             tmp_path / "o.h5", needle=f"--task-field qid does nothing with a folder: each file of "
                                       f"{made['libsvm']} is one task", inputs=[made["libsvm"]])
    _refused("data", "import", "vw", made["vw"], "--task-namespace", "task", "-o", tmp_path / "o.h5",
             needle="--task-namespace task does nothing with a folder", inputs=[made["vw"]])
    (tmp_path / "two.vw").write_text("1 |task de |w good\n-1 |task de |task en |w bad\n")
    _refused("data", "import", "vw", tmp_path / "two.vw", "--task-namespace", "task", "-o",
             tmp_path / "o.h5", needle="two.vw: line 2: '|task' appears twice in the line; name "
                                       "its task once", inputs=[tmp_path / "two.vw"])
    for options, needle in ((["--text-col", "label", "--label-col", "label"],
                             "--text-col and --label-col both name column 'label'"),
                            (["--text-col", "text", "--task-col", "text"],
                             "--text-col and --task-col both name column 'text'")):
        _refused("data", "import", "text-csv", made["text-csv"], *options, "-o", tmp_path / "o.h5",
                 needle=needle, inputs=[made["text-csv"]])
    with pytest.raises(ConfigError, match="--text-col and --label-col both name column 'label'"):
        import_text_csv(made["text-csv"], tmp_path / "o.h5", text_col="label", label_col="label")
    assert no_output(tmp_path)


# ---------------------------------------------------------------- graphs
def write_tu(root, name, edges, indicator, glabels, nlabels):
    d = root / name
    d.mkdir(parents=True)
    (d / f"{name}_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (d / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (d / f"{name}_graph_labels.txt").write_text("".join(f"{g}\n" for g in glabels))
    (d / f"{name}_node_labels.txt").write_text("".join(f"{g}\n" for g in nlabels))


def triangle_and_path(root, name="TOY"):
    # graph 1: triangle (nodes 1-3), graph 2: path of 3 (nodes 4-6); edges both directions
    edges = [(1, 2), (2, 1), (2, 3), (3, 2), (1, 3), (3, 1), (4, 5), (5, 4), (5, 6), (6, 5)]
    write_tu(root, name, edges, [1, 1, 1, 2, 2, 2], [1, -1], [0, 0, 0, 0, 0, 0])


def test_tudataset_wl_features(tmp_path):
    triangle_and_path(tmp_path)
    meta = import_tudataset(tmp_path, tmp_path / "g.h5", sets=("TOY",), dims=32, iterations=2)
    X = load_tasks(meta, [0]).X[0]
    assert X.shape == (2, 32)
    assert not np.allclose(X[0], X[1])      # WL tells a triangle from a path after one refinement


def test_tudataset_edge_outside_graph(tmp_path):
    write_tu(tmp_path, "BAD", [(1, 2), (2, 9)], [1, 1, 1], [1], [0, 0, 0])
    with pytest.raises(DataError, match="BAD_A.txt: line 2: edge names node 9 but there are 3 nodes"):
        import_tudataset(tmp_path, tmp_path / "g.h5", sets=("BAD",))
    assert no_output(tmp_path)


# ---------------------------------------------------------------- users' own data
def test_csv_and_libsvm(tmp_path):
    (tmp_path / "d.csv").write_text("f1,f2,label,task\n1,2,1,a\n3,4,0,a\n5,6,1,b\n")
    meta = import_csv(tmp_path / "d.csv", tmp_path / "c.h5")
    assert meta.names == ("a", "b") and meta.dim == 2
    got = load_tasks(meta, [0, 1])
    assert [x.tolist() for x in got.X] == [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0]]]
    assert [v.tolist() for v in got.y] == [[1, -1], [1]]
    (tmp_path / "bad.csv").write_text("f1,label,task\n1,x,a\n")
    with pytest.raises(DataError, match="line 2"):
        import_csv(tmp_path / "bad.csv", tmp_path / "x.h5")
    (tmp_path / "s.txt").write_text("+1 qid:a 1:0.5 3:1\n-1 qid:b 2:2\n+1 qid:a 1:1\n")
    meta = import_libsvm(tmp_path / "s.txt", tmp_path / "l.h5", task_field="qid")
    assert meta.names == ("a", "b") and meta.dim == 3 and list(meta.lengths) == [2, 1]
    got = load_tasks(meta, [0, 1])
    assert [x.tolist() for x in got.X] == [[[0.5, 0.0, 1.0], [1.0, 0.0, 0.0]], [[0.0, 2.0, 0.0]]]
    assert [v.tolist() for v in got.y] == [[1, 1], [-1]]
    (tmp_path / "t.txt").write_text("+1 1:0.5 x\n")
    with pytest.raises(DataError, match="t.txt: line 1"):
        import_libsvm(tmp_path / "t.txt", tmp_path / "m.h5", task_field="qid")


def test_cli_import_error_is_one_line(tmp_path):
    (tmp_path / "x.mat").write_bytes(b"nope")
    r = omtl("data", "import", "landmine", tmp_path / "x.mat", "-o", tmp_path / "o.h5")
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    assert not (tmp_path / "o.h5").exists()


# ---------------------------------------------------------------- the real files, where present
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (real data sets)")


@needs_shared
def test_real_landmine(tmp_path):
    facts = info(import_landmine(SHARED / "landmine" / "LandmineData.mat", tmp_path / "l.h5").path)
    assert (facts["tasks"], facts["dims"], facts["total"], facts["max"], facts["min"]) == (29, 9, 14820, 690, 445)
    assert round(facts["positive_ratio"], 2) == 0.06


@needs_shared
def test_real_tweeteval(tmp_path):
    facts = info(import_tweeteval(SHARED / "tweeteval", tmp_path / "t.h5", dims=64).path)
    assert (facts["tasks"], facts["total"]) == (3, 31671)


@needs_shared
def test_real_chem(tmp_path):
    facts = info(import_tudataset(SHARED / "chem" / "tudataset", tmp_path / "c.h5").path)
    assert (facts["tasks"], facts["dims"], facts["total"]) == (6, 64, 7514)


@needs_shared
def test_real_mnist(tmp_path):
    facts = info(import_mnist(SHARED / "mnist" / "mnist_restored.npz", tmp_path / "m.h5", dims=32).path)
    assert (facts["tasks"], facts["dims"], facts["total"]) == (5, 32, 60000)
    assert round(facts["positive_ratio"], 2) == 0.51


# --------------------- random bytes and records (hypothesis): refused in one line, no file left
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


# ------------------- the importers' refusals and labels (--label-map), through the command line
@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
@pytest.mark.parametrize("name, fifo", [("text-csv-folder", "fr.csv"), ("tweeteval", "irony/val_labels.txt"),
                                        ("tudataset", "TOY/TOY_graph_labels.txt"),
                                        ("libsvm-folder", "c.txt")])
def test_a_fifo_inside_a_source_folder_never_blocks(tmp_path, capsys, name, fifo):
    table = sources(tmp_path / "src")
    args, _ = table[name]
    path = args[1] / fifo
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    code, _, err = cli(capsys, "data", "import", *args, "-o", tmp_path / "o.h5")
    # refused naming the pipe, LIBSVM's folder of task files too (it was left out unseen)
    assert code == 2 and "not a regular file" in err and fifo.split("/")[-1] in err, err
    assert "Traceback" not in err and not (tmp_path / "o.h5").exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_import_bad_numbers(tmp_path, capsys):
    table = sources(tmp_path / "src")
    out = tmp_path / "o.h5"
    src = {k: v[0][1] for k, v in table.items()}
    for args, needle in (
            (["mnist", src["mnist-npz"], "--dims", "0"], "--dims must be >= 1, got 0"),
            (["mnist", src["mnist-npz"], "--seed", "-1"], "--seed must be between 0 and"),
            (["tudataset", src["tudataset"], "--sets", "TOY", "--dims", "0"], "--dims must be >= 1, got 0"),
            (["tudataset", src["tudataset"], "--sets", "TOY", "--iterations", "-1"],
             "--iterations must be between 0 and 50, got -1"),
            (["tudataset", src["tudataset"], "--sets", "TOY", "--iterations", "100000"],
             "--iterations must be between 0 and 50"),
            (["tudataset", src["tudataset"], "--sets", ","], "--sets: name at least one"),
            (["tweeteval", src["tweeteval"], "--dims", "-5"], "--dims must be >= 1, got -5"),
            (["tweeteval", src["tweeteval"], "--tasks", "irony,irony"], "--tasks names irony twice"),
            (["text-csv", src["text-csv-folder"], "--dims", "0"], "--dims must be >= 1, got 0")):
        refused(capsys, "data", "import", *args, "-o", out, needle=needle)
    for args, needle in ((["mnist", "--dims", "0"], "--dims must be >= 1"),
                         (["tudataset", "--iterations", "-2"], "--iterations must be between 0 and 50")):
        refused(capsys, "data", "fetch", *args, "--dest", tmp_path / "d", needle=needle)
    assert not out.exists() and not (tmp_path / "d").exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_libsvm_labels_that_differ_between_tasks_need_a_map(tmp_path, capsys):
    (tmp_path / "svm").mkdir()
    (tmp_path / "svm" / "a.txt").write_text("1 1:1\n2 2:1\n")
    (tmp_path / "svm" / "b.txt").write_text("2 1:1\n3 2:1\n")
    with pytest.raises(DataError) as exc:
        import_libsvm(tmp_path / "svm", tmp_path / "o.h5")
    assert str(exc.value).endswith(
        "svm: labels must take two values, found 3: 1, 2, 3 (their label sets differ: task a: 1, 2; "
        "task b: 2, 3); only -1/+1 and 0/1 are imported without a mapping: say which label is +1 (and "
        "which to drop) with --label-map, e.g. --label-map \"1=-1,2=drop,3=+1\"")
    code, _, err = cli(capsys, "data", "import", "libsvm", tmp_path / "svm", "-o", tmp_path / "o.h5",
                       "--label-map", "1=-1,2=+1,3=drop")
    assert code == 0, err
    assert "notice: " in err and "1 row(s) dropped" in err
    got = load_tasks(taskfile.read_meta(tmp_path / "o.h5"), [0, 1])
    assert [y.tolist() for y in got.y] == [[-1, 1], [1]]


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_two_other_labels_are_refused_without_a_map(tmp_path):
    (tmp_path / "s.txt").write_text("1 qid:a 1:1\n2 qid:a 2:1\n")
    with pytest.raises(DataError, match=r'labels 1, 2 found; .* e\.g\. --label-map "1=-1,2=\+1"'):
        import_libsvm(tmp_path / "s.txt", tmp_path / "o.h5", task_field="qid")
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_zero_one_labels_are_read_with_a_notice(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("f1,label,task\n1,1,a\n2,0,a\n3,-1,b\n4,1,b\n")
    meta = import_csv(tmp_path / "x.csv", tmp_path / "o.h5")
    assert [y.tolist() for y in load_tasks(meta, [0, 1]).y] == [[1, -1], [-1, 1]]
    assert "notice: " in capsys.readouterr().err
    (tmp_path / "y.csv").write_text("f1,label,task\n1,1,a\n2,0,a\n3,-1,a\n")
    with pytest.raises(DataError, match="labels must take two values, found 3: -1, 0, 1"):
        import_csv(tmp_path / "y.csv", tmp_path / "p.h5")


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_csv_label_map_with_names_and_errors_at_the_source_line(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("f1,f2,label,task\n1,2,spam,a\n3,4,ham,a\n5,6,Spam,b\n7,8,eggs,b\n")
    refused(capsys, "data", "import", "csv", tmp_path / "x.csv", "-o", tmp_path / "o.h5",
            needle="x.csv: line 2: label 'spam' is not a number; labels must be -1/+1 or 0/1")
    refused(capsys, "data", "import", "csv", tmp_path / "x.csv", "-o", tmp_path / "o.h5",
            "--label-map", "spam=+1,ham=-1", needle="x.csv: line 5: label 'eggs' is not in the label map")
    refused(capsys, "data", "import", "csv", tmp_path / "x.csv", "-o", tmp_path / "o.h5",
            "--label-map", "spam", needle="--label-map entry 'spam' must look like")
    refused(capsys, "data", "import", "csv", tmp_path / "x.csv", "-o", tmp_path / "o.h5",
            "--label-map", "spam=2", needle="--label-map spam=2: the value must be +1, -1 or drop")
    meta = import_csv(tmp_path / "x.csv", tmp_path / "o.h5", label_map="spam=+1,ham=-1,eggs=drop")
    assert [y.tolist() for y in load_tasks(meta, [0, 1]).y] == [[1, -1], [1]]
    assert "1 row(s) dropped" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("f1,f2,f3,label,task\n1,2,3,1,a\n1,2,abc,1,a\n")
    refused(capsys, "data", "import", "csv", tmp_path / "bad.csv", "-o", tmp_path / "o2.h5",
            needle="bad.csv: line 3: 'abc' is not a number in column f3")
    (tmp_path / "nan.csv").write_text("f1,label,task\n1,1,a\nnan,1,a\n")
    refused(capsys, "data", "import", "csv", tmp_path / "nan.csv", "-o", tmp_path / "o2.h5",
            needle="nan.csv: line 3: 'nan' in column f1 is not a finite number")
    assert not (tmp_path / "o2.h5").exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_other_importers_take_the_same_label_map(tmp_path, capsys):
    root = tmp_path / "src"
    sources(root)
    (root / "tu" / "TOY" / "TOY_graph_labels.txt").write_text("1\n2\n")
    refused(capsys, "data", "import", "tudataset", root / "tu", "--sets", "TOY", "-o", tmp_path / "o.h5",
            needle='labels 1, 2 found; only -1/+1 and 0/1')
    code, _, err = cli(capsys, "data", "import", "tudataset", root / "tu", "--sets", "TOY",
                       "-o", tmp_path / "o.h5", "--label-map", "1=-1,2=+1")
    assert code == 0, err
    assert load_tasks(taskfile.read_meta(tmp_path / "o.h5"), [0]).y[0].tolist() == [-1, 1]
    np.savez(root / "d.npz", X_0=np.ones((2, 3)), y_0=np.array([1, -1]),
             X_1=np.ones((2, 4)), y_1=np.array([1, -1]))
    refused(capsys, "data", "import", "npz", root / "d.npz", "-o", tmp_path / "d.h5",
            needle="d.npz: task 'task0' has 3 features but task 'task1' has 4")
    np.savez(root / "q.npz", X_0=np.ones((2, 3)), y_0=np.array([3, 7]))
    refused(capsys, "data", "import", "npz", root / "q.npz", "-o", tmp_path / "q.h5",
            needle="q.npz: labels 3, 7 found")
    code, _, err = cli(capsys, "data", "import", "npz", root / "q.npz", "-o", tmp_path / "q.h5",
                       "--label-map", "3=+1,7=-1")
    assert code == 0, err


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_text_csv_numeric_zero_one_labels_need_no_map(tmp_path):
    from omtl_mpi.data import import_text_csv
    (tmp_path / "a.csv").write_text("text,label\ngood,1\nbad,0\n")
    meta = import_text_csv(tmp_path / "a.csv", tmp_path / "o.h5", dims=8)
    assert load_tasks(meta, [0]).y[0].tolist() == [1, -1]


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_label_map_parsing():
    from omtl_mpi.data.importers.common import parse_label_map
    assert parse_label_map("1=-1, 2=+1 ,3=drop") == {1.0: -1, 2.0: 1, 3.0: None}
    assert parse_label_map("Positive=1,neutral=drop") == {"positive": 1, "neutral": None}
    assert parse_label_map(None) is None and parse_label_map("") is None
    with pytest.raises(ConfigError, match="two different values"):
        parse_label_map("1=+1,1.0=-1")


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_csv_without_a_feature_column_is_refused(tmp_path, capsys):
    (tmp_path / "nf.csv").write_text("label,task\n1,a\n0,a\n")
    refused(capsys, "data", "import", "csv", tmp_path / "nf.csv", "-o", tmp_path / "o.h5",
            needle="nf.csv: no feature column: its only columns are the label (label) and the task (task)")
    refused(capsys, "data", "import", "csv", tmp_path / "nf.csv", "-o", tmp_path / "o.h5",
            "--label-col", "task", needle="--label-col and --task-col both name column 'task'")
    assert not (tmp_path / "o.h5").exists()
