"""Outputs are regular files or absent (docs/RELIABILITY.md, "The promise"): every writer refuses,
before any work and in one line, an output where a device, a FIFO, a socket or a folder is (or a
link to one), and the node is left as it was; a path that is no file name (None, a number, a
NUL character) is one line too, and a path holding control characters is shown escaped on its
one line.

No output replaces an input either: every command (run, its checkpoints, resume, every import,
data fetch, topo show --png, sweep, report) refuses an output that is one of its inputs (the same
path, a symbolic or a hard link to it), one in a missing or read-only folder, and a folder given
as a file, leaving the input as it was.

Each command-line case runs ``omtl_mpi.cli.main`` in a forked child (conftest's ``forked``) or
in this process (conftest's ``cli``): milliseconds a case, and no MPI job is started, since
every case is refused first.
"""
import os
import shutil
import socket
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import omtl_mpi
from omtl_mpi.atomic import atomic_path, replace
from omtl_mpi.data import generate
from omtl_mpi.errors import UserError, printable
from omtl_mpi.paths import output_file
from omtl_mpi.data import import_csv
from conftest import CASES, allowed, cli, digest, digests, forked, omtl_forked as omtl, one_line_error, refused, sources

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="device nodes need root (mknod)")

SMALL = ("--synth-tasks", "3", "--synth-samples", "60")


@pytest.fixture
def data(tasks_3x60):
    return tasks_3x60


# ------------------------------------------------------------------ the nodes an output may meet
def _device(path):
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))     # a copy of /dev/null's node


def _socket(path):
    # an AF_UNIX name is limited to about 108 bytes: bound by its name inside its folder
    here = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.basename(path))
        s.close()                       # the node stays
    finally:
        os.chdir(here)


def _link_to_device(path):
    target = f"{path}.node"
    _device(target)
    os.symlink(os.path.basename(target), path)


def _link_to_fifo(path):
    target = f"{path}.node"
    os.mkfifo(target)
    os.symlink(os.path.basename(target), path)


NODES = {
    "device": (_device, stat.S_ISCHR),
    "fifo": (os.mkfifo, stat.S_ISFIFO),
    "socket": (_socket, stat.S_ISSOCK),
    "folder": (os.mkdir, stat.S_ISDIR),
    "link-to-device": (_link_to_device, stat.S_ISCHR),
    "link-to-fifo": (_link_to_fifo, stat.S_ISFIFO),
}
KINDS = [pytest.param(k, marks=ROOT_ONLY) if "device" in k else k for k in NODES]


def make_node(kind: str, path) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    NODES[kind][0](str(path))


def assert_unchanged(kind: str, path) -> None:
    """The node is still there, of its kind (a link still a link, to the same kind)."""
    path = str(path)
    assert os.path.lexists(path), f"{path} is gone"
    assert os.path.islink(path) == kind.startswith("link"), path
    assert NODES[kind][1](os.stat(path).st_mode), f"{path} is now {stat.filemode(os.stat(path).st_mode)}"


def temporary_files(root) -> list:
    return sorted(str(p) for p in root.rglob("*") if ".tmp" in p.name)


def refused_in_one_line(code, stderr, args) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, f"omtl-mpi {' '.join(map(str, args))}: exit {code}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


# ------------------------------------------------------------------ every writer of the command line
@pytest.fixture(scope="module")
def corpus(files):
    """The hostile corpus's task file, sweep file and finished sweep, every importer's source,
    the sweep's run and a file that ``data fetch landmine`` downloads."""
    from omtl_mpi.data.fetch import select_files
    from omtl_mpi.sweep import load_plan
    (_, fetched), *_ = select_files("landmine")
    return {**files, "run": load_plan(str(files["sweep"])).runs[0].id,
            "imports": sources(files["root"] / "src"), "landmine": fetched[0]["path"]}


