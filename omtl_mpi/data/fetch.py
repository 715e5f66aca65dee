"""Download the paper's public data sets, verify them and import them (``omtl-mpi data fetch``).

Standard library only. Every file is written to ``FINAL.part``, resumed with an HTTP ``Range``
request after an interruption, checked against the size and digest in :mod:`fetch_manifest`,
and only then renamed; docs/DATASETS.md (*Fetching*) says what each failure does."""
from __future__ import annotations

import hashlib
import http.client
import inspect
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field

from .. import __version__
from ..errors import ConfigError, UserError
from ..atomic import replace
from ..paths import output_file, refuse_inputs, refuse_special
from . import importers
from .fetch_manifest import DATASETS

READ_CHUNK_BYTES = 1 << 20         # downloaded and written this much at a time
BACKOFF_S = 0.5                    # first pause before a retry; doubles each time
ANNOUNCE_FROM_BYTES = 4 << 20      # files from this size get a line before their download too

WITHDRAWN = {
    "multilingual": (
        "multilingual: the paper's multilingual review corpus (Amazon Multilingual Reviews, MARC) "
        "was withdrawn by its publisher and has no canonical download; if you hold a copy, bring "
        "it in with 'omtl-mpi data import text-csv SRC -o multilingual.h5' (one CSV per language "
        "with text and label columns, or --task-col; see docs/DATASETS.md)"),
}
NAMES = tuple(DATASETS) + tuple(WITHDRAWN)


def _options(importer) -> dict:
    """The keyword options of ``importer`` that `data fetch` passes on, with their defaults."""
    return {p.name: p.default for p in inspect.signature(importer).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "label_map"}


IMPORTERS = {"landmine": importers.import_landmine, "mnist": importers.import_mnist,
             "tweeteval": importers.import_tweeteval, "tudataset": importers.import_tudataset}
# declared by the importers' signatures alone, so that `data fetch` takes what they take
OPTIONS = {name: tuple(_options(importer)) for name, importer in IMPORTERS.items()}
# the option naming the groups of files read (TweetEval's tasks, TU sets): the tuple-valued one
GROUP_OPTION = {name: option for name, importer in IMPORTERS.items()
                for option, default in _options(importer).items() if isinstance(default, tuple)}


class FetchError(UserError):
    """A download failed or did not verify (exit status 1; bad input exits 2)."""

    exit_code = 1


class NotFound(FetchError):
    """A URL answered 404 (or a file:// mirror has no such file)."""

    def __init__(self, path, url, why, hint=""):
        super().__init__(f"{path}: {url} {why}" + (f"; {hint}" if hint else ""))
        self.path, self.url, self.why = path, url, why


class _Gone(Exception):
    """404, 410, or no such file under a file:// mirror."""


class _Transient(Exception):
    """Worth another try (the .part is kept): timeouts, resets, truncation, 5xx."""


class _Restart(Exception):
    """The .part cannot be continued (416 or a wrong Content-Range): start from zero."""


@dataclass
class Fetched:
    name: str
    dest: str
    variant: str
    import_src: str
    files: list = field(default_factory=list)

    @property
    def downloaded(self) -> int:
        return sum(f["action"] != "present" for f in self.files)


