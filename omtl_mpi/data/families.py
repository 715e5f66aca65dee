"""The generated families of ``omtl-mpi data synth``: which options each takes, their defaults,
and whether what they would write fits memory and disk, before anything is generated."""
from __future__ import annotations

from typing import Iterable, NamedTuple

from ..errors import ConfigError


class Plan(NamedTuple):
    """What ``data synth`` writes: the blocks, source, description, instances and what it says."""

    blocks: Iterable
    source: str
    description: str
    rows: int
    said: str


def plan_family(out, family: str, *, tasks, samples, seed, normalize, testbed: dict,
                lengths: dict) -> Plan:
    """The plan of ``family`` with the options given (None: not), ``testbed``'s and ``lengths``'s by
    option name: a ConfigError for one the family does not take, UserError for what does not fit."""
    given = [k for k, v in lengths.items() if v is not None]
    if given and family != "personal":
        other = "to the paper's family" if family == "paper" else family
        raise ConfigError(f"--{given[0]} applies to --family personal, not {other}")
    if family == "paper":
        from .synthetic import blocks
        given = [k for k, v in testbed.items() if v is not None]
        if given:
            raise ConfigError(f"--{given[0]} applies to the test beds (--family identical, "
                              "clustered or unrelated) and --family personal, not to the paper's "
                              "family")
        tasks = 5 if tasks is None else tasks
        samples = 10000 if samples is None else samples
        _synth_fits(out, tasks, samples, 9, "")
        return Plan(blocks(tasks=tasks, samples=samples, seed=seed, normalize=normalize),
                    "omtl-mpi synthetic (Li et al. 2025)",
                    f"paper tasks={tasks} samples={samples} seed={seed} normalize={normalize}",
                    tasks * samples, f"{tasks} tasks x {samples} instances, d=9")
    if family == "personal":
        return _personal_plan(out, tasks, samples, seed, normalize, testbed, lengths)
    from .testbeds import DEFAULTS, testbed_blocks
    if testbed["clusters"] is not None and family != "clustered":
        raise ConfigError(f"--clusters applies to --family clustered, not {family}")
    tasks = DEFAULTS["tasks"] if tasks is None else tasks
    samples = DEFAULTS["samples"] if samples is None else samples
    given = {k: v for k, v in testbed.items() if v is not None}
    dims = given.get("dims", DEFAULTS["dims"])
    _synth_fits(out, tasks, samples, dims, " or --dims")
    blocks = testbed_blocks(family, tasks=tasks, samples=samples, seed=seed, normalize=normalize,
                            **given)
    what = " ".join(f"{k}={v}" for k, v in {**given, "normalize": normalize or None}.items()
                    if v is not None)
    return Plan(blocks, f"omtl-mpi test bed '{family}'",
            f"{family} tasks={tasks} samples={samples} seed={seed} {what}".strip(),
            tasks * samples, f"{tasks} tasks x {samples} instances, d={dims}")


def _personal_plan(out, tasks, samples, seed, normalize, testbed, lengths):
    import numpy as np

    from . import personal
    from .footprint import file_bytes, personal_bytes
    from .importers.common import require_disk, require_memory
    if samples is not None:
        raise ConfigError("--samples does not apply to --family personal: its stream lengths are "
                          "drawn (--length-median, --length-sigma, --length-max)")
    if testbed["clusters"] is not None:
        raise ConfigError("--clusters applies to --family clustered, not personal (personal: "
                          "--groups)")
    given = {k.replace("-", "_"): v for k, v in {**testbed, **lengths}.items()
             if v is not None and k != "clusters"}
    options = {**personal.DEFAULTS, "tasks": tasks or personal.DEFAULTS["tasks"], **given}
    personal.check_options(**options, seed=seed)
    drawn = personal.stream_lengths(options["tasks"], options["length_median"],
                                    options["length_sigma"], options["length_max"], seed)
    K, N, d = len(drawn), int(drawn.sum()), options["dims"]
    what = (f"{K} tasks x {N} instances (stream lengths {int(drawn.min())}..{int(drawn.max())}) "
            f"x {d} features")
    fix = "lower --tasks, --length-median, --length-sigma or --dims, or cap --length-max"
    require_memory(personal_bytes(drawn, d), what, fix)
    require_disk(file_bytes(N, d, K), out, what, fix)
    shown = " ".join(f"{k}={v}" for k, v in {**given, "normalize": normalize or None}.items()
                     if v is not None)
    return Plan(personal.personal_blocks(**options, seed=seed, normalize=normalize),
            "omtl-mpi personal (latent groups, heavy-tailed streams)",
            f"personal tasks={K} seed={seed} {shown}".strip(), N,
            f"{K} tasks, {N} instances (stream lengths {int(drawn.min())} to {int(drawn.max())}, "
            f"median {float(np.median(drawn)):g}), d={d}")


def _synth_fits(out, tasks: int, samples: int, dims: int, also: str) -> None:
    """Refuse, before generating it, data that free memory or the output's free disk cannot hold."""
    from .footprint import file_bytes, synthetic_bytes
    from .importers.common import require_disk, require_memory
    what = f"{tasks} tasks x {samples} samples x {dims} features"
    require_memory(synthetic_bytes(tasks, samples, dims), what, f"lower --tasks or --samples{also}")
    require_disk(file_bytes(tasks * samples, dims, tasks), out, what,
                 f"lower --tasks or --samples{also}")
