"""Sparse features end to end (docs/DATASETS.md, *Sparse storage*; docs/ALGORITHMS.md section
2.1, *Large d*): task files of compressed sparse rows, importers that write them, every learner
on sparse rounds equal to the same data stored dense, the steps on the instances' coordinates
against the steps on all of them, in-process == MPI on sparse data, AROW's full covariance at
large d refused (asked for) or switched (not asked for) before anything is read, and sparse
instances in the Python API."""
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import omtl_mpi
from conftest import omtl_forked as omtl, read_results
from omtl_mpi.algorithms.registry import REGISTRY
from omtl_mpi.data import footprint, taskfile
from omtl_mpi.data.featurise import hash_texts_sparse
from omtl_mpi.data.importers import import_libsvm, import_text_csv
from omtl_mpi.data.taskfile import info, load_block, read_meta, write_tasks
from omtl_mpi.errors import DataError
from omtl_mpi.options import run_config
from omtl_mpi.runtime.run import run

LENGTHS = (24, 31, 18, 27)


def sparse_tasks(d: int, seed: int = 0, density: float = 0.08):
    """Four related tasks of sparse instances (about ``density`` of d non-zero), labels from
    a shared model and a task's own."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=d)
    Xs, ys = [], []
    for k, n in enumerate(LENGTHS):
        X = sp.random(n, d, density=density, random_state=seed * 10 + k, format="csr")
        X.data = rng.normal(size=X.nnz)
        ys.append(np.where(X @ (shared + 0.5 * rng.normal(size=d)) >= 0, 1, -1))
        Xs.append(X)
    return Xs, ys


def stored_both_ways(folder, d: int):
    Xs, ys = sparse_tasks(d)
    names = [f"t{k}" for k in range(len(Xs))]
    write_tasks(folder / "sparse.h5", names, Xs, ys)
    write_tasks(folder / "dense.h5", names, [X.toarray() for X in Xs], ys)
    return folder / "sparse.h5", folder / "dense.h5"


def learned(path, **options):
    """(predictions, the model's arrays, mean error) of an in-process run of ``path``."""
    report = run(run_config({"data": str(path), **options}))
    written = report["_written"][2]
    return written.predictions, {k: np.asarray(v) for k, v in written.model.items()}, report["mean_error"]


def assert_same(a, b, atol=1e-10):
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1].keys() == b[1].keys()
    for key in a[1]:
        np.testing.assert_allclose(a[1][key], b[1][key], rtol=0, atol=atol, err_msg=key)


# ------------------------------------------------------------------ the task file
def test_a_sparse_task_file_round_trips(tmp_path, capsys):
    sparse, dense = stored_both_ways(tmp_path, 3000)
    meta = read_meta(sparse)
    assert meta.version == 3 and meta.sparse and read_meta(dense).version == 2
    Xs, _ = sparse_tasks(3000)
    assert meta.nnz == sum(X.nnz for X in Xs) and meta.max_row_nnz == max(np.diff(X.indptr).max() for X in Xs)
    block = load_block(meta, 1, 3)
    assert sp.issparse(block.X)
    np.testing.assert_array_equal(block.X.toarray(), load_block(read_meta(dense), 1, 3).X)
    facts = info(sparse)
    assert facts["storage"] == "sparse" and facts["density"] == pytest.approx(meta.nnz / (100 * 3000))
    from omtl_mpi.cli import main
    with pytest.raises(SystemExit) as code:
        main(["data", "info", str(sparse)])
    assert code.value.code in (0, None)
    assert f"sparse: {meta.nnz:,} non-zero features stored, density" in capsys.readouterr().out


def test_sparse_files_refuse_bad_values_and_damage_in_one_line(tmp_path):
    Xs, ys = sparse_tasks(50)
    Xs[2].data[5] = np.inf
    with pytest.raises(DataError, match="task 2 .* non-finite feature values"):
        write_tasks(tmp_path / "bad.h5", ["a", "b", "c", "d"], Xs, ys)
    assert not (tmp_path / "bad.h5").exists()
    sparse, _ = stored_both_ways(tmp_path, 50)
    with h5py.File(sparse, "r+") as f:
        f["X/indices"][7] = 60                          # beyond d
    with pytest.raises(DataError) as err:
        load_block(read_meta(sparse), 0, 4)
    assert len(str(err.value).splitlines()) == 1
    assert "task 0 ('t0')" in str(err.value) and "columns /X/indices lie outside 0..d-1" in str(err.value)


