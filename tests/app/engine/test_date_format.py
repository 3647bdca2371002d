"""A `format: date` string holds only days that exist (llama.cpp's rule took 02-31, 04-31 and the
year 0000, which a date parser refuses: the tiny model wrote "7742-02-30"): the grammar's date,
turned into a regular expression, takes a text exactly when Python's date parser does, for every
day of four centuries' edges and leap years."""

from __future__ import annotations

import datetime
import re

from app.engine.grammar import schema_grammar
from tests.support.gbnf_regex import gbnf_matcher


def date_rule() -> re.Pattern[str]:
    grammar = schema_grammar({"type": "string", "format": "date"})
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)
    body = rules["date"]
    for name in ("date-year", "date-day28", "date-leap-year"):
        body = re.sub(rf"(?<![\w-]){name}(?![\w-])", lambda _, rule=rules[name]: f"({rule})", body)
    return gbnf_matcher(body)


def test_a_date_is_a_day_that_exists() -> None:
    rule = date_rule()
    years = [*range(0, 12), *range(96, 105), *range(1896, 1905), *range(1996, 2030), 2100, 2400, 2800, 9996, 9999]
    wrong = []
    for year in years:
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    datetime.date.fromisoformat(text)
                    exists = True
                except ValueError:
                    exists = False
                if exists != (rule.fullmatch(text) is not None):
                    wrong.append(text)
    assert wrong == []
