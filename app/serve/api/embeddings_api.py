"""POST /v1/embeddings: vectors from an installed embedding model, as floats or base64 (the
openai client asks for base64 unless told otherwise); any other model is a clear 400."""

from __future__ import annotations

import base64
import struct

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.api.chat_request import read_model
from app.serve.api.service import Service
from app.serve.http.errors import ApiError
from app.serve.http.http import MAX_BODY_BYTES, json_body

MAX_INPUTS = 2048  # the real API's limit on inputs in one request


def read_inputs(body: object) -> tuple[str, list[str], str]:
    """(model, texts, encoding format) of an embeddings request; ApiError naming the field."""
    body, model = read_model(body, missing="'model' is required: the name of an installed embedding model")
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts:
        raise ApiError(400, "'input' must be a string or a non-empty list of strings", param="input")
    if not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "'input' must hold text: token-id arrays are not supported here", param="input")
    if any(not t for t in texts):
        raise ApiError(400, "'input' cannot hold an empty string", param="input")
    if len(texts) > MAX_INPUTS:
        raise ApiError(400, f"'input' may hold at most {MAX_INPUTS} texts", param="input")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise ApiError(400, '\'encoding_format\' must be "float" or "base64"', param="encoding_format")
    if body.get("dimensions") is not None:
        raise ApiError(400, "'dimensions' is not supported: the model's vectors have the size it was trained with", param="dimensions")
    return model, texts, encoding


def _as_base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


class EmbeddingsApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def embeddings(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            name, texts, encoding = read_inputs(await json_body(request, MAX_BODY_BYTES))
            model = await self.service.model(name)
            result = await self.service.embed(request, model, texts, {"encoding_format": encoding})
        except ApiError as exc:
            return exc.response()
        data = [
            {"object": "embedding", "index": i, "embedding": _as_base64(v) if encoding == "base64" else v}
            for i, v in enumerate(result.vectors)
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": model.name,
                "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
            }
        )
