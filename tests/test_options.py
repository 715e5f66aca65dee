"""The option table (omtl_mpi/options.py): a learner's dataclass field is an option of
'omtl-mpi run', of sweep files and of 'omtl-mpi algos' with nothing else to write; flags are
unique; values render to arguments that parse back to the same run."""
import json
from dataclasses import asdict, dataclass, field

import pytest

from omtl_mpi.algorithms.admm import AdmmParams
from click.testing import CliRunner

from omtl_mpi import cli, options
from omtl_mpi.algorithms.independent import PaNode
from omtl_mpi.algorithms.params import require_positive
from omtl_mpi.algorithms.registry import REGISTRY, Algorithm
from omtl_mpi.errors import ConfigError
from omtl_mpi.sweep import load_plan


@dataclass(frozen=True)
class ToyParams:
    """PA-I (the role class below reads C) with one hyper-parameter no other learner has."""

    C: float = 1.0
    toy_knob: float = field(default=0.5, metadata={"help": "A knob only the toy learner has (> 0)."})

    def __post_init__(self):
        require_positive("toy_knob", self.toy_knob)

    def resolved(self, rounds: int) -> "ToyParams":
        return self


@pytest.fixture
def toy(monkeypatch):
    """A learner registered for one test: its dataclass is all that names the new option."""
    monkeypatch.setitem(REGISTRY, "toy", Algorithm(
        name="toy", summary="A throwaway learner.", citation="tests/test_options.py",
        pattern="none", reconstruction=False, params=ToyParams, node=PaNode))
    return "toy"


def invoke(*args):
    result = CliRunner().invoke(cli.cli, list(args))
    return result.exit_code, result.output


def parse(args):
    """``omtl-mpi run ARGS`` parsed as the command parses them, without running."""
    params = cli.run.make_context("run", list(args)).params
    opts = options.table()
    return options.run_config({k: v for k, v in params.items() if k in opts}), params


def test_a_new_field_is_an_option_of_run(toy):
    code, out = invoke("run", "--help")
    assert code == 0
    assert "--toy-knob FLOAT" in out and "toy: a knob only the toy learner has" in out
    assert "[default: 0.5]" in out.split("--toy-knob")[1].split("--")[0]
    cfg, _ = parse(["--algo", "toy", "--toy-knob", "2"])
    assert cfg.params == ToyParams(toy_knob=2.0)
    code, out = invoke("run", "--algo", "toy", "--toy-knob", "2", "--synth-samples", "50",
                       "--synth-tasks", "2", "--json", "--no-progress")
    assert code == 0, out
    assert json.loads(out)["algo"] == "toy"
    # the dataclass validates, one line
    with pytest.raises(ConfigError, match=r"^--toy-knob must be a finite number > 0, got -1.0$"):
        parse(["--algo", "toy", "--toy-knob", "-1"])
    with pytest.raises(ConfigError, match=r"^--toy-knob does not apply to c-admm; its hyper-parameters: --rho"):
        parse(["--toy-knob", "2"])
    with pytest.raises(ConfigError, match=r"^--rho does not apply to toy; its hyper-parameters: --C, --toy-knob "):
        parse(["--algo", "toy", "--rho", "2"])


