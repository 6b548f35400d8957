"""Activity inputs encoded once.

durabletask encodes an activity's input with ``json.dumps`` every time the orchestration
calls the activity, and a replay calls every activity of the execution again; the
interpreter also measures each input against the message limit. :func:`encode` writes a
pydantic model's JSON once (pydantic's own encoder) as :class:`EncodedJson`; the size
check reads its length, and :class:`EncodedJsonConverter` (the data converter of the
engine's durabletask worker, ``engine/app/host.py``) hands it to the backend as it is.
An activity reads either form (:func:`parse`): a worker built without the converter
sends the text as a JSON string.
"""

from __future__ import annotations

from typing import Any, TypeVar

from durabletask.serialization import JsonDataConverter
from pydantic import BaseModel

__all__ = ["EncodedJson", "EncodedJsonConverter", "encode", "encoded_size", "parse"]

M = TypeVar("M", bound=BaseModel)


class EncodedJson(str):
    """A JSON document, already encoded."""

    __slots__ = ()


#: optional fields left out of the JSON when None, so that they cost the history nothing
#: when unused: the trace context (tracing off), the child runs a step cancels
_OMITTED_WHEN_NONE = ("traceparent", "cancel_children")


def encode(model: BaseModel) -> EncodedJson:
    """``model`` as camelCase JSON (by alias), without the optional fields that are None
    (:data:`_OMITTED_WHEN_NONE`)."""
    exclude = {name for name in _OMITTED_WHEN_NONE if getattr(model, name, "") is None}
    return EncodedJson(model.model_dump_json(by_alias=True, exclude=exclude or None))


def encoded_size(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes (not counted when it cannot matter)."""
    return len(text.encode())


def parse(model: type[M], raw: Any) -> M:
    """An activity's input: a JSON object, or the text of one."""
    if isinstance(raw, str):
        return model.model_validate_json(raw)
    return model.model_validate(raw)


class EncodedJsonConverter(JsonDataConverter):
    """durabletask's JSON converter, passing :class:`EncodedJson` through unencoded."""

    def serialize(self, value: Any) -> str | None:
        if isinstance(value, EncodedJson):
            return str(value)
        return super().serialize(value)
