"""Checks a model's reply against one task of bench/auto_tasks.json (issue 53's task set for
picking the model per task) and owns the three check types:

- "value": the last number in the reply (or the last LaTeX \\boxed{..} if there is one), read
  with thousands separators, signs, decimals, "$12.50" and "12.5%", compared with `value`
  within `tolerance`;
- "tests": the reply's code (the last fenced block that defines `function`, else the last
  fenced block, else the whole reply when it starts with code) run with the task's asserts in
  a fresh `python -I` subprocess, in a temporary directory, with a wall-clock timeout, CPU,
  address-space and file-size limits; passed iff it exits 0. This keeps a runaway reply from
  hanging or exhausting the runner; it is not a security sandbox;
- "keywords": `any` is a list of groups; every group must match, and a group matches when
  any of its alternatives occurs as a whole word (case-, accent- and hyphen-insensitive).

`check(task, reply)` never raises: a bad reply, or a malformed task, is (False, reason).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # not on POSIX: the timeout still applies, the limits do not
    resource = None  # type: ignore[assignment]

TIMEOUT_S = 5.0
MEMORY_BYTES = 512 * 1024 * 1024
FILE_BYTES = 4 * 1024 * 1024
TASKS_PATH = Path(__file__).with_name("auto_tasks.json")


def load_tasks(path: Path | str = TASKS_PATH) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def check(task: dict[str, Any], reply: str) -> tuple[bool, str]:
    """(passed, a short reason) for `reply` against `task["check"]`."""
    try:
        if not isinstance(reply, str):
            return False, f"reply is {type(reply).__name__}, not text"
        spec = task["check"]
        kind = spec["type"]
        if kind == "value":
            return check_value(spec, reply)
        if kind == "tests":
            return check_tests(spec, reply)
        if kind == "keywords":
            return check_keywords(spec, reply)
        return False, f"unknown check type {kind!r}"
    except Exception as e:  # a malformed task or a checker bug must not stop a whole run
        return False, f"checker error: {type(e).__name__}: {e}"


# --- value -------------------------------------------------------------------------------

# A number not glued to a word or another number: an optional sign (before or after a "$"),
# digits with comma thousands separators or plain, an optional decimal part.
_NUMBER = re.compile(
    r"(?<![\w.,])(?P<s1>[-−])?\$?(?P<s2>[-−])?"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
)
_FRAC = re.compile(r"\\d?frac\{\s*(-?\d+(?:\.\d+)?)\s*\}\{\s*(-?\d+(?:\.\d+)?)\s*\}")


def _last_boxed(text: str) -> str | None:
    """The contents of the last \\boxed{...} (braces matched), or None."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return text[i:]  # unclosed: take the rest


def _last_number(text: str) -> float | None:
    text = text.replace("{,}", ",").replace("\\,", "").replace("\\!", "")
    last = None
    for m in _NUMBER.finditer(text):
        last = m
    frac = None
    for f in _FRAC.finditer(text):
        frac = f
    if frac is not None and (last is None or frac.end() >= last.end()):
        den = float(frac.group(2))
        if den != 0:
            return float(frac.group(1)) / den
    if last is None:
        return None
    value = float(last.group("num").replace(",", ""))
    return -value if (last.group("s1") or last.group("s2")) else value


def extract_number(reply: str) -> float | None:
    """The reply's answer as a number: from the last \\boxed{..} if any, else its last number."""
    boxed = _last_boxed(reply)
    if boxed is not None:
        value = _last_number(boxed)
        if value is not None:
            return value
    return _last_number(reply)


def check_value(spec: dict[str, Any], reply: str) -> tuple[bool, str]:
    want = float(spec["value"])
    tolerance = float(spec.get("tolerance", 0))
    got = extract_number(reply)
    if got is None:
        return False, "no number in the reply"
    if abs(got - want) <= tolerance + 1e-9 * max(1.0, abs(want)):
        return True, f"{got:g} == {want:g}"
    return False, f"{got:g} != {want:g}"


# --- tests -------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_CODE_START = re.compile(r"\s*(def|import|from|class|@)\b")