def _edited(tmp_path, name: str, most=None, entries=None):
    """A copy of a valid sparse file with /X's max_row_nnz set to ``most``, or its entries'
    arrays declared ``entries`` long (chunked, never written: a few KiB on disk) and the row
    pointers ending there."""
    sparse, _ = stored_both_ways(tmp_path, 3000)
    path = tmp_path / name
    path.write_bytes(sparse.read_bytes())
    with h5py.File(path, "r+") as f:
        g = f["X"]
        if most is not None:
            g.attrs["max_row_nnz"] = np.int64(most)
        if entries is not None:
            indptr = g["indptr"][()]
            for key, dtype in (("data", "f8"), ("indices", "i4")):
                del g[key]
                g.create_dataset(key, shape=(entries,), dtype=dtype, chunks=(2 ** 16,))
            indptr[-1] = entries
            g["indptr"][...] = indptr
    return path


@pytest.mark.mpi
def test_sparse_metadata_that_contradicts_its_arrays_is_a_damaged_file(tmp_path, capsys):
    """/X's max_row_nnz sizes a run's rounds and messages, and its entries the memory a run
    asks for: each is checked against the arrays it describes, so that a wrong one is one line
    naming a damaged file (before: a broadcast error mid-run, '[rank 1] ValueError' under
    --np 2; a file of 10^12 declared entries, a few KiB on disk, shown at density 5e+05 by
    'data info' and refused by 'run' for memory)."""
    from conftest import cli
    Xs, _ = sparse_tasks(3000)
    most = max(int(np.diff(X.indptr).max()) for X in Xs)
    total = sum(X.nnz for X in Xs)
    cases = {  # the edit, and what the one line says
        "one.h5": ({"most": 1}, f"/X holds {total:,} entries in 100 rows, which its max_row_nnz "
                                "attribute of 1 (the most entries of a row) contradicts"),
        "two.h5": ({"most": 2}, "which its max_row_nnz attribute of 2"),
        "zero.h5": ({"most": 0}, "which its max_row_nnz attribute of 0"),
        # a row of more entries than declared, found where its rows are read (data info too)
        "short.h5": ({"most": most - 1}, f"entries, more than the file's max_row_nnz attribute "
                                         f"({most - 1}); the file is damaged"),
        "huge.h5": ({"entries": 10 ** 12}, "/X holds 1,000,000,000,000 entries in 100 rows, which "
                                           f"its max_row_nnz attribute of {most}")}
    for name, (edit, needle) in cases.items():
        path = _edited(tmp_path, name, **edit)
        before = path.read_bytes()
        out = tmp_path / f"{name}.out.h5"
        for command in (["data", "info", path], ["run", "--data", path, "--out", out]):
            code, _, err = cli(capsys, *command)
            lines = [line for line in err.splitlines() if line.startswith("error:")]
            assert code == 2 and len(lines) == 1 and needle in lines[0], (name, command, err)
            assert "damaged" in lines[0] and "Traceback" not in err and "memory" not in err, err
        assert not out.exists() and path.read_bytes() == before
    # under --np 2 (a server and a worker): the worker's rows, one line, no results file
    for name in ("two.h5", "short.h5"):
        out = tmp_path / f"{name}.np.h5"
        r = omtl("run", "--data", tmp_path / name, "--np", "2", "--out", out)
        lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert r.returncode == 2 and len(lines) == 1 and cases[name][1] in lines[0], r.stderr
        assert "[rank" not in r.stderr and "Traceback" not in r.stderr and not out.exists()
    # the attribute as the writer wrote it (the largest row exactly) is read as before
    assert read_meta(_edited(tmp_path, "same.h5", most=most)).max_row_nnz == most


