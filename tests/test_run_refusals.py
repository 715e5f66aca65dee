"""Issue 31 for the run, topo, sweep and report commands: no output over an input, options
that do nothing refused, a model gone non-finite is an error (never a result), and stopping
`omtl-mpi run --np` stops every rank."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import _env, omtl

SMALL = ("--synth-tasks", "3", "--synth-samples", "60")


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def one_line_error(r, *needles):
    """Exit 2, exactly one `error:` line holding every needle, no traceback or warning (under
    mpiexec, MPICH adds its own line about the MPI_Abort that ends the job)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("Abort(")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr and "Warning" not in r.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("safety")
    path = folder / "tasks.h5"
    r = omtl("data", "synth", "-o", path, "--tasks", "3", "--samples", "60", "--seed", "1")
    assert r.returncode == 0, r.stderr
    return path


# ----------------------------------------------------------------------------- inputs are sacred
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


def test_topologies_beyond_what_this_release_builds_are_refused():
    one_line_error(omtl("topo", "show", "ring", "--nodes", "70000"), "more than the 65536")
    one_line_error(omtl("topo", "show", "full", "--nodes", "3000"), "visits every pair")
    r = omtl("topo", "show", "ring", "--nodes", "3000")
    assert r.returncode == 0 and "diameter and SLEM not computed" in r.stdout, r.stderr


# ----------------------------------------------------------------------------- options that do nothing
@pytest.mark.parametrize("args, needle", [
    (["--topology", "ring"], "--topology does nothing"),
    (["--algo", "arow", "--nodes", "3"], "--nodes does nothing"),
    (["--w-step", "euclid", "--arow-r", "2"], "--arow-r does nothing"),
    (["--delta", "2"], "--delta does nothing"),
    (["--omega-every", "3"], "--omega-every does nothing"),
    (["--algo", "admm-single", "--omega-eps", "0.1"], "--omega-eps does nothing"),
    (["--checkpoint", "c.h5"], "--checkpoint does nothing without --checkpoint-every"),
    (["--fail-rank", "1"], "--fail-rank does nothing without --fail-at"),
    (["--fail-mode", "kill"], "--fail-mode does nothing without --fail-at"),
    (["--fail-at", "3", "--fail-rank", "1"], "--fail-rank 1 is not a rank of this job (ranks 0..0)"),
    (["--fail-at", "3", "--fail-rank", "2", "--np", "2"], "--fail-rank 2 is not a rank"),
    (["--eta", "0"], "--eta must be > 0"),
    (["--batch", "61"], "--batch 61 is more than the longest stream (60 instances)"),
])
def test_options_that_do_nothing_or_cannot_work_are_refused(tmp_path, args, needle):
    one_line_error(omtl("run", *SMALL, *args, cwd=tmp_path), needle)
    assert os.listdir(tmp_path) == []


def test_synthetic_options_with_a_data_file_are_refused(data):
    one_line_error(omtl("run", "--data", data, "--synth-samples", "30"), "--synth-samples does nothing")


def test_the_options_that_do_act_are_accepted(tmp_path):
    r = omtl("run", *SMALL, "--w-step", "adagrad", "--delta", "2", "--relationship",
             "--omega-every", "3", "--json")
    assert r.returncode == 0, r.stderr
    r = omtl("run", *SMALL, "--algo", "d-admm", "--topology", "full", "--nodes", "3", "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.mpi
def test_fail_rank_beyond_the_world_under_mpiexec(mpiexec):
    one_line_error(omtl("run", *SMALL, "--fail-at", "3", "--fail-rank", "5", np_ranks=2),
                   "--fail-rank 5 is not a rank of this job (ranks 0..1)")


# ----------------------------------------------------------------------------- non-finite models
@pytest.mark.parametrize("args", [
    [],
    ["--np", "2"],
    ["--np", "3", "--algo", "d-admm"],
    ["--w-step", "euclid"],
    ["--checkpoint-every", "50"],
])
@pytest.mark.mpi
def test_a_model_gone_non_finite_is_an_error_not_a_result(tmp_path, args):
    out = tmp_path / "run.h5"
    r = omtl("run", "--synth-samples", "300", "--class-weight", "1e12", "--out", out, *args)
    line = one_line_error(r, "went non-finite (NaN or inf) by round", "--class-weight")
    # found by a periodic check (every 100 rounds, or before a checkpoint every 50) before the
    # last round's: these settings overflow within the first 200 rounds of 300
    found = int(line.split("by round ")[1].split()[0])
    assert found <= 200, line
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


@pytest.mark.mpi
def test_a_sweep_records_a_non_finite_run_as_failed(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 3, samples = 300 }\n'
                     '[algorithms.c-admm]\noptions = { class-weight = "1e12" }\n')
    r = omtl("sweep", sweep, "--out", tmp_path / "out", "--json")
    assert r.returncode == 1, r.stderr
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    (record,) = index["runs"].values()
    assert record["status"] == "failed" and "non-finite" in record["error"]
    assert not (tmp_path / "out" / "runs" / f"{next(iter(index['runs']))}.h5").exists()


# ----------------------------------------------------------------------------- no orphans
def _ranks_of(marker: str) -> list[str]:
    """Command lines of the processes started for the run that writes ``marker`` (mpiexec and
    its ranks), from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in args and ("mpiexec" in args or "mpi4py" in args):
            found.append(args)
    return found


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopping_the_np_launcher_stops_every_rank_and_writes_nothing(tmp_path, sig):
    out = tmp_path / f"stopped-{sig.name}.h5"
    proc = subprocess.Popen([sys.executable, "-m", "omtl_mpi", "run", "--np", "3",
                             "--synth-samples", "300000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.time() + 30
        while len(_ranks_of(str(out))) < 4 and time.time() < deadline:    # mpiexec + 3 ranks
            time.sleep(0.2)
        assert len(_ranks_of(str(out))) == 4
        time.sleep(1.0)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name}" in err
    deadline = time.time() + 5
    while _ranks_of(str(out)) and time.time() < deadline:
        time.sleep(0.2)
    assert _ranks_of(str(out)) == []
    time.sleep(1.0)
    assert os.listdir(tmp_path) == []
