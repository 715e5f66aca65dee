"""The bench tool (scripts/bench.py): tables it refuses with one line, a real tiny table,
alone and against a base revision, leaving no worktree behind, and a tiny run of the Python
API's table (script rows, ratio_to) with its ratio column."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tool", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROW = '[[rows]]\nlabel = "one process"\noptions = ["--algo", "c-admm"]\n'
HEAD = 'title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n'
API = '[[rows]]\nlabel = "api"\nscript = "scripts/bench/api.py"\noptions = ["--what", "learn_one"]\n'
NET = '[[rows]]\nlabel = "net"\nranks = 4\nhosts = 3\n'


@pytest.mark.parametrize("text, message", [
    ("title = \n", "not valid TOML"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n[[rows]]\nlabel = "x"\nrank = 2\n', "rank"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n[[rows]]\nlabel = "x"\nranks = 0\n', "ranks"),
    ('title = "t"\nsection = "s"\nmetric = "speed"\ndata = { K = 2, d = 3, samples = 30 }\n' + ROW, "metric"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n', "rows"),
    # script: a file of the repository, named from its root, in one process
    (HEAD + API + "ranks = 2\n", "ranks and script together"),
    (HEAD + API.replace("scripts/bench/api.py", "scripts/bench/none.py"), "is not a file of"),
    (HEAD + API.replace('"scripts/bench/api.py"', '"/usr/bin/true"'), "path from the repository's root"),
    (HEAD + API.replace('"scripts/bench/api.py"', '"../x.py"'), "path from the repository's root"),
    (HEAD + API.replace('"scripts/bench/api.py"', "3"), "script = 3"),
    # ratio_to: the label of one other row, of the same metric
    (HEAD + ROW + API + 'ratio_to = "two processes"\n', "not the label of a row"),
    (HEAD + ROW + API + 'ratio_to = "api"\n', "own label"),
    (HEAD + ROW + ROW + API + 'ratio_to = "one process"\n', "label of 2 rows"),
    (HEAD + ROW + API + 'ratio_to = "one process"\nmetric = "wall_s"\n', "one metric"),
    (HEAD + ROW + API + "ratio_to = 1\n", "ratio_to = 1"),
    # hosts: 2 or more, each with a rank; rate: a tc rate, only with hosts
    (HEAD + NET.replace("hosts = 3", "hosts = 1"), "hosts = 1, but it must be at least 2"),
    (HEAD + NET.replace("hosts = 3", "hosts = 0"), "hosts = 0, but it must be an integer"),
    (HEAD + NET.replace("hosts = 3", 'hosts = "3"'), "hosts = '3'"),
    (HEAD + NET.replace("ranks = 4\n", ""), "hosts = 3 needs ranks"),
    (HEAD + NET.replace("ranks = 4", "ranks = 2"), "hosts = 3 needs ranks"),
    (HEAD + ROW + 'rate = "10mbit"\n', "rate goes only with hosts"),
    (HEAD + NET + 'rate = "fast"\n', "rate = 'fast', but it must be a tc rate"),
    (HEAD + NET + 'rate = "10 mbit"\n', "must be a tc rate"),
    (HEAD + NET + "rate = 10\n", "rate = 10, but it must be a string"),
    (HEAD + API + "hosts = 2\n", "needs ranks"),
])
def test_bad_tables_are_one_line(bench, tmp_path, text, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message) as exc:
        bench.load_table(str(path))
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("root", [True, False])
def test_rows_over_hosts_are_refused_unless_root_in_one_line(bench, tmp_path, monkeypatch, root):
    """Whoever runs the tests: the bench makes network namespaces, so a table with a hosts row
    loads as root and is refused, in one line, otherwise (nothing is brought up either way)."""
    path = tmp_path / "t.toml"
    path.write_text(HEAD + NET + 'rate = "10mbit"\n' + NET.replace('"net"', '"net2"') + 'rate = "none"\n')
    monkeypatch.setattr(bench.os, "geteuid", lambda: 0 if root else 1000)
    if root:
        rows = bench.load_table(str(path))["rows"]
        assert [(r["hosts"], r["rate"]) for r in rows] == [(3, "10mbit"), (3, "none")]
    else:
        with pytest.raises(SystemExit, match=r"rows\[0\]: hosts needs root") as exc:
            bench.load_table(str(path))
        assert "\n" not in str(exc.value)


def test_a_hosts_row_starts_mpiexec_on_h0_over_its_hosts_and_tcp(bench):
    """The command of tests/cluster/on_hosts.py: hosts.sh exec h0 mpiexec -genvall -hosts h0,h1,h2
    -launcher ssh -launcher-exec hosts.sh -n RANKS ..., with UCX_TLS=tcp and the hosts' prefix
    in its environment (hosts.sh reads it as the launcher too)."""
    cmd = bench.on_hosts({"hosts": 3}, bench.command(["--data", "x.h5"], 5))
    assert cmd[:3] == [bench.HOSTS, "exec", "h0"]
    assert cmd[3:11] == [bench.MPIEXEC, "-genvall", "-hosts", "h0,h1,h2", "-launcher", "ssh",
                         "-launcher-exec", bench.HOSTS]
    assert cmd[11:13] == ["-n", "5"] and cmd[-2:] == ["--data", "x.h5"]
    env = bench.hosts_env()
    assert env["UCX_TLS"] == "tcp" and env["OMTL_HOSTS_PREFIX"] == bench.HOSTS_PREFIX
    assert env["PATH"].split(":")[0] == str(pathlib.Path(bench.MPIEXEC).parent)


def test_the_byte_metrics_are_rank_0s_and_the_busiest_other_ranks(bench):
    report = {"bytes_per_round": [[400.0, 300.0], [100.0, 50.0], [120.0, 60.0], [90.0, 90.0]]}
    assert bench.METRICS["rank0_bytes"][2](report, 0, 0) == 700.0
    assert bench.METRICS["node_bytes"][2](report, 0, 0) == 180.0
    assert bench.METRICS["node_bytes"][2]({"bytes_per_round": [[0.0, 0.0]]}, 0, 0) == 0.0


@pytest.mark.parametrize("ranks, finish, stragglers, fast", [
    (5, [2.0, 0.6, 0.7, 0.65], "--slow 1:5", 0.7),          # a server's workers: ranks 1..4
    (4, [1.3, 2.9, 1.25, 1.2], "--slow 1:5", 1.3),          # a graph's nodes: ranks 0..3
    (5, [1.3, 2.9, 1.25, 1.2], "--slow 1:3, --slow 2:2", 1.25),
    (4, [1.3, 2.9, 1.25, 1.2], "--delays srad", 2.9),       # nobody slowed: every worker
    (1, [0.5], "none", 0.5),
])
def test_the_fast_workers_end_leaves_out_the_ranks_slow_named(bench, ranks, finish, stragglers,
                                                              fast):
    report = {"worker_finish_s": finish, "ranks": ranks, "stragglers": stragglers}
    assert bench.METRICS["fast_workers_s"][2](report, 0, 0) == fast


def _worktrees():
    return subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout


def test_a_tiny_table_runs_alone_and_against_a_revision(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text('title = "tiny"\nsection = "tiny"\ndata = { K = 2, d = 3, samples = 30 }\n' + ROW)
    before = _worktrees()
    for extra in ([], ["--base", "HEAD"]):
        r = subprocess.run([sys.executable, str(SCRIPT), str(path), "--repeats", "2", "--json", *extra],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)["rows"]
        assert len(rows) == 1
        for tree in rows[0]["trees"].values():
            assert len(tree["runs"]) == 2
            assert tree["fastest"] <= tree["median"] <= tree["slowest"]
        assert len(rows[0]["trees"]) == (2 if extra else 1)
    assert _worktrees() == before


def test_the_api_table_runs_with_its_ratio_column(tmp_path):
    """scripts/bench/api.toml itself, tiny: its script rows report "api", and the table has a
    ratio column whose target row says whether it is met. Tiny: --samples 30 for the rows on
    random tasks, and the row on 100,000 tasks times 200 calls of learn_one, not 20,000 (the
    only change to the table; its data and everything the row reports are the table's)."""
    docs = tmp_path / "perf.md"
    docs.write_text("# Performance\n\n<!-- begin api -->\n<!-- end api -->\n")
    table = (ROOT / "scripts" / "bench" / "api.toml").read_text()
    calls = '"--calls", "20000"'
    assert table.count(calls) == 1
    (tmp_path / "api.toml").write_text(table.replace(calls, '"--calls", "200"'))
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "api.toml"), "--repeats", "1",
                        "--samples", "30", "--docs-file", str(docs)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| run |"))
    cols = [c.strip() for c in lines[header].strip("|").split("|")]
    assert cols[-3:] == ["ratio", "target", "met"]
    rows = {c[0]: dict(zip(cols, c)) for c in
            ([x.strip() for x in line.strip("|").split("|")] for line in lines[header + 2:]
             if line.startswith("|"))}
    assert list(rows) == ["omtl-mpi run, 1 process", "learn_round", "learn_one",
                          "predict_one + learn_one", "learn_one, K = 100,000"]
    # a row on `omtl-mpi data synth` data: its K and d are the run's, its data named
    assert rows["learn_one, K = 100,000"]["K, d"] == "100000, 9"
    assert rows["learn_one, K = 100,000"]["options"].endswith("on `data synth --tasks 100000 --samples 2`")
    assert rows["omtl-mpi run, 1 process"]["ratio"] == ""
    assert rows["omtl-mpi run, 1 process"]["transport chosen"] == "local"
    run = float(rows["omtl-mpi run, 1 process"]["this tree: ms per round"])
    for label in ("learn_round", "learn_one", "predict_one + learn_one"):
        row = rows[label]
        assert row["transport chosen"] == "api"
        assert row["options"].startswith("`scripts/bench/api.py ")
        ms = float(row["this tree: ms per round"])
        assert float(row["ratio"]) == pytest.approx(ms / run, rel=0.01, abs=0.01)
    assert rows["learn_one"]["target"] == "ratio 2"
    assert rows["learn_one"]["met"] == ("yes" if float(rows["learn_one"]["ratio"]) <= 2 else "no")
    assert rows["learn_round"]["target"] == rows["learn_round"]["met"] == ""
    text = docs.read_text()
    assert "scripts/bench/api.py" in text.splitlines()[3]        # the stamp's depends
