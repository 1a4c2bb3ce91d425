"""OpenAI-style error objects: every refusal, from any layer, becomes
`{"error": {"message", "type", "param", "code"}}` with the right status, never a stack trace."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("stiva.server")

# The error `type` OpenAI uses (or would) for each status we send.
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
}


class APIError(Exception):
    """A request the server refuses or could not complete; turned into an error object."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or TYPES.get(status, "invalid_request_error")
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_error(exc.errors()).response()


def validation_error(errors: list[dict] | tuple) -> APIError:
    """The first pydantic/FastAPI validation problem as a 400 naming the field."""
    if not errors:
        return APIError(400, "invalid request body", code="invalid_request")
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return APIError(400, "the request body is not valid JSON", code="invalid_json")
    if kind in ("model_attributes_type", "dict_type") and not loc:
        return APIError(
            400,
            "the request body must be a JSON object, sent with Content-Type: application/json",
            code="invalid_value",
        )
    if kind == "missing" and not loc:
        return APIError(400, "the request body is missing: send a JSON object", code="invalid_request")
    if kind == "missing":
        return APIError(400, f"missing required parameter {param!r}", param=param, code="missing_parameter")
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    message = (
        f"invalid value for {param!r}: {first.get('msg', 'invalid')}"
        if param
        else (f"invalid request body: {first.get('msg', 'invalid')}")
    )
    return APIError(400, message + more, param=param, code="invalid_value")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        error = APIError(404, f"unknown route {request.method} {request.url.path}", code="unknown_url")
    elif exc.status_code == 405:
        error = APIError(
            405, f"method {request.method} is not allowed on {request.url.path}", code="method_not_allowed"
        )
    else:
        error = APIError(exc.status_code, str(exc.detail))
    error.headers = headers
    return error.response()


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error in %s %s", request.method, request.url.path)
    return APIError(500, "internal server error", code="internal_error").response()
