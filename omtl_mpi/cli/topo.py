"""``omtl-mpi topo``: the neighbour graphs of the decentralised learners."""
import json

import click


@click.group()
def topo():
    """Inspect the neighbour graphs of the decentralised learners."""


@topo.command("show")
@click.argument("spec", metavar="NAME|PATH")
@click.option("--nodes", type=int, required=True, help="Number of nodes (ranks) to size it for.")
@click.option("--png", type=click.Path(dir_okay=False), default=None, help="Also draw it to a PNG.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def topo_show(spec, nodes, png, as_json):
    """Nodes, edges, degrees, diameter and the SLEM of the Metropolis-Hastings mixing matrix
    (the closer to 1, the slower gossip spreads)."""
    from ..topology import describe, draw_png, load_topology, topology_file
    if png is not None:                 # "" too: output_file refuses it in one line
        from ..paths import output_file, refuse_inputs
        output_file(png, "--png")
        refuse_inputs(png, [(topology_file(spec), "the topology file")], "--png")
    topology = load_topology(spec, nodes)
    facts = describe(topology)
    if png:
        draw_png(topology, png)
    if as_json:
        click.echo(json.dumps(facts))
        return
    shape = (f"diameter {facts['diameter']}, SLEM {facts['slem']:.4f}" if facts["slem"] is not None
             else "diameter and SLEM not computed (more than 2048 nodes)")
    click.echo(f"{facts['name']}: {facts['nodes']} nodes, {facts['edges']} edges, degree "
               f"{facts['min_degree']}..{facts['max_degree']}, {shape}")
    for i in range(topology.n_nodes):
        click.echo(f"  {i:>4}: {' '.join(map(str, topology.neighbours(i)))}")
    if png:
        click.echo(f"wrote {png}")
