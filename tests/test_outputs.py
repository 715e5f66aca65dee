"""Outputs are regular files or absent (docs/RELIABILITY.md, "The promise"): every writer refuses,
before any work and in one line, an output where a device, a FIFO, a socket or a folder is (or a
link to one), and the node is left as it was; a path that is no file name (None, a number, a
NUL character) is one line too, and a path holding control characters is shown escaped on its
one line.

Each command-line case runs ``omtl_mpi.cli.main`` in a forked child (tests/test_hostile_cli.py's
``forked``): milliseconds a case, and no MPI job is started, since every case is refused first.
"""
import os
import socket
import stat

import pytest

import omtl_mpi
from omtl_mpi.atomic import atomic_path, replace
from omtl_mpi.data import generate
from omtl_mpi.errors import UserError, printable
from omtl_mpi.paths import output_file
from conftest import omtl
from test_data_safety import sources
from test_hostile_cli import files, forked  # noqa: F401  (files: a fixture)

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="device nodes need root (mknod)")


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
