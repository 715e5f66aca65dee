"""The options of a run: one table, generated from :class:`~omtl_mpi.config.RunConfig` and from
every registered learner's hyper-parameter dataclass.

The command line (``omtl-mpi run``), sweep files and ``omtl-mpi algos`` read names, flags,
types, defaults, help and choices from here, so a learner's new dataclass field (with
``metadata={"help": ...}``) is an option everywhere. The table checks only types: values go
through the dataclasses, whose ``__post_init__`` check them.
"""
import functools
import itertools
import types
import typing
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .algorithms.admm import PAPER
from .config import RunConfig
from .errors import ConfigError

_TYPES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class Option:
    """One option of a run: its field ``name`` (``w_step``), its ``flag`` for true
    (``--w-step``; a bool's :attr:`off_flag` is for false), ``type`` (bool, int, float or
    str), RunConfig's ``default`` and ``help`` (a hyper-parameter's: the main learner's, see
    :func:`table`), ``kind`` ("run": a RunConfig field; "param": a hyper-parameter;
    "execution": how the run executes, which its results do not depend on), for a
    hyper-parameter every learner's ``defaults`` and ``helps`` by learner name, and
    ``none_text``, how a default of None reads (eta: ``sqrt(T)``)."""

    name: str
    flag: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None
    metavar: str | None = None
    kind: str = "run"
    defaults: dict = field(default_factory=dict)
    none_text: str | None = None
    helps: dict = field(default_factory=dict)

    @property
    def learners(self) -> tuple:
        """The learners that have this hyper-parameter (empty for the other options)."""
        return tuple(self.defaults)

    @property
    def off_flag(self) -> str:
        """A bool option's flag for false (``--no-relationship``)."""
        return f"--no-{self.flag[2:]}"

    def show(self, value) -> str:
        """``value`` as ``--help`` and ``omtl-mpi algos`` print it."""
        if isinstance(value, bool):
            return "on" if value else "off"
        return self.none_text if value is None and self.none_text else str(value)

    @property
    def other_meanings(self) -> tuple:
        """The learners to which this option means something other than :attr:`help`."""
        return tuple(name for name, text in self.helps.items() if text != self.help)

    def default_text(self, learner: str | None = None) -> str:
        """The default for ``--help``: ``0.1``, or ``0.1; adagrad: 1.0`` where learners differ;
        with ``learner``, that learner's alone. Empty for a None nobody named."""
        default = self.default if learner is None else self.defaults[learner]
        if default is None and not self.none_text:
            return ""
        others = {}
        for name, value in self.defaults.items() if learner is None else ():
            if value != self.default:
                others.setdefault(self.show(value), []).append(name)
        return "; ".join([self.show(default)]
                         + [f"{', '.join(names)}: {text}" for text, names in others.items()])


ASLR = Option(
    name="aslr", flag="--aslr", type=str, default="on", kind="execution", choices=("on", "off"),
    help="Address-space layout randomisation of the ranks. on: keep the system's randomisation. "
         "off: ranks of a node with more ranks than CPUs run without it (re-started before MPI "
         "starts), so that the ranks sharing a core share its branch predictors too: faster "
         "rounds there (docs/PERFORMANCE.md). Not the default because randomisation is a "
         "defence against memory-corruption exploits and the ranks parse user-supplied files "
         "(HDF5) in C; use off only for data you trust.")
# Named starting points: a preset sets these options unless given. "paper" is the model and
# settings of Li et al. 2025 (docs/ALGORITHMS.md section 1), whatever the defaults become; a
# learner keeps what its dataclass fixes otherwise (ADMM-Single's lambda4 = 0).
PRESETS = {"paper": {"intercept": False, "scale": "none", **PAPER}}
PRESET = Option(
    name="preset", flag="--preset", type=str, default=None, kind="execution",
    choices=tuple(PRESETS),
    help="Start from named settings; options given explicitly still win. paper: the paper's "
         "model and settings (no intercept or scaling, euclid w-step, eta = sqrt(T), rho = "
         "lambda2 = 0.1, lambda1 = lambda3 = lambda4 = 0.01, hinge loss, no experts' vote).")
EXECUTION = (PRESET, ASLR)


