"""Every file read is validated before use, and nothing but a regular file is opened: task
files, checkpoints, topology and sweep files, a sweep folder's index and results. A bad file
is one line and exit 2, in one process and under MPI, never a hang or a traceback; damaged
(truncated, flipped, padded) task files, checkpoints, topology and sweep files fed to every
command (hypothesis) give only the project's one-line error or a finite result, and stay as
they were."""
import json
import os
import shutil

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CASES, DAMAGE, allowed, damaged, digests, forked, omtl_forked as omtl, one_line_error, write_declared_only
from test_taskfile_v2 import damage_chunk, write_v1
from omtl_mpi.data import generate, info, load_tasks, read_meta, write_tasks
from omtl_mpi.errors import ConfigError, DataError, UserError
from omtl_mpi.report import load_sweep
from omtl_mpi.sweep import load_plan
from omtl_mpi.topology import load_topology

# a refusal must come at once; a FIFO that is opened blocks until this runs out
QUICK = 30


def refused(r, *fragments) -> str:
    """``r`` ended with exit 2 and one error line holding every fragment; that line."""
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for fragment in fragments:
        assert fragment in lines[0], r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """3 synthetic tasks of 60 instances (d = 9) as a task-stream file."""
    names, X, y = generate(3, 60, 0)
    path = tmp_path_factory.mktemp("tasks") / "t.h5"
    write_tasks(path, names, X, y)
    return path


@pytest.fixture(scope="module")
def tasks_v1(tmp_path_factory):
    """The same tasks as a version 1 file (one group per task)."""
    names, X, y = generate(3, 60, 0)
    return write_v1(tmp_path_factory.mktemp("tasks") / "t1.h5", names, X, y)


def copy_of(path, tmp_path, name="copy.h5"):
    out = tmp_path / name
    shutil.copy(path, out)
    return out


def dangling(tmp_path, name="gone"):
    link = tmp_path / name
    os.symlink(tmp_path / "nothing-here", link)
    return link


# --------------------------------------------------------------------------- anything but a file
def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    what = "not a regular file (a pipe, socket or device)"
    refused(omtl("run", "--data", fifo, timeout=QUICK), str(fifo), what)
    refused(omtl("run", "--np", "2", "--data", fifo, timeout=QUICK), str(fifo), what)
    refused(omtl("data", "info", fifo, timeout=QUICK), str(fifo), what)
    refused(omtl("run", "--synth-samples", "60", "--resume", fifo, timeout=QUICK),
            f"--resume {fifo}", what)
    refused(omtl("topo", "show", fifo, "--nodes", "4", timeout=QUICK), f"topology file {fifo}", what)
    refused(omtl("sweep", fifo, "--dry-run", timeout=QUICK), f"sweep file {fifo}", what)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    os.mkfifo(sweep / "index.json")
    refused(omtl("report", sweep, timeout=QUICK), "index.json", what)


def test_folders_and_dangling_links_are_refused(tmp_path):
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    link = dangling(tmp_path, "gone.toml")
    for path, message in ((folder, "is a folder"), (link, "which does not exist")):
        with pytest.raises(DataError, match=message):
            read_meta(path)
        with pytest.raises(ConfigError, match=message):
            load_topology(str(path), 4)
        with pytest.raises(ConfigError, match=message):
            load_plan(str(path))
        for call in (lambda: read_meta(path), lambda: load_topology(str(path), 4),
                     lambda: load_plan(str(path))):
            with pytest.raises(UserError) as err:
                call()
            assert len(err.value.lines) == 1 and str(path) in str(err.value)


# --------------------------------------------------------------------------- task files
def test_links_that_dangle_or_leave_the_task_file_are_refused(tmp_path, tasks_v1):
    soft, external, inside = (copy_of(tasks_v1, tmp_path, n) for n in ("soft.h5", "ext.h5", "in.h5"))
    (tmp_path / "other.h5").write_bytes(tasks_v1.read_bytes())
    with h5py.File(soft, "r+") as f:
        del f["tasks/0000/X"]
        f["tasks/0000/X"] = h5py.SoftLink("/nowhere")
    with h5py.File(external, "r+") as f:
        del f["tasks/0001/X"]
        f["tasks/0001/X"] = h5py.ExternalLink("other.h5", "/tasks/0001/X")
    with h5py.File(inside, "r+") as f:          # a soft link inside the file is followed
        f["kept"] = f["tasks/0002/y"][()]
        del f["tasks/0002/y"]
        f["tasks/0002/y"] = h5py.SoftLink("/kept")
    with pytest.raises(DataError, match=r"task 0 \('task0'\): X is a soft link to /nowhere, "
                                        "which does not exist in the file"):
        read_meta(soft)
    message = (f"{external}: task 1 ('task1'): X is an external link to /tasks/0001/X in "
               "other.h5; links leaving the file are refused")
    with pytest.raises(DataError, match="links leaving the file are refused") as err:
        read_meta(external)
    assert str(err.value).startswith(message) and len(err.value.lines) == 1
    assert len(load_tasks(read_meta(inside), [2]).y[0]) == 60
    refused(omtl("run", "--data", external, timeout=QUICK), message)
    refused(omtl("run", "--np", "2", "--data", soft, timeout=QUICK), "X is a soft link to /nowhere")


