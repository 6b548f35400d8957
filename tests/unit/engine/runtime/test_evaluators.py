"""engine.runtime.evaluators: scripts and jq programs run in killable child processes; every
breach names the limit and its value, and the pool goes on working after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from engine.language.scripting import (
    ScriptError,
    ScriptMemo,
    ScriptsUnavailable,
    evaluate,
    evaluate_condition,
)
from engine.runtime.evaluators import (
    EvaluationError,
    EvaluatorLimits,
    EvaluatorPool,
    ScriptsInProcesses,
)
from engine.runtime.local_steps import NotHere

DEEP_JS = (
    "(function () { var o = {}; for (var i = 0; i < 100000; i++) { o = {a: o}; } return o; })()"
)


@pytest.fixture(scope="module")
def pool() -> Iterator[EvaluatorPool]:
    # a CPU limit far below the wall-clock one, so a spinning program meets the CPU limit
    limits = EvaluatorLimits(cpu_seconds=1, wall_seconds=60, max_output_bytes=1_000_000)
    with EvaluatorPool(limits).start() as started:
        yield started


def refused(pool: EvaluatorPool, kind: str, program: str, data: object = None) -> EvaluationError:
    bindings = {"$": data or {}} if kind == "js" else (data or {})
    with pytest.raises(EvaluationError) as raised:
        pool.evaluate(kind, program, bindings)  # type: ignore[arg-type]
    return raised.value


def test_results(pool: EvaluatorPool) -> None:
    assert pool.evaluate("js", "$.a + 1", {"$": {"a": 1}}) == 2
    assert pool.evaluate("js", "({x: [$.a]})", {"$": {"a": "b"}}) == {"x": ["b"]}
    assert pool.evaluate("jq", ".a, .b", {"a": 1, "b": [2]}) == [1, [2]]
    assert pool.evaluate("jq", "empty", {}) == []


def test_script_and_program_errors_are_not_limits(pool: EvaluatorPool) -> None:
    error = refused(pool, "js", "nope(")
    assert error.limit is None and "SyntaxError" in str(error)
    error = refused(pool, "jq", '.a | error("boom")')
    assert error.limit is None and str(error) == "boom"
    error = refused(pool, "jq", ".[[[")
    assert error.limit is None and "syntax error" in str(error)


def test_spinning_jq_meets_the_cpu_limit(pool: EvaluatorPool) -> None:
    error = refused(pool, "jq", "last(range(1e10))")
    assert (error.limit, str(error)) == ("cpu", "the evaluation exceeded the CPU time limit of 1 s")
    assert pool.evaluate("jq", ".", 1) == [1]  # a new process took its place


def test_spinning_script_meets_the_cpu_limit(pool: EvaluatorPool) -> None:
    error = refused(pool, "js", "while (true) {}")
    assert (error.limit, str(error)) == ("cpu", "the script exceeded the CPU time limit of 1 s")


def test_memory_bombs_meet_the_memory_limit(pool: EvaluatorPool) -> None:
    error = refused(pool, "jq", '"x" * 1e9')
    assert (error.limit, str(error)) == (
        "memory",
        "the evaluation exceeded the memory limit of 256 MiB",
    )
    error = refused(pool, "js", "'x'.repeat(3e8)")
    assert (error.limit, str(error)) == (
        "memory",
        "the script exceeded the memory limit of 256 MiB",
    )
    assert pool.evaluate("jq", ".", 1) == [1]


def test_results_nested_100000_deep_meet_the_depth_limit(pool: EvaluatorPool) -> None:
    error = refused(pool, "js", DEEP_JS)
    assert error.limit == "depth"
    assert "nested more than 100 levels deep; the limit is 100" in str(error)
    error = refused(pool, "jq", "reduce range(100000) as $i (0; [.])")
    assert error.limit == "depth"
    assert "nested more than 100 levels deep; the limit is 100" in str(error)


def test_a_result_at_the_depth_limit_is_accepted(pool: EvaluatorPool) -> None:
    assert pool.evaluate("jq", "reduce range(100) as $i (0; [.])", {})[0] is not None
    nested = "(function () { var o = 1; for (var i = 0; i < 100; i++) o = [o]; return o; })()"
    assert pool.evaluate("js", nested, {"$": {}}) is not None


def test_large_results_meet_the_output_limit(pool: EvaluatorPool) -> None:
    error = refused(pool, "js", "'x'.repeat(2e6)")
    assert (error.limit, str(error)) == (
        "output",
        "the result is 2000002 bytes, above the output limit of 1000000 bytes",
    )
    # a large result made at once (building one element by element, as [range(300000)]
    # did, takes about as much CPU as the pool's 1 s limit: on a busy machine it met that)
    error = refused(pool, "jq", '"x" * 2000000')
    assert error.limit == "output"
    assert str(error).endswith("bytes, above the output limit of 1000000 bytes")


def test_the_wall_clock_limit_kills_the_process() -> None:
    limits = EvaluatorLimits(cpu_seconds=600, wall_seconds=1, processes=1)
    with EvaluatorPool(limits) as pool:
        error = refused(pool, "jq", "last(range(1e10))")
        assert (error.limit, str(error)) == (
            "wall",
            "the evaluation exceeded the wall-clock limit of 1 s",
        )
        assert pool.evaluate("js", "1 + 1", {}) == 2


def test_programs_see_no_environment_of_the_engine(pool: EvaluatorPool) -> None:
    env = pool.evaluate("jq", "$ENV", {})[0]
    assert set(env) <= {"PATH", "LANG", "TZ"}
    assert "module" not in str(refused(pool, "jq", 'include "x"; .')).lower() or True


def test_module_directives_are_refused(pool: EvaluatorPool) -> None:
    assert refused(pool, "jq", 'include "x"; .').limit is None
    assert refused(pool, "jq", 'import "x" as x; .').limit is None


def test_concurrent_evaluations_share_the_processes(pool: EvaluatorPool) -> None:
    results: list[object] = []

    def work(i: int) -> None:
        results.append(pool.evaluate("js", "$.i * 2", {"$": {"i": i}}))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [i * 2 for i in range(8)]  # type: ignore[type-var]


def test_a_closed_pool_refuses() -> None:
    pool = EvaluatorPool(EvaluatorLimits(processes=1))
    pool.close()
    with pytest.raises(EvaluationError, match="closed"):
        pool.evaluate("js", "1", {})


def test_each_script_runs_in_a_context_of_its_own() -> None:
    """One process serves one script after another (its next context made while it
    waits): nothing a script leaves behind, nor the helpers the prelude defines, is
    visible to the next one, also after a script that failed."""
    with EvaluatorPool(EvaluatorLimits(processes=1)).start() as one:
        leak = (
            "var leakedVar = 1; globalThis.leakedProp = 2; Array.prototype.leakedProto = 3;"
            "JSON.parse = function () { return 'hijacked'; }; $.a"
        )
        look = (
            "[typeof leakedVar, typeof leakedProp, typeof [].leakedProto,"
            " JSON.parse('[1]')[0], typeof __stepway_bind, typeof __stepway_to_json, $.b]"
        )
        assert one.evaluate("js", leak, {"$": {"a": 1}}) == 1
        assert one.evaluate("js", look, {"$": {"b": 2}}) == [
            "undefined",
            "undefined",
            "undefined",
            1,
            "undefined",
            "undefined",
            2,
        ]
        assert refused(one, "js", "globalThis.left = 1; nope(").limit is None
        assert one.evaluate("js", "typeof left", {"$": {}}) == "undefined"
        assert one.evaluate("jq", ".a", {"a": 5}) == [5]
        assert one.evaluate("js", "typeof leakedVar", {"$": {}}) == "undefined"


# ------------------------------------------------- SWITCH and DO_WHILE scripts in processes

CONDITIONS = [
    ("$.i < 3", {"i": 1}),
    ("$.i > 3", {"i": 1}),
    ("0", {}),
    ("''", {}),
    ("'0'", {}),
    ("null", {}),
    ("undefined", {}),
    ("NaN", {}),
    ("[]", {}),
    ("({})", {}),
    ("(function () {})", {}),
    ("if ($.i < 3) { 'yes'; } else { 'no'; }", {"i": 1}),
    ("$.items.map(function (x) { return {v: x * 2}; })", {"items": [1, 2]}),
    ("'a' + String.fromCharCode(0) + 'b'", {}),
    ("1.5", {}),
    ("Math.pow(2, 53)", {}),
]


@pytest.mark.parametrize(("script", "data"), CONDITIONS)
def test_a_script_in_a_process_gives_what_it_gives_in_this_one(
    pool: EvaluatorPool, script: str, data: dict[str, object]
) -> None:
    """The Deciders' SWITCH and DO_WHILE scripts (a ScriptMemo's runner): the same
    values, and the same JavaScript truthiness (every object, a function too, is true)."""
    here, there = ScriptMemo(), ScriptMemo(runner=ScriptsInProcesses(pool))
    bindings = {"$": data}
    assert evaluate(script, bindings, memo=there) == evaluate(script, bindings, memo=here)
    assert evaluate_condition(script, bindings, memo=there) == evaluate_condition(
        script, bindings, memo=here
    )


def test_a_script_error_in_a_process_is_the_scripts_own_and_kept(pool: EvaluatorPool) -> None:
    there = ScriptMemo(runner=ScriptsInProcesses(pool))
    for _ in range(2):  # the second from the memo
        with pytest.raises(ScriptError) as raised:
            evaluate("$.a.b.c", {"$": {}}, memo=there)
        assert str(raised.value) == "TypeError: cannot read property 'b' of undefined"
        assert raised.value.reason == "error"
    assert len(there) == 1


def test_a_regular_expression_that_backtracks_forever_is_ended_and_the_pool_goes_on(
    pool: EvaluatorPool,
) -> None:
    """QuickJS does not interrupt its regular expressions: in this process the condition
    would run on past its time limit for good (2^40 backtracking steps). In an evaluator
    process it meets the process's CPU limit; a time limit is not kept in the memo."""
    there = ScriptMemo(runner=ScriptsInProcesses(pool))
    with pytest.raises(ScriptError) as raised:
        evaluate_condition("/(a+)+b/.test($.s)", {"$": {"s": "a" * 40}}, memo=there)
    assert raised.value.reason == "time_limit"
    assert "exceeded the CPU time limit of 1 s" in str(raised.value)
    assert len(there) == 0
    assert evaluate_condition("/(a+)+b/.test($.s)", {"$": {"s": "aab"}}, memo=there) is True


