"""A hostile corpus for the whole command line: every command is fed damaged
files, hostile option values and outputs that collide with its inputs. The only outcomes
allowed are the project's own one-line error with exit code 2, or exit 0 with a finite result;
every input file is hashed before and after, and must not change.

Each case runs ``omtl_mpi.cli.main`` in a forked child of this process (the packages are
already imported, so a case costs milliseconds instead of a Python start-up); a case that
needs MPI starts mpiexec from there as the command line does.
"""
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import omtl_mpi.cli as cli

CASES = settings(max_examples=60, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
SMALL = ["--synth-tasks", "3", "--synth-samples", "40"]


def forked(*args, timeout: float = 60.0):
    """``omtl-mpi ARGS`` in a forked child; (exit code, stdout, stderr)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:                                    # the child: never returns
        code = 99
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.stdin = open(os.devnull)
            sys.argv = ["omtl-mpi", *map(str, args)]     # what --np passes on to mpiexec
            try:
                cli.main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:                   # noqa: BLE001 - reported as a traceback
                import traceback
                traceback.print_exc()
                code = 98
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.time() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"omtl-mpi {' '.join(map(str, args))}: no answer in {timeout} s")
        time.sleep(0.005)
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
    return os.waitstatus_to_exitcode(status), texts[0], texts[1]


def digests(paths) -> dict:
    found = {}
    for p in paths:
        if os.path.isfile(p):
            with open(p, "rb") as f:
                found[str(p)] = hashlib.sha256(f.read()).hexdigest()
    return found


def allowed(code: int, stdout: str, stderr: str, args) -> str:
    """Assert an allowed outcome; return "refused" or "ran"."""
    what = f"omtl-mpi {' '.join(map(str, args))}"
    assert "Traceback" not in stderr, f"{what}: traceback\n{stderr}"
    assert "Warning" not in stderr, f"{what}: warning\n{stderr}"
    if code == 0:
        if "--json" in args:
            for key, value in json.loads(stdout.strip().splitlines()[-1]).items():
                if isinstance(value, float):
                    assert math.isfinite(value), f"{what}: {key} = {value}"
        return "ran"
    # one line per problem found (several options may be wrong at once), nothing else
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, f"{what}: exit {code}\n{stderr}"
    assert lines and all(ln.startswith(("error: ", "notice: ")) for ln in lines), \
        f"{what}: not error lines\n{stderr}"
    assert any(ln.startswith("error: ") and len(ln) > 12 for ln in lines), f"{what}\n{stderr}"
    return "refused"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small task file, a checkpoint of a run on it, a topology and a sweep file."""
    root = tmp_path_factory.mktemp("corpus")
    data = root / "tasks.h5"
    assert forked("data", "synth", "-o", data, "--tasks", "3", "--samples", "40")[0] == 0
    ckpt = root / "run.ckpt.h5"
    code, _, err = forked("run", "--data", data, "--out", root / "run.h5", "--checkpoint-every", "20",
                          "--fail-at", "30")
    assert ckpt.exists(), err
    topo = root / "topo.toml"
    topo.write_text('kind = "random-regular"\ndegree = 2\nseed = 1\n')
    sweep = root / "sweep.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 30 }\n[algorithms.pa]\n')
    sweep_out = root / "swept"
    assert forked("sweep", sweep, "--out", sweep_out, "--json")[0] == 0
    return {"data": data, "ckpt": ckpt, "topo": topo, "sweep": sweep, "root": root,
            "sweep_out": sweep_out}


# ----------------------------------------------------------------------------- option values
HOSTILE = st.sampled_from(["-1", "0", "1e308", "-1e308", "nan", "inf", "-inf", "", " ", "1e-320",
                           "abc", "2.5", "99999999999999999999", "auto", "none", "balanced",
                           "\u00e9\u00e9", "../x", "1,2", "--json", "true"])
RUN_OPTIONS = ["--rho", "--eta", "--lambda1", "--lambda2", "--lambda3", "--lambda4", "--batch",
               "--seed", "--class-weight", "--arow-r", "--w-step", "--loss", "--variant", "--scale",
               "--omega-every", "--omega-eps", "--delta", "--synth-seed", "--checkpoint-every",
               "--fail-at", "--topology", "--nodes", "--algo", "--preset", "--aslr"]


@CASES
@given(picked=st.lists(st.tuples(st.sampled_from(RUN_OPTIONS), HOSTILE), min_size=1, max_size=3,
                       unique_by=lambda t: t[0]),
       extra=st.sampled_from([[], ["--relationship"], ["--w-step", "euclid"], ["--algo", "d-admm"]]))
def test_hostile_run_options(tmp_path, picked, extra):
    results = tmp_path / "r.h5"
    results.unlink(missing_ok=True)          # hypothesis runs every example in one tmp_path
    args = ["run", *SMALL, *extra, *[x for pair in picked for x in pair], "--json", "--out", results]
    code, out, err = forked(*args)
    if allowed(code, out, err, args) == "refused":
        assert not results.exists()


@CASES
@given(option=st.sampled_from(["--tasks", "--samples", "--seed"]), value=HOSTILE)
def test_hostile_synth_options(tmp_path, option, value):
    out = tmp_path / "s.h5"
    out.unlink(missing_ok=True)
    args = ["data", "synth", "-o", out, "--tasks", "2", "--samples", "20", option, value]
    if allowed(*forked(*args), args) == "refused":
        assert not out.exists()


@CASES
@given(spec=st.sampled_from(["ring", "full", "star", "torus", "random-regular", "nope", "erdos-renyi"]),
       nodes=HOSTILE)
def test_hostile_topologies(spec, nodes):
    args = ["topo", "show", spec, "--nodes", nodes, "--json"]
    allowed(*forked(*args), args)


# ----------------------------------------------------------------------------- damaged files
def damaged(good: bytes, how: str, where: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    cut = int(where * len(good))
    if how == "truncate":
        return good[:cut]
    if how == "garbage":
        return good + rng.bytes(64)
    blob = bytearray(good)
    for i in rng.integers(cut, len(good), size=8):
        blob[i] ^= 0xFF
    return bytes(blob)


DAMAGE = dict(how=st.sampled_from(["truncate", "flip", "garbage"]), where=st.floats(0.0, 0.999),
              seed=st.integers(0, 2**16))


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


# ----------------------------------------------------------------------------- colliding paths
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


# ----------------------------------------------------------------------------- under mpiexec
@pytest.mark.parametrize("args", [
    ["--class-weight", "1e12", "--synth-samples", "300"],      # the model goes non-finite
    ["--eta", "0"],
    ["--topology", "ring"],
    ["--data", "{bad}"],
    ["--resume", "{bad}"],
])
@pytest.mark.mpi
def test_hostile_runs_under_two_ranks(files, tmp_path, args):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(damaged(files["data"].read_bytes(), "truncate", 0.5, 1))
    args = ["run", "--np", "2", *[str(a).format(bad=bad) for a in args], "--json",
            "--out", tmp_path / "r.h5"]
    code, out, err = forked(*args)
    err = "\n".join(ln for ln in err.splitlines() if not ln.startswith("Abort("))   # MPICH's own
    assert allowed(code, out, err, args) == "refused"
    assert not (tmp_path / "r.h5").exists()
