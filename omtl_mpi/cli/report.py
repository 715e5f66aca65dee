"""``omtl-mpi report``: the paper's tables and figures from a sweep."""
import json

import click

from ..errors import ConfigError


@click.command()
@click.argument("folder", type=click.Path(file_okay=False), metavar="DIR")
@click.option("-o", "--out", type=click.Path(file_okay=False), default=None,
              help="Report folder (default DIR/report).")
@click.option("--timing", multiple=True, metavar="PATTERN",
              help="Runs (id patterns such as 'synthetic.*.s0') to draw per-rank timing for; "
                   "repeatable. Default: the first data set's multi-rank runs, first seed.")
@click.option("--omega", multiple=True, metavar="PATTERN",
              help="Runs to draw the learned Omega of; repeatable. Default: c-admm and d-admm "
                   "runs with relationship learning, first seed, every data set.")
@click.option("--target", multiple=True, metavar="DATA=ACC",
              help="Table 3 target accuracy of a data set, overriding the sweep file's.")
@click.option("--json", "as_json", is_flag=True, help="Print the report's numbers as JSON.")
def report(folder, out, timing, omega, target, as_json):
    """Tables 2-4 (Markdown and CSV), Figure 1, timing and Omega figures (PNG) of a sweep.

    Cells are the mean and standard deviation over seeds. Runs that failed or have not run
    are listed, not silently dropped.
    """
    from ..report import build_report
    targets = {}
    for item in target:
        key, _, value = item.partition("=")
        try:
            targets[key] = float(value)
        except ValueError:
            raise ConfigError(f"--target takes DATA=ACCURACY such as synthetic=0.9, got {item!r}") from None
        if not 0 < targets[key] <= 1:
            raise ConfigError(f"--target {item}: the accuracy must be in (0, 1]")
    summary = build_report(folder, out, timing=timing, omega=omega, targets=targets)
    if as_json:
        click.echo(json.dumps(summary))
        return 0
    click.echo(f"{summary['finished']} finished runs; report: {summary['report']}")
    for p in summary["figures"]:
        click.echo(f"  {p}")
    if summary["not_done"] or summary["missing"]:
        click.echo(f"  ({len(summary['not_done'])} runs failed, {len(summary['missing'])} not run: "
                   "listed in the report)")
    return 0
