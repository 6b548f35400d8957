"""Limits on JSON values and on names, shared by the control plane and the engine.

Pure functions, no I/O. The limits are documented in ``docs/configuration.md``
("Limits on JSON and names").

* **Depth.** A JSON value nested deeper than :data:`MAX_JSON_DEPTH` containers is
  refused wherever it enters (API bodies, worker results, script and jq results):
  recursive code (validation, serialization, expressions) would otherwise hit Python's
  recursion limit or the C stack. :func:`json_depth_problem` measures without recursion,
  so it is safe on any value, however deep.
* **Unicode.** JSON text can spell a UTF-16 surrogate code point on its own (the escape
  ``"\\ud800"``), which Python reads into a string that no UTF-8 text, database or
  response can hold. :func:`surrogate_problem` finds one in a value (iteratively), and
  :func:`may_spell_surrogates` tells cheaply whether a JSON document may spell one.
  ``NaN``, ``Infinity`` and literals beyond a double's range (``1e999``), which
  Python's ``json`` reads but JSON has no number for, are found by
  :func:`non_number_problem`; :func:`needs_checking` tells cheaply whether
  a document needs any of these looks.
* **Names.** A definition name (workflow or task definition) travels in URL paths
  (``/api/workflow/{name}``), in queue names and in database keys: :func:`name_problem`
  refuses what cannot travel there.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "MAX_INTEGER_DIGITS",
    "MAX_JSON_DEPTH",
    "MAX_NAME_LENGTH",
    "MIN_INT64",
    "NAME_FORBIDDEN",
    "JsonTooDeep",
    "NotFiniteNumber",
    "check_json_depth",
    "json_depth",
    "json_depth_problem",
    "loads_limited",
    "may_hold_non_numbers",
    "may_spell_non_numbers",
    "may_spell_nul",
    "may_spell_surrogates",
    "name_problem",
    "needs_checking",
    "non_number_problem",
    "nul_problem",
    "surrogate_problem",
    "text_problem",
    "unstorable_text_problem",
]

#: Containers (objects and arrays) one inside the other, at most. ``{}`` and ``[]`` are
#: depth 1, a scalar is depth 0. Far above what business data needs, far below what
#: recursive code in the platform can handle.
MAX_JSON_DEPTH = 100

#: Integer bounds on the wire: versions, attempts and seconds are 32-bit (Conductor's
#: Java ``int``, and the run store's integer columns); epoch milliseconds and offsets
#: are 64-bit.
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)

#: Characters of a definition name, at most (the database key columns hold 255).
MAX_NAME_LENGTH = 255

#: Characters a definition name must not contain besides control characters: ``/``
#: separates URL path segments, ``:`` is refused by Conductor in workflow names.
NAME_FORBIDDEN = "/:"


class JsonTooDeep(ValueError):
    """A JSON value is nested deeper than the limit."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


_CONTAINERS = (dict, list, tuple)


def json_depth(value: Any, stop_above: int | None = None) -> int:
    """The nesting depth of ``value`` (dicts, lists and tuples are containers).
    Iterative: safe on any depth. With ``stop_above``, stops as soon as a point deeper
    than that is found (the result is then ``stop_above + 1``)."""
    if not isinstance(value, _CONTAINERS):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if stop_above is not None and depth > stop_above:
                return deepest
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
    return deepest


def _path_deeper_than(value: Any, limit: int) -> str:
    """A JSON path to a container at depth ``limit + 1`` (shortened for messages)."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return path if len(path) <= 120 else path[:117] + "..."
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, _CONTAINERS):
                step = f"[{key}]" if isinstance(key, int) else f".{key}"
                stack.append((child, depth + 1, path + step))
    return "$"


def json_depth_problem(value: Any, limit: int = MAX_JSON_DEPTH, what: str = "value") -> str | None:
    """Why ``value`` is too deep (a sentence naming the limit and where), or None."""
    if json_depth(value, stop_above=limit) <= limit:
        return None
    where = _path_deeper_than(value, limit)
    return f"{what} is nested more than {limit} levels deep (at {where}); the limit is {limit}"


def check_json_depth(value: Any, limit: int = MAX_JSON_DEPTH, what: str = "value") -> None:
    """Raise :class:`JsonTooDeep` when ``value`` is nested deeper than ``limit``."""
    problem = json_depth_problem(value, limit, what)
    if problem is not None:
        raise JsonTooDeep(problem, _path_deeper_than(value, limit))


class NotFiniteNumber(ValueError):
    """A document holds a number no JSON number stands for (:func:`non_number_problem`);
    ``path`` is where."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


