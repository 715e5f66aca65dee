"""`omtl-mpi data fetch` against real HTTP servers on 127.0.0.1: downloads, checksums, resume,
restart, mirrors and fallbacks, and the import that follows; the real data sets over
../shared/data when present."""
import gzip
import hashlib
import http.server
import json
import os
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from conftest import omtl
from omtl_mpi.data import fetch as F
from omtl_mpi.data import info
from omtl_mpi.data.fetch_manifest import DATASETS, SOURCES
from omtl_mpi.errors import ConfigError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (real data sets)")


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder, records every request, honours Range (unless told not to) and can cut
    the first N responses short (half the body, then close) or stall after 10 bytes."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.log.append((self.path, self.headers.get("Range")))
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404, "File not found")
            return
        data = Path(path).read_bytes()
        start, rng = 0, self.headers.get("Range")
        if rng and srv.ranges:
            start = int(rng.split("=", 1)[1].split("-", 1)[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if srv.stall:
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(srv.stall)
            return
        if srv.truncate > 0:
            srv.truncate -= 1
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@contextmanager
def serve(root, *, ranges=True, truncate=0, stall=0.0):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    server.log, server.ranges, server.truncate, server.stall = [], ranges, truncate, stall
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _no_proxy_no_wait(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(F, "BACKOFF_S", 0.0)


def make_file(root, rel, size=300_000, seed=0):
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    return {"path": rel, "size": size, "sha256": hashlib.sha256(data).hexdigest(), "urls": []}


def leftovers(dest):
    return sorted(str(p.relative_to(dest)) for p in Path(dest).rglob("*") if p.is_file())


# ---------------------------------------------------------------- one file, synthetic tree
def test_download_verify_and_keep(tmp_path):
    spec = make_file(tmp_path / "srv", "a/b.bin")
    lines = []
    with serve(tmp_path / "srv") as (server, url):
        row = F.fetch_file(spec, tmp_path / "d", [f"{url}/a/b.bin"], echo=lines.append)
        assert row["action"] == "downloaded" and row["verified"] and row["digest"].startswith("sha256:")
        again = F.fetch_file(spec, tmp_path / "d", [f"{url}/a/b.bin"], echo=lines.append)
        assert again["action"] == "present"
        assert len(server.log) == 1                      # the verified file was not fetched again
    assert leftovers(tmp_path / "d") == ["a/b.bin"]
    # the bytes served, not only the fetcher's own word ("verified") for them
    assert (tmp_path / "d/a/b.bin").read_bytes() == (tmp_path / "srv/a/b.bin").read_bytes()
    assert len(lines) == 2 and "sha256 ok" in lines[0] and "present" in lines[1]


def test_truncated_download_fails_then_resumes_with_range(tmp_path):
    spec = make_file(tmp_path / "srv", "x/big.bin")
    dest = tmp_path / "d"
    with serve(tmp_path / "srv", truncate=1) as (server, url):
        with pytest.raises(F.FetchError) as exc:
            F.fetch_file(spec, dest, [f"{url}/x/big.bin"], retries=0, echo=lambda s: None)
        msg = str(exc.value)
        assert "\n" not in msg and "x/big.bin" in msg and "150000 of 300000 bytes" in msg
        assert "x/big.bin.part is kept" in msg and "resume" in msg
        assert leftovers(dest) == ["x/big.bin.part"]                  # never the final name
        assert (dest / "x/big.bin.part").stat().st_size == 150_000
        row = F.fetch_file(spec, dest, [f"{url}/x/big.bin"], retries=0, echo=lambda s: None)
        assert row["action"] == "resumed"
        assert server.log[-1] == ("/x/big.bin", "bytes=150000-")
    assert leftovers(dest) == ["x/big.bin"]
    assert hashlib.sha256((dest / "x/big.bin").read_bytes()).hexdigest() == spec["sha256"]


def test_truncation_is_retried_in_the_same_call(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    with serve(tmp_path / "srv", truncate=1) as (server, url):
        row = F.fetch_file(spec, tmp_path / "d", [f"{url}/f.bin"], retries=1, echo=lambda s: None)
    assert row["action"] == "resumed" and [r for _, r in server.log] == [None, "bytes=150000-"]
    assert leftovers(tmp_path / "d") == ["f.bin"]
    assert (tmp_path / "d/f.bin").read_bytes() == (tmp_path / "srv/f.bin").read_bytes()


def test_server_ignoring_range_restarts_from_zero(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "f.bin.part").write_bytes(b"\0" * 1000)        # even a wrong partial file is harmless
    lines = []
    with serve(tmp_path / "srv", ranges=False) as (server, url):
        row = F.fetch_file(spec, dest, [f"{url}/f.bin"], echo=lines.append)
    assert server.log == [("/f.bin", "bytes=1000-")] and row["action"] == "downloaded"
    assert any("ignored the range request; restarting" in line for line in lines)
    assert leftovers(dest) == ["f.bin"]
    # restarted from zero: none of the 1000 stale bytes of the .part are left at its start
    assert (dest / "f.bin").read_bytes() == (tmp_path / "srv/f.bin").read_bytes()


def test_stalled_server_times_out_and_keeps_the_part(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    with serve(tmp_path / "srv", stall=2.0) as (server, url):
        t0 = time.monotonic()
        with pytest.raises(F.FetchError, match="no data for 0.3 s after 10 of 300000 bytes"):
            F.fetch_file(spec, tmp_path / "d", [f"{url}/f.bin"], timeout=0.3, retries=0,
                         echo=lambda s: None)
        assert time.monotonic() - t0 < 1.5
    assert leftovers(tmp_path / "d") == ["f.bin.part"]


def test_checksum_mismatch_deletes_the_download(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    tampered = bytearray((tmp_path / "srv/f.bin").read_bytes())
    tampered[1234] ^= 0xFF
    (tmp_path / "srv/f.bin").write_bytes(bytes(tampered))
    with serve(tmp_path / "srv") as (server, url):
        with pytest.raises(F.FetchError) as exc:
            F.fetch_file(spec, tmp_path / "d", [f"{url}/f.bin"], echo=lambda s: None)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("f.bin: sha256 mismatch")
    assert spec["sha256"] in msg and hashlib.sha256(tampered).hexdigest() in msg
    assert f"{url}/f.bin" in msg and "--mirror" in msg
    assert leftovers(tmp_path / "d") == []                     # no final file, no .part


def test_wrong_size_is_refused_before_downloading(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    spec["size"] += 1
    with serve(tmp_path / "srv") as (server, url):
        with pytest.raises(F.FetchError, match="offers 300000 bytes but the manifest expects 300001"):
            F.fetch_file(spec, tmp_path / "d", [f"{url}/f.bin"], echo=lambda s: None)
    assert leftovers(tmp_path / "d") == []


def test_404_names_the_url_and_next_url_is_tried(tmp_path):
    spec = make_file(tmp_path / "srv", "f.bin")
    with serve(tmp_path / "srv") as (server, url):
        with pytest.raises(F.NotFound, match=f"f.bin: {url}/nope.bin answered 404"):
            F.fetch_file(spec, tmp_path / "d", [f"{url}/nope.bin"], echo=lambda s: None)
        row = F.fetch_file(spec, tmp_path / "d", [f"{url}/nope.bin", f"{url}/f.bin"], echo=lambda s: None)
    assert row["url"] == f"{url}/f.bin" and leftovers(tmp_path / "d") == ["f.bin"]
    assert (tmp_path / "d/f.bin").read_bytes() == (tmp_path / "srv/f.bin").read_bytes()


def test_file_mirror_and_md5(tmp_path):
    spec = make_file(tmp_path / "srv", "m/f.gz")
    spec = {"path": spec["path"], "size": spec["size"], "urls": [],
            "md5": hashlib.md5((tmp_path / "srv/m/f.gz").read_bytes()).hexdigest()}
    row = F.fetch_file(spec, tmp_path / "d", [F.mirror_url((tmp_path / "srv").as_uri(), "m/f.gz")],
                       echo=lambda s: None)
    assert row["action"] == "downloaded" and row["digest"].startswith("md5:")
    assert leftovers(tmp_path / "d") == ["m/f.gz"]
    assert (tmp_path / "d/m/f.gz").read_bytes() == (tmp_path / "srv/m/f.gz").read_bytes()


# ---------------------------------------------------------------- data sets, synthetic manifest
def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def fake_mnist(monkeypatch, root, with_idx=True):
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, size=(40, 28, 28)), np.arange(40) % 10
    idx = []
    for name, arr in (("train-images-idx3-ubyte.gz", images), ("train-labels-idx1-ubyte.gz", labels)):
        write_idx(root / "mnist" / name, arr)
        data = (root / "mnist" / name).read_bytes()
        idx.append({"path": f"mnist/{name}", "size": len(data), "md5": hashlib.md5(data).hexdigest(),
                    "urls": []})
        if not with_idx:
            (root / "mnist" / name).unlink()
    np.savez(root / "mnist" / "mnist_restored.npz", x_train=images.astype(np.uint8), y_train=labels)
    data = (root / "mnist" / "mnist_restored.npz").read_bytes()
    npz = {"path": "mnist/mnist_restored.npz", "size": len(data),
           "sha256": hashlib.sha256(data).hexdigest(), "urls": []}
    monkeypatch.setitem(DATASETS, "mnist", {"title": "fake", "variants": [
        {"name": "idx", "import_src": "mnist", "files": idx},
        {"name": "npz", "import_src": "mnist/mnist_restored.npz", "files": [npz]}]})


@pytest.mark.parametrize("with_idx", [True, False])
def test_mnist_idx_first_then_npz_fallback(tmp_path, monkeypatch, with_idx):
    fake_mnist(monkeypatch, tmp_path / "srv", with_idx=with_idx)
    lines = []
    with serve(tmp_path / "srv") as (server, url):
        fetched = F.fetch("mnist", tmp_path / "d", mirror=url, echo=lines.append)
        assert fetched.variant == ("idx" if with_idx else "npz")
        n = len(server.log)
        assert F.fetch("mnist", tmp_path / "d", mirror=url, echo=lines.append).downloaded == 0
        assert len(server.log) == n
    assert with_idx or any("404" in line and "trying the npz files" in line for line in lines)
    meta = F.import_fetched(fetched, tmp_path / "m.h5", dims=8)
    assert meta.n_tasks == 5 and meta.dim == 8 and int(meta.lengths.sum()) == 40


def test_npz_needs_a_mirror_unless_present(tmp_path, monkeypatch):
    fake_mnist(monkeypatch, tmp_path / "srv", with_idx=False)
    for f in DATASETS["mnist"]["variants"][0]["files"]:
        f["urls"] = ["http://127.0.0.1:9/none.gz"]                   # nothing listens there
    with pytest.raises(F.FetchError, match="cannot connect"):
        F.fetch("mnist", tmp_path / "d", retries=0, timeout=5, echo=lambda s: None)
    (tmp_path / "d/mnist").mkdir(parents=True)
    (tmp_path / "d/mnist/mnist_restored.npz").write_bytes((tmp_path / "srv/mnist/mnist_restored.npz").read_bytes())
    assert F.fetch("mnist", tmp_path / "d", retries=0, echo=lambda s: None).variant == "npz"


def test_names_groups_and_options():
    with pytest.raises(ConfigError, match="unknown data set 'x'; choose one of: landmine, mnist, "
                                          "tweeteval, tudataset, multilingual"):
        F.select_files("x")
    with pytest.raises(ConfigError, match="withdrawn by its publisher.*data import text-csv"):
        F.select_files("multilingual")
    with pytest.raises(ConfigError, match="--sets DHFR: not in the tudataset manifest"):
        F.select_files("tudataset", ("MUTAG", "DHFR"))
    [(_, files)] = F.select_files("tudataset")
    assert sorted({f["group"] for f in files}) == sorted(F._default_groups("tudataset"))
    [(_, files)] = F.select_files("tweeteval", ("irony",))
    assert len(files) == 7 and all(f["path"].startswith("tweeteval/irony/") for f in files)
    assert F.foreign_options("landmine", {"dims": 3, "sets": None}) == ["dims"]
    with pytest.raises(ConfigError, match="--mirror"):
        F.check_mirror("ftp://example.org/")


def test_fetch_takes_what_the_importers_take():
    from omtl_mpi.cli.data import IMPORTER_OPTIONS
    assert F.OPTIONS == {"landmine": (), "mnist": ("dims", "seed"),
                         "tweeteval": ("dims", "tasks", "featuriser"),
                         "tudataset": ("dims", "sets", "iterations")}
    assert F.GROUP_OPTION == {"tweeteval": "tasks", "tudataset": "sets"}
    assert {name: set(options) for name, options in IMPORTER_OPTIONS.items()} == \
        {name: set(options) for name, options in F.OPTIONS.items() if options}


# ---------------------------------------------------------------- the manifest
def test_manifest_is_pinned_and_complete():
    for source in SOURCES.values():
        assert len(source["commit"]) == 40 and int(source["commit"], 16) >= 0
    for name, ds in DATASETS.items():
        for variant in ds["variants"]:
            for f in variant["files"]:
                assert f["size"] > 0 and ("sha256" in f or "md5" in f), f["path"]
                for url in f["urls"]:
                    assert url.startswith("https://")
                    if "githubusercontent" in url:
                        commit = url.split("/")[5]
                        assert any(commit == s["commit"] for s in SOURCES.values()), url
    idx = {f["path"]: (f["size"], f["md5"]) for f in DATASETS["mnist"]["variants"][0]["files"]}
    assert idx["mnist/train-images-idx3-ubyte.gz"] == (9912422, "f68b3c2dcbeaaa9fbdd348bbdeb94873")


@needs_shared
def test_manifest_matches_shared_copies():
    for ds in DATASETS.values():
        for variant in ds["variants"]:
            for f in variant["files"]:
                if "sha256" in f:
                    assert F.verify(str(SHARED / f["path"]), f) is None, f["path"]


# ---------------------------------------------------------------- the command line
def test_cli_bad_input_is_one_line(tmp_path):
    for args, needle in ((["nope"], "unknown data set 'nope'; choose one of: landmine"),
                         (["multilingual"], "withdrawn by its publisher"),
                         (["landmine", "--sets", "MUTAG"], "--sets does not apply to landmine"),
                         (["landmine", "--mirror", "ftp://x"], "--mirror 'ftp://x'")):
        r = omtl("data", "fetch", *args, "--dest", tmp_path / "d")
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and needle in r.stderr
    assert not (tmp_path / "d").exists()


def test_cli_checksum_mismatch_and_404(tmp_path):
    srv = tmp_path / "srv"
    (srv / "landmine").mkdir(parents=True)
    (srv / "landmine/LandmineData.mat").write_bytes(b"\1" * DATASETS["landmine"]["variants"][0]["files"][0]["size"])
    with serve(srv) as (server, url):
        r = omtl("data", "fetch", "landmine", "--dest", tmp_path / "d", "--mirror", url)
        assert r.returncode == 1
        err = r.stderr.splitlines()[-1]
        assert err.startswith("error: landmine/LandmineData.mat: sha256 mismatch: expected 2163ab20")
        assert "deleted the download" in err and "--mirror" in err
        assert leftovers(tmp_path / "d") == []
        r = omtl("data", "fetch", "tudataset", "--sets", "MUTAG", "--dest", tmp_path / "d", "--mirror", url)
        assert r.returncode == 1
        assert r.stderr.strip().splitlines()[-1] == (
            f"error: chem/tudataset/MUTAG/MUTAG_A.txt: {url}/chem/tudataset/MUTAG/MUTAG_A.txt "
            "answered 404 File not found; --mirror must be a base URL holding the files as "
            "'omtl-mpi data fetch' writes them under --dest (BASE/chem/tudataset/MUTAG/MUTAG_A.txt)")
    assert leftovers(tmp_path / "d") == []


@needs_shared
def test_cli_truncated_then_resumed_real_landmine(tmp_path):
    with serve(SHARED, truncate=1) as (server, url):
        r = omtl("data", "fetch", "landmine", "--dest", tmp_path / "d", "--mirror", url, "--retries", "0")
        assert r.returncode == 1 and "LandmineData.mat.part is kept" in r.stderr.splitlines()[-1]
        assert leftovers(tmp_path / "d") == ["landmine/LandmineData.mat.part"]
        r = omtl("data", "fetch", "landmine", "--dest", tmp_path / "d", "--mirror", url, "--json")
        assert r.returncode == 0, r.stderr
        assert server.log[-1] == ("/landmine/LandmineData.mat", "bytes=542728-")
    out = json.loads(r.stdout)
    assert out["files"][0]["action"] == "resumed" and out["verified"] and out["tasks"] == 29
    assert leftovers(tmp_path / "d") == ["landmine.h5", "landmine/LandmineData.mat"]


@needs_shared
def test_cli_fetch_real_sets_from_local_mirror(tmp_path):
    dest = tmp_path / "data"
    with serve(SHARED) as (server, url):
        results = {}
        for args in (["landmine"], ["tudataset", "--sets", "MUTAG,PTC_MR"],
                     ["tweeteval", "--tasks", "irony", "--dims", "16"], ["mnist", "--dims", "16"]):
            r = omtl("data", "fetch", *args, "--dest", dest, "--mirror", url, "--json")
            assert r.returncode == 0, r.stderr
            results[args[0]] = json.loads(r.stdout)
        n = len(server.log)
        r = omtl("data", "fetch", "landmine", "--dest", dest, "--mirror", url, "-o", tmp_path / "l2.h5")
        assert r.returncode == 0 and len(server.log) == n          # present and verified: no request
    assert results["mnist"]["variant"] == "npz"                     # the mirror has no idx files
    facts = {k: info(v["output"]) for k, v in results.items()}
    assert (facts["landmine"]["tasks"], facts["landmine"]["total"], facts["landmine"]["dims"]) == (29, 14820, 9)
    assert (facts["tudataset"]["tasks"], facts["tudataset"]["total"], facts["tudataset"]["dims"]) == (2, 532, 64)
    assert (facts["tweeteval"]["tasks"], facts["tweeteval"]["total"], facts["tweeteval"]["dims"]) == (1, 4601, 16)
    assert (facts["mnist"]["tasks"], facts["mnist"]["total"], facts["mnist"]["dims"]) == (5, 60000, 16)
    assert info(tmp_path / "l2.h5")["total"] == 14820
    assert not [p for p in dest.rglob("*") if p.name.endswith(".part") or ".tmp-" in p.name]
