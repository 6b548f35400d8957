"""The OpenAPI document: every operation declares the error statuses it answers, each
with the Conductor error body (:class:`ErrorBody`, rendered by
``control_plane.api.error_handlers``).

Validation errors are 400 (as Conductor answers them), so FastAPI's default ``422``
response is taken out of the document.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

__all__ = ["ErrorBody", "errors", "install_openapi"]


class ValidationErrorEntry(BaseModel):
    path: str = Field(description="where: `$.field` in the body, or a parameter name")
    message: str


class ErrorBody(BaseModel):
    """Conductor's error body, for every 4xx and 5xx."""

    status: int = Field(description="the HTTP status")
    message: str
    instance: str = Field(description="the host that answered")
    retryable: bool = Field(description="true when the same request may succeed later")
    validationErrors: list[ValidationErrorEntry] = Field(
        default_factory=list, description="one entry per invalid field"
    )


_WHY = {
    400: "Invalid request: a parameter or the body is malformed, out of range or too deep",
    401: "No valid bearer token (when authentication is on)",
    403: "The caller lacks the role or the task type",
    404: "Not found",
    409: "Conflict with the current state",
    413: "The request body or a payload is above its size limit",
    501: "Not available in this deployment",
    502: "A stored payload could not be read",
    503: "A backing service is unavailable; retry later",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for these error statuses, each with the error body."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


#: what any operation of the API can answer: bad input, no token, no role
COMMON = errors(400, 401, 403)


_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


def _finish(document: dict[str, Any]) -> dict[str, Any]:
    """Drop FastAPI's 422; errors are JSON even where the success is text/plain."""
    for item in document.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for status, response in responses.items():
                if status[:1] in ("4", "5"):
                    response["content"] = _ERROR_CONTENT
    schemas = document.get("components", {}).get("schemas", {})
    text = str(document.get("paths"))
    for name in ("HTTPValidationError", "ValidationError"):
        if f"#/components/schemas/{name}'" not in text:
            schemas.pop(name, None)
    return document


def install_openapi(app: FastAPI) -> None:
    """Serve the document without FastAPI's 422 responses (cached after the first call)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _finish(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    description=app.description,
                    routes=app.routes,
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