def table() -> dict[str, Option]:
    """Every option of a run by name, in ``--help`` order: RunConfig's, the learners' (in
    registry order), then how it executes; generated on every call from the registry as it is.
    A field of several learners is one option with each one's default and help (``defaults``,
    ``helps``); its ``default``, ``help``, choices and metavar are the main learner's: the
    default ``--algo`` where it has the field, else the first learner that has it.
    """
    from .algorithms.registry import REGISTRY
    opts = {f.name: _option(f.name, RunConfig, _default(f)) for f in fields(RunConfig)
            if f.name != "params"}          # the learner's dataclass: its fields are options
    main = opts["algo"].default
    uses: dict[str, list] = {}
    taken = set(opts) | {o.name for o in EXECUTION}
    for algo in REGISTRY.values():
        for f in fields(algo.params):
            if f.name in taken:
                raise ValueError(f"{algo.name}: hyper-parameter {f.name!r} is also a run option")
            uses.setdefault(f.name, []).append((algo, f))
    for name, found in uses.items():
        if len({_hints(a.params)[f.name] for a, f in found}) > 1:
            # one flag must parse the same way for every learner
            raise ValueError(f"hyper-parameter {name!r} has different types in "
                             f"{', '.join(a.name for a, _ in found)}")
        algo, f = next(((a, f) for a, f in found if a.name == main), found[0])
        opts[name] = _option(name, algo.params, _default(f), kind="param",
                             defaults={a.name: _default(f) for a, f in found},
                             helps={a.name: _metadata(a.params, name).get("help", "") for a, _ in found})
    opts.update((o.name, o) for o in EXECUTION)
    return opts


@functools.cache
def _hints(owner: type) -> dict:
    # evaluating the annotations is most of the table's cost; a class's do not change
    return typing.get_type_hints(owner)


def _metadata(owner: type, name: str) -> dict:
    """The metadata of dataclass ``owner``'s field ``name``, each key from the nearest class
    that gives it: a subclass that only changes a field's default keeps its base's help."""
    meta = {}
    for klass in reversed(owner.__mro__):
        f = vars(klass).get("__dataclass_fields__", {}).get(name)
        if f is not None:
            meta.update(f.metadata)
    return meta


def _option(name: str, owner: type, default, **more) -> Option:
    py_type = _hints(owner)[name]
    if isinstance(py_type, types.UnionType):    # "int | None": None is "not given"
        py_type = next(k for k in typing.get_args(py_type) if k is not type(None))
    if py_type not in _TYPES:
        raise ValueError(f"{owner.__name__}.{name}: an option is bool, int, float or str, not {py_type}")
    dashed = name.replace("_", "-")
    meta = _metadata(owner, name)
    return Option(name=name, flag=f"--{dashed}",
                  type=py_type, default=default, help=meta.get("help", ""),
                  choices=tuple(meta["choices"]) if "choices" in meta else None,
                  metavar=meta.get("metavar"), none_text=meta.get("none_text"), **more)


def _default(f):
    return f.default_factory() if f.default is MISSING else f.default


def run_config(values: Mapping[str, Any]) -> RunConfig:
    """The RunConfig of a run from option values keyed by name (None or missing: not given,
    so that RunConfig's or the learner's own default applies): what ``omtl-mpi run``, sweeps
    and Python callers build a run from. ``preset`` fills in the options not given
    (:data:`PRESETS`); ``aslr`` is checked and left out. A ConfigError has one line per
    problem: an unknown option or learner, a hyper-parameter the learner does not have, a
    value of the wrong type, what the dataclasses' own checks find."""
    from .algorithms.registry import get as get_algo
    opts = table()
    given = {name: _checked(opts, name, value) for name, value in values.items() if value is not None}
    algo = get_algo(given.get("algo", opts["algo"].default))
    foreign = [name for name in given if opts[name].kind == "param" and algo.name not in opts[name].defaults]
    if foreign:
        own = [o.flag for o in opts.values() if algo.name in o.defaults]
        raise ConfigError(f"{opts[foreign[0]].flag} does not apply to {algo.name}; its hyper-parameters: "
                          f"{', '.join(own) or 'none'} (see 'omtl-mpi algos')")
    preset = preset_values(given.get("preset"), algo, opts)
    chosen = {**preset, **given}
    params = algo.params(**{k: v for k, v in chosen.items() if opts[k].kind == "param"})
    cfg = RunConfig(**{k: v for k, v in chosen.items() if opts[k].kind == "run"}, params=params)
    idle = inactive(cfg, algo)
    unused = [name for name in given if name in idle]
    if unused:
        # an option that changes nothing is a mistake the user should hear about: a run
        # believed to be on a ring, or with some r, that is not
        raise ConfigError("\n".join(f"{opts[n].flag} does nothing for this run: {idle[n]}; leave "
                                     "it out" for n in unused))
    return cfg


def inactive(cfg: RunConfig, algo) -> dict:
    """The options that have no effect in run ``cfg`` of learner ``algo``, each with the reason:
    :meth:`RunConfig.inactive` and the hyper-parameters' own ``inactive`` (where the learner's
    dataclass has one). :func:`run_config` refuses them; :func:`effects` reads them."""
    return {**cfg.inactive(algo.pattern), **getattr(cfg.params, "inactive", dict)()}