def test_a_new_field_is_an_option_of_sweeps(toy, tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text("""
[data.synthetic]
synthetic = { tasks = 2, samples = 50 }
[algorithms.fixed]
algo = "toy"
options = { toy-knob = 0.25 }
[algorithms.grid]
algo = "toy"
grid = { toy_knob = [0.5, 2] }
""")
    runs = {r.id: r for r in load_plan(str(path)).runs}
    assert sorted(runs) == ["synthetic.fixed", "synthetic.grid.toy_knob=0.5", "synthetic.grid.toy_knob=2"]
    assert runs["synthetic.fixed"].args == ("--data", "synthetic", "--synth-tasks", "2", "--synth-samples",
                                            "50", "--algo", "toy", "--toy-knob", "0.25")
    assert runs["synthetic.grid.toy_knob=2"].args[-2:] == ("--toy-knob", "2")
    assert parse(runs["synthetic.grid.toy_knob=2"].args)[0].params.toy_knob == 2.0
    path.write_text(path.read_text().replace("[0.5, 2]", "[0.5, -2]"))
    with pytest.raises(ConfigError, match="algorithms.grid: --toy-knob must be a finite number > 0"):
        load_plan(str(path))


def test_a_new_field_is_shown_by_algos(toy):
    code, out = invoke("algos")
    assert code == 0 and "toy  (none)\n  A throwaway learner." in out
    assert "  defaults: C=1.0, toy_knob=0.5\n" in out
    code, out = invoke("algos", "--json")
    assert {r["name"]: r["defaults"] for r in json.loads(out)}["toy"] == {"C": 1.0, "toy_knob": 0.5}
    code, out = invoke("algos", "toy")
    assert code == 0 and "\n  --toy-knob FLOAT " in out and "[default: 0.5]" in out.split("--toy-knob")[1]


def test_every_flag_is_unique_and_every_option_explained():
    ctx = cli.run.make_context("run", [])
    flags = [flag for p in cli.run.get_params(ctx) for flag in p.opts + p.secondary_opts]
    assert len(flags) == len(set(flags))
    assert all(o.help for o in options.table().values())


def test_bool_fields_have_a_flag_for_each_value():
    """Both flags, so that a value a preset sets can be set back (--preset paper --no-relationship)."""
    opts = options.table()
    assert (opts["relationship"].flag, opts["relationship"].off_flag) == ("--relationship", "--no-relationship")
    assert options.to_args({"relationship": False, "synth_normalize": True}) == \
        ["--no-relationship", "--synth-normalize"]
    assert options.to_args({"relationship": True, "intercept": False}) == ["--relationship", "--no-intercept"]
    assert options.from_flags({"no-relationship": True}) == {"relationship": False}
    assert options.from_flags({"no-relationship": False}) == {"relationship": True}
    assert options.from_flags({"relationship": False}) == {"relationship": False}
    with pytest.raises(ConfigError, match="--relationship is given twice"):
        options.from_flags({"no-relationship": True, "no_relationship": False})
    assert parse(["--no-relationship"])[0].params.relationship is False
    assert parse(["--relationship"])[0].params.relationship is True
    assert parse(["--preset", "paper"])[0].params.relationship is True
    assert parse(["--preset", "paper", "--no-relationship"])[0].params.relationship is False
    assert parse(["--preset", "paper", "--intercept"])[0].intercept is True


def test_what_a_learner_fixes_cannot_be_set():
    with pytest.raises(ConfigError, match="--relationship cannot be set: admm-single learns each task alone"):
        options.run_config({"algo": "admm-single", "relationship": True})
    with pytest.raises(ConfigError, match="--experts cannot be set: pmsc-log"):
        options.run_config({"algo": "pmsc-log", "experts": True})
    # and a preset leaves it as the learner fixes it
    assert options.run_config({"algo": "admm-single", "preset": "paper"}).params.relationship is False


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_values_render_to_args_that_parse_to_the_same_run(name):
    algo = REGISTRY[name]
    # every hyper-parameter that acts with the defaults (one that does nothing is refused)
    idle = getattr(algo.params(), "inactive", dict)()
    values = {"algo": name, "synth_normalize": True, "seed": 3, "batch": 2, "aslr": "on",
              **{k: v for k, v in asdict(algo.params()).items() if k not in idle}}
    cfg, parsed = parse(options.to_args(values))
    assert cfg == options.run_config(values)
    assert cfg.params == algo.params() and parsed["aslr"] == "on"


def test_unknown_sweep_option_is_one_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 50 }\n'
                    '[algorithms.c-admm]\ngrid = { rhoo = [1, 2] }\n')
    with pytest.raises(ConfigError) as err:
        load_plan(str(path))
    assert str(err.value) == (f"{path}: algorithms.c-admm: No such option '--rhoo'. Did you mean "
                              "'--rho'? (see 'omtl-mpi run --help')")


@pytest.mark.parametrize("values, message", [
    ({"rho": "x"}, "--rho takes a number, got 'x'"),
    ({"tau": 1.5, "algo": "drom"}, "--tau takes an integer, got 1.5"),
    ({"synth_samples": True}, "--synth-samples takes an integer, got True"),
    ({"aslr": "pigeon"}, "--aslr must be one of on, off, got 'pigeon'"),
    ({"speed": 3}, "unknown option 'speed'"),
])
def test_values_of_the_wrong_type_are_one_line(values, message):
    with pytest.raises(ConfigError, match=None) as err:
        options.run_config(values)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_paper_preset_is_the_papers_model_for_every_learner(name):
    """What reproduces the paper's figures: no intercept or scaling, and the ADMM learners with
    the paper's settings (those a learner fixes itself stay its own); the other learners keep
    their defaults."""
    cfg = options.run_config({"algo": name, "preset": "paper"})
    default = options.run_config({"algo": name})
    assert (cfg.intercept, cfg.scale, default.intercept) == (False, "none", True)
    if not isinstance(cfg.params, AdmmParams):
        assert cfg.params == default.params
        return
    params = cfg.params.resolved(100)
    # the paper's settings written out: PAPER and AdmmParams.paper() are what the preset is
    # made of, so a wrong value there would be in the expectation too
    paper = {"variant": "exact", "w_step": "euclid", "rho": 0.1, "lambda1": 0.01,
             "lambda2": 0.1, "lambda3": 0.01, "class_weight": "none", "experts": False}
    for key, value in paper.items():
        assert getattr(params, key) == value, key
    assert params.eta == 10.0                                   # sqrt(T)
    own = {"c-admm": ("hinge", 0.01, True), "d-admm": ("hinge", 0.01, True),    # lambda4, Omega
           "admm-single": ("hinge", 0.0, False), "pmsc-log": ("logistic", 0.0, False)}[name]
    assert (params.loss, params.lambda4, params.relationship, params.omega_every) == (*own, 1)
    if name in ("c-admm", "d-admm"):
        assert cfg != default                                   # the defaults are not the paper's


def test_a_preset_fills_in_what_is_not_given():
    cfg = options.run_config({"preset": "paper", "w_step": "arow", "intercept": True})
    assert (cfg.params.w_step, cfg.intercept, cfg.params.rho) == ("arow", True, 0.1)
    # a learner keeps what its own dataclass fixes (ADMM-Single has no lambda4 term)
    assert options.run_config({"algo": "admm-single", "preset": "paper"}).params.lambda4 == 0.0
    assert options.to_args({"preset": "paper"}) == ["--preset", "paper"]
    assert parse(["--preset", "paper", "--rho", "0.5"])[0].params.rho == 0.5
    with pytest.raises(ConfigError, match="--preset must be one of paper, got 'mine'"):
        options.run_config({"preset": "mine"})
