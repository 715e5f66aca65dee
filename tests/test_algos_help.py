"""Each learner's own help for its options: 'omtl-mpi algos NAME' shows a
learner's options with its defaults and what each means to it, only those 'omtl-mpi run --algo
NAME' accepts, and 'omtl-mpi run --help' shows the default learner's meaning and points at the
others."""
import json
import re
from dataclasses import dataclass, field, fields

import pytest
from click.testing import CliRunner

from conftest import omtl_forked as omtl

from omtl_mpi import cli, options
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.independent import ArowParams, PaNode
from omtl_mpi.algorithms.registry import REGISTRY, Algorithm
from omtl_mpi.errors import ConfigError


def invoke(*args):
    result = CliRunner().invoke(cli.cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def unwrapped(text: str) -> str:
    """``text`` with click's line wrapping undone: a line broken after a hyphen joined back,
    every run of white space one space."""
    return " ".join(re.sub(r"-\n\s+", "-", text).split())


def entry(help_text: str, flag: str) -> str:
    """The entry of ``flag`` in a click help text: its line and the indented lines after it,
    up to the next option."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(flag + " "))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines))
                if len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))
    return unwrapped("\n".join(lines[start:end]))


def own_help(params: type, name: str) -> str:
    return next(f for f in fields(params) if f.name == name).metadata["help"]


def test_algos_arow_shows_arows_own_meaning_of_arow_r():
    out = invoke("algos", "arow")
    assert out.startswith("arow  (none)\n  Independent AROW")
    shown = entry(out, "--arow-r")
    assert shown == f"--arow-r FLOAT|auto {own_help(ArowParams, 'arow_r')} [default: auto]"
    assert "is 0.5 times" in shown and "2.0 times with the diagonal covariance" in shown
    assert own_help(AdmmParams, "arow_r") not in unwrapped(out)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_algos_name_lists_exactly_the_learners_fields_each_explained(name):
    """Every field is an option, fixed, or without effect; fails for a new learner field
    without help (its own or its base class's)."""
    algo = REGISTRY[name]
    got = json.loads(invoke("algos", name, "--json"))
    assert {k: got[k] for k in ("name", "summary", "citation", "pattern")} == \
        {"name": name, "summary": algo.summary, "citation": algo.citation, "pattern": algo.pattern}
    defaults = algo.params()
    listed = [o["name"] for o in got["options"]]
    assert sorted(listed + list(got["fixed"]) + got["no_effect"]) == \
        sorted(f.name for f in fields(algo.params))
    assert set(got["fixed"]) == set(getattr(algo.params, "FIXED_FIELDS", ()))
    for o in got["options"]:
        assert o["help"].strip(), f"{name}: --{o['name']} has no help"
        assert o["default"] == getattr(defaults, o["name"])
    assert got["fixed"] == {n: getattr(defaults, n) for n in got["fixed"]}
    text = invoke("algos", name)
    for o in got["options"]:
        assert unwrapped(o["help"]) in entry(text, o["flag"])
    for n in got["no_effect"]:                          # named once, at the end, not explained
        flag = "--" + n.replace("_", "-")
        assert unwrapped(text).count(flag) == 1 and not any(
            line.lstrip().startswith(flag + " ") for line in text.splitlines())
    if not fields(algo.params):
        assert text.endswith("  no hyper-parameters\n")


def _valid(opt, learner):
    """A value the learner's option takes: its default, or 1 where that is None (auto)."""
    default = opt.defaults[learner]
    return opt.type(1) if default is None else default


def _another(opt, value):
    """A valid value of the option's type other than ``value``."""
    if opt.type is bool:
        return not value
    if opt.choices:
        return next(c for c in opt.choices if c != value)
    return value + 1


@pytest.mark.parametrize("name", list(REGISTRY))
def test_what_algos_name_lists_is_what_run_accepts(name):
    """Every option 'algos NAME' lists is accepted by 'run --algo NAME' given alone (with the
    settings its 'only with' names, and refused without them); every field it says the
    learner fixes is accepted at its value and refused at another; every field it says has
    no effect is refused. run_config is what 'omtl-mpi run' checks its options with."""
    opts = options.table()
    got = json.loads(invoke("algos", name, "--json"))
    for o in got["options"]:
        value = _valid(opts[o["name"]], name)
        options.run_config({"algo": name, o["name"]: value, **o["needs"]})
        if o["needs"]:
            with pytest.raises(ConfigError, match=f"{o['flag']} does nothing for this run"):
                options.run_config({"algo": name, o["name"]: value})
    for n, value in got["fixed"].items():
        options.run_config({"algo": name, n: value})
        with pytest.raises(ConfigError, match="cannot be set"):
            options.run_config({"algo": name, n: _another(opts[n], value)})
    for n in got["no_effect"]:
        with pytest.raises(ConfigError, match="does nothing for this run"):
            options.run_config({"algo": name, n: _valid(opts[n], name)})


def test_no_effect_options_are_refused_on_the_command_line_and_left_out():
    """The reviewer's case: admm-single fixes --relationship off, so --omega-every can do
    nothing: 'algos' does not offer it, and 'run' refuses it in one line."""
    shown = invoke("algos", "admm-single")
    assert "--omega-every ROUNDS" not in shown
    assert "--omega-every, --omega-eps." in unwrapped(shown)
    rows = {row["name"]: row for row in json.loads(invoke("algos", "--json"))}
    assert "omega_every" not in rows["admm-single"]["defaults"]
    assert "omega_every" in rows["c-admm"]["defaults"]
    r = omtl("run", "--algo", "admm-single", "--omega-every", "5")
    assert r.returncode == 2 and r.stderr.startswith("error: --omega-every does nothing for this run")


def test_an_option_is_named_with_what_it_needs():
    out = invoke("algos", "c-admm")
    assert entry(out, "--delta").endswith("[default: 1.0; only with --w-step adagrad]")
    assert entry(out, "--omega-every").endswith("[default: 1; only with --relationship]")
    assert entry(out, "--arow-r").endswith("[default: auto]")       # the default w-step is arow


def test_algos_name_shows_that_learners_defaults_and_what_it_fixes():
    out = invoke("algos", "pmsc-log")
    assert entry(out, "--lambda1").endswith("[default: 0.01]")            # not c-admm's 1e-06
    assert ("Fixed (pmsc-log is the published method, with Omega fixed at I/K; setting them "
            "otherwise is refused): --lambda4 0.0, --variant exact, --loss logistic, "
            "--no-relationship, --no-experts.") in unwrapped(out)
    assert entry(out, "--arow-r").endswith("[default: auto; only with --w-step arow]")
    # a field pmsc-log only re-defaults keeps its base class's help and choices
    assert entry(out, "--w-step").startswith("--w-step [euclid|adagrad|arow] " + own_help(AdmmParams, "w_step"))


def test_algos_lists_and_points_at_algos_name():
    assert invoke("algos").endswith("\n'omtl-mpi algos NAME' shows a learner's options with what "
                                    "each means to it.\n")


@pytest.mark.parametrize("flag, others", [
    ("--arow-r", "arow, hashed: 'omtl-mpi algos NAME'"),
    ("--delta", "adagrad, hashed: 'omtl-mpi algos NAME'"),
    ("--omega-eps", "drom: 'omtl-mpi algos drom'"),
    ("--gamma0", "drom, adagrad, pooled, hashed: 'omtl-mpi algos NAME'"),
])
def test_run_help_shows_the_main_meaning_and_names_the_others(flag, others):
    opt = next(o for o in options.table().values() if o.flag == flag)
    shown = entry(invoke("run", "--help"), flag)
    # [1:]: after the learners' names ('d-psgd: initial step ...') it starts in lower case
    assert unwrapped(opt.help)[1:] in shown and f"What it means to {others}." in shown
    for learner in opt.other_meanings:                  # their own text is for 'algos NAME'
        assert unwrapped(opt.helps[learner]) not in shown


def test_run_help_adds_nothing_where_the_learners_agree():
    shown = entry(invoke("run", "--help"), "--rho")
    assert shown == f"--rho FLOAT {own_help(AdmmParams, 'rho')} [default: 0.1]"


@dataclass(frozen=True)
class ToyParams(AdmmParams):
    """C-ADMM's fields; rho means something else here, lambda1 only has another default."""

    rho: float = field(default=2.0, metadata={"help": "The toy's own penalty (> 0)."})
    lambda1: float = 0.5


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(REGISTRY, "toy", Algorithm(
        name="toy", summary="A throwaway learner.", citation="tests/test_algos_help.py",
        pattern="none", reconstruction=False, params=ToyParams, node=PaNode))


def test_a_learner_keeps_its_own_help_and_its_base_classs(toy):
    opts = options.table()
    rho, lambda1 = opts["rho"], opts["lambda1"]
    # the main learner's meaning and default are the option's; the toy keeps its own
    assert (rho.help, rho.default) == (own_help(AdmmParams, "rho"), 0.1)
    assert (rho.helps["toy"], rho.defaults["toy"]) == ("The toy's own penalty (> 0).", 2.0)
    assert rho.other_meanings == ("toy",) and lambda1.other_meanings == ()
    assert lambda1.helps["toy"] == own_help(AdmmParams, "lambda1")
    assert (rho.default_text("toy"), rho.default_text()) == ("2.0", "0.1; toy: 2.0")
    assert entry(invoke("algos", "toy"), "--rho") == "--rho FLOAT The toy's own penalty (> 0). [default: 2.0]"
    assert "What it means to toy: 'omtl-mpi algos toy'." in entry(invoke("run", "--help"), "--rho")