def loads_limited(data: str | bytes, limit: int = MAX_JSON_DEPTH, what: str = "value") -> Any:
    """``json.loads`` that refuses a document nested deeper than ``limit`` with
    :class:`JsonTooDeep` (also when the parser itself gives up on the depth), one
    holding ``NaN``, ``Infinity`` or a number beyond a double's range with
    :class:`NotFiniteNumber` (a ``ValueError``: Python would read it, and it would be
    stored as ``null``), and lets malformed JSON raise ``json.JSONDecodeError``."""
    too_deep = JsonTooDeep(
        f"{what} is nested more than {limit} levels deep; the limit is {limit}", "$"
    )
    try:
        value = json.loads(data)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError:
        raise
    except ValueError:
        # Python reads no integer this long: the marked parse below names where it is
        value = None
        numbers_read = False
    else:
        check_json_depth(value, limit, what)
        numbers_read = True
    may = may_spell_non_numbers(data) if isinstance(data, bytes) else may_hold_non_numbers(data)
    if may or not numbers_read:
        try:
            problem = non_number_problem(data, what)
        except RecursionError:
            raise too_deep from None
        if problem is not None:
            raise NotFiniteNumber(*problem)
    return value


#: how a JSON document spells a surrogate code point: an escape ``\\uD800`` to
#: ``\\uDFFF``, or (read from bytes, as Python's ``json`` reads them) the three bytes a
#: surrogate would take in UTF-8. Two patterns with a literal first byte: each scans a
#: document at memory speed. A pair of escapes that spells one character matches too.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def may_spell_surrogates(document: bytes) -> bool:
    """Whether the JSON ``document`` may hold a surrogate code point once parsed (no:
    none can be in it; yes: look for one with :func:`surrogate_problem`)."""
    return bool(_SURROGATE_ESCAPE.search(document) or _SURROGATE_BYTES.search(document))


def _printable(text: str) -> str:
    """``text`` with its surrogates written as ``\\udXXX`` and NUL as ``\\u0000`` (a
    message can carry it)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")


def _first(value: Any, found: Callable[[Any], bool]) -> tuple[Any, str] | None:
    """The first string, object key or other value of ``value`` (in document order) for
    which ``found`` is true, with its JSON path; None when there is none. Iterative."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        node, path = stack.pop()
        if found(node):
            return node, path
        if isinstance(node, dict):
            children: list[tuple[Any, str]] = []
            for key, child in node.items():
                step = f"{path}.{_printable(str(key))}"
                children += [(key, step), (child, step)]  # the key is a string too
            stack.extend(reversed(children))
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed([(child, f"{path}[{i}]") for i, child in enumerate(node)]))
    return None


def _holding_surrogate(value: Any) -> tuple[str, str] | None:
    """The first string or object key of ``value`` (in document order) that holds a
    surrogate code point, with its JSON path; None when there is none."""
    return _first(value, lambda node: isinstance(node, str) and bool(_SURROGATE.search(node)))


def _shown(path: str) -> str:
    return path if len(path) <= 120 else path[:117] + "..."


def surrogate_problem(value: Any, what: str = "value") -> tuple[str, str] | None:
    """``(message, path)`` when a string or object key of ``value`` holds a UTF-16
    surrogate code point (not Unicode text: what a lone ``\\ud800`` in JSON gives),
    else None. Iterative: safe on any depth."""
    found = _holding_surrogate(value)
    if found is None:
        return None
    text, path = found
    match = _SURROGATE.search(text)
    assert match is not None
    shown = _shown(path)
    message = (
        f"{what} holds U+{ord(match.group()):04X} at {shown}, a UTF-16 surrogate that is "
        "not half of a pair: strings must be Unicode text"
    )
    return message, shown


#: how a JSON document spells the NUL character (a raw NUL byte is not JSON)
_NUL_ESCAPE = re.compile(rb"\\u0000")


def may_spell_nul(document: bytes) -> bool:
    """Whether the JSON ``document`` may hold the NUL character once parsed (no: it does
    not; yes: look with :func:`nul_problem`)."""
    return _NUL_ESCAPE.search(document) is not None


def nul_problem(value: Any, what: str = "value") -> tuple[str, str] | None:
    """``(message, path)`` when a string or object key of ``value`` holds the NUL
    character, which PostgreSQL's text and JSONB cannot store; else None. Iterative."""
    found = _first(value, lambda node: isinstance(node, str) and "\x00" in node)
    if found is None:
        return None
    shown = _shown(found[1])
    message = f"{what} holds the NUL character (\\u0000) at {shown}: strings must not hold it"
    return message, shown


def unstorable_text_problem(
    value: Any, what: str = "value", text: str | None = None
) -> tuple[str, str] | None:
    """``(message, path)`` when a string or object key of the JSON-like ``value`` holds
    what no UTF-8 text or PostgreSQL text or JSONB can keep (the NUL character, a UTF-16
    surrogate), else None: for values the engine itself produces (a built-in task's
    output), which never passed the API's checks. One encode at C speed; the walk that
    names the place runs only when the text shows one may be there. ``text``: the
    value's JSON text (``ensure_ascii=False``) when the caller made it already."""
    if text is None:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return None  # not JSON: what stores it reports that
    if "\\u0000" not in text and _SURROGATE.search(text) is None:
        return None
    return nul_problem(value, what) or surrogate_problem(value, what)