# ------------------------------------------------------------------ importers
def test_hashed_text_and_libsvm_are_imported_sparse(tmp_path):
    folder = tmp_path / "reviews"
    folder.mkdir()
    texts = {"de": ["sehr gut", "schlecht, nicht gut", "gut gut"], "fr": ["très bien", "mauvais"]}
    for lang, rows in texts.items():
        labels = ["positive", "negative", "positive"][: len(rows)]
        (folder / f"{lang}.csv").write_text("text,label\n" + "".join(
            f'"{t}",{lab}\n' for t, lab in zip(rows, labels)), encoding="utf-8")
    meta = import_text_csv(folder, tmp_path / "t.h5", dims=2 ** 18)
    assert meta.sparse and meta.dim == 2 ** 18
    got = load_block(meta, 0, 2).X
    want = hash_texts_sparse(texts["de"] + texts["fr"], 2 ** 18)
    assert (got != want).nnz == 0
    (tmp_path / "svm").mkdir()
    (tmp_path / "svm" / "a.txt").write_text("1 5:0.5 90000:2\n-1 3:1\n")
    (tmp_path / "svm" / "b.txt").write_text("-1 90000:-1 1:4\n")
    meta = import_libsvm(tmp_path / "svm", tmp_path / "l.h5")
    assert meta.sparse and meta.dim == 90000
    X = load_block(meta, 0, 2).X
    assert X[0, 4] == 0.5 and X[0, 89999] == 2 and X[2, 0] == 4 and X.nnz == 5
    # an index given twice in a row is refused, naming the line: which value was meant is a guess
    (tmp_path / "svm" / "b.txt").write_text("-1 90000:-1 1:1 1:4\n")
    with pytest.raises(DataError, match=r"b.txt: line 1: feature index 1 appears twice"):
        import_libsvm(tmp_path / "svm", tmp_path / "l2.h5")
    assert not (tmp_path / "l2.h5").exists()


def test_vowpal_wabbit_lines_are_hashed_into_sparse_rows(tmp_path):
    from omtl_mpi.data import import_vw
    from omtl_mpi.data.featurise import feature_column
    (tmp_path / "a.vw").write_text("1 |task de |w good film:2 nice\n-1 |task de |w bad\n"
                                   "1 2.0 'tag |task fr |w bien |c good\n")
    meta = import_vw(tmp_path / "a.vw", tmp_path / "v.h5", task_namespace="task", dims=2 ** 18)
    assert meta.sparse and meta.names == ("de", "fr") and list(meta.lengths) == [2, 1]
    X = load_block(meta, 0, 2).X
    for row, name, value in ((0, "w^film", 2.0), (0, "w^nice", 1.0), (2, "c^good", 1.0)):
        column, sign = feature_column(name, 2 ** 18)
        assert X[row, column] == sign * value
    assert X.nnz == 6
    with pytest.raises(DataError, match="line 1: no '|task NAME' naming the line's task"):
        import_vw(tmp_path / "a.vw", tmp_path / "w.h5", task_namespace="lang")


