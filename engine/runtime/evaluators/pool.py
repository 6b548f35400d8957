"""A small pool of evaluator processes with hard limits, killed and replaced on breach.

Scripts and jq programs come from workflow definitions and, through ``${...}``, from
whoever starts a run. Evaluated in the engine's own interpreter they can hold the GIL
for as long as they like (jq runs C code), exhaust its memory or crash it. Here each
evaluation runs in a pre-started child process (:mod:`engine.runtime.evaluators.child`) with
an empty environment and kernel limits (``RLIMIT_AS``, ``RLIMIT_CPU``); the engine thread
that asked only waits on a pipe, with a wall-clock deadline after which it kills the
process. A process that died or was killed is replaced in the background, so the next
evaluation finds one ready.

Results come back as JSON text, at most ``max_output_bytes`` long and checked for depth
by the child; the parent parses them with :func:`protocol.limits.loads_limited` all the same.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from engine.runtime.evaluators.limits import EvaluationError, EvaluatorLimits
from engine.runtime.local_steps import NotHere
from protocol.limits import JsonTooDeep, loads_limited

__all__ = ["EvaluatorPool", "Kind", "PoolClosed", "ScriptsInProcesses"]

log = logging.getLogger(__name__)

#: ``js``: an INLINE script, its result's JSON; ``script``: a SWITCH or DO_WHILE script,
#: ``[kind, value]`` (engine/runtime/evaluators/child.py); ``jq``: a jq program
Kind = Literal["js", "script", "jq"]

_ROOT = str(Path(__file__).resolve().parents[3])
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from engine.runtime.evaluators.child import main; sys.exit(main(sys.argv[2:]))"
)
#: the child's whole environment: no secrets for a program to read (jq's ``$ENV``)
_CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TZ": "UTC"}
_STARTUP_SECONDS = 60.0
_STDERR_TAIL = 4096
_HEADER_MAX = 64 * 1024
_MEMORY_MARKERS = ("cannot allocate memory", "MemoryError", "out of memory", "std::bad_alloc")


class PoolClosed(EvaluationError):
    """The pool is closed (its engine stops): nothing was evaluated."""


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


class _Child:
    """One evaluator process and the thread that drains its stderr."""

    def __init__(self, limits: EvaluatorLimits) -> None:
        argument = json.dumps(
            {
                "cpuSeconds": limits.cpu_seconds,
                "memoryBytes": limits.memory_bytes,
                "maxOutputBytes": limits.max_output_bytes,
                "maxDepth": limits.max_depth,
            }
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP, _ROOT, argument],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_CHILD_ENV,
            close_fds=True,
            # not in the engine's process group: a Ctrl-C meant for `stepway dev` is the
            # engine's to handle; the child ends when its stdin closes
            start_new_session=True,
        )
        self.stderr_tail = b""
        self.killed = False
        threading.Thread(target=self._drain, name="stepway-evaluator-stderr", daemon=True).start()
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._buffer = b""
        ready = self._read_line(time.monotonic() + _STARTUP_SECONDS)
        if ready != b"ready":
            self.kill()
            raise RuntimeError(f"evaluator process did not start: {self.describe_death()}")

    def _drain(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        for chunk in iter(lambda: stream.read(4096), b""):
            self.stderr_tail = (self.stderr_tail + chunk)[-_STDERR_TAIL:]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()

    def close(self) -> None:
        """Ask the child to end (stdin closed), then make sure it did."""
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.kill()

    # -- framing -----------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read what is available into the buffer; False at EOF or past the deadline."""
        stdout = self.proc.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if selector.select(remaining):
                    try:
                        chunk = os.read(stdout.fileno(), 1 << 20)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        return False
                    self._buffer += chunk
                    return True

    def _read_line(self, deadline: float) -> bytes | None:
        while b"\n" not in self._buffer:
            if len(self._buffer) > _HEADER_MAX or not self._fill(deadline):
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _read_exactly(self, size: int, deadline: float) -> bytes | None:
        while len(self._buffer) < size:
            if not self._fill(deadline):
                return None
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def request(
        self,
        kind: Kind,
        program: str,
        data: bytes,
        deadline: float,
        max_bytes: int,
        bounds: dict[str, float] | None = None,
    ) -> dict[str, Any] | bytes | None:
        """Send one request; the answer header when it failed, the result text when it
        worked, ``None`` when the process died. Raises TimeoutError at the deadline.
        ``bounds``: a script's own ``cpuSeconds`` and ``memoryBytes``, lower than the
        process's (the child takes the lower of the two)."""
        stdin = self.proc.stdin
        assert stdin is not None
        fields: dict[str, Any] = {"kind": kind, "program": program, "bytes": len(data)}
        if bounds:
            fields["bounds"] = bounds
        header = json.dumps(fields)
        try:
            stdin.write(header.encode() + b"\n" + data)
            stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        line = self._read_line(deadline)
        if line is None:
            return None
        answer = json.loads(line)
        if not answer.get("ok"):
            return dict(answer)
        size = int(answer["bytes"])
        if size > max_bytes:
            return None  # the child checks this; never trust a bigger frame
        return self._read_exactly(size, deadline)

    def describe_death(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"


class EvaluatorPool:
    """Evaluates scripts and jq programs in at most ``limits.processes`` child
    processes, one evaluation per process at a time. Thread-safe."""

    def __init__(self, limits: EvaluatorLimits | None = None) -> None:
        self.limits = limits or EvaluatorLimits()
        self._idle: list[_Child] = []
        self._live = 0
        self._closed = False
        self._cond = threading.Condition()
        #: urgent callers waiting for a process (:meth:`_acquire`)
        self._urgent = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> EvaluatorPool:
        """Start every process now (otherwise they start on first use)."""
        with self._cond:
            missing = self.limits.processes - self._live
            self._live += max(missing, 0)
        for _ in range(max(missing, 0)):
            self._spawn_into_idle()
        return self

    def close(self) -> None:
        """End every idle process; busy ones are ended when their evaluation returns."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for child in idle:
            child.close()

    def __enter__(self) -> EvaluatorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn_into_idle(self) -> None:
        """Start a process for a slot already counted in ``_live``."""
        try:
            child = _Child(self.limits)
        except Exception:
            log.exception("could not start an evaluator process")
            with self._cond:
                self._live -= 1
                self._cond.notify_all()
            return
        with self._cond:
            if self._closed:
                self._live -= 1
                child.close()
                return
            self._idle.append(child)
            self._cond.notify_all()

    def _acquire(self, urgent: bool = False, wait: bool = True) -> _Child:
        """A process for one evaluation. An ``urgent`` caller (a Decider's script, on an
        orchestration's thread) is served before every other waiting one (INLINE and jq
        activities, of which up to the engine's activity limit may wait): an
        orchestration waits for an evaluation in progress at most, never for a queue.
        Without ``wait``, an idle process or :class:`NotHere` (none is idle: a step done
        in a work item waits for none; one is started in the background if the pool is
        not full, for the next)."""
        if not wait:
            with self._cond:
                idle = None if self._closed or self._urgent else self._take_idle()
                if idle is not None:
                    return idle
                start = not self._closed and self._live < self.limits.processes
                if start:
                    self._live += 1
            if start:
                threading.Thread(
                    target=self._spawn_into_idle, name="stepway-evaluator-start", daemon=True
                ).start()
            raise NotHere("no evaluator process is idle", remember=False)
        with self._cond:
            if urgent:
                self._urgent += 1
            try:
                while True:
                    if self._closed:
                        raise PoolClosed("the evaluator pool is closed")
                    if urgent or not self._urgent:
                        idle = self._take_idle()
                        if idle is not None:
                            return idle
                        if self._live < self.limits.processes:
                            self._live += 1
                            break
                    self._cond.wait()
            finally:
                if urgent:
                    self._urgent -= 1
                    self._cond.notify_all()  # the others may go on
        try:
            return _Child(self.limits)
        except Exception:
            with self._cond:
                self._live -= 1
                self._cond.notify_all()
            raise

    def _take_idle(self) -> _Child | None:
        """The live idle process idle longest (it has had the most time to make its next
        script context: engine/runtime/evaluators/child.py), dropping dead ones; None if
        there is none. Called holding ``_cond``."""
        while self._idle:
            child = self._idle.pop(0)
            if child.alive:
                return child
            self._live -= 1
        return None

    def _release(self, child: _Child, healthy: bool) -> None:
        if healthy and child.alive:
            with self._cond:
                if not self._closed:
                    self._idle.append(child)
                    self._cond.notify_all()
                    return
                self._live -= 1
            child.close()
            return
        child.kill()
        with self._cond:
            replace = not self._closed
            if not replace:
                self._live -= 1
            self._cond.notify_all()
        if replace:  # keep the slot: a fresh process starts in the background
            threading.Thread(
                target=self._spawn_into_idle, name="stepway-evaluator-start", daemon=True
            ).start()

    # -- evaluating ----------------------------------------------------------------------

    def evaluate(self, kind: Kind, program: str, data: Any, within: float | None = None) -> Any:
        """The result of ``program`` (JavaScript for ``js``, with ``data`` as its bindings
        object; jq for ``jq``, with ``data`` as its input, giving the list of every
        output). Raises :class:`EvaluationError` naming the limit on a breach.
        ``within``: a step done in an orchestration's work item: an idle process only,
        at most this many seconds of CPU and wall-clock time; past them (or with no
        process idle) :class:`NotHere`, not a breach (the full limits may not be)."""
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return self.evaluate_text(kind, program, text.encode("utf-8"), within=within)

    def evaluate_text(
        self,
        kind: Kind,
        program: str,
        data: bytes,
        bounds: dict[str, float] | None = None,
        *,
        urgent: bool = False,
        within: float | None = None,
    ) -> Any:
        """:meth:`evaluate` of JSON text; ``urgent``: served before other waiting callers
        (:meth:`_acquire`)."""
        limits = self.limits
        wall = limits.wall_seconds
        if within is not None:
            wall = min(wall, within)
            cpu = min(within, (bounds or {}).get("cpuSeconds", within))
            bounds = {**(bounds or {}), "cpuSeconds": cpu}
        child = self._acquire(urgent, wait=within is None)
        healthy = False
        try:
            deadline = time.monotonic() + wall
            try:
                answer = child.request(
                    kind, program, data, deadline, limits.max_output_bytes, bounds
                )
            except TimeoutError:
                child.kill()
                if within is not None:
                    raise NotHere(f"the evaluation took more than {within:g} s") from None
                raise EvaluationError(
                    f"the evaluation exceeded the wall-clock limit of {limits.wall_seconds:g} s",
                    "wall",
                ) from None
            if answer is None:
                child.kill()
                death = self._death(child)
                if within is not None and death.limit == "cpu":
                    raise NotHere(f"the evaluation took more than {within:g} s of CPU")
                raise death
            healthy = True
            if isinstance(answer, dict):
                limit = answer.get("limit")
                if within is not None and limit in ("cpu", "wall"):
                    raise NotHere(f"the evaluation took more than {within:g} s")
                raise EvaluationError(str(answer.get("message") or "failed"), limit)
            try:
                return loads_limited(answer, limits.max_depth + 1, "the result")
            except JsonTooDeep as exc:  # the child checks this first; never trust it
                raise EvaluationError(str(exc), "depth") from None
        finally:
            self._release(child, healthy)

    def _death(self, child: _Child) -> EvaluationError:
        """Why a process died during an evaluation, naming the limit when it was one."""
        limits = self.limits
        code = child.proc.poll()
        # let the stderr thread catch up with the last words of the process
        time.sleep(0.05)
        tail = child.stderr_tail.decode("utf-8", "replace")
        if code == -signal.SIGXCPU:
            return EvaluationError(
                f"the evaluation exceeded the CPU time limit of {limits.cpu_seconds:g} s", "cpu"
            )
        if any(marker in tail for marker in _MEMORY_MARKERS):
            return EvaluationError(
                f"the evaluation exceeded the memory limit of {_mib(limits.memory_bytes)}",
                "memory",
            )
        log.warning("evaluator process died (%s): %s", child.describe_death(), tail[-500:])
        return EvaluationError(
            f"the evaluator process died during the evaluation ({child.describe_death()})"
        )


#: the reason of a ScriptError for the limit an evaluation exceeded
_SCRIPT_REASONS = {
    "cpu": "time_limit",
    "wall": "time_limit",
    "memory": "memory_limit",
    "depth": "depth_limit",
}


class ScriptsInProcesses:
    """Runs the SWITCH and DO_WHILE scripts of the Deciders in ``pool``'s processes
    (a :class:`engine.language.scripting.ScriptMemo`'s runner), not in the engine's own:
    QuickJS cannot interrupt everything it runs in C (a regular expression that
    backtracks exponentially runs on past its time limit), and only a process can be
    ended from outside. A breach of a limit is a ScriptError naming it, as in process.
    The script's time and memory limits apply inside QuickJS, as in process, within the
    pool's: its process's CPU limit ends what QuickJS cannot interrupt."""

    def __init__(self, pool: EvaluatorPool) -> None:
        self.pool = pool

    def __call__(
        self, expression: str, bindings_json: str, time_limit_s: float, memory_limit_bytes: int
    ) -> tuple[str, Any]:
        from engine.language.scripting import ScriptError, ScriptsUnavailable

        try:
            kind, value = self.pool.evaluate_text(
                "script",
                expression,
                _utf8(bindings_json),
                {"cpuSeconds": time_limit_s, "memoryBytes": memory_limit_bytes},
                urgent=True,  # an orchestration's thread waits for it
            )
        except PoolClosed as exc:
            raise ScriptsUnavailable(exc.message) from None
        except OSError as exc:  # no process could be started
            raise ScriptsUnavailable(f"no evaluator process: {exc}") from None
        except EvaluationError as exc:
            # a process that died (not of a limit) died of the script: an error like any
            raise ScriptError(exc.message, _SCRIPT_REASONS.get(exc.limit or "", "error")) from None
        if kind == "json":
            return "json", json.dumps(value, ensure_ascii=False, allow_nan=False)
        return "value", value


def _utf8(text: str) -> bytes:
    """JSON text as UTF-8; a lone surrogate (valid JSON text, not UTF-8) escaped."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True).encode("ascii")
