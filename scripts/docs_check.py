#!/usr/bin/env python
"""List every generated section of the docs, the command and revision that made it, and
whether the code it describes has changed since.

Usage: python scripts/docs_check.py [--strict] [--root DIR] [FILE ...]

A generated section lies between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``; its first
line is the stamp that scripts/lib/docsection.py writes (command, git revision, and the paths its
figures depend on). One line per section (``make docs-check`` runs this), with its status:

    current             the paths it depends on are the same at HEAD (and in the working
                        tree) as at the stamp's revision
    stale (...)         they differ: the commits since the revision (or that it is not an
                        ancestor of HEAD) and the files changed, or uncommitted changes to them
    dirty               made from code with uncommitted changes: no commit holds it
    no stamp            a section without the stamp (not regenerated since stamps exist)
    unknown command     the stamp's command cannot regenerate it here: its program is not a
                        file of the checkout, its table not one of scripts/results.py, or its
                        make target not in the Makefile (a command renamed since)
    unknown ...         the stamp's revision is not in this repository (or was made outside
                        one), or git could not compare it with HEAD

The files: README.md, docs/*.md and docs/results/*.md (or the FILEs given). Exit status: 0,
also when sections are stale (regenerating them takes an hour: the listing is the point);
1 with --strict unless every section is current; 1 whenever a marker has no partner (a begin
without its end, or an end without its begin), since the next generator run would write into
the wrong place; 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.docsection import git, parse_stamp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = re.compile(r"^<!-- begin (\S+) -->\s*$")
END = re.compile(r"^<!-- end (\S+) -->\s*$")
SHOWN_PATHS = 5                  # changed files named in a stale line; the rest are counted
# programs whose first argument chooses what they make -> the file that each choice's code is
TABLE_FILES = {"scripts/results.py": "scripts/lib/{}.py"}


def sections(text: str) -> list:
    """(name, line number, stamp or None, problem or None) of every marked section in ``text``:
    a section's stamp is its first non-blank line parsed by docsection.parse_stamp; a problem
    is a marker without its partner."""
    found, open_ = [], None                 # open_: [name, line, first line inside or None]
    for number, line in enumerate(text.splitlines(), start=1):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if open_:
                found.append((open_[0], open_[1], None, f"begin on line {open_[1]} has no end "
                              f"before the begin of '{begin[1]}' on line {number}"))
            open_ = [begin[1], number, None]
        elif end:
            if open_ is None or end[1] != open_[0]:
                found.append((end[1], number, None, f"end on line {number} without its begin"))
                continue
            found.append((open_[0], open_[1], parse_stamp(open_[2] or ""), None))
            open_ = None
        elif open_ and open_[2] is None and line.strip():
            open_[2] = line
    if open_:
        found.append((open_[0], open_[1], None, f"begin on line {open_[1]} has no end"))
    return found


def _listed(paths: list) -> str:
    shown = ", ".join(paths[:SHOWN_PATHS])
    return shown + (f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else "")


def command_problem(root: str, command: str) -> str | None:
    """Why the stamp's ``command`` would not run in the checkout at ``root``, or None: ``make
    TARGET`` needs the target in root's Makefile (unchecked without one), ``python PROGRAM ARGS``
    the program, and for a program of :data:`TABLE_FILES` its first argument's code."""
    try:
        words = shlex.split(command)
    except ValueError:
        return f"`{command}` is not a command line"
    if words[:1] == ["make"] and len(words) > 1:
        makefile = os.path.join(root, "Makefile")
        if not os.path.isfile(makefile):
            return None
        with open(makefile, encoding="utf-8") as f:
            targets = {m[1] for line in f for m in [re.match(r"^([\w.-]+)\s*:", line)] if m}
        return None if words[1] in targets else f"no make target '{words[1]}' in the Makefile"
    if words[:1] == ["python"] and len(words) > 1:
        program = words[1]
        if not os.path.isfile(os.path.join(root, program)):
            return f"{program} is not a file of this checkout"
        code = TABLE_FILES.get(program)
        choice = words[2] if len(words) > 2 else ""
        if code and not (choice and os.path.isfile(os.path.join(root, code.format(choice)))):
            return f"{program} has no table '{choice}'"
    return None


def status(root: str, stamp: dict | None) -> str:
    """What a section's stamp says about it against the repository at ``root`` (module doc)."""
    if stamp is None:
        return "no stamp"
    problem = command_problem(root, stamp["command"])
    if problem:
        return f"unknown command ({problem})"
    rev, depends = stamp["revision"], stamp["depends"]
    if rev.endswith("+dirty"):
        return "dirty (made from uncommitted code)"
    if rev == "unknown":
        return "unknown revision (made outside a git checkout)"
    if git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") is None:
        return f"unknown revision ({rev} is not a commit of this repository)"
    # decided by what differs between the stamp's revision and HEAD, not by the commits
    # between them: a revision that is not an ancestor of HEAD (a rebased or cherry-picked
    # stamp, a HEAD reset behind it) has no commits "since" and may still differ
    paths = git(root, "diff", "--name-only", rev, "HEAD", "--", *depends)
    changed = git(root, "status", "--porcelain", "--", *depends)
    if paths is None or changed is None:
        return f"unknown (git could not compare {rev} with HEAD)"
    if paths:
        count = git(root, "rev-list", "--count", f"{rev}..HEAD", "--", *depends) or "0"
        since = (f"{count} commit{'s' if count != '1' else ''} since {rev}" if count != "0"
                 else f"{rev} is not an ancestor of HEAD")
        return f"stale ({since}; changed: {_listed(paths.splitlines())})"
    changed = changed.splitlines()
    if changed:
        # a porcelain line is "XY PATH"; X is a space for unstaged changes
        return f"stale (uncommitted changes to: {_listed([c.split(maxsplit=1)[1] for c in changed])})"
    return "current"


def default_files(root: str) -> list:
    files = [os.path.join(root, "README.md")] if os.path.exists(os.path.join(root, "README.md")) else []
    return files + sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + sorted(
        glob.glob(os.path.join(root, "docs", "results", "*.md")))


def check(root: str, files: list) -> tuple[list, int, int]:
    """The listing's lines, how many sections are not current, how many markers are broken."""
    lines, not_current, broken = [], 0, 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            found = sections(f.read())
        shown = os.path.relpath(path, root)
        for name, number, stamp, problem in found:
            if problem:
                broken += 1
                lines.append(f"{shown}: {name}: broken marker: {problem}")
                continue
            state = status(root, stamp)
            not_current += state != "current"
            made = f" (made by `{stamp['command']}` at {stamp['revision']})" if stamp else ""
            lines.append(f"{shown}: {name}: {state}{made}")
    return lines, not_current, broken


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", metavar="FILE", help="Markdown files (default: the docs)")
    ap.add_argument("--root", default=ROOT, help="the git checkout the stamps refer to")
    ap.add_argument("--strict", action="store_true", help="exit 1 unless every section is current")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    if git(root, "rev-parse", "--git-dir") is None:
        print(f"error: {root} is not a git checkout: the stamps' revisions cannot be checked",
              file=sys.stderr)
        return 2
    files = [os.path.abspath(f) for f in args.files] or default_files(root)
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        print(f"error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    lines, not_current, broken = check(root, files)
    print("\n".join(lines))
    total = len(lines) - broken
    print(f"{total} generated section{'s' if total != 1 else ''}: {total - not_current} current, "
          f"{not_current} not" + (f"; {broken} broken marker{'s' if broken > 1 else ''}" if broken else ""))
    return 1 if broken or (args.strict and not_current) else 0


if __name__ == "__main__":
    sys.exit(main())