# Runs the solution under a module name other than "__main__" (so an `if __name__ ...` demo
# block does not run, nor wait on input), then the asserts in the same namespace.
_HARNESS = """\
import os, sys, traceback
here = os.path.dirname(os.path.abspath(__file__))
ns = {"__name__": "solution", "__builtins__": __builtins__}
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        exec(compile(f.read(), "solution.py", "exec"), ns)
except BaseException as e:
    msg = str(e)[:200]
    print("solution failed to load: " + type(e).__name__ + (": " + msg if msg else ""), file=sys.stderr)
    sys.exit(3)
if not callable(ns.get(sys.argv[3])):
    print("no function " + sys.argv[3] + " defined", file=sys.stderr)
    sys.exit(4)
with open(sys.argv[2], encoding="utf-8") as f:
    tests = f.read()
try:
    exec(compile(tests, "tests.py", "exec"), ns)
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    where = [fr for fr in tb if fr.filename == "tests.py"]
    line = tests.splitlines()[where[-1].lineno - 1].strip() if where else ""
    msg = str(e)[:200]
    print("failed: " + (line + ": " if line else "") + type(e).__name__ + (": " + msg if msg else ""), file=sys.stderr)
    sys.exit(1)
with open(os.path.join(here, "passed.txt"), "w", encoding="utf-8") as f:  # an os._exit(0) in the reply leaves no token
    f.write(sys.argv[4])
"""


def extract_code(reply: str, function: str | None = None) -> str | None:
    """The code in a reply: the last fenced block that defines `function`, else the last
    python (or unlabelled) fenced block, else the whole reply when it starts with code."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    blocks = [body for lang, body in blocks if lang in ("", "python", "py", "python3")]
    if function:
        defining = [b for b in blocks if re.search(rf"^\s*(async\s+)?def\s+{re.escape(function)}\s*\(", b, re.M)]
        if defining:
            return defining[-1]
    if blocks:
        return blocks[-1]
    if _CODE_START.match(reply):
        return reply
    return None


def _limits(timeout_s: float) -> None:  # runs in the child, before exec
    if resource is None:
        return
    cpu = int(timeout_s) + 1
    for limit, value in (
        (resource.RLIMIT_AS, MEMORY_BYTES),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, FILE_BYTES),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    if os.name == "posix":
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        proc.kill()


def run_tests(code: str, tests: str, function: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="auto_check_", ignore_cleanup_errors=True) as tmp:
        d = Path(tmp)
        (d / "harness.py").write_text(_HARNESS, encoding="utf-8")
        (d / "solution.py").write_text(code, encoding="utf-8")
        (d / "tests.py").write_text(tests, encoding="utf-8")
        token = secrets.token_hex(8)
        started = time.monotonic()
        with open(d / "out.txt", "wb") as out, open(d / "err.txt", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(d / "harness.py"), str(d / "solution.py"), str(d / "tests.py"), function, token],
                cwd=d,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=os.name == "posix",
                preexec_fn=(lambda: _limits(timeout_s)) if os.name == "posix" else None,
            )
            try:
                rc = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(proc)  # also any children it left behind
            if timed_out:
                proc.wait()
        elapsed = time.monotonic() - started
        if timed_out:
            return False, f"timed out after {timeout_s:g} s"
        stderr = (d / "err.txt").read_bytes()[-4000:].decode("utf-8", "replace").strip()
        passed = (d / "passed.txt").is_file() and (d / "passed.txt").read_text(encoding="utf-8") == token
    if rc == 0 and passed:
        return True, f"tests passed in {elapsed:.2f} s"
    last = stderr.splitlines()[-1] if stderr else ""
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return False, f"killed by {name}" + (f": {last[:200]}" if last else "")
    if rc == 0:
        return False, "exited before the tests finished"
    return False, (last[:300] if last else f"exit code {rc}")


def check_tests(spec: dict[str, Any], reply: str) -> tuple[bool, str]:
    function = spec["function"]
    code = extract_code(reply, function)
    if code is None:
        return False, "no code in the reply"
    return run_tests(code, spec["tests"], function, float(spec.get("timeout_s", TIMEOUT_S)))


# --- keywords ----------------------------------------------------------------------------


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.casefold()


def _keyword_pattern(word: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in re.split(r"[\s\-‐‑–—]+", _fold(word).strip()) if p]
    body = r"[\s\-‐‑–—]+".join(parts)  # "ulan bator" also matches "Ulan-Bator"
    # whole words; a number does not match inside a longer one ("0" is not found in "0.5")
    return re.compile(rf"(?<!\w)(?<!\d[.,]){body}(?!\w)(?![.,]\d)")


def check_keywords(spec: dict[str, Any], reply: str) -> tuple[bool, str]:
    text = _fold(reply)
    for group in spec["any"]:
        if isinstance(group, str):
            group = [group]
        if not any(_keyword_pattern(w).search(text) for w in group):
            return False, f"none of {group} in the reply"
    return True, "keywords found"
