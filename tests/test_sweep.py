"""Sweeps and reports: plan expansion and its errors, a tiny sweep under mpiexec that is
interrupted and resumed, failures and timeouts recorded (a run gone non-finite among them),
the report's tables and figures, and random sweep files (hypothesis): planned or one line."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import TIMEOUT, _env, omtl_forked as omtl
from omtl_mpi.errors import ConfigError
from omtl_mpi.sweep import load_plan, rank_count

TINY = """\
name = "tiny"
seeds = [0, 1]
timeout = 120

[data.synthetic]
synthetic = { tasks = 3, samples = 400 }
label = "Synthetic"
target = 0.8

[data.later]
path = "not-imported-yet.h5"
optional = true

[algorithms.c-admm]
ranks = "tasks+1"
options = { preset = "paper" }

[algorithms.d-admm]
topology = "ring"
options = { preset = "paper" }
"""


def write(folder, text, name="sweep.toml"):
    path = folder / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- the plan
def test_plan_expands_the_cross_product_with_stable_ids(tmp_path, monkeypatch):
    path = write(tmp_path, TINY + """
[algorithms.grid]
algo = "d-admm"
topology = ["ring", "full"]
grid = { rho = [0.1, 1.0], loss = ["hinge", "logistic"] }
ranks = 2
""")
    plan = load_plan(str(path))
    ids = [r.id for r in plan.runs]
    assert ids[:4] == ["synthetic.c-admm.s0", "synthetic.c-admm.s1", "synthetic.d-admm.s0",
                       "synthetic.d-admm.s1"]
    assert len(ids) == 4 + 2 * 2 * 2 * 2 and len(set(ids)) == len(ids)
    assert "synthetic.grid.full.rho=1.0.loss=logistic.s1" in ids
    assert plan.skipped and "not-imported-yet.h5" in plan.skipped[0]
    by_id = {r.id: r for r in plan.runs}
    assert by_id["synthetic.c-admm.s0"].ranks == 4 and by_id["synthetic.d-admm.s0"].ranks == 3
    run = by_id["synthetic.grid.full.rho=1.0.loss=logistic.s1"]
    assert run.ranks == 2 and run.grid == {"rho": 1.0, "loss": "logistic"}
    assert "--rho" in run.args and "--seed" in run.args and run.args[run.args.index("--topology") + 1] == "full"
    # same file, same ids and hashes; a changed option changes the hash, not the id
    again = {r.id: r.config_hash for r in load_plan(str(path)).runs}
    assert again == {r.id: r.config_hash for r in plan.runs}
    changed = load_plan(str(write(tmp_path, TINY.replace("samples = 400", "samples = 500"), "b.toml")))
    assert changed.runs[0].id == plan.runs[0].id and changed.runs[0].config_hash != plan.runs[0].config_hash
    # so does a change of what the same arguments mean (a default of a newer version): the
    # resolved configuration is part of the hash, so the run is not taken as done
    from omtl_mpi.config import RunConfig
    monkeypatch.setattr(RunConfig, "fingerprint", lambda self: "another version's defaults")
    assert load_plan(str(path)).runs[0].config_hash != plan.runs[0].config_hash


def test_a_run_is_done_for_the_data_and_code_it_ran_on_not_for_a_path(tmp_path, monkeypatch):
    """The run hash follows the data file's bytes (a re-import under the same name re-runs; the
    same file elsewhere, e.g. in a git worktree, does not) and the package's code."""
    import shutil

    import numpy as np

    from omtl_mpi.data.taskfile import write_tasks
    from omtl_mpi.sweep import plan as plan_module
    rng = np.random.default_rng(0)

    def data(folder, labels):
        folder.mkdir(exist_ok=True)
        write_tasks(str(folder / "d.h5"), ["a", "b"], [rng.normal(size=(6, 3))] * 2, [labels] * 2)
        return write(folder, '[data.d]\npath = "d.h5"\n[algorithms.pa]\n')

    def run_hash(sweep):
        return load_plan(str(sweep)).runs[0].config_hash

    first = data(tmp_path / "one", np.array([1, -1] * 3))
    h = run_hash(first)
    shutil.copytree(tmp_path / "one", tmp_path / "elsewhere")
    assert run_hash(tmp_path / "elsewhere" / "sweep.toml") == h
    assert run_hash(data(tmp_path / "one", np.array([-1, 1] * 3))) != h     # re-imported
    again = run_hash(first)
    monkeypatch.setattr(plan_module, "code_digest", lambda: "another version's code")
    assert run_hash(first) != again


SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(SCRIPTS) if f.endswith(".toml")))
def test_every_sweep_file_of_the_repository_plans(tmp_path, name):
    """Every learner and option of the shipped sweep files (scripts/*.toml: make paper, wstep,
    quality, minilm) passes the option table whatever has been imported here: each file's data sets become small
    synthetic ones, so that every run is planned and checked (a typo would otherwise surface
    only where the real data is, an hour into a sweep)."""
    text = open(os.path.join(SCRIPTS, name)).read()
    text = re.sub(r'^path = ".*"$', "synthetic = { tasks = 6, samples = 20 }", text, flags=re.M)
    text = re.sub(r"^optional = true$", "", text, flags=re.M)
    plan = load_plan(str(write(tmp_path, text, name)))
    algorithms = re.findall(r"^\[algorithms\.([^\]]+)\]$", text, flags=re.M)
    data = re.findall(r"^\[data\.([^\]]+)\]$", text, flags=re.M)
    assert {(r.algorithm, r.data) for r in plan.runs} == {(a, d) for a in algorithms for d in data}


ONE_PROCESS = """\
[data.synthetic]
synthetic = { tasks = 4, samples = 40 }

[algorithms.ENTRY]
algo = "ALGO"
ranks = 1
options = OPTIONS
"""


@pytest.mark.parametrize("algo, options, refused", [
    # --sync partial in one process: --slow names a rank of its simulated clock, as 'omtl-mpi
    # run' takes it (C-ADMM: the server and its --nodes workers; D-ADMM: the graph's nodes)
    ("c-admm", '{ nodes = 4, sync = "partial", slow = "1:5" }', None),
    ("c-admm", '{ nodes = 4, sync = "partial", slow = "4:5" }', None),
    ("c-admm", '{ sync = "partial", slow = "4:5" }', None),                # one worker per task
    ("c-admm", '{ nodes = 4, sync = "partial", slow = "5:5" }', "(ranks 0..4)"),
    ("c-admm", '{ nodes = 2, sync = "partial", delays = "srad", slow = "3:2" }', "(ranks 0..2)"),
    ("d-admm", '{ nodes = 4, sync = "partial", slow = "3:5" }', None),
    ("d-admm", '{ nodes = 4, sync = "partial", slow = "4:5" }', "(ranks 0..3)"),
    # synchronous rounds in one process have no clock to slow
    ("c-admm", '{ slow = "1:5" }', "(ranks 0..0)"),
    ("d-admm", '{ nodes = 4, slow = "1:5" }', "(ranks 0..0)"),
])
def test_one_process_partial_runs_take_slow_ranks_of_their_clock(tmp_path, algo, options, refused):
    text = ONE_PROCESS.replace("ENTRY", algo).replace("ALGO", algo).replace("OPTIONS", options)
    if algo == "d-admm":
        text += 'topology = "ring"\n'
    path = write(tmp_path, text)
    if refused is None:
        assert len(load_plan(str(path)).runs) == 1
        return
    with pytest.raises(ConfigError) as err:
        load_plan(str(path))
    assert "names no rank of this job " + refused in str(err.value)


def test_max_ranks_caps_every_run(tmp_path):
    plan = load_plan(str(write(tmp_path, TINY)), max_ranks=2)
    assert {r.ranks for r in plan.runs} == {2}


@pytest.mark.parametrize("expr, tasks, expected", [
    (3, 5, 3), ("tasks", 5, 5), ("tasks+1", 29, 30), ("min(tasks, 4) + 1", 29, 5),
    ("tasks // 2", 7, 3), ("max(2, tasks - 3)", 4, 2)])
def test_rank_expressions(expr, tasks, expected):
    assert rank_count(expr, tasks, "here") == expected


@pytest.mark.parametrize("expr", ["tasks ** 2", "__import__('os')", "tasks - 5", "cores", "1.5", True, "tasks +"])
def test_bad_rank_expressions_are_refused(expr):
    with pytest.raises(ConfigError, match="ranks"):
        rank_count(expr, 5, "here")


