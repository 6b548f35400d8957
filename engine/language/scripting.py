"""Sandboxed JavaScript for SWITCH, DO_WHILE, INLINE and LAMBDA tasks.

Scripts run in the embedded QuickJS engine (PyPI ``quickjs``). The interpreter evaluates
SWITCH and DO_WHILE conditions as it decides, again on every replay, so those must give
the same result every time:

* There is no clock and no randomness: ``Date.now()``, ``Date()`` and ``new Date()``
  without arguments, and ``Math.random()`` throw an error saying so. ``new Date(x)`` with
  an explicit argument works. An INLINE or LAMBDA task's script has them (``clock``):
  its result is recorded once, by its activity or the work item that ran it, and
  replays read that (Conductor's scripts use ``new Date()`` freely).
* A list has the methods of the Java List Conductor's script engines hand scripts:
  ``get(i)``, ``size()``, ``isEmpty()``, ``contains(x)`` (Conductor's own test definitions
  call ``$.list.get(i)``), as well as its own.
* There is no host access: no ``std``/``os`` modules, no ``require``, no module loader;
  QuickJS's clock hook ``__date_clock`` is removed.
* Each evaluation runs in a fresh QuickJS context, so nothing a script does (globals,
  changed built-ins) is visible to the next one. A context costs about 0.3 ms to create;
  to keep replays cheap, a caller may pass a :class:`ScriptMemo`: results of successful
  evaluations and of deterministic script errors are then memoised by (expression,
  bindings JSON, limits), so a replay that re-evaluates the same scripts on the same
  data gets the answer from it. The memo belongs to its caller (the Deciders of one
  :mod:`engine.runtime.definition_cache` share one); there is none per process.
* A time limit and a memory limit bound each evaluation; exceeding one raises
  :class:`ScriptError` saying which.
* QuickJS's ``JSON.stringify`` recurses in C without checking its stack unless it calls
  a replacer function at each level: a value nested 100,000 deep would crash the
  process. Results are converted by ``JSON.stringify`` with a replacer that refuses a
  container nested deeper than ``max_depth`` (default :data:`protocol.limits.MAX_JSON_DEPTH`)
  before it descends, raising :class:`ScriptError` with reason ``"depth_limit"``; the
  ``JSON.stringify`` scripts call always passes a replacer function (theirs, or one
  that keeps the value, or one that keeps the properties an array replacer lists), so
  a deep value there is a ``stack overflow`` error, as in any other deep recursion. The
  converter and the built-ins it uses are captured before the script runs, so a script
  cannot replace them.

These limits hold inside QuickJS only. INLINE tasks are evaluated by
:mod:`engine.runtime.evaluators` in a separate process with process limits as well; SWITCH and
DO_WHILE conditions run here, in the orchestration.

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
from collections.abc import Callable, Mapping
from typing import Any

import quickjs

from protocol.limits import MAX_JSON_DEPTH, JsonTooDeep, loads_limited

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_TIME_LIMIT_S",
    "FreshContext",
    "ScriptError",
    "ScriptMemo",
    "ScriptRunner",
    "ScriptsUnavailable",
    "evaluate",
    "evaluate_condition",
    "evaluate_to_json",
    "run_in_this_process",
]

DEFAULT_TIME_LIMIT_S = 0.5
DEFAULT_MEMORY_LIMIT_BYTES = 32 * 1024 * 1024


class ScriptsUnavailable(Exception):
    """The processes that run scripts cannot run one now (their engine stops): nothing
    was decided, and the decision is to be made again later."""


#: runs one evaluation somewhere: (expression, bindings JSON, time limit in seconds,
#: memory limit in bytes) -> ("json", text) | ("value", primitive); raises ScriptError,
#: or ScriptsUnavailable when it cannot run anything now
ScriptRunner = Callable[[str, str, float, int], tuple[str, Any]]


def run_in_this_process(
    expression: str, bindings_json: str, time_limit_s: float, memory_limit_bytes: int
) -> tuple[str, Any]:
    """A :data:`ScriptRunner`: a fresh context in this process."""
    return FreshContext().run(expression, bindings_json, time_limit_s, memory_limit_bytes)


class ScriptError(Exception):
    """A script that could not be evaluated; ``str()`` is the message for the task.

    ``reason`` is ``"error"`` (syntax or runtime error raised by the script, message as
    the script gave it), ``"time_limit"``, ``"memory_limit"``, ``"depth_limit"`` (the
    result nests deeper than the limit) or ``"bindings"`` (a binding that is not JSON or
    not a valid name).
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_BIND_GLOBAL = "__stepway_bind"
_RUN_GLOBAL = "__stepway_run"
_HELD_GLOBAL = "__stepway_held"
_TO_JSON_GLOBAL = "__stepway_to_json"
_CLOCK_GLOBAL = "__stepway_clock"
_DEPTH_MARKER = "__stepway_depth_limit"

