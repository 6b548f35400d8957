"""``${workflow.secrets.NAME}``: a reference to a secret, kept as its text.

A definition names a secret instead of holding it (conductor-oss's form). Resolving a
task's input leaves the reference as the literal text ``${workflow.secrets.NAME}``, so the
run's state, its task rows and its history never hold the value; only an HTTP task's
request reveals it, at the moment of the call and only to the hosts the secret is bound to
(engine/runtime/builtins/secrets.py). A name is letters, digits, ``_`` and ``-``; a
reference whose name is computed (``${workflow.secrets.${...}}``) is not a secret
reference and reads null.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "SECRETS_PREFIX",
    "is_secret_name",
    "placeholder",
    "reveal",
    "secret_name",
    "secret_names",
]

#: the expression text of a secret reference, before its name
SECRETS_PREFIX = "workflow.secrets."

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,127}"
_NAME_ONLY = re.compile(_NAME)
_EXPRESSION = re.compile(rf"workflow\.secrets\.({_NAME})")
_REFERENCE = re.compile(rf"\$\{{workflow\.secrets\.({_NAME})\}}")


def secret_name(expression: str) -> str | None:
    """The secret an expression's text (inside ``${...}``) names, or None."""
    match = _EXPRESSION.fullmatch(expression.strip())
    return match.group(1) if match else None


def is_secret_name(name: str) -> bool:
    """Whether ``name`` can be referenced as ``${workflow.secrets.<name>}``."""
    return _NAME_ONLY.fullmatch(name) is not None


def placeholder(name: str) -> str:
    """The literal text a reference to ``name`` resolves to."""
    return "${" + SECRETS_PREFIX + name + "}"


def secret_names(value: Any) -> set[str]:
    """The secrets the strings of a JSON value reference."""
    return {match.group(1) for text in _strings(value) for match in _REFERENCE.finditer(text)}


def reveal(value: Any, value_of: Callable[[str], str]) -> Any:
    """A copy of a JSON value with every secret reference in its strings replaced by
    ``value_of(name)`` (which raises for a secret that may not be revealed)."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        return _REFERENCE.sub(lambda match: value_of(match.group(1)), value)
    if isinstance(value, dict):
        return {key: reveal(item, value_of) for key, item in value.items()}
    if isinstance(value, list):
        return [reveal(item, value_of) for item in value]
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if "${" in value:
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