def test_links_in_a_version_2_file_are_refused_without_being_followed(tmp_path, tasks):
    soft, external, inside = (copy_of(tasks, tmp_path, n) for n in ("soft.h5", "ext.h5", "in.h5"))
    (tmp_path / "other.h5").write_bytes(tasks.read_bytes())
    for path, name, link in ((soft, "X", h5py.SoftLink("/nowhere")),
                             (external, "X", h5py.ExternalLink("other.h5", "/X")),
                             (inside, "y", h5py.SoftLink("/kept"))):
        with h5py.File(path, "r+") as f:
            f["kept"] = f[name][()]
            del f[name]
            f[name] = link
    with pytest.raises(DataError, match="/X is a soft link to /nowhere, which does not exist"):
        read_meta(soft)
    message = (f"{external}: /X is an external link to /X in other.h5; links leaving the file "
               "are refused")
    with pytest.raises(DataError) as err:
        read_meta(external)
    assert str(err.value).startswith(message) and len(err.value.lines) == 1
    # a version 2 file holds no link at all: even one that stays in the file is refused
    with pytest.raises(DataError, match="/y is a soft link to /kept; a task file holds its arrays"):
        read_meta(inside)
    refused(omtl("run", "--data", external, timeout=QUICK), message)
    refused(omtl("data", "info", soft, timeout=QUICK), "/X is a soft link to /nowhere")


@pytest.mark.mpi
@pytest.mark.parametrize("version", [1, 2])
def test_a_damaged_chunk_names_the_file_and_the_task(mpiexec, tmp_path, tasks, tasks_v1, version):
    bad_x, bad_y = (copy_of(tasks if version == 2 else tasks_v1, tmp_path, n) for n in ("x.h5", "y.h5"))
    if version == 2:                            # tasks of 60 rows: task 1 is rows 60..119
        damage_chunk(bad_x, "X", 70)
        damage_chunk(bad_y, "y", 130)
    else:
        damage_chunk(bad_x, "tasks/0001/X", rows=None)
        damage_chunk(bad_y, "tasks/0002/y", rows=None)
    with pytest.raises(DataError, match=r"task 1 \('task1'\): cannot read X"):
        load_tasks(read_meta(bad_x), [0, 1, 2])
    message = f"{bad_x}: task 1 ('task1'): cannot read X ("
    refused(omtl("run", "--data", bad_x, "--out", tmp_path / "r.h5", timeout=QUICK), message,
            "the file is damaged")
    refused(omtl("run", "--np", "2", "--data", bad_x, "--out", tmp_path / "r.h5", timeout=60),
            message)
    assert not (tmp_path / "r.h5").exists()
    # data info reads the labels only
    refused(omtl("data", "info", bad_y, timeout=QUICK), f"{bad_y}: task 2 ('task2'): cannot read y (")
    assert info(bad_x)["tasks"] == 3


def test_format_versions(tmp_path, tasks, tasks_v1):
    newer = copy_of(tasks, tmp_path, "v4.h5")
    with h5py.File(newer, "r+") as f:
        f.attrs["format_version"] = 4
    message = (f"{newer}: task-file format version 4; this release of omtl-mpi reads versions 1, "
               "2 and 3")
    with pytest.raises(DataError, match="format version 4; this release of omtl-mpi reads versions 1, 2 and 3"):
        read_meta(newer)
    refused(omtl("data", "info", newer, timeout=QUICK), message)
    assert read_meta(tasks).version == 2 and read_meta(tasks_v1).version == 1
    # files without a version (older ones) are read as version 1
    assert read_meta(write_declared_only(tmp_path / "old.h5", 4, 3)).dim == 3
    older = copy_of(tasks_v1, tmp_path, "v0.h5")
    with h5py.File(older, "r+") as f:
        del f.attrs["format_version"]
    assert len(load_tasks(read_meta(older), [0]).y[0]) == 60


