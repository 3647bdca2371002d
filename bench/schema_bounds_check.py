"""Issue 47's own check, again: the tiny random model through `cove serve` and the official openai
client, the schema {"hours": integer 1..48, "ratio": number 0..1}, six seeds at temperature 1, as a
response_format reply and as a forced strict tool call; prints how many replies ended and how
many of those break the schema (the issue measured 6 of 6 out of bounds).

Run: .venv/bin/python bench/schema_bounds_check.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonschema  # noqa: E402
import openai  # noqa: E402

from tests.support.serve_fixture import cove_serve  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {"hours": {"type": "integer", "minimum": 1, "maximum": 48}, "ratio": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["hours", "ratio"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Tides at Brest?"}]
TOOL = {"type": "function", "function": {"name": "tide_table", "parameters": SCHEMA, "strict": True}}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, cove_serve(Path(tmp), n_ctx_train=4096) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="local")
        model = next(m.id for m in client.models.list().data if m.id != "auto")  # the model itself, not Auto
        replies: dict[str, list[tuple[str, str]]] = {"response_format": [], "forced call": []}
        for seed in range(6):
            r = client.chat.completions.create(
                model=model,
                messages=ASK,
                seed=seed,
                temperature=1,
                max_tokens=200,  # type: ignore[arg-type]
                response_format={"type": "json_schema", "json_schema": {"name": "tides", "schema": SCHEMA, "strict": True}},
            )
            replies["response_format"].append((r.choices[0].finish_reason, r.choices[0].message.content or ""))
            r = client.chat.completions.create(
                model=model,
                messages=ASK,
                seed=seed,
                temperature=1,
                max_tokens=200,  # type: ignore[arg-type]
                tools=[TOOL],
                tool_choice={"type": "function", "function": {"name": "tide_table"}},
            )  # type: ignore[list-item]
            calls = r.choices[0].message.tool_calls or []
            replies["forced call"].append((r.choices[0].finish_reason, calls[0].function.arguments if calls else ""))  # type: ignore[union-attr]
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for kind, outs in replies.items():
        ended = [text for reason, text in outs if reason != "length"]
        bad = [text for text in ended if not validator.is_valid(json.loads(text))]
        print(f"{kind}: {len(ended)} of {len(outs)} ended; out of bounds: {len(bad)}")
        for reason, text in outs:
            print(f"  {reason:<10} {' '.join(text.split())[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
