"""Import time, per-call cost and download behaviour of the project's progress line and fetcher
against tqdm and pooch (the measurement behind docs/DESIGN.md, *Downloads* and *The progress line*);
import time, generation and graph properties of the project's topologies against networkx (behind
docs/DESIGN.md, *Graphs*).

Run from the repository root, with pooch, tqdm and networkx in throwaway folders (not the project's
.venv):

    pip install --target /tmp/pooch pooch tqdm
    pip install --target /tmp/nx networkx
    PYTHONPATH=tests:/tmp/pooch:/tmp/nx no_proxy=127.0.0.1 .venv/bin/python experiments/libraries.py

One part alone: ``libraries.py downloads`` (tqdm and pooch; needs /tmp/pooch and tests on the
path) or ``libraries.py graphs`` (networkx; needs only /tmp/nx on the path). No argument runs both.
"""
import contextlib, io, os, resource, statistics, subprocess, sys, tempfile, time, timeit


def imports(mods, runs):
    """Median wall and CPU of ``import m`` in ``runs`` fresh interpreters, interleaved."""
    wall, cpu = {m: [] for m in mods}, {m: [] for m in mods}
    for _ in range(runs):
        for m in mods:                              # interleaved: drift hits every module alike
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run([sys.executable, "-c", "import " + m], check=True)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[m].append(time.perf_counter() - t0)
            cpu[m].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    for m in mods:
        print(f"  {m:62s} {1e3 * statistics.median(wall[m]):6.0f} {1e3 * statistics.median(cpu[m]):6.0f}")


def downloads():
    import pooch
    from tqdm import tqdm
    from omtl_mpi.runtime.progress import Progress
    from test_fetch import F, make_file, serve

    print("import, median of 31 fresh interpreters (wall ms, CPU ms)")
    imports(["sys", "omtl_mpi.runtime.progress", "tqdm", "omtl_mpi.runtime.run",
             "omtl_mpi.runtime.run, tqdm", "omtl_mpi.data", "omtl_mpi.data.fetch",
             "omtl_mpi.data, pooch, requests"], 31)

    print("update(), best of 7 x 200000 calls (ns per call)")
    for on in (True, False):
        ours = Progress(200_000, enabled=on)
        bar = tqdm(total=200_000, file=io.StringIO(), disable=not on)
        for name, f in (("Progress", ours.update), ("tqdm", bar.update)):
            with contextlib.redirect_stderr(io.StringIO()):     # where Progress writes its line
                best = min(timeit.repeat(lambda: f(1), number=200_000, repeat=7)) / 200_000
            print(f"  {name:8s} {'shown' if on else 'off':5s} {1e9 * best:4.0f}")

    print("a 10 MB file over HTTP on 127.0.0.1")
    root = tempfile.mkdtemp()
    spec = make_file(root + "/srv", "f.bin", size=10_000_000)
    def get(who, name, dest, retries):
        if who == "omtl-mpi":
            F.fetch_file({**spec, "path": name}, dest, [f"{url}/{name}"], retries=retries, echo=lambda line: None)
        else:
            pooch.create(path=dest, base_url=url + "/", retry_if_failed=retries,
                         registry={name: "sha256:" + spec["sha256"]}).fetch(name)
    for who in ("omtl-mpi", "pooch"):
        with serve(root + "/srv", truncate=1) as (server, url):     # the first response stops at half
            get(who, "f.bin", f"{root}/{who}", 1)
        sent = [spec["size"] - int(rng.split("=")[1][:-1]) if rng else spec["size"] for _, rng in server.log]
        sent[0] //= 2
        print(f"  {who}: cut at half, 1 retry: {sum(sent) / spec['size']:.2f} x the file sent")
        with serve(root + "/srv", truncate=1) as (server, url):
            try:
                get(who, "f.bin", f"{root}/{who}-0", 0)
            except Exception:
                pass
        kept = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(f"{root}/{who}-0") for f in fs)
        print(f"  {who}: cut at half, no retry: {kept} bytes kept")
        with serve(root + "/srv") as (server, url):
            t0 = time.perf_counter()
            try:
                get(who, "missing.bin", f"{root}/{who}-404", 2)
            except Exception:
                pass
            print(f"  {who}: 404, 2 retries: {len(server.log)} requests, {time.perf_counter() - t0:.1f} s")


class Stopped(Exception):
    pass