#: what may spell a number Python's ``json`` reads but no JSON number stands for
#: (RFC 8259: numbers are finite): the constants ``NaN``, ``Infinity`` and
#: ``-Infinity``, and a literal beyond a double's range (``1e999``, 309 digits or more
#: before any point) that reads as an infinity. Matches what may be one, in strings too;
#: a long literal only where a value starts (at the start of the document, or after
#: ``:``, ``,`` or ``[``), so that the hex of an id (``...-4e12...``, a third of UUIDs)
#: does not send a worker's result off the Task API's fast path
#: (control_plane/api/fast_path.py) to be parsed twice.
_NON_NUMBER = re.compile(
    rb"NaN|Infinity|(?:^|[:,\[])\s*-?(?:[0-9]{309}|[0-9]+(?:\.[0-9]+)?[eE]\+?0*[1-9][0-9]{2})"
)
_NON_NUMBER_TEXT = re.compile(_NON_NUMBER.pattern.decode())

#: Python reads no integer of more digits from text (``sys.get_int_max_str_digits``)
MAX_INTEGER_DIGITS = 4300


class _NonNumber:
    """What a number of a document that is not a finite JSON number parses to while it
    is looked for (:func:`non_number_problem`)."""

    __slots__ = ("problem", "token")

    def __init__(self, token: str, problem: str = "JSON numbers must be finite") -> None:
        self.token = token
        self.problem = problem


def _float_or_marker(text: str) -> float | _NonNumber:
    value = float(text)
    if math.isinf(value):
        return _NonNumber(
            _shown(text), "the number is beyond the range of a double (about 1.8e308)"
        )
    return value


def _int_or_marker(text: str) -> int | _NonNumber:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        return _NonNumber(
            f"an integer of {len(text.lstrip('-'))} digits",
            f"integers have at most {MAX_INTEGER_DIGITS} digits",
        )
    return int(text)


def _with_markers(document: str | bytes) -> Any:
    return json.loads(
        document,
        parse_constant=_NonNumber,
        parse_float=_float_or_marker,
        parse_int=_int_or_marker,
    )


def non_number_problem(document: str | bytes, what: str = "value") -> tuple[str, str] | None:
    """``(message, path)`` when the JSON ``document`` (well-formed, within the depth
    limit) holds a number no JSON number stands for: ``NaN``, ``Infinity`` or
    ``-Infinity``, or a literal beyond a double's range (``1e999``), which Python's
    ``json`` reads as an infinity (Jackson, and so Conductor, refuses the constants);
    stored, such a value would come back as ``null``. Also an integer longer than
    Python reads (:data:`MAX_INTEGER_DIGITS`). None when it holds none."""
    value = _with_markers(document)
    found = _first(value, lambda node: isinstance(node, _NonNumber))
    if found is None:
        return None
    marker, path = found
    shown = _shown(path)
    message = f"{what} holds {marker.token} at {shown}: {marker.problem}"
    return message, shown


def may_hold_non_numbers(text: str) -> bool:
    """:func:`may_spell_non_numbers` for a document already decoded to text."""
    return _NON_NUMBER_TEXT.search(text) is not None


def needs_checking(document: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``document`` must be parsed and checked before use: it may nest
    deeper than ``limit`` (more brackets than that), spell a surrogate
    (:func:`surrogate_problem`), the NUL character (:func:`nul_problem`) or a constant
    JSON has no number for (:func:`non_number_problem`). Scans at memory speed; most
    documents are cleared."""
    return (
        document.count(b"[") + document.count(b"{") > limit
        or may_spell_surrogates(document)
        or _NON_NUMBER.search(document) is not None
        or _NUL_ESCAPE.search(document) is not None
    )


def may_spell_non_numbers(document: bytes) -> bool:
    """Whether the JSON ``document`` may hold a number that is not a finite JSON number
    (no: it does not; yes: look with :func:`non_number_problem`)."""
    return _NON_NUMBER.search(document) is not None


def text_problem(text: str, what: str = "value") -> str | None:
    """Why ``text`` cannot be an identifier (it holds a control character, NUL
    included), or None."""
    for i, char in enumerate(text):
        if unicodedata.category(char) == "Cc":
            return f"{what} contains the control character U+{ord(char):04X} at index {i}"
    return None


def name_problem(name: str, what: str = "name") -> str | None:
    """Why ``name`` cannot be a definition name, or None. Allowed: 1 to
    :data:`MAX_NAME_LENGTH` characters without control characters (NUL included),
    without ``/`` or ``:``, and without leading or trailing white space."""
    if not name or not name.strip():
        return f"{what} must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} is {len(name)} characters; at most {MAX_NAME_LENGTH} are allowed"
    problem = text_problem(name, what)
    if problem is not None:
        return problem
    for char in NAME_FORBIDDEN:
        if char in name:
            return f"{what} {name!r} must not contain {char!r}"
    if name != name.strip():
        return f"{what} {name!r} must not start or end with white space"
    return None
