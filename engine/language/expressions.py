"""Conductor's ``${...}`` input references, resolved deterministically.

A task's ``inputParameters`` (and a workflow's ``outputParameters``) are templates: any
string in them may reference the run's data with ``${...}``. The text between the braces
is a JSONPath over one document, the *context*, which is JSON-shaped::

    {
      "workflow": {"input": {...}, "output": {...}, "variables": {...},
                   "workflowId": "...", "correlationId": ..., "workflowType": "...",
                   "version": 1},
      "<taskRef>": {"input": {...}, "output": {...}, "status": "COMPLETED",
                    "taskId": "...", ...},
      "<taskRef>__2": {...},            # iteration 2 of a DO_WHILE child, if provided
      "CPEWF_TASK_ID": "<id of the task being scheduled>"
    }

Rules (Conductor's ``ParametersUtils`` with Jayway JsonPath, except where noted):

* The query is ``$.`` + the expression text (a text already starting with ``$`` is used as
  it is). Everything python-jsonpath parses works: ``a.b``, ``a[0]``, ``a[-1]``, ``a['k']``,
  ``..x``, ``*``, slices, unions, filters ``[?(@.amount > 10 && @.kind == 'x')]``. Jayway's
  trailing functions ``.length()``, ``.size()``, ``.sum()``, ``.min()``, ``.max()``,
  ``.avg()``, ``.first()``, ``.last()`` and ``.keys()`` are supported too.
* Result shape follows Jayway: a *definite* path (only names and single indexes) yields
  the value, or ``None`` when nothing is there; an *indefinite* path (deep scan, wildcard,
  filter, slice, union) always yields a list of the matches, possibly empty or of one.
  The shape therefore depends on the expression only, never on the data.
* A string that is exactly one ``${...}`` is replaced by the value itself, keeping its JSON
  type (number, bool, dict, list, ``None``).
* Otherwise each ``${...}`` is interpolated as text: strings as they are, ``None`` as
  ``null`` (what Conductor does: ``Objects.toString(null)``), booleans ``true``/``false``,
  numbers as JSON numbers, dicts and lists as compact JSON (Conductor prints Java's
  ``Map.toString()`` here, ``{a=1}``, which nothing can parse; JSON is the useful choice).
* A missing value, a missing task, or a query that cannot be parsed resolves to ``None``;
  :func:`resolve` never raises on data. :func:`check` reports bad syntax up front.
* ``$${`` is an escape for a literal ``${``. ``${}`` (blank) is replaced by ``""``.
* Expressions nest, as in Conductor: ``${workflow.input.${workflow.input.key}}`` first
  resolves the inner reference (as text), then the outer query.
* Only values are resolved, never dict keys. The input is never mutated; values taken from
  the context are copied, so the result shares no mutable object with the context.

Parsed strings and compiled queries are cached, and plain dotted paths
(``workflow.input.a.b``, ``ref.output.items[0].id``) are walked directly without
JSONPath, because resolution runs on every replay of a run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import jsonpath

from engine.language.secret_refs import SECRETS_PREFIX, placeholder, secret_name

__all__ = [
    "ExpressionError",
    "InterpolationTooLong",
    "check",
    "copy_json",
    "expression_errors",
    "peek",
    "reference_paths",
    "references",
    "resolve",
    "split_iteration",
]

#: Context keys that are not task references.
WORKFLOW_ROOT = "workflow"
TASK_ID_ROOT = "CPEWF_TASK_ID"


class ExpressionError(ValueError):
    """A ``${...}`` expression that cannot be parsed.

    ``path`` is where the string sits in the template (``$.inputParameters.x``),
    ``expression`` the offending text, ``problem`` what is wrong with it.
    """

    def __init__(self, path: str, expression: str, problem: str) -> None:
        self.path = path
        self.expression = expression
        self.problem = problem
        super().__init__(f"{path}: {problem} in {expression!r}")


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Expr:
    """One ``${...}``; ``parts`` is its inner text, itself possibly holding nested ones."""

    parts: tuple[str | _Expr, ...]
    start: int
    end: int

    @property
    def static_text(self) -> str | None:
        """The inner text when it holds no nested expression."""
        if not self.parts:
            return ""
        if len(self.parts) == 1 and isinstance(self.parts[0], str):
            return self.parts[0]
        return None

    @cached_property
    def secret(self) -> str | None:
        """The text this expression stays when it is a secret reference written out
        (``${workflow.secrets.NAME}``: secret_refs), else None; once per parsed text."""
        static = self.static_text
        name = secret_name(static) if static and SECRETS_PREFIX in static else None
        return placeholder(name) if name is not None else None


@dataclass(frozen=True)
class _Parsed:
    parts: tuple[str | _Expr, ...]
    #: Positions of ``${`` that have no closing brace.
    unclosed: tuple[int, ...]

    @property
    def single(self) -> _Expr | None:
        """The expression when the whole string is exactly one ``${...}``."""
        if len(self.parts) == 1 and isinstance(self.parts[0], _Expr):
            return self.parts[0]
        return None


def _parse_parts(text: str, begin: int, end: int, unclosed: list[int]) -> tuple[str | _Expr, ...]:
    """Split ``text[begin:end]`` into literal text and expressions."""
    parts: list[str | _Expr] = []
    literal: list[str] = []
    i = begin
    while i < end:
        j = text.find("$", i, end)
        if j < 0:
            literal.append(text[i:end])
            break
        literal.append(text[i:j])
        if text.startswith("$${", j) and j + 3 <= end:
            literal.append("${")  # escape: a literal "${"
            i = j + 3
            continue
        if text.startswith("${", j) and j + 2 <= end:
            close = _matching_brace(text, j + 2, end)
            if close < 0:
                unclosed.append(j)
                literal.append(text[j:end])
                break
            if literal and (joined := "".join(literal)):
                parts.append(joined)
            literal = []
            inner = _parse_parts(text, j + 2, close, unclosed)
            parts.append(_Expr(inner, j, close + 1))
            i = close + 1
            continue
        literal.append("$")
        i = j + 1
    if literal and (joined := "".join(literal)):
        parts.append(joined)
    return tuple(parts)


def _matching_brace(text: str, start: int, end: int) -> int:
    """Index of the ``}`` that closes a ``${`` whose body starts at ``start``, or -1."""
    depth = 1
    i = start
    while i < end:
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


@lru_cache(maxsize=8192)
def _parse(text: str) -> _Parsed:
    unclosed: list[int] = []
    parts = _parse_parts(text, 0, len(text), unclosed)
    return _Parsed(parts, tuple(unclosed))


# --------------------------------------------------------------------------- queries

#: a member name in dot notation; as Jayway JsonPath (Conductor's), it may start with a
#: digit: ``${loop.output.3.task}`` reads a DO_WHILE's iteration "3"
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_\-]*"
_SIMPLE_PATH = re.compile(rf"(?:\$\.)?{_NAME}(?:\.{_NAME}|\[-?\d+\])*")
_SIMPLE_STEP = re.compile(rf"\.?({_NAME})|\[(-?\d+)\]")
_FUNCTION = re.compile(r"^(.*)\.(length|size|sum|min|max|avg|first|last|keys)\(\)$", re.DOTALL)
_LEADING_NAME = re.compile(r"[^.\[\s]+")
_BRACKET_NAME = re.compile(r"\[\s*(['\"])(.*?)\1\s*\]")
_ITERATION = re.compile(r"^(.+?)((?:__\d+)+)$")

_MISSING = object()


class _Query:
    """A compiled expression text: ``evaluate(context)`` gives its value (never raises)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.error: str | None = None
        self._function: Callable[[Any], Any] | None = None
        self._steps: tuple[str | int, ...] | None = None
        self._path: jsonpath.JSONPath | jsonpath.CompoundJSONPath | None = None
        self._definite = True
        self._blank = not text.strip()
        if self._blank:
            return
        body = text.strip()
        match = _FUNCTION.match(body)
        if match:
            body = match.group(1)
            self._function = _FUNCTIONS[match.group(2)]
        if _SIMPLE_PATH.fullmatch(body):
            self._steps = _simple_steps(body)
            return
        query = body if body.startswith("$") else ("$" + body if body[0] == "[" else "$." + body)
        query = _digit_members_bracketed(query)
        try:
            compiled = jsonpath.compile(query)
            self.error = _unbounded(query)
        except jsonpath.JSONPathError as exc:
            self.error = str(exc).splitlines()[0]
        if self.error is not None:
            return
        self._path = compiled
        self._definite = isinstance(compiled, jsonpath.JSONPath) and compiled.singular_query()

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        if self._blank:
            return ""
        value = self._lookup(context)
        if self._function is not None:
            try:
                value = self._function(value)
            except (TypeError, ValueError, ArithmeticError):
                value = None
        return value

    def _lookup(self, context: Mapping[str, Any]) -> Any:
        if self._steps is not None:
            return _walk(context, self._steps)
        if self._path is None:
            return None
        try:
            values = self._path.findall(context)
        except jsonpath.JSONPathError:
            return None if self._definite else []
        if self._definite:
            return values[0] if values else None
        return values


_MEMBER_CHAR = re.compile(r"[A-Za-z0-9_\-]")


def _digit_members_bracketed(query: str) -> str:
    """``query`` with each dot-notation member whose name starts with a digit (``.3``,
    ``..2b``) written as a bracketed name (``['3']``): Jayway JsonPath, whose paths
    Conductor's definitions are written in, reads ``$.output.3`` as the member "3";
    RFC 9535 (python-jsonpath) refuses it. Only outside brackets, parentheses and
    quotes, so a filter's numbers (``[?(@.price > 3.5)]``) are left alone."""
    if not any(query[i].isdigit() for i in range(1, len(query)) if query[i - 1] == "."):
        return query
    out: list[str] = []
    depth = 0
    quote = ""
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if quote:
            if c == "\\":
                out.append(query[i : i + 2])
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"" and depth:
            quote = c
        elif c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "." and depth == 0 and i + 1 < n and query[i + 1].isdigit():
            j = i + 1
            while j < n and _MEMBER_CHAR.match(query[j]):
                j += 1
            # a descendant segment (``..3``) keeps its first dot: ``..['3']``
            out.append(f"{'.' if query[i - 1] == '.' else ''}['{query[i + 1 : j]}']")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


#: JSONPath filter functions that match a regular expression
_REGEX_FUNCTIONS = frozenset({"match", "search"})


def _unbounded(query: str) -> str | None:
    """Why ``query`` could take unbounded time on some data, or None. Refused: regular
    expressions (``=~``, ``match()``, ``search()``: Python's ``re`` backtracks, holding
    the process's GIL while it does, so ``/(a|a)*b/`` on thirty characters freezes the
    whole engine for minutes; a pattern may even come from the data), and more than one
    deep scan (``..``), each of which multiplies the work by the size of the data."""
    descents = 0
    for token in jsonpath.DEFAULT_ENV.lexer.tokenize(query):
        if token.kind == jsonpath.token.TOKEN_RE:
            return "regular expressions (=~) are not supported: their matching time has no bound"
        if token.kind == jsonpath.token.TOKEN_FUNCTION and token.value in _REGEX_FUNCTIONS:
            return (
                f"{token.value}() is not supported: it matches a regular expression, "
                "whose matching time has no bound"
            )
        if token.kind == jsonpath.token.TOKEN_DDOT:
            descents += 1
    if descents > 1:
        return (
            f"{descents} deep scans (..); at most one is allowed: each multiplies the work "
            "by the size of the data"
        )
    return None


def _simple_steps(body: str) -> tuple[str | int, ...]:
    if body.startswith("$."):
        body = body[2:]
    steps: list[str | int] = []
    for m in _SIMPLE_STEP.finditer(body):
        name, index = m.group(1), m.group(2)
        steps.append(name if name is not None else int(index))
    return tuple(steps)


def _walk(value: Any, steps: tuple[str | int, ...]) -> Any:
    for step in steps:
        if isinstance(step, str):
            if type(value) is not dict and not isinstance(value, Mapping):
                return None
            value = value.get(step, _MISSING)
            if value is _MISSING:
                return None
        else:
            if type(value) is not list:
                return None
            n = len(value)
            if not -n <= step < n:
                return None
            value = value[step]
    return value


def _numbers(value: Any) -> list[int | float]:
    if not isinstance(value, list):
        raise TypeError("not a list")
    numbers = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
    if not numbers:
        raise ValueError("no numbers")
    return numbers


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, list | dict | str) else None