def _writers(c):
    """name -> (where the output is, relative to the case's folder; the command line, given
    the case's folder)."""
    data = c["data"]
    table = {
        "run --out": ("o.h5", lambda d: ["run", "--data", data, "--out", d / "o.h5"]),
        "run --np 2 --out": ("o.h5", lambda d: ["run", "--np", "2", "--data", data, "--out", d / "o.h5"]),
        "run --checkpoint": ("c.h5", lambda d: ["run", "--data", data, "--out", d / "r.h5",
                                                "--checkpoint-every", "10", "--checkpoint", d / "c.h5"]),
        "run --np 2 --checkpoint": ("c.h5", lambda d: ["run", "--np", "2", "--data", data, "--out",
                                                       d / "r.h5", "--checkpoint-every", "10",
                                                       "--checkpoint", d / "c.h5"]),
        # the checkpoint next to --out that --checkpoint-every implies
        "run NAME.ckpt.h5": ("r.ckpt.h5", lambda d: ["run", "--data", data, "--out", d / "r.h5",
                                                     "--checkpoint-every", "10"]),
        "data synth -o": ("s.h5", lambda d: ["data", "synth", "-o", d / "s.h5", "--tasks", "2",
                                             "--samples", "20"]),
        "topo show --png": ("g.png", lambda d: ["topo", "show", "ring", "--nodes", "4", "--png", d / "g.png"]),
        "data fetch -o": ("f.h5", lambda d: ["data", "fetch", "landmine", "--dest", d / "dest", "-o", d / "f.h5"]),
        # a downloaded file's place under --dest: refused before the network is asked
        "data fetch --dest": (os.path.join("dest", *c["landmine"].split("/")),
                              lambda d: ["data", "fetch", "landmine", "--dest", d / "dest", "--no-import"]),
        "sweep log": (os.path.join("sw", "logs", c["run"] + ".log"),
                      lambda d: ["sweep", c["sweep"], "--out", d / "sw"]),
        "sweep results": (os.path.join("sw", "runs", c["run"] + ".h5"),
                          lambda d: ["sweep", c["sweep"], "--out", d / "sw"]),
        "sweep checkpoint": (os.path.join("sw", "runs", c["run"] + ".ckpt.h5"),
                             lambda d: ["sweep", c["sweep"], "--out", d / "sw", "--checkpoint-every", "10"]),
        "report": (os.path.join("rep", "table2.md"), lambda d: ["report", c["sweep_out"], "-o", d / "rep"]),
        "report figure": (os.path.join("rep", "figure1.png"),
                          lambda d: ["report", c["sweep_out"], "-o", d / "rep"]),
    }
    for name, (args, _) in c["imports"].items():
        table[f"data import {name} -o"] = ("i.h5", lambda d, args=args: ["data", "import", *args, "-o", d / "i.h5"])
    return table


WRITERS = ["run --out", "run --np 2 --out", "run --checkpoint", "run --np 2 --checkpoint",
           "run NAME.ckpt.h5", "data synth -o", "topo show --png", "data fetch -o", "data fetch --dest",
           "sweep log", "sweep results", "sweep checkpoint", "report", "report figure",
           *(f"data import {name} -o" for name in ("vw-file", "vw-folder", "csv", "libsvm-file",
                                                    "libsvm-folder", "text-csv-file", "text-csv-folder",
                                                    "tweeteval", "tudataset", "landmine", "mnist-npz",
                                                    "mnist-folder", "npz"))]


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", WRITERS)
def test_no_writer_replaces_what_is_not_a_regular_file(corpus, tmp_path, writer, kind):
    where, command = _writers(corpus)[writer]
    target = tmp_path / where
    make_node(kind, target)
    args = command(tmp_path)
    code, _, err = forked(*args)
    line = refused_in_one_line(code, err, args)
    # a folder given where a file is wanted may be click's own refusal ("is a directory")
    assert any(w in line for w in (("folder", "directory") if kind == "folder" else ("not a regular file",))), line
    assert_unchanged(kind, target)
    assert temporary_files(tmp_path) == []
    assert temporary_files(corpus["root"]) == []


