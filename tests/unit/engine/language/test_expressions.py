"""engine.language.expressions: Conductor ``${...}`` references."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.language.expressions import (
    ExpressionError,
    check,
    expression_errors,
    reference_paths,
    references,
    resolve,
    split_iteration,
)


def make_context() -> dict[str, Any]:
    return {
        "workflow": {
            "input": {
                "a": {"b": 1, "c": [10, 20, 30]},
                "key": "a",
                "flag": False,
                "ratio": 0.25,
                "nothing": None,
                "name": "alice",
                "items": [
                    {"id": "i1", "amount": 5, "tags": ["x"]},
                    {"id": "i2", "amount": 20, "tags": []},
                    {"id": "i3", "amount": 30, "tags": ["y", "z"]},
                ],
                "dotted.key": "dk",
            },
            "variables": {"counter": 3, "list": [1, 2]},
            "workflowId": "wf-1",
            "correlationId": None,
            "workflowType": "order",
            "version": 2,
        },
        "get_user": {
            "input": {"userId": 7},
            "output": {"user": {"name": "Bob", "emails": ["b@x", "b@y"]}, "count": 2},
            "status": "COMPLETED",
            "taskId": "task-1",
        },
        "fetch-page": {"output": {"page": 1}, "status": "COMPLETED"},
        "loop_body": {"output": {"i": 3}},
        "loop_body__2": {"output": {"i": 2}},
        "CPEWF_TASK_ID": "task-current",
    }


CTX = make_context()


# --------------------------------------------------------------------------- basic roots


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.a.b}", 1),
        ("${workflow.input.name}", "alice"),
        ("${workflow.variables.counter}", 3),
        ("${workflow.workflowId}", "wf-1"),
        ("${workflow.correlationId}", None),
        ("${workflow.workflowType}", "order"),
        ("${workflow.version}", 2),
        ("${get_user.output.user.name}", "Bob"),
        ("${get_user.input.userId}", 7),
        ("${get_user.status}", "COMPLETED"),
        ("${get_user.taskId}", "task-1"),
        ("${fetch-page.output.page}", 1),
        ("${CPEWF_TASK_ID}", "task-current"),
        ("${loop_body__2.output.i}", 2),
        ("${loop_body.output.i}", 3),
    ],
)
def test_roots(template: str, expected: Any) -> None:
    assert resolve(template, CTX) == expected


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.a}", {"b": 1, "c": [10, 20, 30]}),
        ("${workflow.input.a.c}", [10, 20, 30]),
        ("${workflow.input.flag}", False),
        ("${workflow.input.ratio}", 0.25),
        ("${workflow.input.nothing}", None),
        ("${workflow.variables.counter}", 3),
    ],
)
def test_single_reference_keeps_json_type(template: str, expected: Any) -> None:
    result = resolve(template, CTX)
    assert result == expected
    assert type(result) is type(expected)


def test_whole_string_with_spaces_is_interpolated() -> None:
    assert resolve(" ${workflow.variables.counter}", CTX) == " 3"
    assert resolve("${workflow.variables.counter} ", CTX) == "3 "


# --------------------------------------------------------------------------- interpolation


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hello ${workflow.input.name}!", "Hello alice!"),
        ("${workflow.input.name}-${workflow.workflowId}", "alice-wf-1"),
        ("n=${workflow.variables.counter}", "n=3"),
        ("r=${workflow.input.ratio}", "r=0.25"),
        ("f=${workflow.input.flag}", "f=false"),
        ("v=${workflow.input.nothing}", "v=null"),
        ("m=${workflow.input.missing}", "m=null"),
        ("t=${nosuchtask.output.x}", "t=null"),
        ("obj=${workflow.input.a}", 'obj={"b":1,"c":[10,20,30]}'),
        ("list=${workflow.variables.list}", "list=[1,2]"),
        ("unicode ${get_user.output.user.name} é", "unicode Bob é"),
    ],
)
def test_interpolation(template: str, expected: str) -> None:
    assert resolve(template, CTX) == expected


def test_interpolated_unicode_json_is_not_escaped() -> None:
    ctx = {"workflow": {"input": {"o": {"k": "é"}}}}
    assert resolve("x ${workflow.input.o}", ctx) == 'x {"k":"é"}'


# --------------------------------------------------------------------------- missing data


@pytest.mark.parametrize(
    "template",
    [
        "${workflow.input.missing}",
        "${workflow.input.a.b.c}",  # through a number
        "${workflow.input.name.x}",  # through a string
        "${workflow.input.a.c[7]}",  # index out of range
        "${workflow.input.a.c.x}",  # name on a list
        "${workflow.input.a[0]}",  # index on a dict
        "${nosuchtask.output}",
        "${loop_body__9.output}",
        "${workflow.input['missing']}",
        "${workflow.input.items[7].id}",
        "${workflow.input.a[}",  # bad syntax: resolve never raises
        "${workflow.input.x[?(@.a >)]}",
    ],
)
def test_missing_resolves_to_none(template: str) -> None:
    assert resolve(template, CTX) is None


def test_missing_never_raises_on_odd_contexts() -> None:
    assert resolve("${workflow.input.a}", {}) is None
    assert resolve("${workflow.input.a}", {"workflow": None}) is None
    assert resolve("${workflow.input.a}", {"workflow": [1, 2]}) is None
    assert resolve("${workflow..x}", {}) == []


# --------------------------------------------------------------------------- JSONPath


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.a.c[0]}", 10),
        ("${workflow.input.a.c[-1]}", 30),
        ("${workflow.input.items[1].id}", "i2"),
        ("${workflow.input.items[-1].tags[0]}", "y"),
        ("${workflow.input['a']['b']}", 1),
        ('${workflow.input["dotted.key"]}', "dk"),
        ("${$.workflow.workflowId}", "wf-1"),
        ("${['workflow']['workflowId']}", "wf-1"),
        ("${ workflow.workflowId }", "wf-1"),
    ],
)
def test_definite_paths(template: str, expected: Any) -> None:
    assert resolve(template, CTX) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.items[*].id}", ["i1", "i2", "i3"]),
        ("${workflow.input.items[?(@.amount > 10)].id}", ["i2", "i3"]),
        ("${workflow.input.items[?(@.amount > 25)].id}", ["i3"]),  # one match: still a list
        ("${workflow.input.items[?(@.amount > 99)].id}", []),  # no match: empty list
        ("${workflow.input.items[?(@.amount > 10 && @.id == 'i3')].amount}", [30]),
        ("${workflow.input.items[0:2].id}", ["i1", "i2"]),
        ("${workflow.input.items[0,2].id}", ["i1", "i3"]),
        ("${get_user..name}", ["Bob"]),
        ("${get_user..emails[0]}", ["b@x"]),
        ("${workflow.input.items..tags[*]}", ["x", "y", "z"]),
        ("${workflow.input.a.*}", [1, [10, 20, 30]]),
        ("${nosuchtask..x}", []),
    ],
)
def test_indefinite_paths_always_give_a_list(template: str, expected: Any) -> None:
    assert resolve(template, CTX) == expected


# ------------------------------------------------------------ queries with no time bound


BACKTRACKING = "a" * 24  # (a|a)*b takes 2^24 steps on it: seconds in Python's re


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("${workflow.input.s[?(@ =~ /(a|a)*b/)]}", "regular expressions (=~) are not supported"),
        ("${workflow.input.items[?(@.id =~ @.pattern)]}", "regular expressions (=~)"),
        ('${workflow.input.items[?match(@.id, "(a|a)*b")]}', "match() is not supported"),
        ("${workflow.input.items[?search(@.id, @.p)]}", "search() is not supported"),
        ("${workflow.input..*..*.zz}", "2 deep scans (..); at most one is allowed"),
        ("${$..items[?(@..id)]}", "2 deep scans (..)"),
    ],
)
def test_a_query_whose_cost_has_no_bound_is_refused(template: str, problem: str) -> None:
    """Python's ``re`` backtracks with the GIL held (the whole engine stalls), and each
    deep scan multiplies the work by the size of the data: refused at registration, and
    resolved to None if one is met at run time (built from data by a nested reference)."""
    [error] = expression_errors({"x": template})
    assert error.path == "$.x" and problem in str(error), str(error)
    ctx = {"workflow": {"input": {"s": [BACKTRACKING], "items": [{"id": BACKTRACKING}]}}}
    assert resolve(template, ctx) is None
    nested = {"workflow": {"input": {"q": template[2:-1], "s": [BACKTRACKING]}}}
    assert resolve("${${workflow.input.q}}", nested) is None


def test_one_deep_scan_and_other_filters_still_work() -> None:
    assert resolve("${workflow.input..amount}", CTX) == [5, 20, 30]
    assert resolve("${workflow.input.items[?(@.id == 'i2')].amount}", CTX) == [20]
    assert expression_errors({"x": "${workflow.input..amount}"}) == []


def test_deep_scan_over_whole_context() -> None:
    ctx = {"t": {"output": {"id": 1, "n": {"id": 2}}}, "u": {"output": [{"id": 3}]}}
    assert resolve("${$..id}", ctx) == [1, 2, 3]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.items.length()}", 3),
        ("${workflow.input.items.size()}", 3),
        ("${workflow.input.a.length()}", 2),
        ("${workflow.input.name.length()}", 5),
        ("${workflow.input.items[*].amount.sum()}", 55),
        ("${workflow.input.items[*].amount.min()}", 5),
        ("${workflow.input.items[*].amount.max()}", 30),
        ("${workflow.input.a.c.avg()}", 20.0),
        ("${workflow.input.a.c.first()}", 10),
        ("${workflow.input.a.c.last()}", 30),
        ("${workflow.input.a.keys()}", ["b", "c"]),
        ("${workflow.input.missing.length()}", None),
        ("${workflow.input.items[?(@.amount > 99)].amount.sum()}", None),
        ("n=${workflow.input.items.length()}", "n=3"),
    ],
)
def test_jayway_functions(template: str, expected: Any) -> None:
    assert resolve(template, CTX) == expected


# --------------------------------------------------------------------------- escaping, nesting


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("$${workflow.input.name}", "${workflow.input.name}"),
        ("literal $${x} and ${workflow.input.name}", "literal ${x} and alice"),
        ("$$${x}", "$${x}"),
        ("cost: $5", "cost: $5"),
        ("$", "$"),
        ("${}", ""),
        ("a${ }b", "ab"),
        ("unclosed ${workflow.input.name", "unclosed ${workflow.input.name"),
        ("brace } alone", "brace } alone"),
    ],
)
def test_escapes_and_edge_text(template: str, expected: Any) -> None:
    assert resolve(template, CTX) == expected


def test_nested_reference_builds_the_path() -> None:
    assert resolve("${workflow.input.${workflow.input.key}.b}", CTX) == 1
    assert resolve("x-${workflow.input.${workflow.input.key}.b}", CTX) == "x-1"
    assert resolve("${${workflow.input.key}}", {"a": 5, "workflow": {"input": {"key": "a"}}}) == 5


# --------------------------------------------------------------------------- structure


def test_walks_dicts_and_lists_and_keeps_other_values() -> None:
    template = {
        "user": "${get_user.output.user}",
        "ids": ["${workflow.input.items[0].id}", 4, None, True, {"deep": "${CPEWF_TASK_ID}"}],
        "${workflow.input.name}": "keys are not resolved",
        "n": 1.5,
    }
    assert resolve(template, CTX) == {
        "user": {"name": "Bob", "emails": ["b@x", "b@y"]},
        "ids": ["i1", 4, None, True, {"deep": "task-current"}],
        "${workflow.input.name}": "keys are not resolved",
        "n": 1.5,
    }


def test_never_mutates_and_shares_nothing() -> None:
    template = {"u": "${get_user.output.user}", "l": ["${workflow.input.items}"]}
    template_before = copy.deepcopy(template)
    ctx = make_context()
    ctx_before = copy.deepcopy(ctx)
    result = resolve(template, ctx)
    assert template == template_before
    assert ctx == ctx_before
    result["u"]["name"] = "changed"
    result["u"]["emails"].append("new")
    result["l"][0][0]["id"] = "changed"
    assert ctx == ctx_before
    assert resolve(template, ctx) == resolve(template, ctx_before)


def test_multi_match_result_is_a_copy() -> None:
    ctx = make_context()
    result = resolve("${workflow.input.items[*]}", ctx)
    result[0]["id"] = "changed"
    assert ctx["workflow"]["input"]["items"][0]["id"] == "i1"


# --------------------------------------------------------------------------- references


def test_references_roots() -> None:
    template = {
        "a": "${workflow.input.x}",
        "b": ["${get_user.output.user}", {"c": "id ${CPEWF_TASK_ID} ${fetch-page.status}"}],
        "d": "${loop_body__2.output.i}",
        "e": "$${not_a_ref.output}",
        "f": "plain",
        "g": 5,
    }
    assert references(template) == {
        "workflow",
        "get_user",
        "CPEWF_TASK_ID",
        "fetch-page",
        "loop_body",
    }


def test_reference_paths_report_where() -> None:
    template = {
        "x": "${foo.output.a}",
        "list": [1, "${bar.input}", {"weird key": "${$.baz.status}"}],
        "nested": "${workflow.input.${qux.output.k}}",
        "computed_root": "${${workflow.input.ref}.output}",
        "bracket": "${['odd-ref'].output}",
    }
    assert reference_paths(template, "$.tasks[0].inputParameters") == [
        ("$.tasks[0].inputParameters.x", "foo"),
        ("$.tasks[0].inputParameters.list[1]", "bar"),
        ('$.tasks[0].inputParameters.list[2]["weird key"]', "baz"),
        ("$.tasks[0].inputParameters.nested", "workflow"),
        ("$.tasks[0].inputParameters.nested", "qux"),
        ("$.tasks[0].inputParameters.computed_root", "workflow"),
        ("$.tasks[0].inputParameters.bracket", "odd-ref"),
    ]
    assert reference_paths({"x": "${a.output}"}) == [("$.x", "a")]


def test_deep_scan_from_the_root_names_no_root() -> None:
    assert references({"x": "${$..id}", "y": "${*.output}"}) == set()


def test_split_iteration() -> None:
    assert split_iteration("ref__2") == ("ref", (2,))
    assert split_iteration("ref__2__1") == ("ref", (2, 1))
    assert split_iteration("my__ref__10") == ("my__ref", (10,))
    assert split_iteration("ref") == ("ref", ())
    assert split_iteration("ref__x") == ("ref__x", ())
    assert split_iteration("__3") == ("__3", ())


def test_nested_loop_iteration_refs() -> None:
    ctx = {"body__2__1": {"output": {"v": "outer 2, inner 1"}}}
    assert resolve("${body__2__1.output.v}", ctx) == "outer 2, inner 1"
    assert references({"x": "${body__2__1.output.v}"}) == {"body"}


# --------------------------------------------------------------------------- check


def test_check_accepts_valid_templates() -> None:
    check(
        {
            "a": "${workflow.input.a}",
            "b": ["${x.output.items[?(@.n > 1)]}", "$${literal", "${}"],
            "c": "${workflow.input.${workflow.input.k}}",
            "d": "${x.output.items.length()}",
        }
    )


def test_check_reports_unclosed() -> None:
    with pytest.raises(ExpressionError) as info:
        check({"p": ["ok", "Hello ${workflow.input.name"]}, "$.inputParameters")
    error = info.value
    assert error.path == "$.inputParameters.p[1]"
    assert "unclosed" in error.problem
    assert error.expression == "${workflow.input.name"
    assert "$.inputParameters.p[1]" in str(error)


def test_check_reports_bad_jsonpath() -> None:
    with pytest.raises(ExpressionError) as info:
        check({"p": "${workflow.input.a[}"})
    assert info.value.path == "$.p"
    assert "invalid JSONPath" in info.value.problem
    assert info.value.expression == "${workflow.input.a[}"


def test_expression_errors_lists_all() -> None:
    errors = expression_errors({"a": "${x", "b": "${y.output[}", "c": "${fine.output}"})
    assert [e.path for e in errors] == ["$.a", "$.b"]


def test_expression_error_is_a_value_error() -> None:
    assert issubclass(ExpressionError, ValueError)


# --------------------------------------------------------------------------- properties

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
plain_text = st.text().filter(lambda s: "${" not in s)
plain_templates = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | plain_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(plain_templates, json_values)
def test_templates_without_references_are_unchanged(template: Any, data: Any) -> None:
    assert resolve(template, {"workflow": {"input": data}}) == template


names = st.sampled_from(["a", "b", "items", "x", "0", "weird key"])
paths = st.lists(names | st.integers(-3, 3), min_size=1, max_size=4)


def _expression(path: list[str | int]) -> str:
    text = "workflow.input"
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif step.isidentifier():
            text += "." + step
        else:
            text += f"['{step}']"
    return text


@given(json_values, paths, st.text(max_size=5))
@settings(max_examples=200)
def test_resolution_is_deterministic(data: Any, path: list[str | int], prefix: str) -> None:
    ctx = {"workflow": {"input": data}}
    before = json.dumps(ctx)  # key order is data: interpolation keeps it
    template = {
        "one": "${" + _expression(path) + "}",
        "text": prefix + "${" + _expression(path) + "}",
    }
    first = resolve(template, ctx)
    assert resolve(template, ctx) == first
    assert resolve(template, json.loads(before)) == first
    assert json.dumps(ctx) == before


@given(json_values, paths)
@settings(max_examples=300)
def test_direct_walk_agrees_with_jsonpath(data: Any, path: list[str | int]) -> None:
    """The fast path for plain dotted paths gives what the JSONPath library gives."""
    expression = _expression(path)
    ctx = {"workflow": {"input": data}}
    matches = jsonpath.findall("$." + expression, ctx)
    assert resolve("${" + expression + "}", ctx) == (matches[0] if matches else None)


# --------------------------------------------------------------------------- digit members


def test_a_member_name_starting_with_a_digit_in_dot_notation() -> None:
    """Jayway JsonPath (Conductor's) reads ``$.output.3`` as the member "3": a DO_WHILE's
    output has one per iteration, and conductor-oss's own scheduler example reads
    ``${poll_loop.output.3.fetch_current_time.response.body.dateTime}``. RFC 9535 has no
    such shorthand; Stepway reads it as Jayway does, on the fast path and in queries."""
    ctx = {
        "loop": {
            "output": {
                "iteration": 3,
                "3": {"fetch": {"response": {"body": {"at": "12:00"}}}},
                "10": {"n": 10},
            }
        },
        "rows": {"output": {"list": [{"p": 3.5, "2nd": "a"}, {"p": 1, "2nd": "b"}]}},
    }
    assert resolve("${loop.output.3.fetch.response.body.at}", ctx) == "12:00"
    assert resolve("${loop.output.10.n}", ctx) == 10
    assert resolve("${loop.output.4.fetch}", ctx) is None
    assert resolve("${rows.output.list[1].2nd}", ctx) == "b"
    # in a query: the filter's numbers are not member names
    assert resolve("${rows.output.list[?(@.p > 3.2)].2nd}", ctx) == ["a"]
    assert resolve("${loop..3.fetch.response.body.at}", ctx) == ["12:00"]
    # a member "3" of a list is not its index 3, as in Jayway
    assert resolve("${rows.output.list.0}", ctx) is None
    assert expression_errors({"x": "${loop.output.3.fetch}", "y": "${a[?(@.b > 1.5)].7}"}) == []


def test_a_secret_reference_stays_its_text() -> None:
    """``${workflow.secrets.NAME}`` never reads a value into the run (state, rows,
    history): it resolves to its own text, alone or inside a string; only an HTTP request
    reveals it (engine/runtime/builtins/secrets.py). A computed name is no reference: it
    reads the run's context, which holds no secrets."""
    ctx = {"workflow": {"input": {"n": "TOKEN"}}}
    assert resolve("${workflow.secrets.TOKEN}", ctx) == "${workflow.secrets.TOKEN}"
    assert resolve("Bearer ${ workflow.secrets.TOKEN }", ctx) == "Bearer ${workflow.secrets.TOKEN}"
    assert resolve("${workflow.secrets.${workflow.input.n}}", ctx) is None
