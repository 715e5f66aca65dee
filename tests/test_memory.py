"""What a process may allocate: the machine's MemAvailable and its control groups' limits
(omtl_mpi.memory), checked on made-up cgroup trees, and on a real one where the test runs as
root on a machine whose cgroups it may make; and what cannot fit refused before allocating:
a run's streams and a learner's own arrays (naming the part that cannot fit), `data synth` and
the imports beyond memory or the free disk."""
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from conftest import cli_exit, omtl, refused, sources, write_declared_only
from omtl_mpi import memory
from omtl_mpi.data import footprint
from omtl_mpi.errors import UserError
from omtl_mpi.paths import output_file

MIB = 2 ** 20


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_tree(root, groups):
    """A cgroup v2 mount at ``root``: ``groups`` {relative path: (memory.max, memory.current,
    inactive_file)}."""
    write(root / "cgroup.controllers", "cpu memory\n")
    for rel, (cap, used, inactive) in groups.items():
        folder = root / rel if rel else root
        write(folder / "memory.max", f"{cap}\n")
        write(folder / "memory.current", f"{used}\n")
        write(folder / "memory.stat", f"anon 1\ninactive_file {inactive}\nactive_file 5\n")


def test_v2_takes_the_tightest_limit_of_the_group_and_those_above_it(tmp_path):
    # a Slurm job's limit binds its step's task below it; page cache the kernel can reclaim
    # (inactive_file) does not count as used
    v2_tree(tmp_path / "cg", {"": ("max", 10 ** 12, 0),
                              "job_7": (1000 * MIB, 300 * MIB, 100 * MIB),
                              "job_7/step_0": ("max", 250 * MIB, 0)})
    write(tmp_path / "self", "0::/job_7/step_0\n")
    assert memory.cgroup_headroom(str(tmp_path / "self"), str(tmp_path / "cg")) == 800 * MIB


def test_v1_memory_controller_and_no_limit(tmp_path):
    root = tmp_path / "cg" / "memory"
    write(root / "memory.limit_in_bytes", "9223372036854771712\n")      # no limit
    write(root / "memory.usage_in_bytes", "1\n")
    write(root / "slurm" / "memory.limit_in_bytes", f"{400 * MIB}\n")
    write(root / "slurm" / "memory.usage_in_bytes", f"{150 * MIB}\n")
    write(root / "slurm" / "memory.stat", f"cache 9\ntotal_inactive_file {50 * MIB}\n")
    write(tmp_path / "self", "5:cpu,cpuacct:/\n4:memory:/slurm\n0::/\n")
    assert memory.cgroup_headroom(str(tmp_path / "self"), str(tmp_path / "cg")) == 300 * MIB
    write(tmp_path / "self", "4:memory:/\n")
    assert memory.cgroup_headroom(str(tmp_path / "self"), str(tmp_path / "cg")) is None


def test_a_namespaced_group_that_is_not_below_the_mount_is_the_mounts_root(tmp_path):
    # in a container the path in /proc/self/cgroup is the host's; the mount shows its own group
    v2_tree(tmp_path / "cg", {"": (512 * MIB, 12 * MIB, 0)})
    write(tmp_path / "self", "0::/docker/abc123\n")
    assert memory.cgroup_headroom(str(tmp_path / "self"), str(tmp_path / "cg")) == 500 * MIB


def test_nothing_readable_is_unknown(tmp_path):
    assert memory.cgroup_headroom(str(tmp_path / "missing"), str(tmp_path)) is None
    # a group's name in bytes that are not UTF-8, a limit that is not a number: unknown, no error
    (tmp_path / "self").write_bytes(b"0::/caf\xe9\n")
    v2_tree(tmp_path / "cg", {"": ("lots", 1, 0)})
    assert memory.cgroup_headroom(str(tmp_path / "self"), str(tmp_path / "cg")) is None
    assert memory.meminfo_available(str(tmp_path / "missing")) is None
    write(tmp_path / "meminfo", "MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    assert memory.meminfo_available(str(tmp_path / "meminfo")) == 2 * MIB


def test_available_is_the_least_of_what_is_known(monkeypatch):
    monkeypatch.setattr(memory, "meminfo_available", lambda: 8 * 2 ** 30)
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 400 * MIB)
    assert memory.available() == 400 * MIB
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: None)
    assert memory.available() == 8 * 2 ** 30


def test_sizes_in_messages_tell_close_figures_apart():
    assert memory.size_text(180 * MIB) == "180 MiB" and memory.size_text(230 * MIB) == "230 MiB"
    assert memory.size_text(100) == "0.0 MiB" and memory.size_text(2.5 * MIB) == "2.5 MiB"
    assert memory.size_text(1020 * MIB) == "1.0 GiB" and memory.size_text(1.25 * 2 ** 30) == "1.2 GiB"
    assert memory.size_text(35.8 * 2 ** 30) == "35.8 GiB"


def test_a_folder_whose_bits_allow_writing_but_that_refuses_a_file_is_refused(tmp_path, monkeypatch):
    # root on NFS with root squashing, /sys or a quota: os.access says yes, creating says no
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(UserError, match=r"-o .*o.h5: cannot create a file in folder .* \(Permission "
                                        r"denied\); choose another -o"):
        output_file(tmp_path / "o.h5", "-o")


