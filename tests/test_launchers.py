"""Launchers without a cluster: the lone-copies guard, the srun command, and sweeps through
the slurm launcher against stand-ins for sbatch, squeue and srun (the real Slurm runs these
paths in tests/cluster, `make test-cluster`). Each test here takes a second or two. And the
local launcher as root: Open MPI's refusal to run as root is overridden only with a notice on
stderr, once per command, and not at all when the user set its variables."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import MPIEXEC, TIMEOUT, _env, omtl
from omtl_mpi.errors import ConfigError, UserError
from omtl_mpi.runtime import launch
from omtl_mpi.runtime.launchers import local
from omtl_mpi.runtime.launchers.local import ROOT_NOTICE, ROOT_VARS, root_override
from omtl_mpi.runtime.launchers import get
from omtl_mpi.runtime.launchers.launched import announced, lone_copies_message, srun_plugin
from omtl_mpi.runtime.launchers.slurm import minutes_of, settings
from omtl_mpi.sweep import load_plan

SWEEP = """\
name = "two"
seeds = [0, 1]
timeout = 100

[data.s]
synthetic = { tasks = 2, samples = 60 }

[algorithms.c-admm]
ranks = "tasks+1"
[algorithms.arow]
ranks = 1
timeout = 500
"""

SLURM = """
[slurm]
partition = "short"
account = "proj"
options = ["--qos=low", "--mem-per-cpu=1G"]
"""


# ----------------------------------------------------------------------------- the guard
@pytest.mark.parametrize("env, expected", [
    ({"SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_ID": "0"}, (3, "srun")),
    ({"SLURM_NTASKS": "4"}, None),                          # a batch script: one process
    ({"SLURM_NTASKS": "4", "SLURM_STEP_ID": "0"}, (4, "srun")),
    ({"SLURM_STEP_NUM_TASKS": "1"}, None),
    ({"PMI_SIZE": "2", "SLURM_STEP_NUM_TASKS": "2"}, (2, "srun")),     # srun --mpi=pmi2
    ({"PMI_SIZE": "1", "SLURM_STEP_NUM_TASKS": "2"}, None),  # Hydra's one rank, its proxy step
    ({"OMPI_COMM_WORLD_SIZE": "5"}, (5, "mpiexec")),
    ({}, None)])
def test_what_the_launcher_says_it_started(env, expected):
    assert announced(env) == expected


def test_the_fix_names_the_plugin_of_the_mpi_in_use():
    assert srun_plugin("MPICH Version: 5.0.2") == "pmi2"
    assert srun_plugin("Open MPI v5.0.11, package: ...") == "pmix"
    line = lone_copies_message(3, "srun", "Open MPI v5.0.11")
    assert "3 copies" in line and "srun --mpi=pmix" in line and "\n" not in line


def test_lone_copies_stop_before_reading_data_or_writing(tmp_path):
    """What each of `srun --mpi=none -n 3` copies sees: a step of 3 tasks, an MPI world of one."""
    env = dict(_env(), SLURM_STEP_NUM_TASKS="3", SLURM_STEP_ID="0", SLURM_NTASKS="3")
    out = tmp_path / "run.h5"
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "run", "--data", tmp_path / "none.h5",
                        "--out", out, "--checkpoint-every", "5"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env, cwd=tmp_path)
    assert r.returncode == 2
    # before the data is read: the missing file is not what it says
    assert r.stderr.splitlines() == [
        "error: srun started 3 copies of this command, but MPI sees each as a job of one rank: "
        "every copy would run the whole job alone and write the same files; start the ranks with "
        "'srun --mpi=pmi2' (this mpi4py uses MPICH), or with mpiexec inside the allocation"]
    assert os.listdir(tmp_path) == []
    # --np in every copy would start a job per copy
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "run", "--np", "2", "--out", out],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 2 and "--np starts the ranks itself" in r.stderr
    assert len(r.stderr.splitlines()) == 1 and not out.exists()


# ----------------------------------------------------------------------------- srun, sbatch
@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch, squeue, scontrol and srun stand-ins first on PATH: sbatch records the script it
    is given and answers job 4242 (4243, ...); squeue prints tmp/squeue.txt; scontrol ping says
    the controller is up; srun runs the rank command under this venv's mpiexec (one rank:
    directly) and notes its own options in tmp/srun.txt."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "sbatch").write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        n = len(os.listdir({str(tmp_path)!r} + "/submitted")) if os.path.isdir({str(tmp_path)!r} + "/submitted") else 0
        os.makedirs({str(tmp_path)!r} + "/submitted", exist_ok=True)
        open({str(tmp_path)!r} + f"/submitted/{{n}}", "w").write(" ".join(sys.argv[1:]))
        print(4242 + n)
        """))
    (bin_ / "squeue").write_text(f"#!/bin/sh\ncat {tmp_path}/squeue.txt 2>/dev/null\n")
    # the controller is up (a machine's own Slurm, up or down, is never asked)
    (bin_ / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at fake is UP'\n")
    (bin_ / "srun").write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        args = sys.argv[1:]
        own = []
        while args[0].startswith("-"):
            own.append(args.pop(0))
            if own[-1] == "-n":
                own.append(args.pop(0))
        open({str(tmp_path)!r} + "/srun.txt", "a").write(" ".join(own) + "\\n")
        n = own[own.index("-n") + 1]
        cmd = args if n == "1" else [{MPIEXEC!r}, "-n", n] + args
        os.execv(cmd[0], cmd)
        """))
    for tool in bin_.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MPIEXEC_TIMEOUT", str(TIMEOUT))
    for var in ("SLURM_MPI_TYPE", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_srun_command_fits_the_mpi_and_respects_slurm_mpi_type(fake_slurm, monkeypatch):
    cmd = get("slurm").command(3, ["run", "--json"])
    assert cmd[0] == str(fake_slurm / "bin" / "srun")
    assert cmd[1:5] == ["--mpi=pmi2", "-n", "3", "--kill-on-bad-exit=1"]      # the mpich wheel
    assert cmd[5:] == [sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run", "--json"]
    assert get("slurm").configured({"mpi": "pmix"}).command(2, [])[1] == "--mpi=pmix"
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmix")        # srun reads it: nothing is added
    assert get("slurm").command(2, [])[1] == "-n"


@pytest.mark.mpi
def test_np_through_srun(fake_slurm, tmp_path):
    r = omtl("run", "--np", "3", "--launcher", "slurm", "--synth-tasks", "2", "--synth-samples",
             "50", "--json", "--out", tmp_path / "r.h5")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ranks"] == 3
    assert (fake_slurm / "srun.txt").read_text() == "--mpi=pmi2 -n 3 --kill-on-bad-exit=1\n"
    r = omtl("run", "--launcher", "slurm")
    assert r.returncode == 2 and "give --np" in r.stderr


@pytest.mark.parametrize("value, minutes", [(30, 30), ("45", 45), ("1:30", 2), ("02:00:00", 120),
                                            ("1-00:00", 1440), ("0:00:59", 1)])
def test_time_limits(value, minutes):
    assert minutes_of(value, "here") == minutes


@pytest.mark.parametrize("table, message", [
    ({"partion": "x"}, "unknown key partion"),
    ({"time": "soon"}, "not a Slurm time limit"),
    ({"time": 0}, "at least one minute"),
    ({"partition": "a b"}, "partition must be a name"),
    ({"options": "--qos=low"}, "options must be a list"),
    ({"options": ["--array=0-3"]}, "--array is set by the sweep itself"),
    ({"options": ["-n 4"]}, "-n is set by the sweep itself"),
    ({"options": ["-t5"]}, "-t is set by the sweep itself"),
    ({"options": ["qos=low"]}, "not an sbatch option"),
    ({"signal": 5}, "signal is the seconds before the time limit")])
def test_bad_slurm_tables_are_one_clear_line(table, message):
    with pytest.raises(ConfigError, match=message):
        settings(table, "f.toml: slurm")


def test_dry_run_prints_one_array_per_ranks_and_time(fake_slurm, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP + SLURM)
    out = tmp_path / "sw"
    r = omtl("sweep", path, "--out", out, "--launcher", "slurm", "--dry-run", "--jobs", "2", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    scripts = report["scripts"]
    assert [s["runs"] for s in scripts] == [["s.c-admm.s0", "s.c-admm.s1"], ["s.arow.s0", "s.arow.s1"]]
    first = scripts[0]["text"].splitlines()
    manifest = str(out.resolve() / "slurm" / "001-r3-t4.json")
    assert scripts[0]["script"] == manifest.replace(".json", ".sbatch")
    assert first[2:] == [
        "#SBATCH --job-name=two-r3", "#SBATCH --array=0-1%2", "#SBATCH --ntasks=3",
        "#SBATCH --time=4",                 # the 100 s timeout, the warning's 60 s and a minute
        "#SBATCH --signal=B:USR1@60", f"#SBATCH --output={out.resolve()}/logs/slurm-%A_%a.out",
        "#SBATCH --partition=short", "#SBATCH --account=proj", "#SBATCH --qos=low",
        "#SBATCH --mem-per-cpu=1G", "", f"exec {sys.executable} -m omtl_mpi sweep-element {manifest}"]
    assert "#SBATCH --ntasks=1" in scripts[1]["text"] and "#SBATCH --time=11" in scripts[1]["text"]
    assert report["runs"][0]["command"][:4] == [str(fake_slurm / "bin" / "srun"), "--mpi=pmi2", "-n", "3"]
    assert not out.exists() and not (fake_slurm / "submitted").exists()
    # [slurm] time: one limit for every run, so one array per number of ranks
    path.write_text(SWEEP + SLURM + 'time = "00:10:00"\n')
    r = omtl("sweep", path, "--out", out, "--launcher", "slurm", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("#SBATCH --time=10\n") == 2 and "as 2 job arrays" in r.stdout
    # a bad table is the file, the table and what to write, before anything is submitted
    path.write_text(SWEEP + SLURM + 'time = "soon"\n')
    r = omtl("sweep", path, "--out", out, "--launcher", "slurm")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == f"error: {path}: slurm: time 'soon' is not a Slurm time limit; write minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\"\n"
    assert not out.exists()


def _element(manifest, job, task, **env):
    env = dict(_env(), SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_ID=str(task), **env)
    return subprocess.run([sys.executable, "-m", "omtl_mpi", "sweep-element", manifest],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)


@pytest.mark.mpi
def test_submitted_runs_are_recorded_and_each_element_records_its_own(fake_slurm, tmp_path):
    from omtl_mpi.sweep.batch import status_rows, submit
    path = tmp_path / "s.toml"
    path.write_text(SWEEP)
    plan = load_plan(str(path))
    folder = str(tmp_path / "sw")
    said = []
    arrays = submit(plan, folder, settings=plan.slurm, echo=said.append)
    assert [a.job for a in arrays] == ["4242", "4243"]
    assert (fake_slurm / "submitted" / "0").read_text() == f"--parsable {arrays[0].script}"
    index = json.loads((tmp_path / "sw" / "index.json").read_text())
    assert {rid: rec["job"] for rid, rec in index["runs"].items()} == {
        "s.c-admm.s0": "4242_0", "s.c-admm.s1": "4242_1", "s.arow.s0": "4243_0", "s.arow.s1": "4243_1"}
    assert {rec["status"] for rec in index["runs"].values()} == {"submitted"}
    # squeue still lists one element as pending: the other three ended without starting
    (fake_slurm / "squeue.txt").write_text("4242_1|PENDING\n999_0|RUNNING\n")
    # one element runs its run as Slurm would start it: srun under the allocation
    r = _element(arrays[0].manifest, 4242, 0)
    assert r.returncode == 0, r.stderr
    assert (fake_slurm / "srun.txt").read_text() == "--mpi=pmi2 -n 3 --kill-on-bad-exit=1\n"
    log = tmp_path / "sw" / "logs" / "s.c-admm.s0.4242_0.log"
    assert log.read_text().startswith(f"$ {fake_slurm / 'bin' / 'srun'} --mpi=pmi2 -n 3")
    rows = {row["id"]: row for row in status_rows(plan, folder)}
    assert {rid: row["state"] for rid, row in rows.items()} == {
        "s.c-admm.s0": "done", "s.c-admm.s1": "pending", "s.arow.s0": "to run", "s.arow.s1": "to run"}
    assert rows["s.arow.s0"]["recorded"] == "cancelled" and "4243_0" in rows["s.arow.s0"]["error"]
    # the same command submits what is neither done nor in the queue, and nothing twice
    arrays = submit(plan, folder, settings=plan.slurm, echo=said.append)
    assert [[r.id for r in a.runs] for a in arrays] == [["s.arow.s0", "s.arow.s1"]]
    assert os.path.basename(arrays[0].manifest) == "003-r1-t11.json"
    # an element whose run was submitted again since does nothing
    r = _element(str(tmp_path / "sw" / "slurm" / "002-r1-t11.json"), 4243, 0)
    assert r.returncode == 0 and "no longer job 4243_0's" in r.stderr
    # an element that died without recording: failed, once squeue no longer lists it
    index = json.loads((tmp_path / "sw" / "index.json").read_text())
    index["runs"]["s.arow.s1"]["status"] = "running"
    (tmp_path / "sw" / "index.json").write_text(json.dumps(index))
    (fake_slurm / "squeue.txt").write_text("")
    r = omtl("sweep", path, "--out", folder, "--status", "--json")
    states = {row["id"]: (row["state"], row["error"]) for row in json.loads(r.stdout)["runs"]}
    assert states["s.arow.s1"][0] == "failed" and "without recording a result" in states["s.arow.s1"][1]
    assert states["s.c-admm.s1"][0] == "to run" and states["s.c-admm.s0"] == ("done", None)


def test_an_element_outside_an_array_or_of_a_bad_manifest_is_refused(tmp_path):
    r = omtl("sweep-element", tmp_path / "m.json")
    assert r.returncode == 2 and "SLURM_ARRAY_TASK_ID" in r.stderr
    (tmp_path / "m.json").write_text('{"format": "something else"}')
    r = _element(tmp_path / "m.json", 1, 0)
    assert r.returncode == 2 and "not an omtl-mpi array manifest" in r.stderr
    assert "Traceback" not in r.stderr


def test_no_sbatch_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="sbatch was not found"):
        get("slurm").submit("x.sbatch")


# ----------------------------------------------------------------------------- Slurm unreachable
DOWN = """#!/bin/sh
echo 'Slurmctld(primary) at head is DOWN'
echo '*****************************************'
echo '** RESTORE SLURMCTLD DAEMON TO SERVICE **'
echo '*****************************************'
exit 1
"""


def _stub(path, text):
    path.write_text(text)
    path.chmod(0o755)


def test_a_controller_that_cannot_be_reached_is_one_line_within_seconds(fake_slurm, tmp_path):
    """srun and sbatch wait about 10 s for a controller that is down, then fail in their own
    words with no line of ours: 'scontrol ping' first, which answers at once; nothing started,
    submitted or written."""
    import time
    _stub(fake_slurm / "bin" / "scontrol", DOWN)
    _stub(fake_slurm / "bin" / "srun", f"#!/bin/sh\ntouch {fake_slurm}/srun-started\nsleep 30\n")
    omtl("data", "synth", "-o", tmp_path / "t.h5", "--tasks", "2", "--samples", "100")
    t0 = time.monotonic()
    r = omtl("run", "--data", tmp_path / "t.h5", "--np", "2", "--launcher", "slurm", "--out",
             tmp_path / "r.h5")
    assert time.monotonic() - t0 < 8, "waited for srun"
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: Slurm's controller cannot be reached (scontrol ping: Slurmctld(primary) at head is "
        "DOWN): srun can do nothing until it is (is slurmctld running? sinfo, or ask the "
        "cluster's administrators), or use --launcher local"], r.stderr
    assert not (fake_slurm / "srun-started").exists() and not (tmp_path / "r.h5").exists()
    # a sweep's submission: before its folder is made
    (tmp_path / "s.toml").write_text(SWEEP)
    r = omtl("sweep", tmp_path / "s.toml", "--out", tmp_path / "sw", "--launcher", "slurm")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: Slurm's controller cannot be reached") and "sbatch can do" in r.stderr
    assert not (tmp_path / "sw").exists() and not (fake_slurm / "submitted").exists()
    # no configuration at all; a backup controller up while the primary is down is reachable
    _stub(fake_slurm / "bin" / "scontrol", "#!/bin/sh\necho 'scontrol: error: fetch_config: DNS "
          "SRV lookup failed' >&2\necho 'scontrol: fatal: Could not establish a configuration "
          "source' >&2\nexit 1\n")
    with pytest.raises(UserError, match=r"\(scontrol ping: scontrol: fatal: Could not establish a "
                                        r"configuration source\): srun can do nothing"):
        get("slurm").ready()
    _stub(fake_slurm / "bin" / "scontrol", "#!/bin/sh\necho 'Slurmctld(primary) at a is DOWN'\n"
          "echo 'Slurmctld(backup) at b is UP'\nexit 1\n")
    get("slurm").ready()


def test_a_controller_that_does_not_answer_is_one_line(fake_slurm, monkeypatch):
    from omtl_mpi.runtime.launchers import slurm
    _stub(fake_slurm / "bin" / "scontrol", "#!/bin/sh\nexec sleep 30\n")
    monkeypatch.setattr(slurm, "_PING_TIMEOUT", 0.5)
    with pytest.raises(UserError, match="^Slurm's controller did not answer 'scontrol ping' within "
                                        "0.5 s: sbatch can do nothing until it is"):
        get("slurm").ready("sbatch")


def test_a_dry_run_needs_no_slurm(tmp_path, monkeypatch):
    """--dry-run submits nothing: it prints the scripts and commands where Slurm is not
    installed (srun named by its name), and writes nothing."""
    (tmp_path / "s.toml").write_text(SWEEP)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    r = omtl("sweep", tmp_path / "s.toml", "--out", tmp_path / "sw", "--launcher", "slurm",
             "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["runs"][0]["command"][:2] == ["srun", "--mpi=pmi2"] and len(report["scripts"]) == 2
    assert not (tmp_path / "sw").exists()
    # submitting, or running, still needs Slurm: one line each
    r = omtl("sweep", tmp_path / "s.toml", "--out", tmp_path / "sw", "--launcher", "slurm")
    assert r.returncode == 2 and r.stderr.startswith("error: sbatch was not found") and not (tmp_path / "sw").exists()
    r = omtl("run", "--np", "2", "--launcher", "slurm", "--synth-tasks", "2")
    assert r.returncode == 2 and r.stderr.startswith("error: srun was not found"), r.stderr


def test_a_refused_submission_leaves_no_files_to_number_past(fake_slurm, tmp_path):
    """An array sbatch refuses leaves neither its manifest nor its script: submitted again, the
    sweep writes one set of files per array, numbered from 001, not a new copy per attempt."""
    working = (fake_slurm / "bin" / "sbatch").read_text()
    _stub(fake_slurm / "bin" / "sbatch", "#!/bin/sh\necho 'sbatch: error: Batch job submission "
          "failed: Invalid partition name specified' >&2\nexit 1\n")
    (tmp_path / "s.toml").write_text(SWEEP)
    for _ in range(3):
        r = omtl("sweep", tmp_path / "s.toml", "--out", tmp_path / "sw", "--launcher", "slurm")
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "sbatch refused" in r.stderr and "Invalid partition name specified" in r.stderr
        assert os.listdir(tmp_path / "sw" / "slurm") == []
    _stub(fake_slurm / "bin" / "sbatch", working)
    r = omtl("sweep", tmp_path / "s.toml", "--out", tmp_path / "sw", "--launcher", "slurm")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "sw" / "slurm")) == [
        "001-r3-t4.json", "001-r3-t4.sbatch", "002-r1-t11.json", "002-r1-t11.sbatch"]


# -------------- run as root: Open MPI's refusal overridden only with a notice, once per command
NOTICE = f"notice: {ROOT_NOTICE}"


as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="the whole command as root: this process must be root")


def test_root_override_only_for_root_and_only_what_the_user_left_unset():
    assert root_override({}, euid=0, open_mpi=True) == {name: "1" for name in ROOT_VARS}
    assert root_override({}, euid=1000, open_mpi=True) == {}
    assert root_override({name: "0" for name in ROOT_VARS}, euid=0, open_mpi=True) == {}   # theirs
    assert root_override({ROOT_VARS[0]: "1"}, euid=0, open_mpi=True) == {ROOT_VARS[1]: "1"}
    assert root_override({}, euid=0, open_mpi=False) == {}        # MPICH: nothing to override
    assert all(name in ROOT_NOTICE for name in ROOT_VARS)
    assert "normal user" in ROOT_NOTICE and "\n" not in ROOT_NOTICE


def _probe(n_ranks, args):
    """In place of mpiexec: exit 0 if the job was allowed to run as root, else 3."""
    code = ("import os, sys; sys.exit(0 if all(os.environ.get(v) == '1' for v in %r) else 3)"
            % (ROOT_VARS,))
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("user_set", [False, True])
def test_launch_says_when_it_lets_open_mpi_run_as_root(monkeypatch, user_set):
    monkeypatch.setattr(local, "mpi_command", _probe)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    for name in ROOT_VARS:
        if user_set:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    said = []
    assert launch.launch(local.LAUNCHER, 2, [], echo=said.append) == 0        # the job got the permission
    assert said == ([] if user_set else [NOTICE])


def test_launch_as_another_user_neither_overrides_nor_says_so(monkeypatch):
    monkeypatch.setattr(local, "mpi_command", _probe)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)
    monkeypatch.setattr(launch.os, "geteuid", lambda: 1000)
    for name in ROOT_VARS:
        monkeypatch.delenv(name, raising=False)
    said = []
    assert launch.launch(local.LAUNCHER, 2, [], echo=said.append) == 3
    assert said == []


def _root_env(user_set: bool) -> dict:
    env = _env()
    for name in ROOT_VARS:
        env.pop(name, None)
        if user_set:
            env[name] = "1"
    return env


@pytest.mark.mpi
@as_root
@pytest.mark.parametrize("user_set", [False, True])
def test_np_as_root_prints_the_notice_on_stderr_only(mpiexec, user_set):
    """With Open MPI's launcher; with MPICH's (this project's wheel) nothing is overridden."""
    import subprocess
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "run", "--np", "2", "--synth-tasks", "2",
                        "--synth-samples", "50", "--json"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=_root_env(user_set))
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)                        # --json's stdout is the report alone
    notices = 0 if user_set or not local.uses_open_mpi() else 1
    assert r.stderr.count(NOTICE) == notices, r.stderr


ROOT_SWEEP = """\
name = "root"
seeds = [0, 1]
[data.s]
synthetic = { tasks = 2, samples = 50 }
[algorithms.c-admm]
ranks = 2
[algorithms.arow]
ranks = 1
"""


@pytest.mark.mpi
@pytest.mark.parametrize("user_set", [False, True])
def test_a_sweep_says_it_once_not_once_per_run(mpiexec, tmp_path, monkeypatch, user_set):
    # in this process, as root whoever runs the tests: two runs under mpiexec, two in one process
    from omtl_mpi.sweep import load_plan, run_sweep
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)       # MPICH ignores the variables
    for name in ROOT_VARS:
        if user_set:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MPIEXEC_TIMEOUT", str(TIMEOUT))
    path = tmp_path / "root.toml"
    path.write_text(ROOT_SWEEP)
    plan = load_plan(str(path))
    assert sorted(r.ranks for r in plan.runs) == [1, 1, 2, 2]
    said = []
    assert run_sweep(plan, str(tmp_path / "out"), echo=said.append) == {"done": 4}
    assert said.count(NOTICE) == (0 if user_set else 1), said