def effects(algo, opts: dict | None = None) -> dict:
    """What each hyper-parameter of learner ``algo`` needs to have an effect, by name: ``{}``
    where it has one with the defaults; the options to change where it has one only then
    (``{"w_step": "adagrad"}`` for C-ADMM's ``delta``); None where no value of the free options
    gives it one (ADMM-Single's ``omega_every``: it fixes ``relationship`` off). A fixed field
    counts as having an effect. Found by trying, through :func:`inactive`, every combination of
    the free bools and choices; the one that changes fewest defaults is named.
    """
    opts = table() if opts is None else opts
    cls = algo.params
    names = [f.name for f in fields(cls)]
    fixed = set(getattr(cls, "FIXED_FIELDS", ()))
    default = cls()
    free = [n for n in names if n not in fixed and (opts[n].type is bool or opts[n].choices)]
    domains = [(False, True) if opts[n].type is bool else opts[n].choices for n in free]
    needs: dict = {}
    for values in itertools.product(*domains):
        try:
            params = cls(**dict(zip(free, values)))
        except ConfigError:         # a combination the learner refuses: none of its runs
            continue
        changed = {n: v for n, v in zip(free, values) if v != getattr(default, n)}
        idle = inactive(RunConfig(algo=algo.name, params=params), algo)
        for n in names:
            if n not in idle and (n not in needs or len(changed) < len(needs[n])):
                needs[n] = changed
    return {n: needs.get(n) for n in names}


def preset_values(name: str | None, algo, opts: dict) -> dict:
    """The values preset ``name`` gives learner ``algo``: its run options, and the
    hyper-parameters the learner has and does not fix itself (its dataclass's default differs
    from the same field's in the first learner that has it, C-ADMM's for the ADMM ones)."""
    if name is None:
        return {}
    own = {f.name for f in fields(algo.params)} - set(getattr(algo.params, "FIXED_FIELDS", ()))
    return {key: value for key, value in PRESETS[name].items()
            if opts[key].kind == "run" or key in own}


def _checked(opts: dict, name: str, value):
    """``value`` as the option's type (a number may come as text, as on the command line)."""
    opt = opts.get(name)
    if opt is None:
        raise ConfigError(f"unknown option {name!r}; options: {', '.join(opts)}")
    if opt.none_text is not None and value == opt.none_text:       # eta = "auto": the default
        return None
    py_type, ok = opt.type, False
    if isinstance(value, bool) or py_type in (bool, str):
        ok = type(value) is py_type
    elif isinstance(value, (str, int)) or py_type is float and isinstance(value, float):
        with suppress(ValueError):
            value, ok = py_type(value), True
    if not ok:
        raise ConfigError(f"{opt.flag} takes {_TYPES[py_type]}, got {value!r}")
    # the dataclasses check their own fields' choices; only execution options have none
    if opt.kind == "execution" and opt.choices and value not in opt.choices:
        raise ConfigError(f"{opt.flag} must be one of {', '.join(opt.choices)}, got {value!r}")
    return value


def from_flags(items: Mapping[str, Any]) -> dict:
    """Options keyed by flag without its dashes, as sweep files write them (``rho``,
    ``w-step`` or ``w_step``, ``relationship = false`` or ``no-relationship = true``), as values
    keyed by name; a ConfigError for a key that is no option, or a flag given something other
    than true or false. Values are not checked here (see :func:`run_config`)."""
    by_flag = {}
    for o in table().values():
        by_flag[o.flag[2:]] = o
        if o.type is bool:
            by_flag[o.off_flag[2:]] = o
    values = {}
    for key, value in items.items():
        opt = by_flag.get(key.replace("_", "-"))
        if opt is None:
            import difflib
            near = difflib.get_close_matches(key, by_flag, n=1)
            raise ConfigError(f"No such option '--{key}'" + (f". Did you mean '--{near[0]}'?" if near else ""))
        if opt.name in values:
            raise ConfigError(f"{opt.flag} is given twice ({key!r} and another spelling)")
        if opt.type is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{opt.flag} is a flag: give true or false, got {value!r}")
            value = value != key.replace("_", "-").startswith("no-")
        values[opt.name] = value
    return values


def to_args(values: Mapping[str, Any]) -> list[str]:
    """Option values keyed by name as ``omtl-mpi run`` arguments, in the mapping's order (a
    ConfigError for an unknown name): written as given (``str()``, so ``--rho 1`` stays
    ``--rho 1``), None left out, a bool as its flag for true or false (``--no-relationship``)."""
    opts = table()
    args = []
    for name, value in values.items():
        opt = opts.get(name)
        if opt is None:
            raise ConfigError(f"unknown option {name!r}; options: {', '.join(opts)}")
        if value is None:
            continue
        if opt.type is not bool:
            args += [opt.flag, str(value)]
        else:
            args.append(opt.flag if value else opt.off_flag)
    return args