# --------------------------------------------------------------------------- checkpoints
def checkpoint_of(tmp_path, data, ranks=None) -> str:
    """A checkpoint of c-admm on ``data`` after 40 of its 60 rounds."""
    path = tmp_path / f"made-on-{ranks or 1}.ckpt.h5"
    r = omtl("run", "--data", data, "--checkpoint", path, "--checkpoint-every", "40",
             *(["--np", str(ranks)] if ranks else []), timeout=60)
    assert r.returncode == 0 and path.exists(), r.stderr
    return path


def flip_data_of(path, name: str) -> None:
    """Flip one byte of the dataset ``name``'s values (not of the file's structure)."""
    with h5py.File(path, "r") as f:
        offset = f[name].id.get_offset()
    with open(path, "r+b") as fh:
        fh.seek(offset + 3)
        byte = fh.read(1)
        fh.seek(offset + 3)
        fh.write(bytes([byte[0] ^ 0x10]))


def reshape(path, name, value):
    with h5py.File(path, "r+") as f:
        del f[name]
        if value is not None:
            f[name] = value


W = "rank_0000/state/holder0/W"


@pytest.fixture(scope="module")
def made(tmp_path_factory, tasks):
    """(data, checkpoint): a copy of the tasks, and a one-process checkpoint made on it."""
    folder = tmp_path_factory.mktemp("made")
    data = copy_of(tasks, folder, "d.h5")
    return data, checkpoint_of(folder, data)


@pytest.mark.parametrize("damage, message", [
    (lambda p: reshape(p, W, np.zeros((2, 3))),
     "rank 0's state holder0/W has shape (2, 3), this run's is (3, 10)"),
    (lambda p: reshape(p, W, None), "rank 0's state holder0/W is missing"),
    (lambda p: reshape(p, W, np.zeros((3, 10), dtype=np.int64)),
     "rank 0's state holder0/W has dtype int64, this run's holds floats"),
    (lambda p: reshape(p, W, h5py.SoftLink("/rank_0000/state/holder0/Z")),
     "the checkpoint is damaged (/rank_0000/state/holder0/W is a link; a checkpoint holds none)"),
    (lambda p: flip_data_of(p, W), "its state does not match its digest: the file is damaged"),
    (lambda p: p.write_bytes(p.read_bytes()[:100]), "not a readable HDF5 checkpoint"),
], ids=["reshaped", "missing", "retyped", "a-link", "flipped-bytes", "truncated"])
def test_a_damaged_checkpoint_is_one_line(tmp_path, made, damage, message):
    data, ckpt = made
    ckpt = copy_of(ckpt, tmp_path, "damaged.ckpt.h5")
    damage(ckpt)
    out = tmp_path / "r.h5"
    refused(omtl("run", "--data", data, "--resume", ckpt, "--out", out, timeout=QUICK),
            f"--resume {ckpt}: ", message)
    assert not out.exists()


@pytest.mark.mpi
def test_checkpoints_under_mpi_are_checked_on_every_rank(mpiexec, tmp_path, tasks):
    """Rank 1's part is checked on rank 1, and every rank agrees: one line from rank 0."""
    data = copy_of(tasks, tmp_path, "d.h5")
    ckpt = checkpoint_of(tmp_path, data, ranks=2)
    damaged = copy_of(ckpt, tmp_path, "damaged.ckpt.h5")
    reshape(damaged, "rank_0001/state/holder0/W", np.zeros((2, 3)))
    out = tmp_path / "r.h5"
    line = refused(omtl("run", "--np", "2", "--data", data, "--resume", damaged, "--out", out,
                        timeout=60),
                   f"--resume {damaged}: rank 1's state holder0/W has shape (2, 3), this run's is (3, 10)")
    assert "[rank" not in line and not out.exists()
    # the same names, lengths and d, other contents, under the same path
    names, X, y = generate(3, 60, 7)
    write_tasks(data, names, X, y)
    refused(omtl("run", "--np", "2", "--data", data, "--resume", ckpt, "--out", out, timeout=60),
            f"--resume {ckpt}: made on a data set with different contents",
            "resume with the same --data")
    assert not out.exists()


def test_a_checkpoint_of_other_contents_is_refused_in_one_process(made):
    data, ckpt = made
    original = data.read_bytes()
    try:
        with h5py.File(data, "r+") as f:        # one value changed: names, lengths and d stay
            f["X"][f["offsets"][2] + 5, 1] += 1.0
        refused(omtl("run", "--data", data, "--resume", ckpt, timeout=QUICK),
                "made on a data set with different contents")
    finally:
        data.write_bytes(original)
    # the same bytes again (a new file's time, the same contents): resumed
    r = omtl("run", "--data", data, "--resume", ckpt, timeout=QUICK)
    assert r.returncode == 0 and "resumed from" in r.stderr, r.stderr


