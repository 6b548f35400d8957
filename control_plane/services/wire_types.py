"""Bounded types for the API's parameters and bodies: what the run store can hold.

Versions, attempts, priorities and seconds are 32-bit (Conductor's Java ``int`` and the
store's integer columns); epoch milliseconds and offsets are 64-bit. Strings that are
stored in columns must not hold NUL (PostgreSQL refuses it). A value outside these
bounds is a 400 naming the field, never an overflow inside the store.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from protocol.limits import MAX_INT32, MAX_INT64, MIN_INT64

__all__ = ["Int32", "Int64", "NonNegative32", "NonNegative64", "Text"]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain the NUL character")
    return value


Int32 = Annotated[int, Field(ge=-MAX_INT32 - 1, le=MAX_INT32)]
NonNegative32 = Annotated[int, Field(ge=0, le=MAX_INT32)]
Int64 = Annotated[int, Field(ge=MIN_INT64, le=MAX_INT64)]
NonNegative64 = Annotated[int, Field(ge=0, le=MAX_INT64)]
#: a string stored in a column: no NUL
Text = Annotated[str, AfterValidator(_no_nul)]