def graphs(limit=20):
    """What a decentralised rank imports, and generating and checking the graphs users ask for,
    the project's generators (numpy, scipy.sparse.csgraph) against networkx's."""
    import signal
    import networkx as nx
    from omtl_mpi.errors import ConfigError
    from omtl_mpi.topology import generate
    from omtl_mpi.topology.core import MAX_DENSE, MAX_NODES

    print(f"networkx {nx.__version__} from {os.path.dirname(os.path.dirname(nx.__file__))}")
    print("import, median of 15 fresh interpreters (wall ms, CPU ms)")
    imports(["sys", "omtl_mpi.topology", "omtl_mpi.topology, scipy.sparse.csgraph", "networkx",
             "omtl_mpi.runtime.run",
             "omtl_mpi.runtime.run, omtl_mpi.topology, scipy.sparse.csgraph",   # a d-psgd rank today
             "omtl_mpi.runtime.run, omtl_mpi.topology, networkx",               # networkx instead
             "omtl_mpi.runtime.run, networkx"], 15)

    # the project: generate() builds, deduplicates, sorts and checks connectedness (CSR + csgraph);
    # the properties 'topo show' prints: degrees, and the diameter up to MAX_DENSE nodes (its SLEM
    # is numpy on the mixing matrix, networkx has no Metropolis weights: left out on both sides)
    kinds = {"ring": ({}, lambda n, s: nx.cycle_graph(n)),
             "random-regular": ({"degree": 4}, lambda n, s: nx.random_regular_graph(4, n, seed=s)),
             "erdos-renyi": (None, lambda n, s: nx.fast_gnp_random_graph(n, 8 / (n - 1), seed=s)),
             "watts-strogatz": ({"k": 4, "beta": 0.1},
                                lambda n, s: nx.watts_strogatz_graph(n, 4, 0.1, seed=s))}

    def ours(kind, n):
        params = kinds[kind][0] if kind != "erdos-renyi" else {"p": 8 / (n - 1)}
        t = generate(kind, n, **params)
        return t, f"{len(t.edges)} edges"

    def ours_props(t):
        deg = t.degrees
        return int(deg.min()), int(deg.max()), t.diameter if t.n_nodes <= MAX_DENSE else None

    def theirs(kind, n, draws=100):
        # seeds 0, 1, ... until a connected graph, as the project's generators retry
        for seed in range(draws):
            g = kinds[kind][1](n, seed)
            if nx.is_connected(g):
                return g, f"{g.number_of_edges()} edges, {seed + 1} draw(s)"
        return None, f"disconnected in {draws} draw(s), {nx.number_connected_components(g)} components in the last"

    def theirs_props(g):
        deg = [d for _, d in g.degree()]
        return min(deg), max(deg), nx.diameter(g) if g.number_of_nodes() <= MAX_DENSE else None

    def timed(f, *args):
        def stop(*_):
            raise Stopped
        old = signal.signal(signal.SIGALRM, stop)
        signal.alarm(limit)
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            out = f(*args)
            return out, time.perf_counter() - t0, time.process_time() - c0
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    print(f"generate + connected, then degrees + diameter (diameter up to {MAX_DENSE} nodes); "
          f"median of 5 (64 nodes) or 3 runs, interleaved; wall s (CPU s); a case stopped at {limit} s")
    for n in (64, 1024, MAX_NODES):
        reps = 5 if n <= 64 else 3
        res = {(k, who): {"build": [], "props": [], "note": ""} for k in kinds for who in ("omtl-mpi", "networkx")}
        for _ in range(reps):
            for kind in kinds:
                for who, build, props in (("omtl-mpi", ours, ours_props), ("networkx", theirs, theirs_props)):
                    r = res[(kind, who)]
                    if r["note"].startswith(("refused", "stopped", "disconnected")):
                        continue
                    # where the project refuses a size, networkx gets one draw, not 100
                    args = (kind, n, 1) if res[(kind, "omtl-mpi")]["note"].startswith("refused") else (kind, n)
                    try:
                        (g, how), w, c = timed(build, *args)
                    except ConfigError as exc:
                        r["note"] = "refused: " + str(exc).split(";")[0]
                        continue
                    except Stopped:
                        r["note"] = f"stopped after {limit} s"
                        continue
                    r["build"].append((w, c))
                    r["note"] = how
                    if g is None:
                        continue
                    facts, w, c = timed(props, g)
                    r["props"].append((w, c))
                    r["facts"] = facts
        for kind in kinds:
            for who in ("omtl-mpi", "networkx"):
                r = res[(kind, who)]
                cell = lambda xs: (f"{statistics.median(x[0] for x in xs):8.3f} ({statistics.median(x[1] for x in xs):7.3f})"
                                   if xs else f"{'-':>8s} {'':9s}")
                facts = "deg {}-{}, diam {}".format(*r["facts"]) if "facts" in r else ""
                print(f"  {n:6d} {kind:15s} {who:9s} {cell(r['build'])} {cell(r['props'])}  {facts}; {r['note']}")
        if res[("watts-strogatz", "omtl-mpi")]["note"].startswith("stopped"):
            # its rewiring lists every node for each rewired edge: one such scan, times the
            # expected number of rewired edges (beta x the n k / 2 edges)
            edges = {(min(i, (i + j) % n), max(i, (i + j) % n)) for i in range(n) for j in (1, 2)}
            c0 = time.process_time()
            [c for c in range(n) if c != 5 and (min(5, c), max(5, c)) not in edges]
            scan = time.process_time() - c0
            print(f"  watts-strogatz {n} nodes, omtl-mpi: one rewiring scan {scan:.3f} s CPU x "
                  f"{0.1 * len(edges):.0f} rewired edges expected = {scan * 0.1 * len(edges):.0f} s CPU")

    # the same seed, the same graph? networkx's generators draw from Python's random.Random(seed)
    # (shuffle, choice), the project's from numpy.random.default_rng(seed)
    t = generate("random-regular", 64, degree=4, seed=0)
    g = nx.random_regular_graph(4, 64, seed=0)
    same = set(t.edges) == {(min(a, b), max(a, b)) for a, b in g.edges()}
    print(f"  random-regular 64 nodes degree 4 seed 0: networkx's graph {'equals' if same else 'differs from'} the project's")


if __name__ == "__main__":
    part = sys.argv[1] if len(sys.argv) > 1 else "all"
    if part not in ("all", "downloads", "graphs"):
        sys.exit("usage: libraries.py [downloads|graphs]")
    if part in ("all", "downloads"):
        downloads()
    if part in ("all", "graphs"):
        graphs()