def test_results_and_checkpoints_are_checked_the_same_way(tmp_path, monkeypatch):
    import tempfile

    from omtl_mpi.paths import output_file

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    output_file(str(tmp_path / "run.h5"), "--out")                 # a folder that takes files
    assert not [p for p in tmp_path.iterdir()]                     # and keeps no probe
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(UserError, match=r"--checkpoint .*c.h5: cannot create a file in folder .* "
                                        r"\(Read-only file system\); choose another --checkpoint"):
        output_file(str(tmp_path / "c.h5"), "--checkpoint")


def test_a_pseudo_file_system_as_output_is_one_line(tmp_path):
    (tmp_path / "t.csv").write_text("text,label\ngood,positive\nbad,negative\n")
    r = omtl("data", "import", "text-csv", tmp_path / "t.csv", "--dims", "16", "-o", "/proc/o.h5")
    assert r.returncode == 2 and r.stderr.startswith("error: -o /proc/o.h5: ")
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def _own_group(controller_root: str, v2: bool):
    """This process's own memory group under ``controller_root`` (from /proc/self/cgroup), so
    that a test's group sits below it and its child stays inside the job that runs the tests."""
    for line in open("/proc/self/cgroup"):
        hierarchy, _, rest = line.rstrip("\n").partition(":")
        controllers, _, relative = rest.partition(":")
        if (v2 and hierarchy == "0" and not controllers) or \
                (not v2 and "memory" in controllers.split(",")):
            folder = os.path.join(controller_root, relative.lstrip("/"))
            return folder if os.path.isdir(folder) else None
    return None


def _cgroup_with_limit(limit: int):
    """A new memory cgroup limited to ``limit`` bytes below this process's own (v1's memory
    controller; v2 where the own group lets a child take the memory controller), its folder;
    None where this process may not make one (not root, no such hierarchy)."""
    if os.geteuid() != 0:
        return None
    name = f"omtl-mpi-test-{uuid.uuid4().hex[:8]}"
    for root, limit_file, v2 in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes", False),
                                 ("/sys/fs/cgroup", "memory.max", True)):
        own = _own_group(root, v2) if os.path.isdir(root) else None
        if own is None or (v2 and "memory" not in
                           open(os.path.join(own, "cgroup.subtree_control")).read().split()):
            continue
        folder = os.path.join(own, name)
        try:
            os.mkdir(folder)
        except OSError:
            continue
        try:
            with open(os.path.join(folder, limit_file), "w") as f:
                f.write(str(limit))
            return folder
        except OSError:
            os.rmdir(folder)
    return None


def test_a_run_under_a_cgroup_limit_is_refused_before_it_is_killed(tmp_path):
    """A model that fits the machine but not the job's memory limit gets one line, where the
    kernel would kill the run without a word (rc 137)."""
    folder = _cgroup_with_limit(400 * MIB)
    if folder is None:
        pytest.skip("needs root and a writable memory cgroup hierarchy")
    try:
        # 5 tasks of 2^22 + 1 weights: about 1.3 GiB of arrays (the machine has more free)
        lines = "".join(f"{'+1' if i % 2 else '-1'} {i + 1}:1 4194304:0.5\n" for i in range(20))
        (tmp_path / "svm").mkdir()
        for k in range(5):
            (tmp_path / "svm" / f"t{k}.txt").write_text(lines)
        r = omtl("data", "import", "libsvm", tmp_path / "svm", "-o", tmp_path / "d.h5")
        assert r.returncode == 0, r.stderr
        # the defaults touch their arrays: without the cgroup's limit in the check, the kernel
        # kills this run (rc 137, nothing on stderr but the large-d notice)
        script = (f"echo $$ > {folder}/cgroup.procs && exec {sys.executable} -m omtl_mpi run "
                  f"--data {tmp_path / 'd.h5'}")
        r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert r.stderr.startswith("error: 5 task(s) of 4194305 weights on one rank need about ")
        assert "of memory available" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    finally:
        os.rmdir(folder)


# -------------------------------------------- more than memory holds: refused before allocating
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


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
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


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_synth_larger_than_the_free_disk_is_refused_before_writing(tmp_path, capsys, monkeypatch):
    from omtl_mpi.data.importers import common
    monkeypatch.setattr(common, "available_disk", lambda path: 2 ** 30)
    refused(capsys, "data", "synth", "--tasks", "100000", "--samples", "2000", "-o", tmp_path / "o.h5",
            needle="100000 tasks x 2000 samples x 9 features would take 13.6 GiB on disk, but only "
                   f"1.0 GiB are free for {tmp_path / 'o.h5'}: lower --tasks or --samples, or write elsewhere")
    refused(capsys, "data", "synth", "--family", "personal", "--tasks", "1000000", "-o", tmp_path / "o.h5",
            needle="1000000 tasks x 32")
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
def test_npz_too_large_is_refused_from_its_header(tmp_path, monkeypatch, capsys):
    np.savez_compressed(tmp_path / "big.npz", xs=np.zeros((2, 1000, 100)), ys=np.ones((2, 1000)))
    monkeypatch.setattr(footprint, "available_memory", lambda: 10 ** 6)
    refused(capsys, "data", "import", "npz", tmp_path / "big.npz", "-o", tmp_path / "o.h5",
            needle="big.npz: its arrays would need")
