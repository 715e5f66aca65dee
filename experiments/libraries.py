"""Import time, per-call cost and download behaviour of the project's progress line and fetcher
against tqdm and pooch (the measurement behind docs/DESIGN.md, *Downloads* and *The progress line*).

Run from the repository root, with pooch and tqdm in a throwaway folder (not the project's .venv):

    pip install --target /tmp/pooch pooch tqdm
    PYTHONPATH=tests:/tmp/pooch no_proxy=127.0.0.1 .venv/bin/python experiments/libraries.py
"""
import io, os, resource, statistics, subprocess, sys, tempfile, time, timeit
import pooch
from tqdm import tqdm
from omtl_mpi.runtime.progress import Progress
from test_fetch import F, make_file, serve

print("import, median of 31 fresh interpreters (wall ms, CPU ms)")
mods = ["sys", "omtl_mpi.runtime.progress", "tqdm", "omtl_mpi.runtime.run",
        "omtl_mpi.runtime.run, tqdm", "omtl_mpi.data", "omtl_mpi.data.fetch",
        "omtl_mpi.data, pooch, requests"]
wall, cpu = {m: [] for m in mods}, {m: [] for m in mods}
for _ in range(31):
    for m in mods:                              # interleaved: drift hits every module alike
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-c", "import " + m], check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall[m].append(time.perf_counter() - t0)
        cpu[m].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
for m in mods:
    print(f"  {m:32s} {1e3 * statistics.median(wall[m]):6.0f} {1e3 * statistics.median(cpu[m]):6.0f}")

print("update(), best of 7 x 200000 calls (ns per call)")
for on in (True, False):
    ours = Progress(200_000, enabled=on, stream=io.StringIO())
    bar = tqdm(total=200_000, file=io.StringIO(), disable=not on)
    for name, f in (("Progress", ours.update), ("tqdm", bar.update)):
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