def test_the_refusal_names_the_option_and_what_is_there(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UserError) as err:
        output_file(tmp_path / "pipe", "--out")
    assert str(err.value) == (f"--out {tmp_path / 'pipe'}: is a FIFO (named pipe), not a regular "
                              "file, and writing there would replace it; give the name of a file on disk")
    os.symlink("pipe", tmp_path / "link")
    with pytest.raises(UserError, match=r"a link to .*pipe, which is a FIFO"):
        output_file(tmp_path / "link", "--out")
    # a dangling link is no node: the file written replaces the link, as for any other name
    os.symlink("nowhere", tmp_path / "dangling")
    assert output_file(tmp_path / "dangling", "--out") == str(tmp_path / "dangling")


# ------------------------------------------------------------------ the Python API's writers
def _api_writers():
    names, X, y = generate(tasks=2, samples=30, seed=0)
    learner = omtl_mpi.learner("pa", n_tasks=2, n_features=9)
    result = omtl_mpi.run_streams(X, y, algo="pa", seed=0)
    return {
        "Learner.save": lambda path: learner.save(path),
        "Result.save": lambda path: result.save(path),
        "run_streams(out=)": lambda path: omtl_mpi.run_streams(X, y, algo="pa", seed=0, out=path),
    }


@pytest.fixture(scope="module")
def api_writers():
    return _api_writers()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", ["Learner.save", "Result.save", "run_streams(out=)"])
def test_no_api_writer_replaces_what_is_not_a_regular_file(api_writers, tmp_path, writer, kind):
    target = tmp_path / "out.h5"
    make_node(kind, target)
    for path in (target, str(target)):                       # a Path and a str
        with pytest.raises(UserError) as err:
            api_writers[writer](path)
        assert len(err.value.lines) == 1, str(err.value)
        assert ("folder" if kind == "folder" else "not a regular file") in str(err.value)
    assert_unchanged(kind, target)
    assert temporary_files(tmp_path) == []


@pytest.mark.parametrize("path, says", [
    (None, "must be a file name (a str or os.PathLike), got None"),
    (5, "must be a file name (a str or os.PathLike), got 5 of type int"),
    (2.5, "got 2.5 of type float"),
    (True, "got True of type bool"),
    ("", "is empty"),
    ("x\0y.h5", r"x\x00y.h5: a file name cannot hold a NUL character"),
])
@pytest.mark.parametrize("writer", ["Learner.save", "Result.save", "run_streams(out=)"])
def test_a_save_path_that_is_no_file_name_is_one_line(api_writers, tmp_path, monkeypatch, writer,
                                                       path, says):
    monkeypatch.chdir(tmp_path)             # where ./None, ./5 or ./x would have been written
    if writer == "run_streams(out=)" and path is None:
        assert api_writers[writer](path) is not None          # out=None: no results file
        assert os.listdir(tmp_path) == []
        return
    with pytest.raises(UserError) as err:
        api_writers[writer](path)
    assert len(err.value.lines) == 1 and says in str(err.value), str(err.value)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ the last guard
@pytest.mark.parametrize("kind", KINDS)
def test_atomic_path_refuses_a_node_before_writing_and_before_renaming(tmp_path, kind):
    target = tmp_path / "x.h5"
    make_node(kind, target)
    with pytest.raises(UserError, match="not a regular file|is a folder"):
        with atomic_path(target):
            pytest.fail("nothing is written over a node")
    assert_unchanged(kind, target)
    # a node that appears while the file is being written: refused at the rename, the
    # temporary file removed
    other = tmp_path / "y.h5"
    with pytest.raises(UserError, match="not a regular file|is a folder"):
        with atomic_path(other) as tmp:
            with open(tmp, "w") as f:
                f.write("data")
            make_node(kind, other)
    assert_unchanged(kind, other)
    assert temporary_files(tmp_path) == []
    with pytest.raises(UserError):
        replace(__file__, str(other))                         # the rename itself, alone
    assert_unchanged(kind, other)


# ------------------------------------------------------------------ paths shown on one line
@pytest.mark.parametrize("name", ["no\nsuch/x.h5", "no\rsuch/x.h5", "a\x1b[31mred/x.h5",
                                  "tab\there/x.h5", "nul\x85line/x.h5", "sep\u2028x/x.h5"])
