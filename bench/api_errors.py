"""Bad requests through the official openai client: each case must raise the client's own
exception type for the status the real API gives, with an error body (type, message) and
never a traceback; the server must answer a good request afterwards.

Run: .venv/bin/python bench/api_errors.py [--json]   (bench/api_load.py runs it too)
Goal: 100% of the cases right.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from bench.serve_process import serving  # noqa: E402

HI = [{"role": "user", "content": "hi"}]


def cases(model: str) -> list[tuple[str, dict[str, Any], type[openai.APIStatusError]]]:
    long = " ".join(f"w{i}" for i in range(40_000))
    return [
        ("unknown model", {"model": "no-such-model", "messages": HI}, openai.NotFoundError),
        ("no messages", {"model": model, "messages": []}, openai.BadRequestError),
        ("a role that does not exist", {"model": model, "messages": [{"role": "wizard", "content": "hi"}]}, openai.BadRequestError),
        ("content of the wrong type", {"model": model, "messages": [{"role": "user", "content": 42}]}, openai.BadRequestError),
        ("temperature as text", {"model": model, "messages": HI, "temperature": "hot"}, openai.BadRequestError),
        ("temperature out of range", {"model": model, "messages": HI, "temperature": 9}, openai.BadRequestError),
        ("absurd max_tokens", {"model": model, "messages": HI, "max_tokens": 10**9}, openai.BadRequestError),
        ("negative max_tokens", {"model": model, "messages": HI, "max_tokens": -1}, openai.BadRequestError),
        ("n = 3", {"model": model, "messages": HI, "n": 3}, openai.BadRequestError),
        ("stop of the wrong type", {"model": model, "messages": HI, "stop": 7}, openai.BadRequestError),
        ("seed as text", {"model": model, "messages": HI, "seed": "x"}, openai.BadRequestError),
        ("response_format unknown", {"model": model, "messages": HI, "response_format": {"type": "xml"}}, openai.BadRequestError),
        (
            "a prompt larger than the context",
            {"model": model, "messages": [{"role": "user", "content": long}], "max_tokens": 8},
            openai.BadRequestError,
        ),
        (
            "the same, streamed",
            {"model": model, "messages": [{"role": "user", "content": long}], "max_tokens": 8, "stream": True},
            openai.BadRequestError,
        ),
    ]


def run_cases(base: str, model: str) -> dict[str, Any]:
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=300)
    results = []
    for name, body, expected in cases(model):
        got: str
        try:
            out = client.chat.completions.create(**body)
            if body.get("stream"):
                list(out)
            got = "no error"
        except openai.APIStatusError as exc:
            shaped = isinstance(exc.body, dict) and {"message", "type"} <= set(exc.body)
            got = type(exc).__name__ if shaped and "Traceback" not in str(exc.body) else f"{type(exc).__name__} (bad body)"
        except openai.APIError as exc:
            got = type(exc).__name__
        results.append({"case": name, "expected": expected.__name__, "got": got, "right": got == expected.__name__})
    alive = client.chat.completions.create(model=model, messages=HI, max_tokens=2).choices[0].message.content is not None
    right = sum(r["right"] for r in results)
    return {"cases": results, "right": right, "total": len(results), "share": right / len(results), "alive_after": alive}


def run_errors(env: dict[str, str], model: str) -> dict[str, Any]:
    """The cases against a cove serve of its own on `env`'s home."""
    with serving(env) as (base, _server):
        return run_cases(base, model)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from bench.api_routing import starter_env

    env, model = starter_env()
    result = run_errors(env, model)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for r in result["cases"]:
            print(f"{'ok ' if r['right'] else 'BAD'} {r['case']}: expected {r['expected']}, got {r['got']}")
        print(f"{result['right']}/{result['total']} right ({result['share']:.0%}); the server answered afterwards: {result['alive_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
