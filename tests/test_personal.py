"""The skewed many-task family (omtl-mpi data synth --family personal): its recipe, reproducible
draws, slices that equal the whole, and the command line."""
import pathlib

import numpy as np
import pytest

from conftest import omtl_forked as omtl
from omtl_mpi.data import info, load_tasks, footprint, read_meta
from omtl_mpi.data.personal import (DEFAULTS, generate_personal, group_centres, personal_blocks,
                                    stream_lengths, task_groups, task_weights)
from omtl_mpi.errors import ConfigError


@pytest.fixture(scope="module")
def default_draw():
    return generate_personal()


def test_the_default_draw_is_the_documented_one(default_draw):
    names, X, y = default_draw
    n = stream_lengths()
    assert len(names) == 2000 and names[7] == "task7"
    assert [len(v) for v in y] == n.tolist() and all(x.shape == (len(v), 20) for x, v in zip(X, y))
    # docs/DATASETS.md: median 15, mean 31.7, longest 721 (heavy-tailed: most streams short)
    assert np.median(n) == 15 and n.max() == 721 and round(n.mean(), 1) == 31.7 and n.min() >= 1
    assert np.mean(n <= 15) >= 0.5 and np.sum(n > 200) >= 10
    assert all(v.dtype == np.int8 and set(np.unique(v)) <= {-1, 1} for v in y)


def test_lengths_follow_the_recipe():
    u = np.random.default_rng([4, 2 ** 31 + 3]).standard_normal(500)
    expected = np.maximum(1, np.rint(8.0 * np.exp(0.7 * u))).astype(np.int64)
    np.testing.assert_array_equal(stream_lengths(500, 8.0, 0.7, seed=4), expected)
    np.testing.assert_array_equal(stream_lengths(500, 8.0, 0.7, 12, seed=4), np.minimum(expected, 12))
    assert stream_lengths(50, 15, 0.0).tolist() == [15] * 50


def test_groups_are_latent_and_shape_the_weights():
    g = task_groups()
    counts = np.bincount(g, minlength=4)
    assert counts.sum() == 2000 and counts.min() > 400        # uniform over 4 groups
    assert len(set(g[:8].tolist())) > 1                       # not contiguous
    centres = group_centres()
    np.testing.assert_allclose(np.linalg.norm(centres, axis=1), 1.0)
    W = task_weights()
    unit = W / np.linalg.norm(W, axis=1, keepdims=True)
    cos = unit @ unit.T
    same = g[:, None] == g[None, :]
    off = ~np.eye(2000, dtype=bool)
    assert cos[same & off].mean() > 0.85 and cos[~same].mean() < 0.5
    # w_k = c_g(k) + spread * z_k / sqrt(d): 0.3 from the centre, on average
    assert abs(np.linalg.norm(W - centres[g], axis=1).mean() - 0.3) < 0.02


def test_labels_are_the_signs_of_the_true_margins():
    names, X, y = generate_personal(tasks=60, noise=0.0, seed=2)
    W = task_weights(tasks=60, seed=2)
    for k in range(60):
        margin = np.array([sum(x[j] * W[k][j] for j in range(20)) for x in X[k]])
        np.testing.assert_array_equal(y[k], np.where(margin >= 0, 1, -1))
    _, _, noisy = generate_personal(tasks=60, seed=2)
    agree = np.mean(np.concatenate(noisy) == np.concatenate(y))
    assert 0.75 < agree < 0.95                                # noise 0.5 flips some labels


def test_draws_are_reproducible_and_slices_equal_the_whole(default_draw):
    names, X, y = default_draw
    part = generate_personal(only=[1999, 3, 3, 640])
    assert part[0] == ["task1999", "task3", "task3", "task640"]
    for got, k in zip(part[1], [1999, 3, 3, 640]):
        assert got.tobytes() == X[k].tobytes()
    # task k depends on (seed, k) only: fewer tasks are the first tasks of more
    fewer = generate_personal(tasks=50)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(fewer[1], X[:50]))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(fewer[2], y[:50]))
    blocks = list(personal_blocks(rows=300))                  # small blocks, the same values
    assert np.concatenate([b[1] for b in blocks]).tobytes() == np.concatenate(X).tobytes()
    assert np.concatenate([b[3] for b in blocks]).tolist() == stream_lengths().tolist()
    assert generate_personal(tasks=5, seed=1)[1][0].tobytes() != X[0].tobytes()


