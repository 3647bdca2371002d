"""Which installed models can call tools: those whose chat template knows tools (a native family
of app/tools/families.py). Reads each model file's header, so it runs off the UI thread, handed
the library's entries read on the UI thread beforehand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.tools.families import family_of
from models.gguf_info import read_gguf_info
from models.library import InstalledModel


@dataclass(frozen=True)
class ToolModel:
    name: str
    family: str  # the tool-call format its template knows: 'hermes', 'mistral' or 'llama3'


def tool_capable(models: Sequence[InstalledModel]) -> list[ToolModel]:
    """The models whose template knows tools, in the order given. A file that cannot be read
    (moved, deleted, damaged since it was added) is left out."""
    found: list[ToolModel] = []
    for model in models:
        if not model.has_chat_template:
            continue
        try:
            template = read_gguf_info(model.path).chat_template
        except Exception:  # noqa: BLE001 - an unreadable file cannot be said to know tools
            continue
        family = family_of(template)
        if family.native:
            found.append(ToolModel(model.name, family.name))
    return found


def tool_models_text(found: Sequence[ToolModel], installed: int) -> str:
    if not installed:
        return "No models are installed yet."
    if not found:
        return (
            "None of the installed models has a chat template that knows tools "
            "(Qwen 2.5/3, Hermes, Mistral and Llama 3.1+ instruct models do)."
        )
    names = ", ".join(f"{model.name} ({model.family})" for model in found)
    return f"Installed models that can call tools (their chat template knows tools): {names}."
