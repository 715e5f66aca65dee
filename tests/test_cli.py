"""The command line end to end: outputs, JSON, and every bad input's one clear error."""
import json
import os
import re

import h5py
import numpy as np
import pytest

from conftest import SMALL_LENGTHS, omtl_forked as omtl


def test_help_teaches():
    r = omtl("--help")
    assert r.returncode == 0 and "omtl-mpi data synth" in r.stdout
    r = omtl("run", "--help")
    assert r.returncode == 0 and "--no-relationship" in r.stdout and "mpiexec" in r.stdout
    assert "algos NAME" in " ".join(r.stdout.split())     # where each learner's own help is
    # learning options first, then the run's, then what tests and measurements need
    sections = [line for line in r.stdout.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert sections == ["Learning options:", "Run options:", "Testing and tuning:"]
    learning, run, testing = re.split(r"\n(?:Run options|Testing and tuning):\n", r.stdout)
    assert "--algo" in learning and "--rho" in learning and "--data" in learning
    assert "--out" in run and "--np" in run and "--resume" in run and "--fail-at" not in run
    assert all(f in testing for f in ("--fail-at", "--fail-rank", "--fail-mode", "--aslr"))
    assert "hashed: hashed:" not in r.stdout and "spread" not in r.stdout


def test_algos_name_shows_one_learner():
    r = omtl("algos", "arow")
    assert r.returncode == 0 and re.search(r"\n  --arow-r FLOAT\|auto +AROW's regularisation r", r.stdout)
    r = omtl("algos", "no-such")
    assert (r.returncode, r.stdout, r.stderr.count("\n")) == (2, "", 1)
    assert r.stderr.startswith("error: unknown algorithm 'no-such'; choose one of adagrad, ")


def test_run_writes_results_and_json(small_tasks, tmp_path):
    out = tmp_path / "r.h5"
    r = omtl("run", "--data", small_tasks, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    for key in ("algo", "variant", "loss", "tasks", "ranks", "rounds", "mean_error",
                "per_task_error", "balanced_error", "f1", "seconds", "ms_per_round"):
        assert key in report
    assert report["tasks"] == 5 and report["rounds"] == 120 and report["ranks"] == 1
    with h5py.File(out) as f:
        assert f.attrs["format"] == "omtl-mpi-results"
        K, T, lengths = 5, 120, SMALL_LENGTHS
        assert f.attrs["format_version"] == 2
        N = sum(lengths)
        assert f["metrics/mistakes"].shape == (N,) and f["predictions"].shape == (N,)
        assert f["tasks/offsets"][()].tolist() == np.concatenate(([0], np.cumsum(lengths))).tolist()
        assert f["metrics/mean_curve"].shape == (T,)
        assert f["model/omega"].shape == (K, K)
        assert abs(np.trace(f["model/omega"][()]) - 1) < 1e-12
        assert f["timing/seconds"].shape == (1, T, 3)
        assert list(f["timing/seconds"].attrs["phases"]) == ["compute", "communicate", "wait"]
        assert f["tasks/names"].asstr()[()].tolist() == [f"task{k}" for k in range(K)]
        assert json.loads(f.attrs["config"])["params"]["rho"] == 0.1
        assert f["metrics/mean_curve"][-1] == pytest.approx(report["mean_error"])
        # per task: its mistakes over its instances; the curve ends at their mean
        mistakes = f["metrics/mistakes"][()]
        offsets = f["tasks/offsets"][()]
        np.testing.assert_allclose(f["metrics/per_task_error"][()],
                                   [mistakes[a:b].mean() for a, b in zip(offsets[:-1], offsets[1:])])
    assert sorted(os.listdir(tmp_path)) == ["r.h5"]


def test_summary_shows_tasks_and_rank_timing(small_tasks):
    r = omtl("run", "--data", small_tasks, "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "task4" in r.stdout and "mean" in r.stdout and "per-rank time per round" in r.stdout


@pytest.mark.mpi
def test_np_launches_mpiexec(mpiexec, small_tasks, tmp_path):
    r = omtl("run", "--data", small_tasks, "--np", "3", "--json", "--out", tmp_path / "r.h5")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["ranks"] == 3
    with h5py.File(tmp_path / "r.h5") as f:
        assert f["timing/seconds"].shape[0] == 3
        assert f["timing/roles"].asstr()[()].tolist() == ["server", "worker tasks 0-2", "worker tasks 3-4"]


def test_data_commands(tmp_path):
    out = tmp_path / "s.h5"
    assert omtl("data", "synth", "-o", out, "--tasks", "3", "--samples", "200").returncode == 0
    r = omtl("data", "info", out, "--json")
    facts = json.loads(r.stdout)
    assert (facts["tasks"], facts["dims"], facts["total"]) == (3, 9, 600)
    xs = np.arange(24.0).reshape(2, 4, 3)
    ys = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    np.savez(tmp_path / "p.npz", xs=xs, ys=ys)
    r = omtl("data", "import", "npz", tmp_path / "p.npz", "-o", tmp_path / "p.h5")
    assert r.returncode == 0, r.stderr
    # what was imported, not only that something was: the same features, labels 0 -> -1
    from omtl_mpi.data import load_tasks, read_meta
    got = load_tasks(read_meta(tmp_path / "p.h5"), [0, 1])
    for k in range(2):
        np.testing.assert_array_equal(got.X[k], xs[k])
    assert [v.tolist() for v in got.y] == [[1, -1, 1, 1], [-1, -1, 1, -1]]


def bad_file(tmp_path):
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        g = f.create_group("tasks")
        for k in range(3):
            t = g.create_group(f"{k:04d}")
            t.attrs["name"] = f"t{k}"
            X = np.ones((10, 2))
            if k == 2:
                X[4, 1] = np.nan
            t["X"] = X
            t["y"] = np.ones(10)
    return tmp_path / "bad.h5"


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [None, 3])
def test_bad_file_stops_every_rank_with_one_message(mpiexec, tmp_path, ranks):
    path = bad_file(tmp_path)
    out = tmp_path / "r.h5"
    r = omtl("run", "--data", path, "--out", out, np_ranks=ranks, timeout=60)
    assert r.returncode == 2
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert lines == [f"error: {path}: task 2 ('t2'): non-finite feature values (NaN or inf) in 1 row(s), "
                     "first at row 4; clean or drop those rows"]
    assert "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--rho", "0"], "--rho must be > 0"),
    (["--lambda4", "-1"], "--lambda4 must be >= 0"),
    (["--eta", "nan"], "--eta must be a finite number"),
    (["--omega-every", "0"], "--omega-every must be an integer >= 1"),
    (["--batch", "0"], "--batch must be an integer >= 1"),
    (["--algo", "nope"], "unknown algorithm 'nope'"),
    (["--data", "/nonexistent/x.h5"], "/nonexistent/x.h5: no such file"),
    (["--out", "/nonexistent/dir/r.h5"], "folder /nonexistent/dir does not exist"),
    (["--variant", "both"], "Invalid value for '--variant'"),
    (["--scale", "zscore"], "'zscore' is not one of 'none', 'online'"),
    (["--rhoo", "1"], "No such option '--rhoo'. Did you mean '--rho'?"),
])
def test_bad_options_give_one_clear_line(args, message):
    # short synthetic streams, unless the case names a data file (then they would do nothing)
    r = omtl("run", *([] if "--data" in args else ["--synth-samples", "50"]), *args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.mpi
def test_too_many_ranks_says_what_to_use(mpiexec):
    r = omtl("run", "--synth-tasks", "2", "--synth-samples", "50", np_ranks=4, timeout=60)
    assert r.returncode == 2
    assert "uses at most 3 ranks" in r.stderr and "start 3 (one task per worker) or fewer (--np, " \
        "or mpiexec -n)" in r.stderr
    r = omtl("run", "--synth-tasks", "2", "--synth-samples", "50", "--np", "4", timeout=60)
    assert r.returncode == 2 and "uses at most 3 ranks" in r.stderr and "(--np, or mpiexec" in r.stderr


@pytest.mark.mpi
def test_bad_option_under_mpi_is_printed_once(mpiexec):
    r = omtl("run", "--rho", "-1", np_ranks=3, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("--rho must be > 0") == 1


def _commands(command, path, parent=None):
    """(path, command, context) of ``command`` and of every subcommand below it."""
    import click
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            yield from _commands(command.get_command(ctx, name), path + [name], ctx)


def test_every_option_of_every_command_has_help():
    """Walks the whole command tree, 'run' with its options from the option table included."""
    import click
    from omtl_mpi.cli import cli
    seen, bare = 0, []
    for path, command, ctx in _commands(cli, ["omtl-mpi"]):
        for param in command.get_params(ctx):
            if isinstance(param, click.Option):
                seen += 1
                if not (param.help or "").strip():
                    bare.append(f"{' '.join(path)} {'/'.join(param.opts)}")
    assert seen > 100 and not bare, bare


def test_the_run_examples_need_no_folder():
    """The epilog's --out is a file in the working directory (a results/ folder may not exist)."""
    from omtl_mpi.cli import EPILOG_RUN
    outs = [line.split("--out ")[1].split()[0] for line in EPILOG_RUN.splitlines() if "--out " in line]
    assert outs and all("/" not in out for out in outs)
