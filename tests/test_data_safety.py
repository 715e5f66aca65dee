"""The data commands never destroy an input, refuse bad values and runaways in one line, and say
what they decide about labels (for `omtl-mpi data ...`)."""
import os

import numpy as np
import pytest

from omtl_mpi.data import import_csv, import_libsvm, load_tasks
from omtl_mpi.data import footprint, taskfile
from omtl_mpi.errors import ConfigError, DataError, UserError
from test_importers import triangle_and_path, write_idx, write_landmine, write_tweeteval

GIB = 2 ** 30


def cli(capsys, *args):
    """(exit code, stdout, stderr) of ``omtl-mpi ARGS`` run in this process."""
    from omtl_mpi.cli import main
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *args, needle=""):
    """The command exits 2 with exactly one ``error:`` line containing ``needle``, no traceback."""
    code, _, err = cli(capsys, *args)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and needle in lines[0], err
    return lines[0]


@pytest.fixture(autouse=True)
def eight_gib(monkeypatch):
    """Every machine looks like one with 8 GiB free, so the runaway checks are deterministic."""
    monkeypatch.setattr(footprint, "available_memory", lambda: 8 * GIB)


# ------------------------------------------------------------------ a small source of each kind
def sources(root):
    """{name: (import arguments before -o, the file an -o must not replace)} for every importer."""
    root.mkdir(exist_ok=True)
    (root / "x.csv").write_text("f1,f2,label,task\n1,2,1,a\n3,4,0,a\n5,6,1,b\n")
    (root / "s.txt").write_text("+1 qid:a 1:0.5 3:1\n-1 qid:b 2:2\n+1 qid:a 1:1\n-1 qid:b 1:1\n")
    svm = root / "svm"
    svm.mkdir()
    (svm / "a.txt").write_text("1 1:0.5\n-1 2:1\n")
    (svm / "b.txt").write_text("-1 1:1\n1 2:2\n")
    (root / "t.csv").write_text("text,label,task\ngood,positive,en\nbad,negative,en\n")
    tc = root / "tc"
    tc.mkdir()
    (tc / "en.csv").write_text("text,label\ngood,positive\nbad,negative\n")
    split = (["I love this", "so bad", "meh"], [1, 0, 0])
    write_tweeteval(root / "te", {"irony": {"train": split, "val": split, "test": split}})
    triangle_and_path(root / "tu")
    write_landmine(root / "l.mat", [np.ones((3, 9)), np.zeros((2, 9))],
                   [np.array([[0], [1], [1]]), np.array([[1], [0]])])
    images, labels = np.arange(20 * 28 * 28).reshape(20, 28, 28) % 256, np.arange(20) % 10
    np.savez(root / "m.npz", x_train=images.astype(np.uint8), y_train=labels)
    idx = root / "idx"
    idx.mkdir()
    write_idx(idx / "train-images-idx3-ubyte.gz", images)
    write_idx(idx / "train-labels-idx1-ubyte.gz", labels)
    np.savez(root / "p.npz", xs=np.ones((2, 3, 4)), ys=np.array([[1, -1, 1], [-1, 1, 1]]))
    (root / "v.vw").write_text("1 |task a |w good\n-1 |task b |w bad\n")
    vw = root / "vw"
    vw.mkdir()
    (vw / "a.vw").write_text("1 |w good\n-1 |w bad\n")
    return {
        "vw-file": (["vw", root / "v.vw", "--task-namespace", "task", "--dims", "8"], root / "v.vw"),
        "vw-folder": (["vw", vw, "--dims", "8"], vw / "a.vw"),
        "csv": (["csv", root / "x.csv"], root / "x.csv"),
        "libsvm-file": (["libsvm", root / "s.txt", "--task-field", "qid"], root / "s.txt"),
        "libsvm-folder": (["libsvm", svm], svm / "a.txt"),
        "text-csv-file": (["text-csv", root / "t.csv", "--task-col", "task", "--dims", "8"],
                          root / "t.csv"),
        "text-csv-folder": (["text-csv", tc, "--dims", "8"], tc / "en.csv"),
        "tweeteval": (["tweeteval", root / "te", "--tasks", "irony", "--dims", "8"],
                      root / "te" / "irony" / "train_text.txt"),
        "tudataset": (["tudataset", root / "tu", "--sets", "TOY", "--dims", "8"],
                      root / "tu" / "TOY" / "TOY_A.txt"),
        "landmine": (["landmine", root / "l.mat"], root / "l.mat"),
        "mnist-npz": (["mnist", root / "m.npz", "--dims", "8"], root / "m.npz"),
        "mnist-folder": (["mnist", idx], idx / "train-labels-idx1-ubyte.gz"),
        "npz": (["npz", root / "p.npz"], root / "p.npz"),
    }


def snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


# ------------------------------------------------------------------ 1. inputs are sacred
def test_every_import_refuses_an_output_that_is_its_source(tmp_path, capsys):
    table = sources(tmp_path / "src")
    before = snapshot(tmp_path / "src")
    for name, (args, target) in table.items():
        link, hard = tmp_path / f"{name}.link", tmp_path / f"{name}.hard"
        link.symlink_to(target)
        os.link(target, hard)
        for out in (target, link, hard):
            line = refused(capsys, "data", "import", *args, "-o", out, needle="would destroy it")
            assert f"-o {out}" in line, (name, line)
        if target.parent != tmp_path / "src":            # a folder source: the folder itself too
            refused(capsys, "data", "import", *args, "-o", args[1], needle="is a directory")
    assert snapshot(tmp_path / "src") == before
    assert not [p for p in (tmp_path / "src").rglob("*") if ".tmp-" in p.name]


def test_a_new_output_inside_a_folder_whose_every_file_is_read_is_refused(tmp_path, capsys):
    """The next import of a LIBSVM or text CSV folder would read it as one of its tasks."""
    table = sources(tmp_path / "src")
    for name in ("libsvm-folder", "text-csv-folder", "vw-folder"):
        args, _ = table[name]
        out = args[1] / "new.h5"
        refused(capsys, "data", "import", *args, "-o", out, needle="whose every file is read as a task")
        assert not out.exists()


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


def test_fetch_again_writes_its_default_output_again(tmp_path, capsys):
    """A second 'data fetch NAME --dest DIR' replaces DIR/NAME.h5, an output, as the first wrote it."""
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "landmine.h5").write_bytes(b"an earlier import")
    code, _, err = cli(capsys, "data", "fetch", "landmine", "--dest", dest, "--mirror",
                       f"file://{tmp_path / 'no-mirror'}")
    assert code == 1 and "would destroy it" not in err and "no such file" in err, err


def test_every_import_source_is_valid(tmp_path, capsys):
    """The sources above import with a fresh -o (so the refusals are about -o alone)."""
    for name, (args, _) in sources(tmp_path / "src").items():
        code, out, err = cli(capsys, "data", "import", *args, "-o", tmp_path / f"{name}.h5")
        assert code == 0 and out.startswith("wrote "), (name, err)


def test_fetch_refuses_an_output_that_is_a_data_set_file(tmp_path, capsys):
    dest = tmp_path / "d"
    (dest / "landmine").mkdir(parents=True)
    mat = dest / "landmine" / "LandmineData.mat"
    mat.write_bytes(b"not yet verified")
    (tmp_path / "link.mat").symlink_to(mat)
    os.link(mat, tmp_path / "hard.mat")
    mirror = f"file://{tmp_path / 'no-mirror'}"
    for out in (mat, tmp_path / "link.mat", tmp_path / "hard.mat"):
        refused(capsys, "data", "fetch", "landmine", "--dest", dest, "--mirror", mirror,
                "-o", out, needle="would destroy it")
    refused(capsys, "data", "fetch", "landmine", "--dest", dest, "--mirror", mirror, "-o", dest,
            needle="is a directory")
    # a file it would download, not there yet, is refused too
    refused(capsys, "data", "fetch", "tudataset", "--sets", "MUTAG", "--dest", dest, "--mirror", mirror,
            "-o", dest / "chem" / "tudataset" / "MUTAG" / "MUTAG_A.txt", needle="would destroy it")
    assert mat.read_bytes() == b"not yet verified"


