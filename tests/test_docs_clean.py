"""The manual and the package speak for themselves: no path outside the repository
(``../shared``), no reference to the project's issue tracker ("issue 12") and no internal stage
names ("stage 1", "Stage 1c"). Generated sections count too: they live in docs/."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what must not appear, whatever its case
FORBIDDEN = re.compile(r"\.\./shared|\bissue #?\d|\bstage 1", re.IGNORECASE)


def text_files(root: Path) -> list[Path]:
    """README.md, every Markdown file under docs/ and every text file of the package."""
    package = [p for p in sorted((root / "omtl_mpi").rglob("*"))
               if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")]
    return [root / "README.md", *sorted((root / "docs").rglob("*.md")), *package]


def dirty_lines(paths, root: Path) -> list[str]:
    """``file:line: text`` for every line of ``paths`` that holds a forbidden phrase."""
    found = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:          # not text: nothing a reader sees as words
            continue
        found += [f"{path.relative_to(root)}:{i}: {line.strip()}"
                  for i, line in enumerate(lines, start=1) if FORBIDDEN.search(line)]
    return found


def test_the_docs_and_the_package_are_clean():
    paths = text_files(ROOT)
    assert len(paths) > 50                   # the walk finds the docs and the package
    dirty = dirty_lines(paths, ROOT)
    assert not dirty, "\n".join(dirty)


@pytest.mark.parametrize("line", [
    "see ../shared/notes.md", "as Issue 32 asks", "fixed in issue #7", "Stage 1c chose it",
    "the STAGE 1 runs"])
def test_a_forbidden_line_is_found_with_its_place(tmp_path, line):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "omtl_mpi").mkdir()
    (tmp_path / "README.md").write_text("# clean\n")
    (tmp_path / "omtl_mpi" / "mod.py").write_text('"""A clean module: stages 2 and issues."""\n')
    (tmp_path / "docs" / "results" / "x.md").write_text(f"first\n{line}\n")
    assert dirty_lines(text_files(tmp_path), tmp_path) == [f"docs/results/x.md:2: {line}"]


def cited_tests(paths) -> list[tuple[str, str]]:
    """Every ``tests/FILE.py::name`` the Markdown ``paths`` cite, as (file, name)."""
    return [(f, name) for path in paths
            for f, name in re.findall(r"tests/([\w/]+\.py)::(\w+)", path.read_text(encoding="utf-8"))]


def test_every_test_the_docs_cite_exists():
    """The evidence tables name the tests that prove each row: a renamed or folded test must
    take its citations along."""
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    cited = cited_tests(docs)
    assert len(cited) > 50          # the reader finds the citations (RELIABILITY.md has many)
    missing = [f"{f}::{name}" for f, name in cited
               if not (ROOT / "tests" / f).exists()
               or not re.search(rf"^\s*(async )?def {name}\(", (ROOT / "tests" / f).read_text(), re.M)]
    assert missing == []
