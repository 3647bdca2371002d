"""Checking a GBNF grammar with llama.cpp's own parser before a reply samples under it."""

from __future__ import annotations

from typing import Any

import llama_cpp

from app.engine.grammar import ROOT_RULE, GrammarError


def check_grammar(vocab: Any, text: str) -> None:
    """Raise GrammarError unless llama.cpp's parser accepts `text` (host side: loads llama_cpp).

    llama-cpp-python adds a grammar to its sampler chain without looking at what
    llama_sampler_init_grammar returned, and a refused grammar returns NULL, which the chain
    would then dereference; so the grammar is parsed once here first.
    """
    if not text.strip():
        raise GrammarError("the grammar is empty")
    if not ROOT_RULE.search(text):
        raise GrammarError('the grammar has no "root" rule (a line "root ::= ...")')
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        raise GrammarError("llama.cpp could not parse the grammar (a syntax error, an undefined or left-recursive rule)")
    llama_cpp.llama_sampler_free(sampler)