# ------------------------------------------------------------------ 2. missing or unwritable folders
def test_outputs_in_a_missing_folder_or_that_are_folders(tmp_path, capsys):
    table = sources(tmp_path / "src")
    (tmp_path / "isdir").mkdir()
    commands = [["data", "synth", "--tasks", "2", "--samples", "5"]]
    commands += [["data", "import", *args] for args, _ in table.values()]
    commands += [["data", "fetch", "landmine", "--dest", tmp_path / "d", "--mirror", f"file://{tmp_path}/none"]]
    for command in commands:
        refused(capsys, *command, "-o", tmp_path / "missing" / "o.h5", needle="does not exist; create it first")
        line = refused(capsys, *command, "-o", tmp_path / "isdir")
        assert "directory" in line or "is a folder" in line, line
    assert not (tmp_path / "missing").exists() and not (tmp_path / "d").exists()


def test_read_only_folder_is_refused(tmp_path, monkeypatch):
    """As root chmod cannot stop a write, so the permission check itself is exercised."""
    real_access = os.access
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access",
                        lambda p, mode: False if os.fspath(p) == str(ro) else real_access(p, mode))
    (tmp_path / "x.csv").write_text("f1,label,task\n1,1,a\n")
    with pytest.raises(UserError, match="is not writable; choose another -o"):
        import_csv(tmp_path / "x.csv", ro / "o.h5")


# ------------------------------------------------------------------ 3. numeric options
@pytest.mark.parametrize("args, needle", [
    (["--seed", "-1"], "--seed must be between 0 and"),
    (["--seed", str(2 ** 70)], "--seed must be between 0 and"),
    (["--tasks", "0"], "--tasks must be >= 1, got 0"),
    (["--tasks", "-3"], "--tasks must be >= 1, got -3"),
    (["--samples", "0"], "--samples must be >= 1, got 0"),
    (["--family", "clustered", "--dims", "0"], "--dims must be >= 1, got 0"),
    (["--family", "clustered", "--clusters", "0"], "--clusters must be >= 2, got 0"),
    (["--family", "unrelated", "--spread", "nan"], "--spread must be a finite number"),
])
def test_synth_bad_numbers(tmp_path, capsys, args, needle):
    refused(capsys, "data", "synth", *args, "-o", tmp_path / "s.h5", needle=needle)
    assert not (tmp_path / "s.h5").exists()


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


# ------------------------------------------------------------------ 4. runaways
def test_runaways_are_refused_before_allocating(tmp_path, capsys):
    table = sources(tmp_path / "src")
    src = {k: v[0][1] for k, v in table.items()}
    for command, needle in (
            # generated and written a block of tasks at a time: one task of 10^8 instances
            (["synth", "--tasks", "100000", "--samples", "100000000"],
             "100000 tasks x 100000000 samples x 9 features would need 35.8 GiB of memory, but only "
             "8.0 GiB are available: lower --tasks or --samples"),
            (["synth", "--family", "identical", "--dims", "1000000000"],
             "lower --tasks or --samples or --dims"),
            (["import", "tudataset", src["tudataset"], "--sets", "TOY", "--dims", "1000000000000"],
             "2 graphs x 1000000000000 features would need"),
            (["import", "mnist", src["mnist-npz"], "--dims", "1000000000000"], "lower --dims")):
        line = refused(capsys, "data", *command, "-o", tmp_path / "o.h5", needle=needle)
        assert "GiB" in line and "available" in line
    # hashed text and LIBSVM rows are held sparse: what bounds them is a task file's columns
    for command in (["text-csv", src["text-csv-folder"]], ["tweeteval", src["tweeteval"], "--tasks", "irony"]):
        refused(capsys, "data", "import", *command, "--dims", "1000000000000", "-o", tmp_path / "o.h5",
                needle="--dims must be at most 2147483647 (the columns a task file holds)")
    (tmp_path / "svm").mkdir()
    (tmp_path / "svm" / "a.txt").write_text("1 1:1\n-1 4000000000:1\n")
    refused(capsys, "data", "import", "libsvm", tmp_path / "svm", "-o", tmp_path / "o.h5",
            needle="feature index 4000000000 is beyond 2147483647")
    assert not (tmp_path / "o.h5").exists()


