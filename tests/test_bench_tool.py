"""The bench tool (scripts/bench.py): tables it refuses with one line, and a real tiny table,
alone and against a base revision, leaving no worktree behind."""
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


@pytest.mark.parametrize("text, message", [
    ("title = \n", "not valid TOML"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n[[rows]]\nlabel = "x"\nrank = 2\n', "rank"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n[[rows]]\nlabel = "x"\nranks = 0\n', "ranks"),
    ('title = "t"\nsection = "s"\nmetric = "speed"\ndata = { K = 2, d = 3, samples = 30 }\n' + ROW, "metric"),
    ('title = "t"\nsection = "s"\ndata = { K = 2, d = 3, samples = 30 }\n', "rows"),
])
def test_bad_tables_are_one_line(bench, tmp_path, text, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message) as exc:
        bench.load_table(str(path))
    assert "\n" not in str(exc.value)


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
