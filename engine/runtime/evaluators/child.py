"""The evaluator process: runs INLINE scripts (QuickJS) and jq programs for the engine.

Started by :class:`engine.runtime.evaluators.pool.EvaluatorPool` with an empty environment and
its limits as the only argument (JSON). It sets ``RLIMIT_AS`` once (its idle size plus
the memory limit), prints ``ready`` and then answers requests on stdin/stdout, one at a
time, until stdin closes (so it ends with the engine process that started it).

Framing, both ways: one JSON header line, then exactly ``bytes`` bytes of UTF-8 JSON.

* request: ``{"kind": "js" | "jq", "program": "...", "bytes": N}`` + the input: for
  ``js`` the bindings object (``{"$": inputs}``), for ``jq`` the input value;
* answer: ``{"ok": true, "bytes": N}`` + the result (for ``jq``: the array of every
  output), or ``{"ok": false, "limit": "cpu" | "memory" | "output" | "depth" | null,
  "message": "..."}``.

Before each request ``RLIMIT_CPU`` is set to the CPU time used so far plus the CPU limit,
so a program that spins in C code (jq's ``last(range(1e10))``) is stopped by the kernel
with SIGXCPU; the engine also kills the process at the wall-clock deadline. A result is
checked for depth before anything recursive touches it (QuickJS: the converter in
:mod:`engine.language.scripting`; jq: a depth guard appended to the program, which jq runs on its
own heap-allocated stack) and for size before it is sent.
"""

from __future__ import annotations

import json
import math
import resource
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from engine.language.scripting import FreshContext

DEPTH_MARKER = "__stepway_depth_limit"

# The user's program runs inside parentheses (a newline first and last, so a trailing
# comment cannot swallow the closing one), which also rules out module directives
# (``import``/``include`` must come first in a jq program). Each of its outputs then goes
# through a guard that refuses values nested deeper than the limit; ``any`` stops at the
# first container found too deep, so the guard costs O(size) at most.
_JQ_WRAPPER = """def __stepway_too_deep($limit):
  def d($n): if (type == "array" or type == "object")
    then ($n > $limit) or any(.[]; d($n + 1)) else false end;
  d(1);
[(
%s
) | if __stepway_too_deep(%d) then error("%s") else . end]"""


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


