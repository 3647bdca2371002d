"""Which files of a collection are indexed: the pattern language (names at any depth, paths from the
folder, `**`, folders only), a bad pattern told in a sentence, and on a generated Sphinx-like tree
(pages, `_sources` copies, `_static` scripts, `searchindex.js`, `.git`, `node_modules`, a `venv`)
the defaults leave exactly the build output and copies out, each listed with why and counted; the
person's include and exclude patterns are stored with the collection and followed, a file a new
pattern leaves out leaves the index, and the walk never enters a folder a pattern leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.docs import walk as walk_module
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.patterns import DEFAULT_EXCLUDES, DEFAULTS, BadPattern, LeftOutCount, Patterns, checked, person_patterns
from app.docs.readers import SUFFIXES, is_supported
from app.docs.search import search
from app.docs.types import FileProblem
from app.docs.walk import walk_roots

pytestmark = pytest.mark.timeout(120)

PAGE_WORD = "marmalade"  # in every page, and in its `_sources` copy
SOURCE_ONLY = "quinceward"  # only in the `_sources` copies (the reST markup of a page)
SCRIPT_WORD = "zebrafunc"  # only in scripts and the search index

# relative path -> text; what a Sphinx build of a small project beside its tools' folders holds
SPHINX_TREE: dict[str, str] = {
    "index.html": f"<html><body><h1>Welcome</h1><p>The {PAGE_WORD} guide starts here.</p></body></html>",
    "library/os.html": f"<html><body><h1>os</h1><p>Files and {PAGE_WORD} folders.</p></body></html>",
    "library/sys.html": f"<html><body><h1>sys</h1><p>The interpreter keeps {PAGE_WORD} flags.</p></body></html>",
    "search.html": "<html><body><h1>Search</h1><p>Please activate JavaScript to search.</p></body></html>",
    "notes/build.md": f"# Building the guide\n\nRun make to build the {PAGE_WORD} pages.\n",
    "genindex.html": "<html><body><h1>Index</h1><p>os sys flags files</p></body></html>",
    "genindex-A.html": "<html><body><h1>Index A</h1><p>abs all any</p></body></html>",
    "py-modindex.html": "<html><body><h1>Module index</h1><p>os sys</p></body></html>",
    "_sources/index.rst.txt": f"Welcome\n=======\n\nThe {PAGE_WORD} guide starts here. {SOURCE_ONLY}\n",
    "_sources/library/os.rst.txt": f"os\n==\n\nFiles and {PAGE_WORD} folders. {SOURCE_ONLY}\n",
    "_static/doctools.js": f"function {SCRIPT_WORD}() {{ return 1; }}\n",
    "_static/jquery.js": f"function {SCRIPT_WORD}Query() {{ return 2; }}\n",
    "_static/pygments.css": ".highlight { color: red; }\n",
    "searchindex.js": f'Search.setIndex({{"terms": {{"{SCRIPT_WORD}": [0]}}}})\n',
    "theme.min.js": f"function {SCRIPT_WORD}(){{return 3}}\n",
    "theme.min.css": ".a{color:blue}\n",
    "objects.inv": "# Sphinx inventory version 2\n",
    "_images/diagram.png": "\x89PNG",
    ".buildinfo": "config: abc\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    ".git/objects/ab/cdef0123": "blob",
    ".git/config": "[core]\n",
    "node_modules/pkg/index.js": f"module.exports = function {SCRIPT_WORD}() {{}}\n",
    "node_modules/pkg/README.md": "# pkg\n\nA package.\n",
    "venv/pyvenv.cfg": "home = /usr/bin\n",
    "venv/lib/python3.11/site-packages/mod.py": "def installed():\n    return 1\n",
    "__pycache__/conf.cpython-311.pyc": "\x00\x01",
}
KEPT = ("index.html", "library/os.html", "library/sys.html", "notes/build.md", "search.html")
# what the defaults leave out, relative path -> the sentence that says why
LEFT_OUT = {
    ".buildinfo": "is left out by the pattern `.*`",
    ".git": "is a folder left out by the pattern `.git/` (3 files in it)",
    "__pycache__": "is a folder left out by the pattern `__pycache__/` (1 file in it)",
    "_images/diagram.png": "is a .png file, which Cove does not read",
    "_sources": "is a folder left out by the pattern `_sources/` (2 files in it)",
    "_static": "is a folder left out by the pattern `_static/` (3 files in it)",
    "genindex-A.html": "is left out by the pattern `genindex*.html`",
    "genindex.html": "is left out by the pattern `genindex*.html`",
    "node_modules": "is a folder left out by the pattern `node_modules/` (2 files in it)",
    "objects.inv": "is a .inv file, which Cove does not read",
    "py-modindex.html": "is left out by the pattern `py-modindex.html`",
    "searchindex.js": "is left out by the pattern `searchindex.js`",
    "theme.min.css": "is left out by the pattern `*.min.css`",
    "theme.min.js": "is left out by the pattern `*.min.js`",
    "venv": "is a folder left out by the pattern `venv/` (2 files in it)",
}


def write_sphinx_tree(root: Path) -> Path:
    for relative, text in SPHINX_TREE.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return root


def relative_left_out(root: Path, left_out: tuple[FileProblem, ...] | list[FileProblem]) -> dict[str, str]:
    return {Path(p.path).relative_to(root).as_posix(): p.sentence for p in left_out}


def indexed_paths(db: Path, root: Path) -> set[str]:
    with DocumentIndex(db) as index:
        rows = index.conn.execute("SELECT path FROM files WHERE status = 'indexed'").fetchall()
    return {Path(str(r[0])).relative_to(root).as_posix() for r in rows}


# ---- the language -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "rel", "is_dir", "left_out"),
    [
        ("_sources", "_sources", True, True),
        ("_sources", "api/_sources", True, True),  # a name matches at any depth
        ("_sources", "my_sources", True, False),
        ("*.min.js", "static/theme.min.js", False, True),
        ("*.min.js", "static/theme.js", False, False),
        ("build/", "build", True, True),
        ("build/", "build", False, False),  # a trailing / matches folders only
        ("library/old", "library/old", True, True),  # with a / it matches from the folder given
        ("library/old", "x/library/old", True, False),
        ("./drafts", "drafts", True, True),
        ("./drafts", "x/drafts", True, False),
        ("api/*.html", "api/os.html", False, True),
        ("api/*.html", "api/sub/os.html", False, False),  # * stays within one name
        ("api/**/*.html", "api/sub/deep/os.html", False, True),  # ** spans folders
        ("api/**/*.html", "api/os.html", False, True),
        ("**/drafts", "a/b/drafts", True, True),
        ("notes/**", "notes/a/b.txt", False, True),
        ("genindex*.html", "genindex-A.html", False, True),
        ("v?.txt", "v1.txt", False, True),
        ("v?.txt", "v10.txt", False, False),
        ("[ab].md", "a.md", False, True),
        ("[!ab].md", "a.md", False, False),
        ("[!ab].md", "c.md", False, True),
        ("file[1.txt", "file[1.txt", False, True),  # an unclosed [ is itself
        ("a+b (1).txt", "a+b (1).txt", False, True),  # regex characters are themselves
    ],
)
def test_the_pattern_language(pattern: str, rel: str, is_dir: bool, left_out: bool) -> None:
    assert (Patterns(exclude=(pattern,)).excluded_by(rel, is_dir) == pattern) is left_out


def test_left_out_by_looks_at_every_folder_above_and_include_keeps_a_folders_files() -> None:
    patterns = Patterns(include=("manual/", "*.html"), exclude=DEFAULT_EXCLUDES)
    assert patterns.left_out_by(["api", "_static", "x.js"], False) == (1, "_static/")
    assert patterns.left_out_by(["api", "x.html"], False) is None
    assert patterns.included("manual/deep/a.txt") and patterns.included("api/x.html")
    assert not patterns.included("notes/a.txt")
    assert Patterns().included("anything/at/all.txt")  # no include patterns: every file


@pytest.mark.parametrize(
    ("pattern", "include", "fragment"),
    [
        ("", False, "an empty pattern matches nothing"),
        ("   ", False, "an empty pattern matches nothing"),
        ("/", False, "an empty pattern matches nothing"),
        ("/usr/share/doc", False, "is an absolute path, so it can never match"),
        ("~/docs", False, "is an absolute path"),
        ("C:\\docs", False, "is an absolute path"),
        ("../elsewhere", False, "leads out of the collection's folders"),
        ("a/../b", False, "leads out of the collection's folders"),
        ("bad\nline", False, "holds a control character"),
        ("*.png", True, "names only .png files, which Cove does not read, so it would include nothing"),
    ],
)
def test_a_bad_pattern_gets_one_sentence(pattern: str, include: bool, fragment: str) -> None:
    with pytest.raises(BadPattern) as caught:
        checked(pattern, include=include, supported=SUFFIXES)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_good_patterns_are_kept_as_written_and_the_defaults_come_first() -> None:
    assert checked("  _build/ ") == "_build/"
    assert checked("*.png") == "*.png"  # excluding a type Cove does not read is harmless
    asked = person_patterns(["*.html"], ["old/", "_sources/"], supported=SUFFIXES)
    assert asked.include == ("*.html",)
    assert asked.exclude == (*DEFAULT_EXCLUDES, "old/")  # the defaults, then the person's, once each
    assert person_patterns([], ["old/"], default_excludes=False).exclude == ("old/",)
    assert Patterns().for_storage() == (None, None)  # the defaults are stored as "the defaults"
    assert asked.for_storage() == (("*.html",), (*DEFAULT_EXCLUDES, "old/"))
    assert Patterns.stored(None, None) == Patterns()
    assert Patterns.stored(["*.md"], []) == Patterns(include=("*.md",), exclude=())
    assert all(why for _pattern, why in DEFAULTS)  # each default says why


# ---- the walk and the indexer on a Sphinx build ---------------------------------------------------


def test_the_defaults_leave_out_exactly_the_build_output_and_copies_each_with_why(tmp_path: Path) -> None:
    root = write_sphinx_tree(tmp_path / "site")
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as index:
        index.create("site", [root])
    seen: list[tuple[int, ...]] = []
    done = index_collection(db, "site", lower_priority=False, on_progress=lambda p: seen.append((len(p.left_out),)))
    assert done.finished and done.problems == ()
    assert indexed_paths(db, root) == set(KEPT)
    assert relative_left_out(root, done.left_out) == LEFT_OUT
    assert all(n == len(LEFT_OUT) for (n,) in seen)  # every progress carries the list, from the first
    with DocumentIndex(db) as index:
        status = index.status("site")
        assert relative_left_out(root, status.left_out) == LEFT_OUT  # stored with the collection
        assert status.files_indexed == len(KEPT)
        assert not search(index, ["site"], SOURCE_ONLY) and not search(index, ["site"], SCRIPT_WORD)
        assert {Path(p.path).name for p in search(index, ["site"], PAGE_WORD, limit=20)} == {
            "index.html",
            "os.html",
            "sys.html",
            "build.md",
        }
    count = LeftOutCount.of(done.left_out)
    assert (count.by_pattern, count.by_type) == (3 + 1 + 2 + 3 + 2 + 2 + 1 + 1 + 1 + 1 + 2 + 1, 2)
    # every file of the tree is indexed or counted as left out
    assert len(KEPT) + count.files == len(SPHINX_TREE)
    assert count.sentence() == "22 left out (20 by pattern, 2 not a type Cove reads)"


def test_a_left_out_folder_is_never_walked_into(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_sphinx_tree(tmp_path / "site")
    statted: list[str] = []
    lstat = walk_module.os.lstat

    def watched_lstat(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        statted.append(str(path))
        return lstat(path, *args, **kwargs)

    monkeypatch.setattr(walk_module, "_BY_FD", False)  # entries by path, so each one looked at is seen by name
    monkeypatch.setattr(walk_module.os, "lstat", watched_lstat)
    found = list(walk_roots([str(root)], is_supported))
    monkeypatch.undo()
    looked_at = {Path(p).relative_to(root).as_posix() for p in statted if Path(p).is_relative_to(root)}
    for folder in (".git", "_sources", "_static", "node_modules", "venv", "__pycache__"):
        assert folder in looked_at  # the folder itself...
        assert not [p for p in looked_at if p.startswith(folder + "/")], folder  # ...and nothing in it
    files = {Path(f.path).relative_to(root).as_posix() for f in found if f.problem is None and f.left_out is None}
    assert files == set(KEPT)


def test_the_persons_patterns_are_stored_followed_and_changed(tmp_path: Path) -> None:
    root = write_sphinx_tree(tmp_path / "site")
    db = tmp_path / "documents.db"
    asked = person_patterns(["*.html"], ["library/sys.html"], supported=SUFFIXES)
    include, exclude = asked.for_storage()
    with DocumentIndex(db) as index:
        index.create("site", [root], include=include, exclude=exclude)
    done = index_collection(db, "site", lower_priority=False)
    assert indexed_paths(db, root) == {"index.html", "library/os.html", "search.html"}
    left = relative_left_out(root, done.left_out)
    assert left["notes/build.md"] == "is left out: it matches none of the include patterns (`*.html`)"
    assert left["library/sys.html"] == "is left out by the pattern `library/sys.html`"
    assert left["_sources"].startswith("is a folder left out by the pattern `_sources/`")

    with DocumentIndex(db) as index:  # a new connection, as after a restart: the patterns were stored
        info = index.require("site")
        assert Patterns.stored(info.include, info.exclude) == asked
        index.set_patterns("site", include=None, exclude=())  # no excludes at all: the copies too
    done = index_collection(db, "site", lower_priority=False)
    not_read = {
        "_images/diagram.png": "is a .png file, which Cove does not read",
        "objects.inv": "is a .inv file, which Cove does not read",
        ".buildinfo": "is a suffix-less file, which Cove does not read",
        ".git/HEAD": "is a suffix-less file, which Cove does not read",
        ".git/config": "is a suffix-less file, which Cove does not read",
        ".git/objects/ab/cdef0123": "is a suffix-less file, which Cove does not read",
        "__pycache__/conf.cpython-311.pyc": "is a .pyc file, which Cove does not read",
    }
    assert relative_left_out(root, done.left_out) == not_read
    assert indexed_paths(db, root) == set(SPHINX_TREE) - set(not_read)
    with DocumentIndex(db) as index:
        assert search(index, ["site"], SOURCE_ONLY)

    with DocumentIndex(db) as index:
        index.set_patterns("site", include=None, exclude=None)  # back to the defaults
    index_collection(db, "site", lower_priority=False)
    assert indexed_paths(db, root) == set(KEPT)  # what a pattern now leaves out left the index
    with DocumentIndex(db) as index:
        assert not search(index, ["site"], SOURCE_ONLY) and not search(index, ["site"], SCRIPT_WORD)
        assert relative_left_out(root, index.left_out("site")) == LEFT_OUT


def test_a_folder_given_as_a_root_is_walked_though_a_pattern_would_leave_it_out(tmp_path: Path) -> None:
    root = write_sphinx_tree(tmp_path / "site")
    found = list(walk_roots([str(root), str(root / "_sources")], is_supported))
    paths = {Path(f.path).relative_to(root).as_posix(): f for f in found}
    assert paths["_sources/index.rst.txt"].left_out is None and paths["_sources/index.rst.txt"].problem is None
    assert "_sources" not in paths  # not listed as left out: it is walked as the root it is


def test_a_link_into_a_left_out_folder_is_left_out_with_the_pattern(tmp_path: Path) -> None:
    root = write_sphinx_tree(tmp_path / "site")
    (root / "copy.txt").symlink_to(root / "_sources" / "index.rst.txt")
    found = {Path(f.path).name: f for f in walk_roots([str(root)], is_supported)}
    assert found["copy.txt"].problem is not None
    assert "is a link into the folder _sources, which the pattern `_sources/` leaves out" in found["copy.txt"].problem