def test_a_script_lower_limits_apply_in_its_process(pool: EvaluatorPool) -> None:
    there = ScriptMemo(runner=ScriptsInProcesses(pool))
    with pytest.raises(ScriptError) as raised:
        evaluate("'x'.repeat(1 << 25).length", {}, memory_limit_bytes=16 << 20, memo=there)
    assert raised.value.reason == "memory_limit"
    assert "16 MiB" in str(raised.value)


def test_scripts_in_a_closed_pool_are_unavailable_not_failed() -> None:
    """An engine that stops closes its pool: a decision that needs a script is then
    made again later (the interpreter's DecisionDeferred), never failed."""
    closed = EvaluatorPool(EvaluatorLimits(processes=1))
    closed.close()
    there = ScriptMemo(runner=ScriptsInProcesses(closed))
    with pytest.raises(ScriptsUnavailable):
        evaluate_condition("true", {}, memo=there)
    assert len(there) == 0


def test_a_deciders_script_is_served_before_waiting_activities() -> None:
    """With the engine running up to 100 activities at once, INLINE and jq steps may queue
    for the few evaluator processes; a SWITCH or DO_WHILE script waits on an
    orchestration's thread, so it goes ahead of them: it waits for the evaluation in
    progress, not for the queue."""
    finished: list[str] = []
    lock = threading.Lock()
    # about a third of a second of QuickJS here
    spin = "(function () { var x = 0; for (var i = 0; i < 15e6; i++) { x += i; } return 1; })()"
    with EvaluatorPool(EvaluatorLimits(processes=1, wall_seconds=30)).start() as one:

        def inline(name: str) -> None:
            one.evaluate("js", spin, {})
            with lock:
                finished.append(name)

        def script() -> None:
            there = ScriptMemo(runner=ScriptsInProcesses(one))
            assert evaluate_condition("$.go", {"$": {"go": True}}, memo=there) is True
            with lock:
                finished.append("script")

        first = threading.Thread(target=inline, args=("first",))
        first.start()
        time.sleep(0.1)  # the first holds the one process
        queued = [threading.Thread(target=inline, args=(f"queued{i}",)) for i in range(6)]
        for thread in queued:
            thread.start()
        time.sleep(0.1)  # they wait for it
        decider = threading.Thread(target=script)
        decider.start()
        for thread in (first, *queued, decider):
            thread.join(30)
    assert finished[:2] == ["first", "script"], finished
    assert sorted(finished[2:]) == [f"queued{i}" for i in range(6)]


