"""Deterministic, sandboxed JavaScript for SWITCH, DO_WHILE and INLINE tasks.

Scripts run in the embedded QuickJS engine (PyPI ``quickjs``). The interpreter evaluates
them inside a Durable Task orchestration, so every evaluation must give the same result on
every replay:

* There is no clock and no randomness: ``Date.now()``, ``Date()`` and ``new Date()``
  without arguments, and ``Math.random()`` throw an error saying so. ``new Date(x)`` with
  an explicit argument works.
* There is no host access: no ``std``/``os`` modules, no ``require``, no module loader;
  QuickJS's clock hook ``__date_clock`` is removed.
* Each evaluation runs in a fresh QuickJS context, so nothing a script does (globals,
  changed built-ins) is visible to the next one. A context costs about 0.25 ms to create;
  to keep replays cheap, results of successful evaluations and of deterministic script
  errors are memoised by (expression, bindings JSON, limits): a replay re-evaluates the
  same scripts on the same data and gets the answer from the cache.
* A time limit and a memory limit bound each evaluation; exceeding one raises
  :class:`ScriptError` saying which.

The script is a bare expression (``$.a > 1 ? 'x' : 'y'``), statements whose completion
value is the result (``if ($.i < 3) { true; } else { false; }``), or an IIFE
(``(function () { return 1; })()``); Conductor accepts all three. Bindings are passed as
JSON (``$`` is the usual one); the result comes back through ``JSON.stringify`` semantics:
objects and arrays as dicts and lists, ``undefined``, functions, ``NaN`` and infinities as
``None``, integral numbers as ``int``.

Local-time ``Date`` methods use the process time zone, as in any JS engine; engine
processes run in UTC.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import quickjs

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_TIME_LIMIT_S",
    "ScriptError",
    "evaluate",
    "evaluate_condition",
]

DEFAULT_TIME_LIMIT_S = 0.5
DEFAULT_MEMORY_LIMIT_BYTES = 32 * 1024 * 1024


class ScriptError(Exception):
    """A script that could not be evaluated; ``str()`` is the message for the task.

    ``reason`` is ``"error"`` (syntax or runtime error raised by the script, message as
    the script gave it), ``"time_limit"``, ``"memory_limit"`` or ``"bindings"`` (a binding
    that is not JSON or not a valid name).
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_BINDINGS_GLOBAL = "__stepway_bindings"

# Runs in every fresh context before the script: removes the clock and randomness,
# defines the bindings as globals, and leaves nothing else behind.
_PRELUDE = r"""
(function (g) {
  "use strict";
  delete g.__date_clock;
  var RealDate = g.Date;
  var construct = Reflect.construct;
  var slice = Array.prototype.slice;
  var parse = JSON.parse;
  function forbidden(what) {
    throw new Error(what + " is not allowed in workflow scripts: they must be " +
      "deterministic (no clock, no randomness); pass the value in the task input");
  }
  var SafeDate = function Date() {
    if (new.target === undefined) forbidden("Date() (the current time)");
    if (arguments.length === 0) forbidden("new Date() without arguments (the current time)");
    return construct(RealDate, slice.call(arguments), new.target);
  };
  SafeDate.prototype = RealDate.prototype;
  SafeDate.UTC = RealDate.UTC;
  SafeDate.parse = RealDate.parse;
  SafeDate.now = function now() { forbidden("Date.now()"); };
  Object.defineProperty(RealDate.prototype, "constructor",
    { value: SafeDate, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(g, "Date",
    { value: SafeDate, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(Math, "random",
    { value: function random() { forbidden("Math.random()"); },
      writable: true, configurable: true, enumerable: false });
  var bindings = parse(g.__stepway_bindings);
  delete g.__stepway_bindings;
  for (var name in bindings) g[name] = bindings[name];
})(globalThis);
"""

_TIME_LIMIT_MARKER = "InternalError: interrupted"
_MEMORY_MARKERS = ("out of memory", "Failed obtaining QuickJS error string")

# The memo: key -> ("value", primitive) | ("json", text or None) | ("error", message).
_CACHE_SIZE = 1024
_CACHE_MAX_TEXT = 256 * 1024
_cache: OrderedDict[bytes, tuple[str, Any]] = OrderedDict()
_cache_lock = threading.Lock()