# The body of the replacer for an array of property names (ECMAScript's PropertyList),
# compiled in a context only when a script first passes one to JSON.stringify: the
# parameters are the prelude's captured built-ins and the list.
_KEEPING = r"""
    var names = [], count = 0, seen = createObject(null), i, item, name;
    for (i = 0; i < list.length; i += 1) {
      item = list[i];
      if (typeof item === "string") name = item;
      else if (typeof item === "number" || item instanceof NumberBox ||
               item instanceof StringBox) name = "" + item;
      else continue;
      if (seen[name] === true) continue;
      put(seen, name, true);
      put(names, count, name);
      count += 1;
    }
    return function kept(key, value) {
      if (typeof value !== "object" || value === null || isArray(value) ||
          value instanceof NumberBox || value instanceof StringBox ||
          value instanceof BooleanBox) return value;
      var out = createObject(null);
      for (var j = 0; j < count; j += 1) put(out, names[j], value[names[j]]);
      return out;
    };
"""

# Runs in every fresh context before the script: removes the clock and randomness, wraps
# JSON.stringify, and leaves four helpers (binder, runner, result reader, converter) that
# Python takes out of the global object before the script runs. Kept commented here; a
# context runs it compacted (_PRELUDE_TEXT).
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
  // a list as Conductor's GraalJS and Nashorn scripts see one (a Java List): get(i),
  // size(), isEmpty(), contains(x), as well as the array's own methods
  var javaList = {
    get: function get(i) { return this[i]; },
    size: function size() { return this.length; },
    isEmpty: function isEmpty() { return this.length === 0; },
    contains: function contains(x) { return this.indexOf(x) !== -1; }
  };
  for (var method in javaList) {
    Object.defineProperty(Array.prototype, method,
      { value: javaList[method], writable: true, configurable: true, enumerable: false });
  }
  var realRandom = Math.random;
  Object.defineProperty(Math, "random",
    { value: function random() { forbidden("Math.random()"); },
      writable: true, configurable: true, enumerable: false });
  // gives the script the clock and randomness back (an INLINE or LAMBDA task, whose
  // result is recorded once); called by Python before binding, or not at all
  g.__stepway_clock = function clock() {
    Object.defineProperty(RealDate.prototype, "constructor",
      { value: RealDate, writable: true, configurable: true, enumerable: false });
    Object.defineProperty(g, "Date",
      { value: RealDate, writable: true, configurable: true, enumerable: false });
    Object.defineProperty(Math, "random",
      { value: realRandom, writable: true, configurable: true, enumerable: false });
  };
  // JSON.stringify as scripts see it: QuickJS's own recurses in C without checking its
  // stack, so a value nested 100,000 deep crashes the process (a SWITCH condition runs in
  // the engine's); with a replacer function it calls that function at every level, whose
  // call checks the stack ("InternalError: stack overflow"). So it always gets one: the
  // script's, or one that passes values on unchanged, or for a list of property names
  // (an array replacer) one that keeps those properties of each object, in that order.
  var nativeStringify = JSON.stringify, isArray = Array.isArray, apply = Reflect.apply;
  var createObject = Object.create, defineProperty = Object.defineProperty;
  var NumberBox = Number, StringBox = String, BooleanBox = Boolean;
  function put(target, slot, value) {
    defineProperty(target, slot,
      { value: value, writable: true, enumerable: true, configurable: true });
  }
  function same(key, value) { return value; }
  // the replacer for a list of property names, compiled on first use (few scripts pass
  // one, and compiling JS is most of what a fresh context costs): by the Function
  // constructor captured here, from a text that reads only its parameters
  var FunctionCtor = Function, keepingMaker = null;
  function keeping(list) {
    if (keepingMaker === null) {
      keepingMaker = FunctionCtor("put", "createObject", "isArray", "NumberBox",
        "StringBox", "BooleanBox", "list", __STEPWAY_KEEPING_SOURCE__);
    }
    return keepingMaker(put, createObject, isArray, NumberBox, StringBox, BooleanBox, list);
  }
  defineProperty(JSON, "stringify", {
    value: function stringify(value, replacer, space) {
      var each = typeof replacer === "function" ? replacer
        : isArray(replacer) ? keeping(replacer) : same;
      return apply(nativeStringify, JSON, [value, each, space]);
    },
    writable: true, configurable: true, enumerable: false });

  // defines the bindings (a JSON object text) as globals; called once, by Python
  g.__stepway_bind = function bind(text) {
    var bindings = parse(text);
    for (var name in bindings) g[name] = bindings[name];
  };

  // runs the script as a global script (an indirect eval) and keeps its completion value;
  // called once, by Python, which gets the value's type, then the value: a string as its
  // JSON text (the bridge to Python reads a string only up to its first NUL character)
  var indirectEval = g.eval, held;
  g.__stepway_run = function run(source) {
    held = indirectEval(source);
    return typeof held;
  };
  g.__stepway_held = function heldValue() {
    return typeof held === "string" ? stringify(held) : held;
  };

  // JSON text of a result: JSON.stringify itself (its rules exactly), given a replacer
  // that refuses a container nested deeper than maxDepth before JSON.stringify descends
  // into it, so that its recursion (in C) stays shallow. The replacer sees each value
  // after toJSON, with its holder as `this`; JSON.stringify writes depth first, so the
  // containers still open form a stack whose top is the holder. Every built-in used is
  // captured here, before the script can replace it, and the stack is written by
  // defining own properties, so setters a script puts on prototypes are never called.
  var stringify = nativeStringify, RangeErr = RangeError, TypeErr = TypeError;
  function toJSONText(root, maxDepth) {
    var open = [], opened = 0, first = true;
    function replacer(key, value) {
      // the root's holder is JSON.stringify's own wrapper
      if (first) {
        first = false;
      } else {
        while (opened > 0 && open[opened - 1] !== this) opened -= 1;
        if (opened === 0) throw new TypeErr("a value outside the result");
      }
      if (typeof value === "object" && value !== null) {
        if (opened + 1 > maxDepth) throw new RangeErr("__stepway_depth_limit");
        put(open, opened, value);
        opened += 1;
      }
      return value;
    }
    var text = stringify(root, replacer);
    return text === undefined ? "null" : text;
  }
  g.__stepway_to_json = toJSONText;
})(globalThis);
"""


def _compact(js: str) -> str:
    """``js`` without its comment lines and indentation: a fresh context compiles the
    prelude, and its cost grows with the text (about 40 us a KiB here)."""
    lines = (line.strip() for line in js.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


#: what a fresh context runs before the script
_PRELUDE_TEXT = _compact(_PRELUDE).replace(
    "__STEPWAY_KEEPING_SOURCE__", json.dumps(_compact(_KEEPING))
)

_TIME_LIMIT_MARKER = "InternalError: interrupted"
_MEMORY_MARKERS = ("out of memory", "Failed obtaining QuickJS error string")

_CACHE_SIZE = 1024
_CACHE_MAX_TEXT = 256 * 1024


class ScriptMemo:
    """Results of evaluations by (expression, bindings JSON, limits), the most recently
    used ``size`` of them: key -> ("value", primitive) | ("json", text or None) |
    ("error", message). Results longer than ``max_text`` characters are not kept.
    ``runner`` runs what the memo does not hold (in this process unless the engine gives
    it its evaluator processes: engine/runtime/evaluators/pool.py). Thread-safe."""

    def __init__(
        self,
        size: int = _CACHE_SIZE,
        max_text: int = _CACHE_MAX_TEXT,
        runner: ScriptRunner = run_in_this_process,
    ) -> None:
        self.size = size
        self.max_text = max_text
        self.runner = runner
        self._entries: OrderedDict[bytes, tuple[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> tuple[str, Any] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def remember(self, key: bytes, entry: tuple[str, Any]) -> None:
        _, value = entry
        if isinstance(value, str) and len(value) > self.max_text:
            return
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def evaluate(
    expression: str,
    bindings: Mapping[str, Any],
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    memo: ScriptMemo | None = None,
) -> Any:
    """Evaluate ``expression`` with ``bindings`` as globals; the result as JSON-like data
    (from ``memo`` when it holds the same evaluation, and kept there).

    Raises :class:`ScriptError` for syntax and runtime errors (with the script's message),
    an exceeded time or memory limit, and bindings that are not JSON.
    """
    kind, value = _run(expression, bindings, time_limit_s, memory_limit_bytes, memo)
    if kind == "json":
        return _parse_result(value)
    return value


def evaluate_to_json(
    expression: str,
    bindings_json: str,
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    context: FreshContext | None = None,
    clock: bool = False,
) -> str:
    """The JSON text of the result of ``expression`` with the bindings given as a JSON
    object text (what :mod:`engine.runtime.evaluators` runs in its worker processes; nothing is
    memoised), in ``context`` if given (made ahead of time; used up by this call);
    ``clock``: with the clock and randomness (an INLINE or LAMBDA task's script, whose
    result is recorded once). Raises :class:`ScriptError` like :func:`evaluate`."""
    fresh = context if context is not None else FreshContext()
    kind, value = fresh.run(
        expression, bindings_json, time_limit_s, memory_limit_bytes, max_depth, clock=clock
    )
    if kind == "json":
        return str(value)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _parse_result(text: str) -> Any:
    try:
        return loads_limited(text, what="the script's result")
    except JsonTooDeep as exc:  # the converter refuses deeper results already
        raise ScriptError(str(exc), "depth_limit") from None


def evaluate_condition(
    expression: str,
    bindings: Mapping[str, Any],
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    memo: ScriptMemo | None = None,
) -> bool:
    """Evaluate ``expression`` and apply JavaScript truthiness to the result.

    Every object is true (also ``{}``, ``[]`` and functions); ``0``, ``NaN``, ``""``,
    ``null``, ``undefined`` and ``false`` are false.
    """
    kind, value = _run(expression, bindings, time_limit_s, memory_limit_bytes, memo)
    if kind == "json":
        return True
    return bool(value)


def _run(
    expression: str,
    bindings: Mapping[str, Any],
    time_limit_s: float,
    memory_limit_bytes: int,
    memo: ScriptMemo | None,
) -> tuple[str, Any]:
    for name in bindings:
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or name == "__proto__":
            raise ScriptError(f"invalid binding name {name!r}", "bindings")
    try:
        bindings_json = json.dumps(dict(bindings), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"script bindings are not JSON: {exc}", "bindings") from exc

    if memo is None:
        return run_in_this_process(expression, bindings_json, time_limit_s, memory_limit_bytes)
    key = _cache_key(expression, bindings_json, time_limit_s, memory_limit_bytes)
    hit = memo.get(key)
    if hit is None:
        try:
            hit = memo.runner(expression, bindings_json, time_limit_s, memory_limit_bytes)
        except ScriptError as exc:
            if exc.reason == "error":  # deterministic: the same script fails the same way
                memo.remember(key, ("error", exc.message))
            raise
        memo.remember(key, hit)
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


class FreshContext:
    """A new QuickJS context with the prelude run and nothing bound: made ahead of one
    evaluation (an evaluator process makes the next while it waits for a request, which
    takes the context's creation off the request's path) and used up by it, so no
    evaluation sees what another one did. A QuickJS runtime must only ever be used from
    one thread: the one that made it."""

    __slots__ = ("_bind", "_clock", "_context", "_held", "_run", "_to_json", "_used")

    def __init__(self) -> None:
        self._used = False
        self._context = quickjs.Context()
        try:
            self._context.eval(_PRELUDE_TEXT)
            helpers = (_BIND_GLOBAL, _RUN_GLOBAL, _HELD_GLOBAL, _TO_JSON_GLOBAL, _CLOCK_GLOBAL)
            self._bind, self._run, self._held, self._to_json, self._clock = (
                self._context.get(name) for name in helpers
            )
            self._context.eval("".join(f"delete globalThis.{name};" for name in helpers))
        except quickjs.JSException as exc:
            raise ScriptError(
                f"cannot prepare script context: {_message(exc)}", "bindings"
            ) from exc

    def run(
        self,
        expression: str,
        bindings_json: str,
        time_limit_s: float,
        memory_limit_bytes: int,
        max_depth: int = MAX_JSON_DEPTH,
        *,
        clock: bool = False,
    ) -> tuple[str, Any]:
        """Bind, then evaluate ``expression`` under the limits: ``("json", text)`` for an
        object result, ``("value", primitive)`` otherwise. ``clock``: the script may read
        the clock and randomness (``new Date()``, ``Date.now()``, ``Math.random()``)."""
        if self._used:
            raise RuntimeError("a script context is used for one evaluation only")
        self._used = True
        context = self._context
        try:
            if clock:
                self._clock()
            self._bind(bindings_json)
        except quickjs.JSException as exc:
            raise ScriptError(
                f"cannot prepare script context: {_message(exc)}", "bindings"
            ) from exc
        context.set_memory_limit(memory_limit_bytes)
        context.set_time_limit(time_limit_s)
        try:
            kind = self._run(expression)
            result = self._held()
            if kind == "string":
                return "value", json.loads(result)
            if isinstance(result, quickjs.Object):
                text = self._to_json(result, max_depth)
                return "json", text if isinstance(text, str) else "null"
        except quickjs.JSException as exc:
            if _DEPTH_MARKER in str(exc):
                raise ScriptError(
                    f"the script's result is nested more than {max_depth} levels deep; the "
                    f"limit is {max_depth}",
                    "depth_limit",
                ) from None
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
