"""protocol.json_depth: depth is measured without recursion and refused with a reason."""

from __future__ import annotations

import json

import pytest

from protocol.json_depth import MAX_JSON_DEPTH, JsonTooDeep, check_depth, json_depth, loads


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("value", "depth"),
    [(1, 0), ("x", 0), ([], 1), ({}, 1), ({"a": 1}, 1), ({"a": [1]}, 2), ([[], [[{}]]], 4)],
)
def test_depth_counts_containers(value: object, depth: int) -> None:
    assert json_depth(value) == depth


def test_the_limit_itself_is_accepted_and_one_more_is_refused() -> None:
    assert loads(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(JsonTooDeep) as refused:
        loads(nested(MAX_JSON_DEPTH + 1), "output of task 'x'")
    assert str(refused.value) == (
        f"output of task 'x' is nested deeper than the limit of {MAX_JSON_DEPTH} levels "
        "of arrays and objects"
    )


def test_text_nested_100000_deep_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(JsonTooDeep):
        loads(nested(100_000))
    with pytest.raises(JsonTooDeep):
        loads(('{"a":' * 100_000) + "1" + "}" * 100_000, limit=5)


def test_a_value_nested_100000_deep_is_measured_without_recursion() -> None:
    value: object = 1
    for _ in range(100_000):
        value = {"a": [value]}
    assert json_depth(value, limit=10) == 11
    with pytest.raises(JsonTooDeep):
        check_depth(value, "variables")


def test_a_smaller_limit_applies() -> None:
    assert loads('{"a": {"b": 1}}', limit=2) == {"a": {"b": 1}}
    with pytest.raises(JsonTooDeep, match="limit of 1 levels"):
        loads('{"a": {"b": 1}}', limit=1)


def test_malformed_text_is_a_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads("[1,")