def evaluate(
    expression: str,
    bindings: Mapping[str, Any],
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
) -> Any:
    """Evaluate ``expression`` with ``bindings`` as globals; the result as JSON-like data.

    Raises :class:`ScriptError` for syntax and runtime errors (with the script's message),
    an exceeded time or memory limit, and bindings that are not JSON.
    """
    kind, value = _run(expression, bindings, time_limit_s, memory_limit_bytes)
    if kind == "json":
        return None if value is None else json.loads(value)
    return value


def evaluate_condition(
    expression: str,
    bindings: Mapping[str, Any],
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
) -> bool:
    """Evaluate ``expression`` and apply JavaScript truthiness to the result.

    Every object is true (also ``{}``, ``[]`` and functions); ``0``, ``NaN``, ``""``,
    ``null``, ``undefined`` and ``false`` are false.
    """
    kind, value = _run(expression, bindings, time_limit_s, memory_limit_bytes)
    if kind == "json":
        return True
    return bool(value)


def clear_cache() -> None:
    """Forget memoised results (tests and benchmarks use this)."""
    with _cache_lock:
        _cache.clear()


def _run(
    expression: str,
    bindings: Mapping[str, Any],
    time_limit_s: float,
    memory_limit_bytes: int,
) -> tuple[str, Any]:
    for name in bindings:
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or name == "__proto__":
            raise ScriptError(f"invalid binding name {name!r}", "bindings")
    try:
        bindings_json = json.dumps(dict(bindings), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"script bindings are not JSON: {exc}", "bindings") from exc

    key = _cache_key(expression, bindings_json, time_limit_s, memory_limit_bytes)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
    if hit is None:
        try:
            hit = _run_fresh(expression, bindings_json, time_limit_s, memory_limit_bytes)
        except ScriptError as exc:
            if exc.reason == "error":  # deterministic: the same script fails the same way
                _remember(key, ("error", exc.message))
            raise
        _remember(key, hit)
    kind, value = hit
    if kind == "error":
        raise ScriptError(value)
    return kind, value


def _cache_key(expression: str, bindings_json: str, time_limit_s: float, memory: int) -> bytes:
    digest = hashlib.blake2b(digest_size=32)
    digest.update(f"{time_limit_s!r}\0{memory}\0{len(expression)}\0".encode())
    digest.update(expression.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(bindings_json.encode("utf-8", "surrogatepass"))
    return digest.digest()


def _remember(key: bytes, entry: tuple[str, Any]) -> None:
    _, value = entry
    if isinstance(value, str) and len(value) > _CACHE_MAX_TEXT:
        return
    with _cache_lock:
        _cache[key] = entry
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _run_fresh(
    expression: str, bindings_json: str, time_limit_s: float, memory_limit_bytes: int
) -> tuple[str, Any]:
    # A QuickJS runtime must only ever be used from one thread; this context lives and
    # dies inside this call.
    context = quickjs.Context()
    context.set(_BINDINGS_GLOBAL, bindings_json)
    try:
        context.eval(_PRELUDE)
    except quickjs.JSException as exc:
        raise ScriptError(f"cannot prepare script context: {_message(exc)}", "bindings") from exc
    context.set_memory_limit(memory_limit_bytes)
    context.set_time_limit(time_limit_s)
    try:
        result = context.eval(expression)
        if isinstance(result, quickjs.Object):
            return "json", result.json()
    except quickjs.JSException as exc:
        raise _script_error(exc, time_limit_s, memory_limit_bytes) from None
    except MemoryError:
        raise _memory_error(memory_limit_bytes) from None
    return "value", _primitive(result)


def _primitive(value: Any) -> Any:
    """A JS primitive as JSON would carry it."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 1e21:
            return int(value)
    return value


def _message(exc: BaseException) -> str:
    """The script's own message: the exception text without QuickJS's stack trace."""
    lines = str(exc).rstrip("\n").split("\n")
    while len(lines) > 1 and (lines[-1].startswith("    at ") or lines[-1] == "undefined"):
        lines.pop()
    return "\n".join(lines).strip() or "script failed"


def _script_error(exc: quickjs.JSException, time_limit_s: float, memory: int) -> ScriptError:
    text = str(exc)
    if text.startswith(_TIME_LIMIT_MARKER):
        return ScriptError(f"script exceeded the time limit of {time_limit_s:g} s", "time_limit")
    if any(marker in text for marker in _MEMORY_MARKERS) or text.strip() == "null":
        return _memory_error(memory)
    return ScriptError(_message(exc))


def _memory_error(memory: int) -> ScriptError:
    return ScriptError(
        f"script exceeded the memory limit of {memory / (1024 * 1024):g} MiB", "memory_limit"
    )
