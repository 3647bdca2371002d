"""Which files of a collection's folders are indexed: the include and exclude patterns (gitignore-like
globs over the path relative to the folder given), the default excludes, the check that gives a bad
pattern one sentence, and the sentences that say why a file was left out unread (and their count).

The pattern language, matched against the path relative to the collection's folder, with "/":
- a pattern without "/" matches a file or folder name at any depth: `_sources`, `*.min.js`;
- a pattern with "/" matches from the folder given: `library/old`, `api/*.html`;
- `*` and `?` match within one name, `[abc]` one of those characters, `**` any number of folders
  (`**/drafts`, `notes/**/*.txt`); a trailing "/" matches folders only (`build/`).
A folder an exclude pattern matches is not walked into; its files are counted, not read. An include
pattern keeps only the files it matches (itself, or a folder above it); none: every file a reader reads.

The default excludes leave out what is not the person's documentation, and only that: copies of
text that is indexed elsewhere, build and packaging output, tools' state and installed packages.
Each is named with why in DEFAULT_EXCLUDES."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.docs.types import FileProblem

# (pattern, why): most specific first, as the first pattern that matches is the one named.
DEFAULTS: tuple[tuple[str, str], ...] = (
    (".git/", "Git's own files: the history of the folder, not documents"),
    (".*", "hidden files and folders: tools' and editors' state (.hg, .svn, .venv, .tox, .DS_Store)"),
    ("_sources/", "Sphinx's copies of each page's reST source; the page itself is indexed"),
    ("_static/", "Sphinx's scripts, styles and fonts for the pages"),
    ("searchindex.js", "Sphinx's search index: word lists of the pages, not text"),
    ("genindex*.html", "Sphinx's general index pages: every term with links to pages, no prose"),
    ("py-modindex.html", "Sphinx's module index: a list of links"),
    ("_build/", "Sphinx's build folder in a project: built copies of the sources beside it"),
    ("*.min.js", "minified scripts: code squeezed onto a line, not text"),
    ("*.min.css", "minified styles"),
    ("node_modules/", "JavaScript packages installed for a project"),
    ("__pycache__/", "Python's compiled files"),
    ("venv/", "a Python virtual environment: installed packages"),
    ("site-packages/", "installed Python packages (in a virtual environment of any name)"),
    ("*.egg-info/", "Python packaging metadata: copies of the project's README"),
    ("htmlcov/", "coverage.py's HTML report of code, not documentation"),
)
DEFAULT_EXCLUDES: tuple[str, ...] = tuple(p for p, _ in DEFAULTS)
WHY_DEFAULT: dict[str, str] = dict(DEFAULTS)

COUNT_CAP = 100_000  # files counted in a left-out folder at most ("100,000 or more")
NOT_READ = "which Cove does not read"
_FOLDER_FILES = re.compile(r"\((\d[\d,]*)( or more)? files? in it\)$")
_ICASE = re.IGNORECASE if os.path.normcase("A") == "a" else 0  # Windows: names match in any case


class BadPattern(ValueError):
    """A pattern that cannot be used; the message is one sentence."""


# ---- the language -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Glob:
    text: str
    regex: re.Pattern[str]
    folders_only: bool
    anchored: bool  # has a "/": matched against the whole relative path, else against one name

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.folders_only and not is_dir:
            return False
        subject = rel if self.anchored else rel.rpartition("/")[2]
        return self.regex.fullmatch(subject) is not None


def _compile(text: str) -> _Glob:
    body = text[2:] if text.startswith("./") else text
    folders_only = body.endswith("/")
    body = body.rstrip("/")
    anchored = "/" in body or text.startswith("./")
    return _Glob(text, re.compile(_regex(body), _ICASE), folders_only, anchored)


def _regex(glob: str) -> str:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1 and "/" not in glob[i:end]:
            inner = glob[i + 1 : end]
            negate = inner[:1] in ("!", "^")
            inner = inner[1:] if negate else inner
            out.append("[" + ("^" if negate else "") + inner.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class Patterns:
    """A collection's patterns as a walk uses them: `include` (empty: every file a reader reads) and
    `exclude` (the defaults unless the person dropped them, and the person's own)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    _include: tuple[_Glob, ...] = field(init=False, repr=False, compare=False)
    _exclude: tuple[_Glob, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", tuple(_compile(p) for p in self.include))
        object.__setattr__(self, "_exclude", tuple(_compile(p) for p in self.exclude))

    @classmethod
    def stored(cls, include: Sequence[str] | None, exclude: Sequence[str] | None) -> Patterns:
        """The patterns as the index keeps them (None: no include patterns; the default excludes).
        A stored pattern that no longer passes the check is dropped (they are checked when set)."""
        return cls(include=_usable(include or ()), exclude=DEFAULT_EXCLUDES if exclude is None else _usable(exclude))

    def for_storage(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
        """(include, exclude) to store: None for no include patterns and for exactly the defaults,
        so a collection on the defaults follows them."""
        return (self.include or None, None if self.exclude == DEFAULT_EXCLUDES else self.exclude)

    @property
    def default_excludes(self) -> bool:
        return set(DEFAULT_EXCLUDES) <= set(self.exclude)

    def excluded_by(self, rel: str, is_dir: bool) -> str | None:
        """The exclude pattern that leaves out the file or folder at `rel` ("a/b", from the folder
        given) itself, or None (the folders above it are not looked at: see left_out_by)."""
        return next((g.text for g in self._exclude if g.matches(rel, is_dir)), None)

    def left_out_by(self, parts: Sequence[str], is_dir: bool) -> tuple[int, str] | None:
        """For a path given as its names from the folder given: (the index of the first name an
        exclude pattern leaves out, that pattern), or None. The names above the last are folders."""
        for i in range(len(parts)):
            pattern = self.excluded_by("/".join(parts[: i + 1]), is_dir or i < len(parts) - 1)
            if pattern is not None:
                return i, pattern
        return None

    def included(self, rel: str) -> bool:
        """Whether the file at `rel` is one the include patterns keep (all are, without any)."""
        if not self._include:
            return True
        parts = rel.split("/")
        return any(g.matches("/".join(parts[: i + 1]), i < len(parts) - 1) for g in self._include for i in range(len(parts)))


DEFAULT_PATTERNS = Patterns()


# ---- the person's patterns, checked -------------------------------------------------------------


def checked(pattern: str, *, include: bool = False, supported: Iterable[str] = ()) -> str:
    """`pattern` as it will be stored (surrounding spaces gone), or BadPattern with a sentence: an
    empty one, an absolute path or one with `..` (they can never match a path inside the folders),
    a control character; for an include pattern, `*.png` and the like when Cove reads no such file
    (`supported`: the suffixes a reader reads, lower case)."""
    text = pattern.strip()
    shown = text.replace("`", "'")
    if not text.rstrip("/") or text in ("./", "."):
        raise BadPattern("an empty pattern matches nothing; give a name such as `_build` or a glob such as `*.min.js`")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise BadPattern(f"the pattern {pattern!r} holds a control character; a pattern is one line naming files or folders")
    if text.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", text):
        raise BadPattern(
            f"the pattern `{shown}` is an absolute path, so it can never match: patterns match paths inside the collection's "
            "folders, from each folder given, such as `_build` or `library/old`"
        )
    if ".." in text.replace("\\", "/").split("/"):
        raise BadPattern(f"the pattern `{shown}` leads out of the collection's folders with `..`, so it can never match")
    suffix = re.fullmatch(r"(?:.*/)?\*(\.[^*?\[\]/]+)", text)
    wanted = {s.lower() for s in supported}
    if include and wanted and suffix is not None and suffix.group(1).lower() not in wanted:
        raise BadPattern(f"the include pattern `{shown}` names only {suffix.group(1)} files, {NOT_READ}, so it would include nothing")
    return text


def _usable(patterns: Iterable[str]) -> tuple[str, ...]:
    kept: list[str] = []
    for p in patterns:
        try:
            kept.append(checked(p))
        except BadPattern:
            continue
    return tuple(dict.fromkeys(kept))


def person_patterns(
    include: Sequence[str] = (), exclude: Sequence[str] = (), *, default_excludes: bool = True, supported: Iterable[str] = ()
) -> Patterns:
    """The patterns a person asked for: `include` as given, `exclude` after the defaults (or alone
    when `default_excludes` is False). BadPattern with a sentence for the first bad one."""
    suffixes = tuple(supported)
    inc = tuple(dict.fromkeys(checked(p, include=True, supported=suffixes) for p in include))
    exc = tuple(checked(p) for p in exclude)
    return Patterns(include=inc, exclude=tuple(dict.fromkeys((*(DEFAULT_EXCLUDES if default_excludes else ()), *exc))))


# ---- why a file was left out, and how many ------------------------------------------------------


def by_pattern(pattern: str, *, files: int | None = None, more: bool = False) -> str:
    """A file, or (`files` given) a folder of that many files, an exclude pattern leaves out."""
    if files is None:
        return f"is left out by the pattern `{pattern}`"
    held = f"{files:,}{' or more' if more else ''} file{'' if files == 1 and not more else 's'} in it"
    return f"is a folder left out by the pattern `{pattern}` ({held})"


def not_included(include: Sequence[str]) -> str:
    return "is left out: it matches none of the include patterns (" + ", ".join(f"`{p}`" for p in include) + ")"


def by_type(suffix: str) -> str:
    return f"is a {suffix or 'suffix-less'} file, {NOT_READ}"


@dataclass(frozen=True)
class LeftOutCount:
    """Files left out unread: by a pattern (a left-out folder counts its files), and not read by
    any reader (their type)."""

    by_pattern: int = 0
    by_type: int = 0

    @property
    def files(self) -> int:
        return self.by_pattern + self.by_type

    @classmethod
    def of(cls, left_out: Iterable[FileProblem]) -> LeftOutCount:
        pattern = kind = 0
        for f in left_out:
            if f.sentence.endswith(NOT_READ):
                kind += 1
                continue
            held = _FOLDER_FILES.search(f.sentence)
            pattern += int(held.group(1).replace(",", "")) if held else 1
        return cls(by_pattern=pattern, by_type=kind)

    def sentence(self) -> str:
        """'17 left out (12 by pattern, 5 not a type Cove reads)', or '' when none were."""
        if not self.files:
            return ""
        parts = [f"{self.by_pattern:,} by pattern"] if self.by_pattern else []
        parts += [f"{self.by_type:,} not a type Cove reads"] if self.by_type else []
        return f"{self.files:,} left out ({', '.join(parts)})"