def test_imports_check_their_memory_before_reading(tmp_path, monkeypatch, capsys):
    from omtl_mpi.cli import main
    folder = tmp_path / "reviews"
    folder.mkdir()
    (folder / "en.csv").write_text("text,label\n" + "good fine,positive\n" * 2000)
    monkeypatch.setattr(footprint, "available_memory", lambda: 2 ** 16)
    with pytest.raises(SystemExit) as code:
        main(["data", "import", "text-csv", str(folder), "-o", str(tmp_path / "o.h5"),
              "--dims", "262144"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code.value.code == 2 and len(err) == 1 and "bytes of text hashed to 262144 features" in err[0]
    assert not (tmp_path / "o.h5").exists()


# ------------------------------------------------------------------ learners
@pytest.mark.parametrize("d", [40, 3000], ids=["small d", "large d"])
def test_every_learner_makes_the_same_predictions_on_sparse_and_dense_storage(tmp_path, d):
    """Sparse rounds (every learner's sparse path) against dense rounds of the same data: the
    same predictions, the learned arrays to 1e-10. At d = 3000 the defaults take AROW's
    diagonal (above 640) and step the instances' coordinates only (above 2048)."""
    sparse, dense = stored_both_ways(tmp_path, d)
    learners = [a for a in REGISTRY if d < 1000 or a in ("c-admm", "d-admm", "admm-single", "arow",
                                                           "adagrad", "pa")]
    for algo in learners:
        options = {"algo": algo, "seed": 3}
        if algo == "d-psgd":
            options["nodes"] = len(LENGTHS)
        assert_same(learned(sparse, **options), learned(dense, **options))
    # a mini-batch (its instances' pairs merged) and online scaling, on the sparse path
    options = {"batch": 3, "scale": "online", "coordinates": "nonzero", "arow_covariance": "diagonal"}
    assert_same(learned(sparse, **options), learned(dense, **options))


@pytest.mark.parametrize("options", [{}, {"algo": "d-admm", "nodes": 3}, {"batch": 2},
                                     {"coordinates": "nonzero", "arow_covariance": "diagonal"}], ids=str)
def test_the_empirical_bayes_expert_reads_sparse_rows_as_dense(tmp_path, options):
    """With more tasks than features the vote has the empirical-Bayes expert, which reads a
    round's sparse rows dense: the same predictions and models as the same data stored dense."""
    from omtl_mpi.algorithms import bayes
    rng = np.random.default_rng(5)
    Xs, ys = [], []
    for k in range(30):
        X = sp.random(6 + k % 7, 8, density=0.3, random_state=k, format="csr")
        X.data = rng.normal(size=X.nnz)
        Xs.append(X)
        ys.append(np.where(X @ rng.normal(size=8) >= 0, 1, -1))
    names = [f"t{k}" for k in range(30)]
    write_tasks(tmp_path / "sparse.h5", names, Xs, ys)
    write_tasks(tmp_path / "dense.h5", names, [X.toarray() for X in Xs], ys)
    assert read_meta(tmp_path / "sparse.h5").sparse and bayes.used(30, 8 + 1)
    assert_same(learned(tmp_path / "sparse.h5", **options), learned(tmp_path / "dense.h5", **options))


def test_steps_on_nonzero_coordinates_need_a_diagonal_metric(tmp_path):
    sparse, _ = stored_both_ways(tmp_path, 40)
    r = omtl("run", "--data", sparse, "--coordinates", "nonzero", "--out", tmp_path / "o.h5")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not (tmp_path / "o.h5").exists()
    assert "needs a diagonal metric" in r.stderr and "--arow-covariance diagonal" in r.stderr


@pytest.mark.parametrize("options", [
    {"arow_covariance": "diagonal"}, {"w_step": "adagrad", "batch": 3},
    {"algo": "d-admm", "arow_covariance": "diagonal", "nodes": 2},
    # a mini-batch where one node's tasks end rounds before the other's: rounds without entries
    {"algo": "d-admm", "arow_covariance": "diagonal", "nodes": 2, "batch": 3},
    {"algo": "admm-single", "w_step": "euclid", "eta": 2.0},
    {"w_step": "euclid", "relationship": True}], ids=str)
def test_steps_on_nonzero_coordinates_are_every_steps_where_nothing_is_zero(tmp_path, options):
    """On instances without a zero feature the pairs a round touches are every coordinate, so
    --coordinates nonzero (entries, the vote's copies of every model) must compute what
    --coordinates all computes (dense rows), to rounding."""
    rng = np.random.default_rng(1)
    Xs = [rng.normal(size=(n, 12)) for n in LENGTHS]
    ys = [np.where(X @ rng.normal(size=12) >= 0, 1, -1) for X in Xs]
    write_tasks(tmp_path / "t.h5", [f"t{k}" for k in range(4)], Xs, ys)
    a, b = (learned(tmp_path / "t.h5", coordinates=c, **options) for c in ("all", "nonzero"))
    assert_same(a, b, atol=1e-9)


def test_the_diagonal_arow_w_step_without_consensus_is_diagonal_arow(tmp_path):
    """Squared hinge, eta = 1 and rho -> 0 give single-task AROW's diagonal variant, step for
    step (its mean step normalised by x^T Sigma x + r, as the full AROW's), as the full metric
    gives full AROW (tests/test_wsteps.py)."""
    sparse, _ = stored_both_ways(tmp_path, 80)
    common = {"arow_r": 0.5, "arow_covariance": "diagonal", "seed": 1}
    admm = learned(sparse, algo="admm-single", w_step="arow", loss="squared-hinge", eta=1.0,
                   rho=1e-12, **common)
    arow = learned(sparse, algo="arow", **common)
    np.testing.assert_array_equal(admm[0], arow[0])
    np.testing.assert_allclose(admm[1]["W"], arow[1]["W"], rtol=1e-6, atol=1e-8)


@pytest.mark.mpi
def test_in_process_equals_mpi_on_sparse_data(mpiexec, tmp_path):
    """The default path at large d (AROW's diagonal, the instances' coordinates, C-ADMM's
    messages of entries sized by the data): one process and 3 ranks agree."""
    sparse, _ = stored_both_ways(tmp_path, 3000)
    r = omtl("run", "--data", sparse, "--seed", "2", "--out", tmp_path / "a.h5")
    assert r.returncode == 0 and "d = 3001 weights: above 640, AROW's diagonal covariance" in r.stderr
    assert "; and above 2048, steps on the coordinates" in r.stderr, r.stderr
    r = omtl("run", "--data", sparse, "--seed", "2", "--out", tmp_path / "b.h5", np_ranks=3)
    assert r.returncode == 0, r.stderr
    a, b = read_results(tmp_path / "a.h5"), read_results(tmp_path / "b.h5")
    np.testing.assert_array_equal(a["predictions"], b["predictions"])
    for key in ("model/W", "model/Z", "model/V", "model/u"):
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-10, err_msg=key)


def test_full_covariance_at_8192_is_refused_or_switched_before_reading(tmp_path, monkeypatch, capsys):
    from omtl_mpi.cli import main
    Xs, ys = sparse_tasks(8191, density=0.001)          # d = 8192 with the intercept
    write_tasks(tmp_path / "t.h5", ["a", "b", "c", "d"], Xs, ys)

    def never(*args, **kwargs):
        raise AssertionError("the data were read")

    def command(*args):
        with pytest.raises(SystemExit) as code:
            main(["run", "--data", str(tmp_path / "t.h5"), *args])
        return code.value.code, capsys.readouterr().err.strip().splitlines()

    monkeypatch.setattr(taskfile, "load_block", never)
    monkeypatch.setattr(taskfile, "load_tasks", never)
    for args in (["--arow-covariance", "full"], ["--algo", "arow", "--arow-covariance", "full"]):
        code, err = command(*args)
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith("error: --arow-covariance full at d = 8192 weights (an intercept counts one): a 8,192 x 8,192 "
                                 "matrix per task (512 MiB)") and "--arow-covariance diagonal" in err[0]
    monkeypatch.undo()
    code, err = command("--algo", "arow", "--json")
    assert code in (0, None) and err == [
        "notice: d = 8192 weights: above 640, AROW's diagonal covariance (full would need a 8,192 x "
        "8,192 matrix per task (512 MiB) and about 134 ms per margin error; --arow-covariance "
        "full asks for it up to d = 4096)"]


@pytest.mark.filterwarnings("error")            # a task of zero instances divides by nothing
def test_single_task_arow_takes_r_for_its_form():
    """experiments/PROTOCOL.md: r = 0.5 m with the full covariance (step 3), 2.0 m with the
    diagonal (step 10 (a)), m the first nonzero instance's squared norm, whether the form was
    asked for or taken by auto at its threshold; an explicit r wins."""
    from omtl_mpi.algorithms.independent import ArowNode, ArowParams
    from omtl_mpi.algorithms.wsteps import AROW_DIAGONAL_ABOVE

    def settled(params, d):
        X = np.zeros((1, 2, d))
        X[0, 1, [1, 3]] = [3.0, 4.0]                # task 0 none yet, task 1 |x|^2 = 25
        node = ArowNode(params, 2, d, 0, 2)
        node.local_step(X, np.ones((1, 2)), np.ones(2))
        return list(node.r)

    assert settled(ArowParams(arow_covariance="full"), 4) == [0.0, 12.5]
    assert settled(ArowParams(arow_covariance="diagonal"), 4) == [0.0, 50.0]
    assert settled(ArowParams(), AROW_DIAGONAL_ABOVE) == [0.0, 12.5]
    assert settled(ArowParams(), AROW_DIAGONAL_ABOVE + 1) == [0.0, 50.0]
    assert settled(ArowParams(arow_r=3.0, arow_covariance="diagonal"), 4) == [3.0, 3.0]


# ------------------------------------------------------------------ the Python API
def test_the_api_takes_sparse_rows_and_dicts_without_a_dense_row():
    rng = np.random.default_rng(2)
    X = sp.random(40, 5000, density=0.002, random_state=4, format="csr")
    y, tasks = rng.choice([-1, 1], 40), rng.integers(0, 3, 40)
    for algo in ("c-admm", "arow"):
        a, b = omtl_mpi.learner(algo, 3, 5000), omtl_mpi.learner(algo, 3, 5000)
        a.partial_fit(X, y, tasks=tasks)
        b.partial_fit(X.toarray(), y, tasks=tasks)
        np.testing.assert_allclose(a.decision_function(X, tasks=tasks),
                                   b.decision_function(X.toarray(), tasks=tasks), atol=1e-10)
        a.learn_one(X[3], 1, task=2)
        b.learn_one(X[3].toarray()[0], 1, task=2)
        assert a.decision_one(X[5], task=2) == pytest.approx(b.decision_one(X[5].toarray()[0], task=2), abs=1e-10)
    m = omtl_mpi.learner("c-admm", 2, 2 ** 18)
    m.learn_one({"great": 1.0, "film": 1.0}, 1, task=0)
    m.learn_one({"awful": 1.0, "film": 1.0}, -1, task=0)
    assert m.predict_one({"great": 1.0}, task=0) == 1 and m.predict_one({"awful": 1.0}, task=0) == -1
    with pytest.raises(omtl_mpi.UserError, match=r"a sparse x must have shape \(1, 262144\)"):
        m.learn_one(sp.csr_matrix((1, 5)), 1, task=0)


def test_the_large_d_constants_are_the_manuals():
    """docs/GUIDE.md, *Large d*, and docs/ALGORITHMS.md section 2.1 state them: the defaults'
    AROW's diagonal above d = 640, the instances' coordinates above 2048, an explicit full
    covariance refused above 4096, the text importers' dimension; changing one must fail here, and the docs change with it."""
    from omtl_mpi.algorithms.admm import LARGE_DIM
    from omtl_mpi.algorithms.wsteps import AROW_DIAGONAL_ABOVE, AROW_FULL_MAX
    from omtl_mpi.data.embed import DEFAULT_HASH_DIMS
    from omtl_mpi.algorithms.bayes import MAX_DIM
    assert (AROW_DIAGONAL_ABOVE, LARGE_DIM, MAX_DIM, AROW_FULL_MAX) == (640, 2048, 640, 4096)
    assert DEFAULT_HASH_DIMS == 16384
    guide = (Path(__file__).resolve().parent.parent / "docs" / "GUIDE.md").read_text()
    assert "above d = 640" in guide and "above d = 2048" in guide and "up to d = 4096" in guide
    assert f"is {DEFAULT_HASH_DIMS:,} by default" in guide
    from omtl_mpi.cli import cli
    from click.testing import CliRunner
    for command in (["data", "import", "text-csv", "--help"], ["data", "import", "vw", "--help"]):
        said = " ".join(CliRunner().invoke(cli, command).output.split())
        assert f"(default {DEFAULT_HASH_DIMS}" in said


def test_new_text_hashed_in_python_is_the_imported_row(tmp_path):
    """omtl_mpi.hash_texts gives the rows the text importers write, bit for bit, so a learner
    trained on an imported file predicts new texts as the import would have seen them."""
    texts = ["Das ist sehr gut", "nicht gut, schlecht", "", "gut gut gut!"]
    (tmp_path / "de.csv").write_text("text,label\n" + "".join(
        f'"{t}",{lab}\n' for t, lab in zip(texts, ["positive", "negative", "negative", "positive"])))
    meta = import_text_csv(tmp_path / "de.csv", tmp_path / "t.h5", dims=2 ** 12)
    got = omtl_mpi.hash_texts(texts, n_features=2 ** 12)
    stored = load_block(meta, 0, 1).X
    assert got.shape == stored.shape and (got != stored).nnz == 0
    assert omtl_mpi.hash_texts(texts[:1]).shape == (1, 16384)          # the importers' default
    assert omtl_mpi.hash_texts(texts, n_features=np.int64(2 ** 12)).shape == (4, 2 ** 12)
    # where the import stores the rows dense (few features), the same numbers
    meta = import_text_csv(tmp_path / "de.csv", tmp_path / "d.h5", dims=8)
    assert not meta.sparse
    np.testing.assert_array_equal(omtl_mpi.hash_texts(texts, 8).toarray(), load_block(meta, 0, 1).X)
    for bad, needle in (("one text", "for one text pass [text]"), ([b"bytes"], "str texts"),
                        ([1.5], "str texts"), (["a", None], "texts[1] is NoneType None"),
                        (5, "got int 5"), (None, "got NoneType"), ({"a": 1}, "got a dict"),
                        ({"a", "b"}, "got a set")):
        with pytest.raises(omtl_mpi.UserError, match=re.escape(needle)) as refused:
            omtl_mpi.hash_texts(bad)
        assert len(refused.value.lines) == 1
    # beyond 2**31 - 1 the int32 columns would wrap (2**63 overflowed the hash's int64)
    for n in (0, -3, 2.0, True, 2 ** 31, 2 ** 63, np.int64(2 ** 40)):
        with pytest.raises(omtl_mpi.UserError, match="n_features must be an integer from 1 to "
                                                     "2147483647") as refused:
            omtl_mpi.hash_texts(texts, n_features=n)
        assert len(refused.value.lines) == 1
    assert omtl_mpi.hash_texts(["a b"], 2 ** 31 - 1).shape == (1, 2 ** 31 - 1)


def test_a_dict_is_hashed_as_each_name_alone_summed_by_column_in_order():
    """hash_entries (names' hashes cached) gives the arrays of the plain rule: every name's
    (column, sign) by feature_column, values summed by column in the dict's order from 0.0
    (np.bincount), zero sums dropped; the same whatever was hashed before, at any dims."""
    from omtl_mpi.data.featurise import feature_column, hash_entries

    def reference(features, dims):
        index, signed = [], []
        for name, value in features.items():
            column, sign = feature_column(str(name), dims)
            index.append(column)
            signed.append(sign * float(value))
        cols, inverse = np.unique(np.array(index, dtype=np.int64), return_inverse=True)
        values = np.bincount(inverse, weights=np.array(signed, dtype=np.float64),
                             minlength=len(cols))
        return cols[values != 0.0], values[values != 0.0]

    rng = np.random.default_rng(0)
    for _ in range(3000):
        dims = int(rng.choice([1, 2, 3, 16, 1000, 2 ** 18]))
        names = [f"f{rng.integers(0, 40)}" for _ in range(int(rng.integers(0, 12)))]
        x = {n: (float(rng.normal()) * 10.0 ** float(rng.integers(-300, 300)) if rng.random() < 0.7
                 else int(rng.integers(-3, 3))) for n in names}
        if names and rng.random() < 0.2:                 # a zero value beside the others
            x[names[0]], x["g" + names[0]] = 1.5, 0.0
        got, want = hash_entries(x, dims), reference(x, dims)
        assert [a.dtype for a in got] == [np.int64, np.float64]
        assert all(a.tobytes() == b.tobytes() and a.shape == b.shape for a, b in zip(got, want))
    assert hash_entries({}, 8)[0].shape == (0,) and hash_entries({"a": 1.0, 7: -0.0}, 8)[0].size == 1