# --------------------------------------------------------------------------- a sweep folder
def sweep_folder(tmp_path, runs: dict, results: bytes | None = None):
    folder = tmp_path / "sweep"
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    index = {"format": "omtl-mpi-sweep", "version": 1, "runs": runs, "plan": list(runs)}
    (folder / "index.json").write_text(json.dumps(index))
    if results is not None:
        (folder / "runs" / "a.h5").write_bytes(results)
    return folder


def test_a_damaged_sweep_folder_is_one_line(tmp_path, tasks):
    record = {"status": "done", "data": "d", "variant": "c-admm", "algorithm": "c-admm",
              "algo": "c-admm", "seed": 0, "results": "runs/a.h5"}
    folder = sweep_folder(tmp_path, {"a": record}, results=b"not hdf5")
    with pytest.raises(UserError, match="cannot read the results of run a") as err:
        load_sweep(str(folder))
    assert len(err.value.lines) == 1
    shutil.copy(tasks, folder / "runs" / "a.h5")        # an HDF5 file, not a results file
    with pytest.raises(UserError, match="cannot read the results of run a"):
        load_sweep(str(folder))
    for runs, message in (({"a": "done"}, "the record of run a has no status"),
                          ({"a": {**record, "results": 3}}, "the record of run a has no valid 'results'")):
        folder = sweep_folder(tmp_path, runs)
        with pytest.raises(UserError, match=message) as err:
            load_sweep(str(folder))
        assert len(err.value.lines) == 1
    (folder / "index.json").write_text("{ not json")
    refused(omtl("report", folder, timeout=QUICK), "index.json is not a readable sweep index")


#  damaged files (hypothesis, the same cases on every run): only allowed outcomes, inputs unchanged
@pytest.mark.mpi
@CASES
@given(**DAMAGE, command=st.sampled_from(["run", "info"]))
def test_damaged_task_files(files, tmp_path, how, where, seed, command):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(damaged(files["data"].read_bytes(), how, where, seed))
    before = digests([bad])
    args = (["run", "--data", bad, "--json", "--out", tmp_path / "r.h5"] if command == "run"
            else ["data", "info", bad, "--json"])
    allowed(*forked(*args), args)
    assert digests([bad]) == before


@pytest.mark.mpi
@settings(CASES, max_examples=30)
@given(**DAMAGE)
def test_damaged_checkpoints(files, tmp_path, how, where, seed):
    bad = tmp_path / "bad.ckpt.h5"
    bad.write_bytes(damaged(files["ckpt"].read_bytes(), how, where, seed))
    before = digests([bad, files["data"]])
    args = ["run", "--data", files["data"], "--resume", bad, "--json", "--out", tmp_path / "r.h5"]
    allowed(*forked(*args), args)
    assert digests([bad, files["data"]]) == before


@pytest.mark.mpi
@settings(CASES, max_examples=30)
@given(**DAMAGE)
def test_damaged_topology_and_sweep_files(files, tmp_path, how, where, seed):
    topo, sweep = tmp_path / "t.toml", tmp_path / "s.toml"
    topo.write_bytes(damaged(files["topo"].read_bytes(), how, where, seed))
    sweep.write_bytes(damaged(files["sweep"].read_bytes(), how, where, seed))
    before = digests([topo, sweep])
    for args in (["topo", "show", topo, "--nodes", "5", "--json"],
                 ["sweep", sweep, "--dry-run", "--json", "--out", tmp_path / "sw"]):
        allowed(*forked(*args), args)
    assert digests([topo, sweep]) == before


# ------------------------------------------------------------------------------ a sweep's index
def test_a_fifo_as_a_sweep_index_never_blocks(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 30 }\n[algorithms.pa]\n')
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "index.json")
    for extra in ([], ["--dry-run"]):
        one_line_error(omtl("sweep", sweep, "--out", tmp_path / "out", *extra, timeout=30),
                       "not a regular file")


def test_a_damaged_record_in_a_sweep_index_is_one_line(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 30 }\n[algorithms.pa]\n')
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "index.json").write_text(
        json.dumps({"format": "omtl-mpi-sweep", "runs": {"s.pa": "done"}}))
    for extra in ([], ["--dry-run"]):
        one_line_error(omtl("sweep", sweep, "--out", tmp_path / "out", *extra), "the sweep index is damaged")