@pytest.mark.parametrize("edit, message", [
    (("[algorithms.c-admm]", "[algorithms.c-admm]\nspeed = 3"), "unknown key speed"),
    (('ranks = "tasks+1"\noptions = { preset = "paper" }', 'ranks = "tasks+1"\noptions = { rhoo = 1 }'), "No such option '--rhoo'"),
    (('ranks = "tasks+1"\noptions = { preset = "paper" }', 'ranks = "tasks+1"\noptions = { rho = -1 }'), "--rho must be > 0"),
    (('ranks = "tasks+1"\noptions = { preset = "paper" }', 'ranks = "tasks+1"\noptions = { gamma0 = 1 }'), "--gamma0 does not apply to c-admm"),
    (('ranks = "tasks+1"\noptions = { preset = "paper" }', 'ranks = "tasks+1"\noptions = { seed = 1 }'), "set by the sweep itself"),
    (("[algorithms.c-admm]", "[algorithms.c-admm]\ntopology = \"ring\""), "topology applies to the neighbour"),
    (("topology = \"ring\"", "topology = \"moebius\""), "moebius"),
    (("[algorithms.d-admm]", "[algorithms.d-admm]\nalgo = \"d-adm\""), "unknown algorithm 'd-adm'"),
    (("ranks = \"tasks+1\"", "ranks = \"tasks*\""), "cannot evaluate ranks"),
    (("seeds = [0, 1]", "seeds = [0, 0]"), "seeds repeat"),
    (("seeds = [0, 1]", "seeds = [-1]"), "seeds must be integers >= 0"),
    (("timeout = 120", "timeout = 0"), "timeout must be a number of seconds > 0"),
    (("optional = true", "optional = false"), "does not exist"),
    (("target = 0.8", "target = 80"), "target is a mean accuracy"),
    (("synthetic = { tasks = 3, samples = 400 }", "synthetic = { tasks = 3, sample = 400 }"), "unknown key sample"),
    (("[data.synthetic]", "[data.synthetic]\npath = \"x.h5\""), "exactly one of path"),
    (("name = \"tiny\"", "name = \"tiny\"\n[[oops]]"), "unknown key oops"),
    (("name = \"tiny\"", "name = tiny"), "not valid TOML"),
])
def test_bad_sweep_files_are_one_clear_line(tmp_path, edit, message):
    old, new = edit
    assert old in TINY
    path = write(tmp_path, TINY.replace(old, new, 1))
    with pytest.raises(ConfigError, match=None) as err:
        load_plan(str(path))
    assert message in str(err.value)
    assert str(path) in str(err.value) or "ranks" in str(err.value) or "max_ranks" in str(err.value)
    r = omtl("sweep", path, "--dry-run")
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_dry_run_lists_runs_and_commands(tmp_path):
    path = write(tmp_path, TINY)
    r = omtl("sweep", path, "--dry-run", "--json", "--out", tmp_path / "out", "--max-ranks", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["to_run"] == 4 and [x["ranks"] for x in out["runs"]] == [3, 3, 3, 3]
    assert all("mpiexec" in x["command"][0] for x in out["runs"])
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- running
def _sweep(path, folder, *extra, timeout=TIMEOUT * 2):
    return omtl("sweep", path, "--out", folder, *extra, timeout=timeout)


def _index(folder):
    return json.loads((folder / "index.json").read_text())


@pytest.mark.mpi
def test_tiny_sweep_interrupted_resumed_and_reported(mpiexec, tmp_path):
    # 200 rounds a run, not 400: the runs' errors 0.18 to 0.19, as at 400
    path = write(tmp_path, TINY.replace("samples = 400", "samples = 200", 1))
    folder = tmp_path / "sweep"
    # interrupt once the first run is recorded
    # SIGINT as a terminal delivers it: when the tests themselves run in the background of a
    # script (`make test &`), SIGINT is ignored and that is inherited, so the sweep would never
    # see it and would run to the end
    proc = subprocess.Popen([sys.executable, "-m", "omtl_mpi", "sweep", str(path), "--out", str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if (folder / "index.json").exists() and _index(folder)["runs"]:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    first = _index(folder)["runs"]
    assert 1 <= len(first) < 4 and all(r["status"] == "done" for r in first.values())
    assert not [f for f in os.listdir(folder / "runs") if ".tmp" in f]      # nothing half-written
    stamps = {rid: os.stat(folder / rec["results"]).st_mtime_ns for rid, rec in first.items()}

    r = _sweep(path, folder, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert f"already recorded: {len(first)} done" in r.stderr
    runs = _index(folder)["runs"]
    assert sorted(runs) == ["synthetic.c-admm.s0", "synthetic.c-admm.s1", "synthetic.d-admm.s0",
                            "synthetic.d-admm.s1"]
    assert all(r["status"] == "done" and r["summary"]["mean_error"] < 0.5 for r in runs.values())
    assert {rid: os.stat(folder / runs[rid]["results"]).st_mtime_ns for rid in first} == stamps
    assert runs["synthetic.c-admm.s0"]["summary"]["ranks"] == 4

    again = _sweep(path, folder)                         # nothing left to do
    assert again.returncode == 0 and "already recorded: 4 done" in again.stderr

    rep = omtl("report", folder, "--json")
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    assert summary["finished"] == 4 and not summary["not_done"]
    out = folder / "report"
    with open(out / "table2.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["learner"], r["data"], r["seeds"]) for r in rows] == [
        ("c-admm", "Synthetic", "2"), ("d-admm", "Synthetic", "2")]
    errors = [runs[f"synthetic.c-admm.s{s}"]["summary"]["mean_error"] for s in (0, 1)]
    assert float(rows[0]["mean_error"]) == pytest.approx(sum(errors) / 2, abs=1e-12)
    table2 = (out / "table2.md").read_text()
    assert "| learner | Synthetic |" in table2 and "| c-admm | " in table2 and " ± " in table2
    with open(out / "table2-f1.csv") as f:          # and its companions, from the same runs
        f1 = list(csv.DictReader(f))
    f1s = [runs[f"synthetic.c-admm.s{s}"]["summary"]["f1"] for s in (0, 1)]
    assert float(f1[0]["f1"]) == pytest.approx(sum(f1s) / 2, abs=1e-12)
    assert "Table 2c: final F1 of the positive class" in (out / "table2-f1.md").read_text()
    assert (out / "table2-balanced.md").exists()
    table3 = (out / "table3.md").read_text()
    assert "Synthetic: rounds to 0.8" in table3 and "Synthetic: ms/round" in table3
    table4 = (out / "table4.md").read_text()
    assert "| Synthetic | C-ADMM |" in table4 and "| Synthetic | D-ADMM ring |" in table4
    assert "Table 4: ablation, final mean balanced error" in (out / "table4-balanced.md").read_text()
    assert "| Synthetic | C-ADMM |" in (out / "table4-f1.md").read_text()
    for name in ("figure1.png", "timing-synthetic.c-admm.s0.png", "timing-synthetic.d-admm.s0.png",
                 "omega-synthetic.c-admm.s0.png", "omega-synthetic.d-admm.s0.png", "report.md"):
        assert (out / name).stat().st_size > 1000, name
        if name.endswith(".png"):
            assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out / "runs.csv") as f:
        assert len(list(csv.DictReader(f))) == 4


@pytest.mark.mpi
def test_failed_and_timed_out_runs_are_recorded_and_the_sweep_goes_on(mpiexec, tmp_path):
    path = write(tmp_path, """
seeds = [0]
[data.small]
synthetic = { tasks = 2, samples = 200 }
[data.huge]
# far past the 3 s timeout (20 s at the fastest 0.04 ms a round), its data made in a second
synthetic = { tasks = 2, samples = 500000 }
[algorithms.crash]
algo = "c-admm"
options = { fail-at = 20, fail-rank = 1 }
[algorithms.fine]
algo = "c-admm"
timeout = 3
""")
    folder = tmp_path / "sweep"
    r = _sweep(path, folder)
    assert r.returncode == 1, r.stderr
    runs = _index(folder)["runs"]
    assert runs["small.fine.s0"]["status"] == "done"
    assert runs["small.crash.s0"]["status"] == "failed"
    assert "[rank 1] InjectedFailure" in runs["small.crash.s0"]["error"]
    assert runs["huge.fine.s0"]["status"] == "timeout" and "3 s timeout" in runs["huge.fine.s0"]["error"]
    assert len(runs) == 4
    assert not (folder / "runs" / "huge.fine.s0.h5").exists()

    # a plain re-run leaves failures alone; --retry-failed runs them again
    again = _sweep(path, folder)
    assert again.returncode == 1 and "--retry-failed" in again.stderr
    assert _index(folder)["runs"] == runs
    # a folder at a failed run's results stops only the sweep that would write them
    (folder / "runs" / "small.crash.s0.h5").mkdir()
    again = _sweep(path, folder)
    assert again.returncode == 1 and "--retry-failed" in again.stderr
    refused = _sweep(path, folder, "--retry-failed")
    assert refused.returncode == 2 and "small.crash.s0.h5: is a folder" in refused.stderr
    assert _index(folder)["runs"] == runs
    (folder / "runs" / "small.crash.s0.h5").rmdir()
    plan = json.loads(omtl("sweep", path, "--out", folder, "--retry-failed", "--dry-run", "--json").stdout)
    assert sorted(x["id"] for x in plan["runs"] if x["state"] == "to run") == \
        ["huge.crash.s0", "huge.fine.s0", "small.crash.s0"]
    time.sleep(1.1)                                      # 'finished' has one-second resolution
    retry = _sweep(path, folder, "--retry-failed", "--jobs", "2")
    assert retry.returncode == 1
    after = _index(folder)["runs"]
    assert after["small.fine.s0"] == runs["small.fine.s0"]
    for rid in ("huge.crash.s0", "huge.fine.s0", "small.crash.s0"):
        assert after[rid]["finished"] != runs[rid]["finished"] and after[rid]["status"] == runs[rid]["status"]

    rep = omtl("report", folder)
    assert rep.returncode == 0, rep.stderr
    text = (folder / "report" / "report.md").read_text()
    assert "small.crash.s0 | failed" in text and "timeout" in text


def test_report_of_a_folder_that_is_not_a_sweep(tmp_path):
    r = omtl("report", tmp_path)
    assert r.returncode == 2 and "not a sweep folder" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "index.json").write_text("{not json")
    r = omtl("report", tmp_path)
    assert r.returncode == 2 and "not a readable sweep index" in r.stderr


# -------------------------------------------------------------- random sweep files (hypothesis)
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
