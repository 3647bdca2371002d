"""Errors as the OpenAI API shapes them: a status and {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from starlette.responses import JSONResponse


class ApiError(Exception):
    """A request the server refuses, with the status and error type an OpenAI client expects."""

    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.kind, param=self.param, code=self.code)


def error_response(
    status: int, message: str, kind: str = "invalid_request_error", *, param: str | None = None, code: str | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}}, status_code=status)