def _avg(value: Any) -> float:
    numbers = _numbers(value)
    return math.fsum(numbers) / len(numbers)


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None


def _last(value: Any) -> Any:
    return value[-1] if isinstance(value, list) and value else None


def _keys(value: Any) -> list[str] | None:
    return list(value) if isinstance(value, Mapping) else None


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "length": _length,
    "size": _length,
    "sum": lambda v: sum(_numbers(v)),
    "min": lambda v: min(_numbers(v)),
    "max": lambda v: max(_numbers(v)),
    "avg": _avg,
    "first": _first,
    "last": _last,
    "keys": _keys,
}


@lru_cache(maxsize=8192)
def _query(text: str) -> _Query:
    return _Query(text)


# --------------------------------------------------------------------------- resolving


class InterpolationTooLong(ValueError):
    """An interpolated string would be longer than the ``max_chars`` given to
    :func:`resolve` (it is not built)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"an interpolated string would be longer than {limit} characters")


def resolve(template: Any, context: Mapping[str, Any], *, max_chars: int | None = None) -> Any:
    """A new value: ``template`` with every ``${...}`` replaced from ``context``.

    Dicts (values only, keys are kept), lists and strings are walked; other values are
    returned as they are. Never raises on missing data and never mutates its arguments.
    With ``max_chars``, an interpolated string that would be longer raises
    :class:`InterpolationTooLong` as soon as that is known (a template repeating a large
    value cannot exhaust memory).
    """
    if isinstance(template, str):
        return _resolve_string(template, context, max_chars)
    if isinstance(template, Mapping):
        return {
            key: resolve(value, context, max_chars=max_chars) for key, value in template.items()
        }
    if isinstance(template, list | tuple):
        return [resolve(value, context, max_chars=max_chars) for value in template]
    return template


def peek(text: str, context: Mapping[str, Any], *, max_chars: int | None = None) -> Any:
    """What ``text`` resolves to, as :func:`resolve`; but when it is exactly one ``${...}``,
    the value in ``context`` itself, not a copy: for a caller that only reads it (a
    DO_WHILE's list, read an item at a time), which must neither change nor keep it."""
    if "$" not in text:
        return text
    parsed = _parse(text)
    single = parsed.single
    if single is not None:
        return _evaluate(single, context, max_chars)
    return _interpolate(parsed.parts, context, max_chars)


def _resolve_string(text: str, context: Mapping[str, Any], max_chars: int | None = None) -> Any:
    if "$" not in text:  # most strings of a definition: no call more than before
        return text
    return copy_json(peek(text, context, max_chars=max_chars))


def _evaluate(expr: _Expr, context: Mapping[str, Any], max_chars: int | None = None) -> Any:
    if expr.secret is not None:
        return expr.secret  # kept as its text: only an HTTP request reveals it
    static = expr.static_text
    text = static if static is not None else _interpolate(expr.parts, context, max_chars)
    return _query(text).evaluate(context)


def _interpolate(
    parts: tuple[str | _Expr, ...], context: Mapping[str, Any], max_chars: int | None = None
) -> str:
    out: list[str] = []
    length = 0
    for part in parts:
        text = part if isinstance(part, str) else _as_text(_evaluate(part, context, max_chars))
        length += len(text)
        if max_chars is not None and length > max_chars:
            raise InterpolationTooLong(max_chars)
        out.append(text)
    return "".join(out)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def copy_json(value: Any) -> Any:
    """A copy of a JSON value that shares no mutable container with the original."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


# --------------------------------------------------------------------------- inspection


def split_iteration(root: str) -> tuple[str, tuple[int, ...]]:
    """``"ref__2"`` -> ``("ref", (2,))``: the task and DO_WHILE iterations a root names.

    Nested loops append one suffix per level, outermost first: ``"ref__2__1"`` ->
    ``("ref", (2, 1))``. A root without a trailing ``__<digits>`` names the task itself:
    ``("ref", ())``.
    """
    match = _ITERATION.match(root)
    if not match:
        return root, ()
    suffix = match.group(2)
    return match.group(1), tuple(int(n) for n in suffix.split("__") if n)


def _root_of(text: str) -> str | None:
    """The context key an expression text reads from, if it can be known statically."""
    body = text.strip()
    if body.startswith("$"):
        body = body[1:]
        if body.startswith(".") and not body.startswith(".."):
            body = body[1:]
        elif not body.startswith("["):
            return None
    if body.startswith("["):
        match = _BRACKET_NAME.match(body)
        return match.group(2) if match else None
    name = _LEADING_NAME.match(body)
    if name is None or name.group(0) == "*":
        return None
    return name.group(0)


def _walk_strings(template: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(template, str):
        if "${" in template:
            yield path, template
    elif isinstance(template, Mapping):
        for key, value in template.items():
            yield from _walk_strings(value, _child_path(path, key))
    elif isinstance(template, list | tuple):
        for i, value in enumerate(template):
            yield from _walk_strings(value, f"{path}[{i}]")


_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _child_path(path: str, key: object) -> str:
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}"
    return f"{path}[{json.dumps(text, ensure_ascii=False)}]"


def _expressions(parts: tuple[str | _Expr, ...]) -> Iterator[_Expr]:
    for part in parts:
        if isinstance(part, _Expr):
            yield part
            yield from _expressions(part.parts)


def _expr_root(expr: _Expr) -> str | None:
    first = expr.parts[0] if expr.parts else None
    if not isinstance(first, str):
        return None
    root = _root_of(first)
    if root is None:
        return None
    # With a nested expression after it, the root is known only if the text before
    # the nested part already ends the first segment.
    if expr.static_text is None and root == first.strip().removeprefix("$.").removeprefix("$"):
        return None
    return root


def reference_paths(template: Any, base: str = "$") -> list[tuple[str, str]]:
    """Every reference in ``template`` as ``(json path of the string, root)``.

    The root is ``workflow``, ``CPEWF_TASK_ID`` or a task reference name; a DO_WHILE
    iteration reference (``${ref__2.output}``) is reported as its task (``ref``, see
    :func:`split_iteration`). Nested expressions are reported too; a reference whose root
    is itself computed (``${${workflow.input.ref}.output}``) cannot be known and is left
    out. ``base`` is the path of ``template`` itself.
    """
    found: list[tuple[str, str]] = []
    for path, text in _walk_strings(template, base):
        for expr in _expressions(_parse(text).parts):
            root = _expr_root(expr)
            if root is None:
                continue
            if root not in (WORKFLOW_ROOT, TASK_ID_ROOT):
                root = split_iteration(root)[0]
            found.append((path, root))
    return found


def references(template: Any) -> set[str]:
    """The roots ``template`` references: ``workflow``, ``CPEWF_TASK_ID``, task refs."""
    return {root for _, root in reference_paths(template)}


def expression_errors(template: Any, base: str = "$") -> list[ExpressionError]:
    """Every syntax problem of the ``${...}`` expressions in ``template``."""
    errors: list[ExpressionError] = []
    for path, text in _walk_strings(template, base):
        parsed = _parse(text)
        for position in parsed.unclosed:
            errors.append(ExpressionError(path, text[position:], "unclosed '${' (no matching '}')"))
        for expr in _expressions(parsed.parts):
            static = expr.static_text
            if static is None or not static.strip():
                continue
            error = _query(static).error
            if error is not None:
                errors.append(
                    ExpressionError(path, "${" + static + "}", f"invalid JSONPath: {error}")
                )
    return errors


def check(template: Any, base: str = "$") -> None:
    """Raise :class:`ExpressionError` for the first syntax problem in ``template``."""
    errors = expression_errors(template, base)
    if errors:
        raise errors[0]