def test_synth_larger_than_the_free_disk_is_refused_before_writing(tmp_path, capsys, monkeypatch):
    from omtl_mpi.data.importers import common
    monkeypatch.setattr(common, "available_disk", lambda path: 2 ** 30)
    refused(capsys, "data", "synth", "--tasks", "100000", "--samples", "2000", "-o", tmp_path / "o.h5",
            needle="100000 tasks x 2000 samples x 9 features would take 13.6 GiB on disk, but only "
                   f"1.0 GiB are free for {tmp_path / 'o.h5'}: lower --tasks or --samples, or write elsewhere")
    refused(capsys, "data", "synth", "--family", "personal", "--tasks", "1000000", "-o", tmp_path / "o.h5",
            needle="1000000 tasks x 32")
    assert not (tmp_path / "o.h5").exists()


def test_npz_too_large_is_refused_from_its_header(tmp_path, monkeypatch, capsys):
    np.savez_compressed(tmp_path / "big.npz", xs=np.zeros((2, 1000, 100)), ys=np.ones((2, 1000)))
    monkeypatch.setattr(footprint, "available_memory", lambda: 10 ** 6)
    refused(capsys, "data", "import", "npz", tmp_path / "big.npz", "-o", tmp_path / "o.h5",
            needle="big.npz: its arrays would need")


# ------------------------------------------------------------------ 5. labels: the rule, and --label-map
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


def test_two_other_labels_are_refused_without_a_map(tmp_path):
    (tmp_path / "s.txt").write_text("1 qid:a 1:1\n2 qid:a 2:1\n")
    with pytest.raises(DataError, match=r'labels 1, 2 found; .* e\.g\. --label-map "1=-1,2=\+1"'):
        import_libsvm(tmp_path / "s.txt", tmp_path / "o.h5", task_field="qid")
    assert not (tmp_path / "o.h5").exists()


def test_zero_one_labels_are_read_with_a_notice(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("f1,label,task\n1,1,a\n2,0,a\n3,-1,b\n4,1,b\n")
    meta = import_csv(tmp_path / "x.csv", tmp_path / "o.h5")
    assert [y.tolist() for y in load_tasks(meta, [0, 1]).y] == [[1, -1], [-1, 1]]
    assert "notice: " in capsys.readouterr().err
    (tmp_path / "y.csv").write_text("f1,label,task\n1,1,a\n2,0,a\n3,-1,a\n")
    with pytest.raises(DataError, match="labels must take two values, found 3: -1, 0, 1"):
        import_csv(tmp_path / "y.csv", tmp_path / "p.h5")


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


def test_text_csv_numeric_zero_one_labels_need_no_map(tmp_path):
    from omtl_mpi.data import import_text_csv
    (tmp_path / "a.csv").write_text("text,label\ngood,1\nbad,0\n")
    meta = import_text_csv(tmp_path / "a.csv", tmp_path / "o.h5", dims=8)
    assert load_tasks(meta, [0]).y[0].tolist() == [1, -1]


def test_label_map_parsing():
    from omtl_mpi.data.importers.common import parse_label_map
    assert parse_label_map("1=-1, 2=+1 ,3=drop") == {1.0: -1, 2.0: 1, 3.0: None}
    assert parse_label_map("Positive=1,neutral=drop") == {"positive": 1, "neutral": None}
    assert parse_label_map(None) is None and parse_label_map("") is None
    with pytest.raises(ConfigError, match="two different values"):
        parse_label_map("1=+1,1.0=-1")


# ------------------------------------------------------------------ 6. a CSV with no feature column
def test_csv_without_a_feature_column_is_refused(tmp_path, capsys):
    (tmp_path / "nf.csv").write_text("label,task\n1,a\n0,a\n")
    refused(capsys, "data", "import", "csv", tmp_path / "nf.csv", "-o", tmp_path / "o.h5",
            needle="nf.csv: no feature column: its only columns are the label (label) and the task (task)")
    refused(capsys, "data", "import", "csv", tmp_path / "nf.csv", "-o", tmp_path / "o.h5",
            "--label-col", "task", needle="--label-col and --task-col both name column 'task'")
    assert not (tmp_path / "o.h5").exists()