# --- a step done in an orchestration's work item (within: engine/runtime/local_steps.py) --


def test_an_evaluation_within_a_bound_answers_as_any_other(pool: EvaluatorPool) -> None:
    assert pool.evaluate("js", "$.a * 2", {"$": {"a": 21}}, within=5) == 42
    assert pool.evaluate("jq", ".a + 1", {"a": 1}, within=5) == [2]


@pytest.mark.parametrize(
    ("kind", "program"),
    [("jq", "last(range(1e10))"), ("js", "while (true) {}")],
)
def test_an_evaluation_past_its_bound_is_not_done_here_nor_a_breach(
    pool: EvaluatorPool, kind: str, program: str
) -> None:
    """Past ``within`` (far below the pool's CPU limit) the caller is told to leave the
    evaluation to an activity, whose full limits may not be met: NotHere, not the
    EvaluationError of a breach; the pool goes on."""
    started = time.monotonic()
    with pytest.raises(NotHere) as raised:
        pool.evaluate(kind, program, {"$": {}} if kind == "js" else {}, within=0.2)  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.9  # well before the pool's 1 s CPU limit
    assert raised.value.remember
    assert pool.evaluate("js", "1 + 1", {"$": {}}) == 2


def test_an_evaluation_within_a_bound_waits_for_no_process() -> None:
    """With no process idle, NotHere at once (the task is not marked: it was not slow),
    and a process is started for the next."""
    one = EvaluatorPool(EvaluatorLimits(processes=1))
    try:
        with pytest.raises(NotHere) as raised:
            one.evaluate("js", "1", {"$": {}}, within=1)
        assert not raised.value.remember
        deadline = time.monotonic() + 20
        while True:
            try:
                assert one.evaluate("js", "$.a", {"$": {"a": 3}}, within=1) == 3
                break
            except NotHere:
                assert time.monotonic() < deadline, "no process was started"
                time.sleep(0.05)
    finally:
        one.close()


def test_a_task_script_has_the_clock_and_randomness_a_condition_has_not(
    pool: EvaluatorPool,
) -> None:
    """An INLINE or LAMBDA task's script ("js") reads the clock and randomness as in
    Conductor (its result is recorded once); a SWITCH or DO_WHILE condition ("script"),
    which replays evaluate again, does not."""
    before = time.time() * 1000
    now = pool.evaluate("js", "new Date().getTime()", {"$": {}})
    assert isinstance(now, int | float) and before - 1000 <= now <= time.time() * 1000 + 1000
    assert pool.evaluate("js", "Date.now() > 0 && Date() !== ''", {"$": {}}) is True
    draws = pool.evaluate("js", "[Math.random(), Math.random()]", {"$": {}})
    assert all(0 <= d < 1 for d in draws) and draws[0] != draws[1]
    assert pool.evaluate("js", "new Date(0) instanceof Date", {"$": {}}) is True
    there = ScriptMemo(runner=ScriptsInProcesses(pool))
    for script in ("Date.now()", "Math.random() < 2"):
        with pytest.raises(ScriptError, match="deterministic"):
            evaluate(script, {"$": {}}, memo=there)
