"""Named sampling presets: three built-ins that cannot be deleted, plus the person's own,
kept in a small JSON file written atomically. Pure Python (no Qt), so it is tested headless.

Disk format: {"version": 1, "presets": {"<name>": {SamplingParams fields}}}. A file that
cannot be read is moved aside as `<name>.unreadable` (never deleted) and the store starts
empty; single entries with wrong types are skipped.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from app.settings import SamplingParams

FORMAT_VERSION = 1
MAX_NAME_LENGTH = 60

BUILTIN_PRESETS: dict[str, SamplingParams] = {
    "Balanced": SamplingParams(),
    "Precise": replace(SamplingParams(), temperature=0.2),
    "Creative": replace(SamplingParams(), temperature=1.1),
}

_FLOAT_FIELDS = {"temperature", "top_p", "min_p", "repeat_penalty"}
_OPTIONAL_INT_FIELDS = {"max_tokens", "seed", "n_ctx"}
_PENALTY_FIELDS = {"presence_penalty", "frequency_penalty"}


class PresetError(ValueError):
    """A preset cannot be saved or deleted; str(exc) is one sentence for the person."""


def params_from_json(data: Any) -> SamplingParams | None:
    """SamplingParams from a stored dict, or None when any known field has the wrong type."""
    if not isinstance(data, dict):
        return None
    values: dict[str, Any] = {}
    for f in fields(SamplingParams):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name in _FLOAT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                return None
            values[f.name] = float(value)
        elif f.name in _PENALTY_FIELDS:  # OpenAI's range, -2 to 2
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -2.0 <= value <= 2.0:
                return None
            values[f.name] = float(value)
        elif f.name == "logit_bias":  # [[token id, bias], ...]
            if not isinstance(value, list) or not all(
                isinstance(pair, list)
                and len(pair) == 2
                and isinstance(pair[0], int)
                and not isinstance(pair[0], bool)
                and isinstance(pair[1], (int, float))
                and not isinstance(pair[1], bool)
                and math.isfinite(pair[1])
                for pair in value
            ):
                return None
            values[f.name] = tuple((int(t), float(b)) for t, b in value)
        elif f.name in _OPTIONAL_INT_FIELDS:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                return None
            values[f.name] = value
        else:  # top_k
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return None
            values[f.name] = value
    return SamplingParams(**values)


class PresetStore:
    """Built-in and saved presets, by name. Saved presets live in the JSON file at `path`."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._saved: dict[str, SamplingParams] = {}
        self.load_problem: str | None = None  # a sentence when the file had to be set aside
        self._load()

    @property
    def path(self) -> Path:
        return self._path

    def names(self) -> list[str]:
        """Built-ins in their fixed order, then saved presets alphabetically."""
        return list(BUILTIN_PRESETS) + sorted(self._saved, key=str.casefold)

    def is_builtin(self, name: str) -> bool:
        return name in BUILTIN_PRESETS

    def get(self, name: str) -> SamplingParams:
        """The preset's values; KeyError when there is no such preset."""
        if name in BUILTIN_PRESETS:
            return BUILTIN_PRESETS[name]
        return self._saved[name]

    def find(self, params: SamplingParams) -> str | None:
        """The first preset whose values equal `params`, if any."""
        for name in self.names():
            if self.get(name) == params:
                return name
        return None

    def save(self, name: str, params: SamplingParams) -> str:
        """Store `params` under `name` (replacing a saved preset of that name); returns the clean name."""
        clean = " ".join(name.split())
        if not clean:
            raise PresetError("A preset needs a name.")
        if len(clean) > MAX_NAME_LENGTH:
            raise PresetError(f"A preset name can be at most {MAX_NAME_LENGTH} characters long.")
        if clean.casefold() in {b.casefold() for b in BUILTIN_PRESETS}:
            raise PresetError(f"'{clean}' is a built-in preset; choose another name.")
        saved = dict(self._saved)
        saved[clean] = params
        self._write(saved)
        self._saved = saved
        return clean

    def delete(self, name: str) -> None:
        """Remove a saved preset; built-ins cannot be deleted."""
        if name in BUILTIN_PRESETS:
            raise PresetError(f"'{name}' is a built-in preset and cannot be deleted.")
        if name not in self._saved:
            raise KeyError(name)
        saved = dict(self._saved)
        del saved[name]
        self._write(saved)
        self._saved = saved

    # ---- disk --------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            self._set_aside("could not be read")
            return
        presets = raw.get("presets") if isinstance(raw, dict) else None
        if not isinstance(presets, dict):
            self._set_aside("has an unknown layout")
            return
        for name, data in presets.items():
            params = params_from_json(data)
            if isinstance(name, str) and name.strip() and name not in BUILTIN_PRESETS and params is not None:
                self._saved[name] = params

    def _set_aside(self, why: str) -> None:
        # Keep the damaged file for the person to look at; never delete what they had.
        aside = self._path.with_name(self._path.name + ".unreadable")
        try:
            self._path.replace(aside)
            self.load_problem = f"The presets file {why}; it was moved to {aside.name} and saved presets start empty."
        except OSError:
            self.load_problem = f"The presets file {why}; saved presets start empty."

    def _write(self, saved: dict[str, SamplingParams]) -> None:
        data = {"version": FORMAT_VERSION, "presets": {name: p.to_dict() for name, p in saved.items()}}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".presets-", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path)  # atomic: readers see the old file or the new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