def test_paths_with_control_characters_are_shown_escaped_on_one_line(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    shown = printable(name)
    assert "\\" in shown and not any(ord(ch) < 32 or 0x7f <= ord(ch) <= 0x9f for ch in shown)
    assert printable(shown) == shown                          # escaping twice changes nothing more
    cases = [("run", "--data", "synthetic", "--synth-samples", "20", "--out", name),
             ("data", "synth", "-o", name),
             ("topo", "show", "ring", "--nodes", "3", "--png", name)]
    for args in cases:
        code, _, err = forked(*args)
        line = refused_in_one_line(code, err, args)
        assert shown.split("/")[0] in line, line
    # and through the API: the message is one line
    learner = omtl_mpi.learner("pa", n_tasks=2, n_features=3)
    with pytest.raises(UserError) as err:
        learner.save(name)
    assert len(err.value.lines) == 1 and shown.split("/")[0] in str(err.value)
    assert os.listdir(tmp_path) == []


def test_every_error_line_escapes_its_control_characters():
    err = UserError("first problem \x1b[2J with\tcontrols\nsecond problem")
    assert err.lines == ["first problem \\x1b[2J with\\tcontrols", "second problem"]
    # the lines of an error found on several ranks, merged and raised again, are unchanged
    assert UserError(str(err)).lines == err.lines
    code, _, stderr = forked("run", "--data", "no\x1bsuch.h5")
    line = refused_in_one_line(code, stderr, ["run"])
    assert "no\\x1bsuch.h5" in line and "\x1b" not in stderr


@pytest.mark.mpi
def test_an_output_folder_holding_nodes_refuses_only_them(corpus, tmp_path):
    """Nodes beside the outputs are nobody's business: a sweep whose folder holds a FIFO under
    another name runs."""
    folder = tmp_path / "sw"
    make_node("fifo", folder / "runs" / "unrelated.h5")
    code, _, err = forked("sweep", corpus["sweep"], "--out", folder, "--json")
    assert code == 0, err
    assert_unchanged("fifo", folder / "runs" / "unrelated.h5")


@pytest.mark.parametrize("kind", KINDS)
def test_the_embedding_cache_is_never_replaced(tmp_path, kind):
    """A text import's MiniLM cache (OUT.minilm-cache.npz) is read, then written: refused
    before either, and before the model is loaded."""
    from omtl_mpi.data.embed import _save_cache, embed_minilm
    cache = tmp_path / "o.h5.minilm-cache.npz"
    make_node(kind, cache)
    with pytest.raises(UserError, match="the embedding cache .*(not a regular file|folder)"):
        embed_minilm(["a text"], cache=str(cache))
    with pytest.raises(UserError, match="not a regular file|is a folder"):
        _save_cache(str(cache), {})
    assert_unchanged(kind, cache)
    assert temporary_files(tmp_path) == []


def test_empty_output_names_are_refused(tmp_path):
    """--png "" and --checkpoint "" were taken as not given (the one drew nothing, the other
    wrote the default checkpoint): an empty name is refused as for every writer."""
    data = tmp_path / "t.h5"
    assert omtl("data", "synth", "-o", data, "--tasks", "2", "--samples", "30").returncode == 0
    for args, option in ((("topo", "show", "ring", "--nodes", "4", "--png", ""), "--png"),
                         (("run", "--data", data, "--out", tmp_path / "r.h5", "--checkpoint-every",
                           "10", "--checkpoint", ""), "--checkpoint")):
        r = omtl(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr == f"error: {option} is empty; give a file name\n", r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.h5"]


def test_data_fetch_never_reads_a_pipe_of_a_mirror_nor_writes_into_a_device(tmp_path):
    mirror = tmp_path / "m" / "landmine"
    mirror.mkdir(parents=True)
    os.mkfifo(mirror / "LandmineData.mat")
    r = omtl("data", "fetch", "landmine", "--dest", tmp_path / "d", "--mirror",
             f"file://{tmp_path / 'm'}", timeout=60)
    assert r.returncode == 2 and "is not a regular file of the mirror" in r.stderr, r.stderr
    os.mkfifo(tmp_path / "fifo")
    r = omtl("data", "fetch", "landmine", "--dest", tmp_path / "fifo", "--mirror",
             f"file://{tmp_path / 'm'}", timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: --dest ") and "not a folder" in r.stderr
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)


# ---------------------------- no output over an input; outputs in a missing or read-only folder
def snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
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


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_a_new_output_inside_a_folder_whose_every_file_is_read_is_refused(tmp_path, capsys):
    """The next import of a LIBSVM or text CSV folder would read it as one of its tasks."""
    table = sources(tmp_path / "src")
    for name in ("libsvm-folder", "text-csv-folder", "vw-folder"):
        args, _ = table[name]
        out = args[1] / "new.h5"
        refused(capsys, "data", "import", *args, "-o", out, needle="whose every file is read as a task")
        assert not out.exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_fetch_again_writes_its_default_output_again(tmp_path, capsys):
    """A second 'data fetch NAME --dest DIR' replaces DIR/NAME.h5, an output, as the first wrote it."""
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "landmine.h5").write_bytes(b"an earlier import")
    code, _, err = cli(capsys, "data", "fetch", "landmine", "--dest", dest, "--mirror",
                       f"file://{tmp_path / 'no-mirror'}")
    assert code == 1 and "would destroy it" not in err and "no such file" in err, err


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_every_import_source_is_valid(tmp_path, capsys):
    """The sources above import with a fresh -o (so the refusals are about -o alone)."""
    for name, (args, _) in sources(tmp_path / "src").items():
        code, out, err = cli(capsys, "data", "import", *args, "-o", tmp_path / f"{name}.h5")
        assert code == 0 and out.startswith("wrote "), (name, err)


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
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


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
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


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
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



def _alias(path, kind: str, folder):
    if kind == "same":
        return path
    alias = folder / f"{kind}-{os.path.basename(path)}"
    if not os.path.lexists(alias):
        (os.symlink if kind == "symlink" else os.link)(path, alias)
    return alias


@settings(CASES, max_examples=40)
@given(case=st.sampled_from(["run-out", "run-ckpt", "run-resume-out", "import-csv", "topo-png",
                             "sweep-index", "report-into-sweep"]),
       kind=st.sampled_from(["same", "symlink", "hardlink"]))
@pytest.mark.mpi
def test_no_output_can_replace_an_input(files, tmp_path, case, kind):
    data, ckpt = files["data"], tmp_path / "copy.ckpt.h5"
    shutil.copy(files["ckpt"], ckpt)
    csv = tmp_path / "x.csv"
    csv.write_text("f0,f1,label,task\n1,2,1,a\n2,1,-1,a\n0,1,1,b\n1,0,-1,b\n")
    topo = tmp_path / "t.toml"
    topo.write_text(files["topo"].read_text())
    index = tmp_path / "index.json"
    index.write_text(files["sweep"].read_text())
    runs = files["sweep_out"]
    inputs = [data, ckpt, csv, topo, index, runs / "index.json", *sorted((runs / "runs").iterdir())]
    before = digests(inputs)
    args = {
        "run-out": ["run", "--data", data, "--out", _alias(data, kind, tmp_path)],
        "run-ckpt": ["run", "--data", data, "--out", tmp_path / "r.h5", "--checkpoint-every", "10",
                     "--checkpoint", _alias(data, kind, tmp_path)],
        "run-resume-out": ["run", "--data", data, "--resume", ckpt, "--out", _alias(ckpt, kind, tmp_path)],
        "import-csv": ["data", "import", "csv", csv, "-o", _alias(csv, kind, tmp_path)],
        "topo-png": ["topo", "show", topo, "--nodes", "5", "--png", _alias(topo, kind, tmp_path)],
        "sweep-index": ["sweep", index, "--out", tmp_path],
        # a report writes only .md, .csv, .png and report.json, atomically: into the sweep
        # folder itself or its runs/ it may run, but must leave the sweep's files as they were
        "report-into-sweep": ["report", runs, "-o", runs if kind == "same" else runs / "runs"],
    }[case]
    outcome = allowed(*forked(*args), args)
    assert outcome == ("ran" if case == "report-into-sweep" else "refused")
    assert digests(inputs) == before



@pytest.mark.parametrize("ranks", [None, 2])
@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_results_over_the_data_set_are_refused(data, tmp_path, link, ranks):
    target = {"same": lambda: data, "symlink": lambda: tmp_path / "sym.h5",
              "hardlink": lambda: tmp_path / "hard.h5"}[link]()
    if link == "symlink":
        os.symlink(data, target)
    elif link == "hardlink":
        os.link(data, target)
    before = digest(data)
    args = ["run", "--data", data, "--out", target] + (["--np", ranks] if ranks else [])
    one_line_error(omtl(*args), "--out", "is the data set", "choose another --out")
    assert digest(data) == before


@pytest.mark.parametrize("extra, needles", [
    (["--checkpoint-every", "10", "--checkpoint", "{data}"], ["--checkpoint", "is the data set"]),
    (["--checkpoint-every", "10", "--checkpoint", "{out}"], ["are the same file"]),
    (["--resume", "{out}"], ["is the checkpoint to resume"]),
])
def test_checkpoint_and_resume_paths_never_overwrite_an_input(data, tmp_path, extra, needles):
    out = tmp_path / "run.h5"
    out.write_bytes(b"keep me")
    args = [a.format(data=data, out=out) for a in extra]
    before = digest(data), digest(out)
    one_line_error(omtl("run", "--data", data, "--out", out, *args), *needles)
    assert (digest(data), digest(out)) == before


def test_topology_png_over_its_topology_file_or_into_a_missing_folder(tmp_path):
    topo = tmp_path / "t.toml"
    topo.write_text('kind = "ring"\n')
    one_line_error(omtl("topo", "show", topo, "--nodes", "4", "--png", topo), "is the topology file")
    assert topo.read_text() == 'kind = "ring"\n'
    # a shipped topology file, named rather than given as a path
    shipped = os.path.join(os.path.dirname(__file__), "..", "topologies", "example-5.toml")
    before = digest(shipped)
    one_line_error(omtl("topo", "show", "example-5", "--nodes", "5", "--png", shipped),
                   "is the topology file")
    assert digest(shipped) == before


@pytest.mark.parametrize("extra", [[], ["--np", "2"], ["--checkpoint-every", "10", "--checkpoint", "{topo}"]])
def test_a_run_never_writes_over_its_topology_file(tmp_path, extra):
    topo = tmp_path / "t.toml"
    topo.write_text('kind = "ring"\n')
    out = topo if "--checkpoint" not in extra else tmp_path / "r.h5"
    args = [str(a).format(topo=topo) for a in extra]
    one_line_error(omtl("run", *SMALL, "--algo", "d-admm", "--topology", topo, "--out", out, *args),
                   "is the topology file")
    assert topo.read_text() == 'kind = "ring"\n'
    one_line_error(omtl("topo", "show", "ring", "--nodes", "4", "--png", tmp_path / "no" / "t.png"),
                   "does not exist")


@pytest.mark.mpi
def test_sweep_and_report_folders_that_are_files_are_one_line(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 30 }\n[algorithms.pa]\n')
    taken = tmp_path / "taken"
    taken.write_text("x")
    one_line_error(omtl("sweep", sweep, "--out", taken), "is a file")
    # a sweep file that happens to lie where the sweep's index would be written
    index = tmp_path / "index.json"
    index.write_text(sweep.read_text())
    one_line_error(omtl("sweep", index, "--out", tmp_path), "is the sweep file")
    assert taken.read_text() == "x" and index.read_text() == sweep.read_text()
    # a report folder under a file: the project's own line (click only checks what exists)
    assert omtl("sweep", sweep, "--out", tmp_path / "swept").returncode == 0
    one_line_error(omtl("report", tmp_path / "swept", "-o", taken / "report"), "cannot create this folder")
    assert taken.read_text() == "x"
