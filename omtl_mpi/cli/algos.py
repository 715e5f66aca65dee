"""``omtl-mpi algos``: the learners and their options."""
import json

import click

from .table import click_option


@click.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def algos(ctx, name, as_json):
    """List the learners, their communication pattern and hyper-parameter defaults; with NAME,
    that learner's options, each with its default and what it means to that learner, what it
    fixes, and the options it leaves without effect (--json: one object)."""
    from ..algorithms.registry import REGISTRY, get
    from ..options import effects, table
    opts = table()
    if name is not None:
        _show_algo(ctx, get(name), opts, as_json)
        return
    # a field that can have no effect for the learner is no option of it (see _show_algo)
    rows = [{**_algo_facts(a),
             "defaults": {n: opts[n].defaults[a.name] for n, need in effects(a, opts).items()
                          if need is not None}}
            for a in REGISTRY.values()]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        click.echo(_algo_heading(r))
        shown = ", ".join(f"{k}={opts[k].show(v)}" for k, v in r["defaults"].items())
        click.echo(f"  defaults: {shown or 'none'}\n")
    click.echo("'omtl-mpi algos NAME' shows a learner's options with what each means to it.")


def _algo_facts(algo) -> dict:
    """A learner's name, summary, citation, pattern and reconstruction flag, for ``algos``."""
    return {"name": algo.name, "summary": algo.summary, "citation": algo.citation,
            "pattern": algo.pattern, "reconstruction": algo.reconstruction}


def _algo_heading(facts: dict) -> str:
    """The first lines of a learner in ``algos``: name, pattern, summary and citation."""
    tag = " [reconstruction]" if facts["reconstruction"] else ""
    return f"{facts['name']}{tag}  ({facts['pattern']})\n  {facts['summary']}\n  {facts['citation']}"


def _show_algo(ctx, algo, opts: dict, as_json: bool) -> None:
    """``omtl-mpi algos NAME``: the learner, the fields that ``omtl-mpi run --algo NAME``
    accepts with this learner's default and help and what else each needs to have an effect
    (:func:`omtl_mpi.options.effects`), then by name only those it fixes (``FIXED_FIELDS``) and
    those it leaves without effect (both refused if given)."""
    from ..options import effects
    fixed = getattr(algo.params, "FIXED_FIELDS", ())
    needs = effects(algo, opts)
    own = [opts[n] for n, need in needs.items() if need is not None and n not in fixed]
    pinned = {n: opts[n].defaults[algo.name] for n in needs if n in fixed}
    idle = [n for n, need in needs.items() if need is None]
    if as_json:
        click.echo(json.dumps({**_algo_facts(algo), "options": [
            {"name": o.name, "flag": o.flag, "default": o.defaults[algo.name],
             "help": o.helps[algo.name], "needs": needs[o.name]} for o in own],
            "fixed": pinned, "fixed_why": getattr(algo.params, "FIXED_FIELDS_WHY", ""),
            "no_effect": idle}))
        return
    click.echo(_algo_heading(_algo_facts(algo)))
    if not needs:
        click.echo("  no hyper-parameters")
        return
    click.echo("")
    click.echo(_algo_options_text(ctx, algo, opts, own, needs, pinned, idle), nl=False)


def _algo_options_text(ctx, algo, opts, own, needs, pinned, idle) -> str:
    """The options part of ``omtl-mpi algos NAME`` (see :func:`_show_algo`)."""
    import textwrap
    from functools import partial
    rows = []
    for o in own:
        notes = [f"default: {o.default_text(algo.name)}"] if o.default_text(algo.name) else []
        if needs[o.name]:
            notes.append(f"only with {' '.join(_as_flags(opts, needs[o.name]))}")
        note = f"  [{'; '.join(notes)}]" if notes else ""
        # the first column as 'omtl-mpi run --help' writes it: flags and metavar
        rows.append((click_option(o, algo.name).get_help_record(ctx)[0], o.helps[algo.name] + note))
    formatter = ctx.make_formatter()
    if rows:
        with formatter.section("Options"):
            formatter.write_dl(rows)
    # paragraphs wrapped between words only: a flag is never cut at its hyphens
    wrap = partial(textwrap.fill, width=formatter.width, break_on_hyphens=False,
                   break_long_words=False)
    if pinned:
        formatter.write_paragraph()
        formatter.write(wrap(f"Fixed ({getattr(algo.params, 'FIXED_FIELDS_WHY', '')}; setting them "
                             f"otherwise is refused): {', '.join(_as_flags(opts, pinned))}.") + "\n")
    if idle:
        formatter.write_paragraph()
        formatter.write(wrap(f"No effect for {algo.name} whatever its other options, so refused "
                             f"if given: {', '.join(opts[n].flag for n in idle)}.") + "\n")
    return formatter.getvalue()


def _as_flags(opts: dict, values: dict) -> list[str]:
    """Option values by name as ``omtl-mpi run`` writes them, one string each (``--w-step
    adagrad``, ``--no-relationship``)."""
    return [opts[n].flag if v is True else opts[n].off_flag if v is False
            else f"{opts[n].flag} {opts[n].show(v)}" for n, v in values.items()]