def test_normalize_keeps_the_labels_at_unit_norm():
    _, X, y = generate_personal(tasks=30, seed=5)
    _, Xn, yn = generate_personal(tasks=30, seed=5, normalize=True)
    for a, an, b, bn in zip(X, Xn, y, yn):
        np.testing.assert_array_equal(b, bn)
        np.testing.assert_allclose(np.linalg.norm(an, axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(an * np.linalg.norm(a, axis=1, keepdims=True), a, rtol=1e-12)


@pytest.mark.parametrize("kw, message", [
    ({"tasks": 0}, "--tasks must be an integer >= 1"),
    ({"groups": 0}, "--groups must be an integer >= 1"),
    ({"length_median": 0.0}, "--length-median must be a finite number > 0"),
    ({"length_sigma": float("nan")}, "--length-sigma must be a finite number >= 0"),
    ({"length_max": 0}, "--length-max must be an integer >= 1"),
    ({"spread": -1.0}, "--spread must be a finite number >= 0"),
])
def test_bad_values_are_one_line_each(kw, message):
    with pytest.raises(ConfigError) as err:
        generate_personal(**kw)
    assert len(err.value.lines) == 1 and message in str(err.value)
    with pytest.raises(ConfigError, match="out of range"):
        generate_personal(tasks=3, only=[3])


def test_the_command_line_writes_the_family(tmp_path):
    out = tmp_path / "p.h5"
    r = omtl("data", "synth", "-o", out, "--family", "personal", "--tasks", "40", "--dims", "6",
             "--length-max", "50", "--seed", "3", timeout=120)
    assert r.returncode == 0, r.stderr
    n = stream_lengths(40, DEFAULTS["length_median"], DEFAULTS["length_sigma"], 50, seed=3)
    assert f"40 tasks, {n.sum()} instances (stream lengths {n.min()} to {n.max()}" in r.stdout
    meta = read_meta(out)
    assert meta.version == 2 and meta.dim == 6 and meta.lengths.tolist() == n.tolist()
    names, X, y = generate_personal(tasks=40, dims=6, length_max=50, seed=3)
    got = load_tasks(meta, range(40))
    assert got.names == tuple(names)
    for a, b in zip(got.X, X):
        assert a.tobytes() == b.tobytes()
    assert "personal tasks=40 seed=3" in info(out)["description"]


@pytest.mark.parametrize("args, message", [
    (["--family", "personal", "--samples", "10"], "--samples does not apply to --family personal"),
    (["--family", "personal", "--clusters", "2"], "--clusters applies to --family clustered, not personal"),
    (["--length-max", "5"], "--length-max applies to --family personal, not to the paper's family"),
    (["--family", "clustered", "--groups", "3"], "--groups applies to --family personal, not clustered"),
    (["--family", "unrelated", "--length-sigma", "1"], "--length-sigma applies to --family personal"),
    (["--dims", "4"], "--dims applies to the test beds (--family identical, clustered or unrelated) "
                      "and --family personal"),
    (["--family", "personal", "--length-median", "-2"], "--length-median must be a finite number > 0"),
    # lengths past any machine are refused as floats, before a cast could wrap them
    (["--family", "personal", "--length-median", "1e308", "--tasks", "3"],
     "draw a stream of 5.5e+307 instances, more than any machine holds"),
    (["--family", "personal", "--length-sigma", "400", "--tasks", "50"],
     "draw a stream of inf instances"),
    (["--family", "personal", "--length-median", "4e18", "--length-sigma", "0", "--tasks", "3"],
     "draw a stream of 4e+18 instances"),
])
def test_options_that_do_not_apply_are_refused(tmp_path, capsys, args, message):
    from conftest import refused
    refused(capsys, "data", "synth", "-o", tmp_path / "x.h5", *args, needle=message)
    assert not (tmp_path / "x.h5").exists()


def test_the_memory_check_uses_the_drawn_lengths(tmp_path, capsys, monkeypatch):
    from conftest import refused
    monkeypatch.setattr(footprint, "available_memory", lambda: 2 ** 26)
    n = stream_lengths(20000, 15, 3.0)
    line = refused(capsys, "data", "synth", "-o", tmp_path / "x.h5", "--family", "personal",
                   "--tasks", "20000", "--length-sigma", "3", needle="would need")
    assert line.startswith(f"error: 20000 tasks x {n.sum()} instances (stream lengths "
                           f"{n.min()}..{n.max()}) x 20 features would need")
    assert "cap --length-max" in line and not (tmp_path / "x.h5").exists()


def _personal_script():
    """scripts/lib/personal.py, where the membership floor and the draws' file names live."""
    import importlib
    import sys
    scripts = str(pathlib.Path(__file__).resolve().parent.parent / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("lib.personal")


def _floor_by_hand(tasks, seed, **options):
    """The membership floor one task and one instance at a time, in plain floats (math.erf):
    an implementation independent of scripts/lib/personal.py's vectorised one."""
    import math
    o = {**DEFAULTS, **options}
    _, X, y = generate_personal(tasks=tasks, seed=seed, **options)
    C = group_centres(o["groups"], o["dims"], seed)
    phi = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))     # noqa: E731
    out = []
    for Xk, yk in zip(X, y):
        post = [1.0 / len(C)] * len(C)
        mistakes = []
        for x, label in zip(Xk, yk):
            s = math.sqrt(o["noise"] ** 2 + o["spread"] ** 2 * float(x @ x) / o["dims"])
            m = [float(x @ c) / s for c in C]
            p_plus = sum(p * phi(mg) for p, mg in zip(post, m)) / sum(post)
            mistakes.append(int((1 if p_plus >= 0.5 else -1) != label))
            post = [p * phi(label * mg) for p, mg in zip(post, m)]
            post = [p / sum(post) for p in post]
        out.append(mistakes)
    return out


@pytest.mark.parametrize("options", [{}, {"groups": 8, "dims": 30, "length_median": 8.0}])
def test_the_membership_floor_is_bayes_rule_over_the_true_centres(options):
    """scripts/lib/personal.py's floor makes the mistakes of the same rule computed by hand, and
    with one group it predicts every instance by the sign of the one centre's margin."""
    membership_floor = _personal_script().membership_floor
    floor = membership_floor(40, 3, **options)
    assert [m.tolist() for m in floor] == _floor_by_hand(40, 3, **options)
    assert 0.05 < np.mean([m.mean() for m in floor]) < 0.45       # neither trivial nor chance
    _, X, y = generate_personal(tasks=40, seed=3, groups=1)
    c = group_centres(1, DEFAULTS["dims"], 3)[0]
    assert [m.tolist() for m in membership_floor(40, 3, groups=1)] == [
        (np.where(Xk @ c >= 0, 1, -1) != yk).astype(int).tolist() for Xk, yk in zip(X, y)]


def test_the_floors_likelihood_is_the_generators():
    """P(y = +1 | x, g) = Phi(x . c_g / s(x)), s(x)^2 = noise^2 + spread^2 |x|^2 / d, the
    floor's likelihood, is what the generator draws: the first instances of 20,000 tasks,
    binned by it, have that share of positive labels (without the / d the bins are 0.2 off)."""
    from scipy.special import ndtr
    K, o = 20000, DEFAULTS
    _, X, y = generate_personal(tasks=K, seed=5, length_median=1.0, length_sigma=0.0)
    x, label = np.array([v[0] for v in X]), np.array([v[0] for v in y])
    c = group_centres(o["groups"], o["dims"], 5)[task_groups(K, o["groups"], 5)]
    for scale in (o["dims"], 1.0):
        s = np.sqrt(o["noise"] ** 2 + o["spread"] ** 2 * (x * x).sum(axis=1) / scale)
        p = ndtr((x * c).sum(axis=1) / s)
        bins = np.minimum((p * 10).astype(int), 9)
        gap = max(abs((label[bins == b] > 0).mean() - p[bins == b].mean()) for b in range(10))
        assert (gap < 0.05) if scale == o["dims"] else (gap > 0.1), (scale, gap)


def test_file_names_carry_the_familys_options(tmp_path):
    """scripts/lib/personal.py reads a draw's options from its file name and draws it with
    them: the file holds generate_personal's arrays."""
    personal = _personal_script()
    m = personal.FILE.match("personal-30-g3-d5-m4.5-2.h5")
    assert personal.family(m) == {"groups": 3, "dims": 5, "length_median": 4.5}
    assert personal.heading(30, personal.family(m)) == "## K = 30 tasks, 3 groups, d = 5, median 4.5"
    assert personal.family(personal.FILE.match("personal-2000-1.h5")) == {}
    assert personal.FILE.match("personal-30-g3-2.h5") is None
    path = tmp_path / "personal-30-g3-d5-m4.5-2.h5"
    personal.draw({path.name: str(path)})                  # by omtl-mpi data synth
    got = load_tasks(read_meta(path), range(30))
    _, X, y = generate_personal(tasks=30, groups=3, dims=5, length_median=4.5, seed=2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got.X, X)) and len(got.X) == 30
    assert all(np.array_equal(a, b) for a, b in zip(got.y, y))
