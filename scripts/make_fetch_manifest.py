#!/usr/bin/env python
"""Regenerate omtl_mpi/data/fetch_manifest.py: the files `omtl-mpi data fetch` downloads, with
their canonical URLs (raw GitHub files at pinned commits), sizes and SHA-256 digests.

Usage: python scripts/make_fetch_manifest.py [--src DIR] [--out omtl_mpi/data/fetch_manifest.py]

Sizes and digests are computed from the reference copies in --src (default $DATA, else data/:
a folder laid out as `omtl-mpi data fetch NAME --dest DIR` fills it, holding copies of the
repository files named below). The MNIST idx files need not be in --src: their sizes and MD5
digests are the published ones (MD5 is the only digest published for them). Seconds.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Source repositories at pinned commits. `readme` is the short hash the reference copies' notes
# name; `commit` is the full hash used in the URLs, and `how` says how it was confirmed.
SOURCES = {
    "fbo": {
        "repo": "daizhongxiang/Federated_Bayesian_Optimization",
        "readme": "30a4548606f2",
        "commit": "9f46a1dfbbcfd5823e026ad9418a4cb881676ae9",
        "how": "NOT the README's commit: its full hash could not be confirmed; this is the commit "
               "of the stored version of LandmineData.mat in a public code index (the checksum "
               "still guards the content)",
    },
    "tweeteval": {
        "repo": "cardiffnlp/tweeteval",
        "readme": "4fbd22cd7842",
        "commit": "4fbd22cd78421f05b1ecdb4fc5725bc7a7bd8f66",
        "how": "full hash quoted as the pinned cardiffnlp/tweeteval revision by several public "
               "projects; offensive/mapping.txt (fixed in d7ee21bb) matches the copy byte for byte",
    },
    "resgnn": {
        "repo": "XuelinHu/Matrix-ResGNN-GraphClassificatio",
        "readme": "f76543d8bd82",
        "commit": "d932440ad7f393a1c5a8fc53592222c2ee9309e1",
        "how": "NOT the README's commit: its full hash could not be confirmed; this is the commit "
               "of the stored versions of data/TUDataset/* in a public code index",
    },
    "infograph-1f28": {
        "repo": "sunfanyunn/InfoGraph",
        "readme": "1f286d5cc48c",
        "commit": "1f286d5cc48c1ea142dd6fa9d9ef5a449a09cf08",
        "how": "commit of the stored versions of data/NCI1/* and data/NCI109/* in a public code index",
    },
    "infograph-0247": {
        "repo": "sunfanyunn/InfoGraph",
        "readme": "0247b242d718",
        "commit": "0247b242d718180640e469223a4a8131db869910",
        "how": "commit of the stored versions of data/PTC_MR/* in a public code index",
    },
    "fgw": {
        "repo": "tvayer/FGW",
        "readme": "3d2128a5e4e2",
        "commit": "3d2128a5e4e2cb8ed8a272295feff13641a36cef",
        "how": "full hash quoted as the pinned tvayer/FGW snapshot by a public project",
    },
}

TWEETEVAL_TASKS = ("hate", "irony", "offensive")
TWEETEVAL_FILES = ("train_text.txt", "train_labels.txt", "val_text.txt", "val_labels.txt",
                   "test_text.txt", "test_labels.txt", "mapping.txt")

# TU set -> (source, folder of <DS>_*.txt in that repository)
TU_SETS = {
    "MUTAG": ("resgnn", "data/TUDataset/MUTAG/raw"),
    "NCI1": ("infograph-1f28", "data/NCI1"),
    "AIDS": ("resgnn", "data/TUDataset/AIDS/raw"),
    "BZR": ("fgw", "data/BZR"),
    "COX2": ("fgw", "data/COX2"),
    "PTC_MR": ("infograph-0247", "data/PTC_MR"),
    "NCI109": ("infograph-1f28", "data/NCI109"),
    "Mutagenicity": ("resgnn", "data/TUDataset/Mutagenicity/raw"),
}
TU_FILES = ("A", "graph_indicator", "graph_labels", "node_labels")     # what the importer reads

MNIST_BASES = ("https://storage.googleapis.com/cvdf-datasets/mnist/",
               "https://ossci-datasets.s3.amazonaws.com/mnist/")
# published sizes and MD5 digests of the original idx files
MNIST_IDX = (("train-images-idx3-ubyte.gz", 9912422, "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
             ("train-labels-idx1-ubyte.gz", 28881, "d53e105ee54ea40749a09fcbcd1e9432"),
             ("t10k-images-idx3-ubyte.gz", 1648877, "9fb629c4189551a2d022fa330f9573f3"),
             ("t10k-labels-idx1-ubyte.gz", 4542, "ec29112dd5afa0611ce80d1b7f02629c"))


def raw_url(source: str, path: str) -> str:
    s = SOURCES[source]
    return f"https://raw.githubusercontent.com/{s['repo']}/{s['commit']}/{path}"


def local(src: str, rel: str) -> tuple[int, str]:
    """Size and SHA-256 of ``src/rel``; stops with one line if the file is missing."""
    path = os.path.join(src, rel)
    if not os.path.isfile(path):
        raise SystemExit(f"error: {path} not found: --src must hold every file of the manifest "
                         "(as `omtl-mpi data fetch NAME --dest DIR` lays them out)")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.hexdigest()


def entry(src, rel, urls, group=None):
    size, sha = local(src, rel)
    out = {"path": rel, "size": size, "sha256": sha, "urls": list(urls)}
    if group:
        out["group"] = group
    return out


def build(src: str) -> dict:
    landmine = [entry(src, "landmine/LandmineData.mat", [raw_url("fbo", "LandmineData.mat")])]
    tweeteval = [entry(src, f"tweeteval/{task}/{name}",
                       [raw_url("tweeteval", f"datasets/{task}/{name}")], group=task)
                 for task in TWEETEVAL_TASKS for name in TWEETEVAL_FILES]
    tu = [entry(src, f"chem/tudataset/{ds}/{ds}_{kind}.txt",
                [raw_url(source, f"{folder}/{ds}_{kind}.txt")], group=ds)
          for ds, (source, folder) in TU_SETS.items() for kind in TU_FILES]
    idx = [{"path": f"mnist/{name}", "size": size, "md5": md5, "urls": [b + name for b in MNIST_BASES]}
           for name, size, md5 in MNIST_IDX]
    npz = [entry(src, "mnist/mnist_restored.npz", [])]          # on mirrors only
    return {
        "landmine": {"title": "Landmine (Xue et al. 2007)", "variants": [
            {"name": "mat", "import_src": "landmine/LandmineData.mat", "files": landmine}]},
        "mnist": {"title": "MNIST (LeCun et al.)", "variants": [
            {"name": "idx", "import_src": "mnist", "files": idx},
            {"name": "npz", "import_src": "mnist/mnist_restored.npz", "files": npz}]},
        "tweeteval": {"title": "TweetEval hate, irony, offensive (Barbieri et al. 2020)", "variants": [
            {"name": "text", "import_src": "tweeteval", "files": tweeteval}]},
        "tudataset": {"title": "TUDataset small molecules (Morris et al. 2020)", "variants": [
            {"name": "tu", "import_src": "chem/tudataset", "files": tu}]},
    }


HEADER = '''"""The files `omtl-mpi data fetch` downloads: per data set, one or more alternative file sets
(variants), each file with its path (relative to the destination folder and to a --mirror base
URL), size, digest and canonical URLs (raw GitHub files at pinned commits; MNIST: the published
idx files). Generated by scripts/make_fetch_manifest.py from the project's reference copies of
the files: do not edit by hand.
"""
# flake8: noqa

'''


def manifest_text(sources: dict, datasets: dict) -> str:
    """The module: one line per source and per file, as the rows of a table (pprint's wrapping
    would give each file five)."""
    lines = [HEADER + "SOURCES = {"]
    lines += [f"    {name!r}: {source!r}," for name, source in sources.items()]
    lines += ["}", "", "DATASETS = {"]
    for name, data_set in datasets.items():
        lines.append(f"    {name!r}: {{'title': {data_set['title']!r}, 'variants': [")
        for variant in data_set["variants"]:
            lines.append(f"        {{'name': {variant['name']!r}, "
                         f"'import_src': {variant['import_src']!r}, 'files': [")
            lines += [f"            {f!r}," for f in variant["files"]]
            lines.append("        ]},")
        lines.append("    ]},")
    return "\n".join(lines + ["}", ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=os.environ.get("DATA") or os.path.join(ROOT, "data"),
                    help="folder of the reference copies ($DATA when set, else data/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "omtl_mpi", "data", "fetch_manifest.py"),
                    help="the module to write")
    args = ap.parse_args(argv)
    datasets = build(args.src)
    text = manifest_text(SOURCES, datasets)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    n = sum(len(v["files"]) for d in datasets.values() for v in d["variants"])
    print(f"wrote {args.out}: {len(datasets)} data sets, {n} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