class _Refused(Exception):
    def __init__(self, message: str, limit: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit


def _vm_size() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _set_memory_limit(memory_bytes: int) -> None:
    limit = _vm_size() + memory_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _set_cpu_deadline(cpu_seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


@lru_cache(maxsize=256)
def _jq_program(program: str, max_depth: int) -> Any:
    import jq

    try:  # alone first, so that a syntax error is reported against the user's text only
        jq.compile("(\n" + program + "\n)")
    except ValueError as exc:
        raise _Refused(str(exc).strip() or "jq: compile error", None) from None
    return jq.compile(_JQ_WRAPPER % (program, max_depth, DEPTH_MARKER))


def _run_jq(program: str, input_text: str, limits: dict[str, Any]) -> str:
    max_depth = int(limits["maxDepth"])
    compiled = _jq_program(program, max_depth)
    try:
        text = compiled.input_text(input_text).text()
    except ValueError as exc:
        message = str(exc)
        if DEPTH_MARKER in message:
            raise _Refused(
                f"a result of the program is nested more than {max_depth} levels deep; the "
                f"limit is {max_depth}",
                "depth",
            ) from None
        raise _Refused(message.strip() or "jq failed", None) from None
    # the array of outputs nests one level more than any output: at most max_depth + 1
    value = json.loads(text)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: the limit an evaluator reports for a script's ScriptError reason
_SCRIPT_LIMITS = {"time_limit": "cpu", "memory_limit": "memory", "depth_limit": "depth"}


def _run_js(
    program: str, input_text: str, limits: dict[str, Any], context: FreshContext | None
) -> str:
    from engine.language.scripting import ScriptError, evaluate_to_json

    try:
        return evaluate_to_json(
            program,
            input_text,
            time_limit_s=float(limits["cpuSeconds"]),
            memory_limit_bytes=int(limits["memoryBytes"]),
            max_depth=int(limits["maxDepth"]),
            context=context,
            clock=True,  # an INLINE or LAMBDA task: its result is recorded once
        )
    except ScriptError as exc:
        if exc.reason == "time_limit":
            message = f"the script exceeded the CPU time limit of {limits['cpuSeconds']:g} s"
        elif exc.reason == "memory_limit":
            message = f"the script exceeded the memory limit of {_mib(limits['memoryBytes'])}"
        else:
            message = exc.message
        raise _Refused(message, _SCRIPT_LIMITS.get(exc.reason)) from None


def _run_script(
    program: str, input_text: str, limits: dict[str, Any], context: FreshContext | None
) -> str:
    """A SWITCH or DO_WHILE script: ``[kind, value]`` as JSON text, as
    :meth:`engine.language.scripting.FreshContext.run` gives them (``"json"`` with the
    result's JSON, ``"value"`` with a primitive), so that the caller applies JavaScript's
    truthiness (every object is true, a function too) as it would in its own process."""
    from engine.language.scripting import FreshContext, ScriptError

    fresh = context if context is not None else FreshContext()
    try:
        kind, value = fresh.run(
            program,
            input_text,
            float(limits["cpuSeconds"]),
            int(limits["memoryBytes"]),
            int(limits["maxDepth"]),
        )
    except ScriptError as exc:
        raise _Refused(exc.message, _SCRIPT_LIMITS.get(exc.reason)) from None
    if kind == "json":
        return '["json",' + str(value) + "]"
    return json.dumps(["value", value], ensure_ascii=False, allow_nan=False)


def _within(limits: dict[str, Any], bounds: Any) -> dict[str, Any]:
    """``limits`` with a script's own lower ``cpuSeconds`` and ``memoryBytes``."""
    if not isinstance(bounds, dict):
        return limits
    bounded = dict(limits)
    for name in ("cpuSeconds", "memoryBytes"):
        value = bounds.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            bounded[name] = min(limits[name], value)
    bounded["memoryBytes"] = int(bounded["memoryBytes"])
    return bounded


def _answer(out: BinaryIO, header: dict[str, Any], body: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n")
    if body:
        out.write(body)
    out.flush()


def _spare_context() -> FreshContext | None:
    """The context for the next script, made while no request waits (None if it cannot
    be made now: the request makes its own and reports why)."""
    from engine.language.scripting import FreshContext, ScriptError

    try:
        return FreshContext()
    except (ScriptError, MemoryError):
        return None


def serve(limits: dict[str, Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer requests until stdin closes. A script runs in a context made while the
    process waited for it (each context serves one script)."""
    spare = _spare_context()
    context: FreshContext | None = None
    while True:
        line = stdin.readline()
        if not line:
            return
        request = json.loads(line)
        data = stdin.read(int(request["bytes"]))
        recycle = False
        try:
            _set_cpu_deadline(float(limits["cpuSeconds"]))
            program, text = str(request["program"]), data.decode("utf-8")
            if request["kind"] == "js":
                context, spare = spare, None
                result = _run_js(program, text, limits, context).encode("utf-8")
            elif request["kind"] == "script":
                context, spare = spare, None
                bounded = _within(limits, request.get("bounds"))
                result = _run_script(program, text, bounded, context).encode("utf-8")
            else:
                result = _run_jq(program, text, limits).encode("utf-8")
            maximum = int(limits["maxOutputBytes"])
            if len(result) > maximum:
                raise _Refused(
                    f"the result is {len(result)} bytes, above the output limit of {maximum} bytes",
                    "output",
                )
        except _Refused as refused:
            _answer(stdout, {"ok": False, "limit": refused.limit, "message": refused.message})
        except MemoryError:
            result = b""
            recycle = True
            _answer(
                stdout,
                {
                    "ok": False,
                    "limit": "memory",
                    "message": "the evaluation exceeded the memory limit of "
                    f"{_mib(int(limits['memoryBytes']))}",
                },
            )
        else:
            _answer(stdout, {"ok": True, "bytes": len(result)}, result)
        if recycle:  # after a MemoryError the interpreter's state is not to be trusted
            return
        # the used context is freed now, after the answer: freeing a QuickJS runtime costs
        # 0.1-0.25 ms, which the next request would otherwise wait for
        context = None
        if spare is None:
            spare = _spare_context()


def main(argv: list[str]) -> int:
    limits = json.loads(argv[0])
    import jq  # noqa: F401  (imported before the memory limit is set)

    import engine.language.scripting  # noqa: F401

    _set_memory_limit(int(limits["memoryBytes"]))
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.buffer.flush()
    serve(limits, sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