def _human(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0


def _digest_of(spec: dict) -> tuple[str, str]:
    return ("sha256", spec["sha256"]) if "sha256" in spec else ("md5", spec["md5"])


def verify(path: str, spec: dict) -> tuple[str, str, str] | None:
    """None when ``path`` has the size and digest of ``spec``, else (what, got, expected)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return ("file", "none", spec["path"])
    if size != spec["size"]:
        return ("size", f"{size} bytes", f"{spec['size']} bytes")
    algo, want = _digest_of(spec)
    with open(path, "rb") as f:
        got = hashlib.file_digest(f, algo).hexdigest()
    return None if got == want else (algo, got, want)


def _sized(dest: str, files: list) -> bool:
    """Every file of ``files`` is present under ``dest`` with its expected size."""
    with suppress(OSError):
        return bool(files) and all(os.path.getsize(os.path.join(dest, f["path"])) == f["size"]
                                   for f in files)
    return False


def mirror_url(mirror: str, path: str) -> str:
    return mirror.rstrip("/") + "/" + urllib.parse.quote(path)


def check_mirror(mirror: str | None) -> None:
    if mirror is None:
        return
    scheme = urllib.parse.urlsplit(mirror).scheme
    if scheme not in ("http", "https", "file") or mirror.rstrip("/") in ("http:", "https:", "file:"):
        raise ConfigError(f"--mirror {mirror!r}: expected a base URL such as http://HOST:PORT/data "
                          "or file:///path/to/data, holding the files as 'omtl-mpi data fetch' "
                          "writes them under --dest (e.g. BASE/landmine/LandmineData.mat)")


def check_name(name: str) -> None:
    """ConfigError unless ``name`` is a data set that can be fetched."""
    if name in WITHDRAWN:
        raise ConfigError(WITHDRAWN[name])
    if name not in DATASETS:
        raise ConfigError(f"unknown data set {name!r}; choose one of: {', '.join(NAMES)}")


def select_files(name: str, groups=None) -> list:
    """The variants of ``name`` ([(variant, files)]), files limited to ``groups`` where given."""
    check_name(name)
    if groups is None and name in GROUP_OPTION:
        groups = _default_groups(name)
    out = []
    for variant in DATASETS[name]["variants"]:
        files = variant["files"]
        if groups is not None:
            known = list(dict.fromkeys(f["group"] for f in files))
            unknown = [g for g in groups if g not in known]
            if unknown:
                raise ConfigError(f"--{GROUP_OPTION[name]} {','.join(unknown)}: not in the {name} "
                                  f"manifest; choose from {','.join(known)}")
            if not groups:
                raise ConfigError(f"--{GROUP_OPTION[name]}: name at least one of {','.join(known)}")
            files = [f for f in files if f["group"] in groups]
        out.append((variant, files))
    return out


def _default_groups(name: str) -> tuple:
    """What the importer reads by default: TweetEval's three tasks, the six TU sets."""
    return _options(IMPORTERS[name])[GROUP_OPTION[name]]


def _open(url: str, headers: dict, timeout: float):
    if url.startswith("file:"):
        # a mirror's file is read as a download: a FIFO or a device there would block or
        # stream forever, so nothing but a regular file is opened
        local = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
        if os.path.lexists(local) and not os.path.isfile(local):
            raise UserError(f"{url} is not a regular file of the mirror (a pipe, socket, "
                            "device or folder): a mirror holds the files themselves")
    req = urllib.request.Request(url, headers={"User-Agent": f"omtl-mpi/{__version__}", **headers})
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise _Gone(f"answered {exc.code} {exc.reason}") from None
        if exc.code == 416:
            raise _Restart("the server refused the range request (416)") from None
        if exc.code >= 500 or exc.code in (408, 429):
            raise _Transient(f"answered {exc.code} {exc.reason}") from None
        raise FetchError(f"{url} answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, FileNotFoundError):            # file:// mirrors
            raise _Gone("has no such file") from None
        raise _Transient(f"cannot connect ({exc.reason})") from None
    except (TimeoutError, socket.timeout):
        raise _Transient(f"no answer within {timeout:g} s") from None
    except (ConnectionError, http.client.HTTPException, OSError) as exc:
        raise _Transient(f"{type(exc).__name__}: {exc}") from None


def _content_range_start(value: str | None) -> int | None:
    with suppress(AttributeError, ValueError):      # "bytes START-END/TOTAL"
        unit, rest = value.split(" ", 1)
        return int(rest.split("-", 1)[0]) if unit == "bytes" else None
    return None


def _transfer(url: str, part: str, spec: dict, timeout: float, echo, label: str = "") -> str:
    """One attempt to complete ``part`` from ``url``: 'downloaded', 'resumed at N' or 'completed
    earlier' (the .part was already whole)."""
    size = spec["size"]
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have > size:
        os.remove(part)
        have = 0
    if have == size:
        return "completed earlier"
    try:
        resp = _open(url, {"Range": f"bytes={have}-"} if have else {}, timeout)
    except _Gone as exc:
        raise NotFound(spec["path"], url, str(exc)) from None
    with resp:
        if have and getattr(resp, "status", None) == 206:
            if _content_range_start(resp.headers.get("Content-Range")) != have:
                raise _Restart("the server answered a different range")
            mode, action = "ab", f"resumed at {_human(have)}"
        else:
            if have:
                echo(f"  {spec['path']}: the server ignored the range request; restarting from zero")
            mode, action, have = "wb", "downloaded", 0
            length = resp.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != size:
                raise FetchError(f"{spec['path']}: {url} offers {length} bytes but the manifest "
                                 f"expects {size}; not downloaded; use --mirror URL for another "
                                 "source, or check the URL")
        try:
            os.makedirs(os.path.dirname(part), exist_ok=True)
        except OSError as exc:
            raise FetchError(f"cannot create {os.path.dirname(part)}: {exc.strerror}; choose a "
                             "writable --dest") from None
        if size >= ANNOUNCE_FROM_BYTES:
            doing = "downloading" if mode == "wb" else f"resuming at {_human(have)}"
            echo(f"{label}  {doing} from {urllib.parse.urlsplit(url).netloc or url} ...")
        got = have
        read = getattr(resp, "read1", resp.read)      # what has arrived: a stall loses nothing
        try:
            with open(part, mode) as f:
                for chunk in iter(lambda: read(READ_CHUNK_BYTES), b""):
                    if got + len(chunk) > size:
                        f.close()
                        os.remove(part)
                        raise FetchError(f"{spec['path']}: {url} sent more than the {size} bytes the "
                                         "manifest expects; deleted the download; use --mirror URL "
                                         "for another source")
                    f.write(chunk)
                    got += len(chunk)
                f.flush()
                os.fsync(f.fileno())
        except (TimeoutError, socket.timeout):
            raise _Transient(f"no data for {timeout:g} s after {got} of {size} bytes") from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise _Transient(f"connection lost after {got} of {size} bytes "
                             f"({type(exc).__name__})") from None
    if got < size:
        raise _Transient(f"connection closed after {got} of {size} bytes")
    return action


def _download(url: str, part: str, spec: dict, timeout: float, retries: int, echo,
              label: str = "") -> str:
    """Complete ``part`` from ``url`` with up to ``retries`` further tries, resuming each time."""
    attempt, restarted = 0, False
    while True:
        try:
            return _transfer(url, part, spec, timeout, echo, label)
        except _Restart as exc:
            if os.path.exists(part):
                os.remove(part)
            if restarted:
                raise FetchError(f"{spec['path']}: {url}: {exc}; use --mirror URL for another "
                                 "source") from None
            restarted = True
        except _Transient as exc:
            if attempt >= retries:
                kept = os.path.exists(part) and os.path.getsize(part) > 0
                tail = (f"the partial file {spec['path']}.part is kept: run the same command "
                        "again to resume" if kept else "run the same command again")
                tries = f"{attempt + 1} tries" if attempt else "1 try"
                raise FetchError(f"{spec['path']}: download from {url} failed after {tries}: "
                                 f"{exc}; {tail}, or use --mirror URL for another source") from None
            time.sleep(BACKOFF_S * 2 ** attempt)
            attempt += 1


def fetch_file(spec: dict, dest: str, urls: list, *, timeout: float = 60.0, retries: int = 2,
               echo=None, index: str = "") -> dict:
    """Make ``dest/spec['path']`` present and verified, from the first of ``urls`` that has it:
    {path, size, digest, url, action, verified}; FetchError (NotFound: every URL answered 404)."""
    echo = echo or (lambda line: print(line, file=sys.stderr))
    final = os.path.join(dest, *spec["path"].split("/"))
    part = final + ".part"
    algo, want = _digest_of(spec)
    row = {"path": spec["path"], "size": spec["size"], "digest": f"{algo}:{want}", "url": None}
    if os.path.exists(final):
        problem = verify(final, spec)
        if problem is None:
            echo(f"  {index}{spec['path']}  {_human(spec['size'])}  present, {algo} ok")
            return {**row, "action": "present", "verified": True}
        echo(f"  {index}{spec['path']}: the file there does not verify ({problem[0]} "
             f"{problem[1]}, expected {problem[2]}); downloading it again")
    if not urls:
        raise FetchError(f"{spec['path']}: missing or damaged, and it has no canonical download; "
                         f"use --mirror URL, a base URL that serves it as BASE/{spec['path']}")
    label = f"  {index}{spec['path']}  {_human(spec['size'])}"
    not_found = None
    for url in urls:
        host = urllib.parse.urlsplit(url).netloc or url
        try:
            action = _download(url, part, spec, timeout, retries, echo, label)
            problem = verify(part, spec)
            if problem is not None and action == "completed earlier":
                # a stale .part of the right size from some earlier download: start afresh once
                os.remove(part)
                action = _download(url, part, spec, timeout, retries, echo, label)
                problem = verify(part, spec)
        except NotFound as exc:
            not_found = exc
            continue                                   # 404 here: the next URL
        if problem is not None:
            os.remove(part)
            what, got, expected = problem
            raise FetchError(f"{spec['path']}: {what} mismatch: expected {expected}, got {got} "
                             f"(from {url}); deleted the download; run the same command again, "
                             "or use --mirror URL for another source")
        replace(part, final)
        how = "completed from an earlier partial download" if action == "completed earlier" \
            else f"{action} from {host}"
        echo(f"{label}  {how}, {algo} ok")
        return {**row, "url": url, "action": "resumed" if action != "downloaded" else action,
                "verified": True}
    raise not_found


def fetch(name: str, dest, *, mirror: str | None = None, groups=None, timeout: float = 60.0,
          retries: int = 2, echo=None) -> Fetched:
    """Download and verify data set ``name``'s files to DEST/<path> (from MIRROR/<path> with
    ``mirror``; a variant it lacks falls back to the next); ``groups``: TweetEval tasks, TU sets."""
    echo = echo or (lambda line: print(line, file=sys.stderr))
    check_mirror(mirror)
    if timeout <= 0:
        raise ConfigError(f"--timeout must be > 0 seconds, got {timeout:g}")
    if retries < 0:
        raise ConfigError(f"--retries must be >= 0, got {retries}")
    variants = select_files(name, groups)
    dest = os.path.abspath(str(dest))
    if os.path.lexists(dest) and not os.path.isdir(dest):
        raise UserError(f"--dest {dest}: not a folder (a file, pipe or device is there); give "
                        "a folder, or a name where none is")
    # every file it may read back and rename into place, before any download (a FIFO blocks)
    for _, files in variants:
        for spec in files:
            final = os.path.join(dest, *spec["path"].split("/"))
            refuse_special(final, "--dest")
            refuse_special(final + ".part", "--dest")
    # a variant on disk first (no network); one without canonical URLs needs --mirror or disk
    variants.sort(key=lambda vf: not _sized(dest, vf[1]))
    usable = [(v, fs) for v, fs in variants if mirror or _sized(dest, fs) or all(f["urls"] for f in fs)]
    for i, (variant, files) in enumerate(usable):
        out = Fetched(name=name, dest=dest, variant=variant["name"],
                      import_src=os.path.join(dest, *variant["import_src"].split("/")))
        try:
            for j, spec in enumerate(files, start=1):
                urls = [mirror_url(mirror, spec["path"])] if mirror else spec["urls"]
                out.files.append(fetch_file(spec, dest, urls, timeout=timeout, retries=retries,
                                            echo=echo, index=f"[{j}/{len(files)}] "))
            return out
        except NotFound as exc:
            if i + 1 < len(usable):
                echo(f"  {exc.url} {exc.why}; trying the {usable[i + 1][0]['name']} files instead")
                continue
            hint = ("--mirror must be a base URL holding the files as 'omtl-mpi data fetch' "
                    f"writes them under --dest (BASE/{exc.path})" if mirror else
                    "the source may have moved: use --mirror URL for another source")
            raise NotFound(exc.path, exc.url, exc.why, hint) from None
    raise FetchError(f"{name}: its files have no canonical download; use --mirror URL")


def check_out(name: str, dest, out, groups=None) -> None:
    """Refuse (UserError), before any download, an output (-o) that would replace a file of the
    data set under ``dest``, that is a folder, or whose folder is missing or not writable."""
    dest = os.path.abspath(str(dest))
    inputs = []
    for variant, files in select_files(name, groups):
        inputs.append((os.path.join(dest, *variant["import_src"].split("/")), f"the {name} data to import"))
        inputs += [(os.path.join(dest, *f["path"].split("/")), f"a {name} file it downloads")
                   for f in files]
    refuse_inputs(out, inputs, "-o")
    if os.path.dirname(os.path.abspath(out)) != dest or os.path.isdir(dest):
        output_file(out, "-o")


def import_fetched(fetched: Fetched, out, **options):
    """Run the data set's importer on the fetched files; returns its TaskMeta."""
    given = {k: v for k, v in options.items() if v is not None}
    return IMPORTERS[fetched.name](fetched.import_src, out, **given)


def foreign_options(name: str, options: dict) -> list:
    """The given importer options that data set ``name`` does not take."""
    allowed = OPTIONS.get(name, ())
    return [k for k, v in options.items() if v is not None and k not in allowed]
