"""protocol.limits: JSON depth without recursion, strings that are not Unicode text,
definition names."""

from __future__ import annotations

import json

import pytest

from protocol.limits import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    NotFiniteNumber,
    check_json_depth,
    json_depth,
    json_depth_problem,
    loads_limited,
    may_spell_surrogates,
    name_problem,
    needs_checking,
    non_number_problem,
    nul_problem,
    surrogate_problem,
    unstorable_text_problem,
)


def _nested(depth: int) -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(depth - 1):
        child: list[object] = []
        node.append(child)
        node = child
    return root


def test_depth_counts_containers() -> None:
    assert json_depth(1) == 0 and json_depth("s") == 0 and json_depth(None) == 0
    assert json_depth({}) == 1 and json_depth([]) == 1
    assert json_depth({"a": [1, {"b": [[[]]]}]}) == 6
    assert json_depth({"a": 1, "b": {"c": {}}, "d": [[]]}) == 3


def test_a_value_far_deeper_than_the_recursion_limit_is_measured_and_refused() -> None:
    deep = _nested(200_000)
    assert json_depth(deep, stop_above=MAX_JSON_DEPTH) == MAX_JSON_DEPTH + 1
    problem = json_depth_problem({"out": deep}, what="the output")
    assert problem is not None
    assert problem.startswith(f"the output is nested more than {MAX_JSON_DEPTH} levels deep")
    assert "(at $.out[0][0]" in problem
    with pytest.raises(JsonTooDeep) as caught:
        check_json_depth({"out": deep})
    assert caught.value.path.startswith("$.out[0]")
    assert json_depth_problem(_nested(MAX_JSON_DEPTH)) is None
    assert json_depth_problem(_nested(MAX_JSON_DEPTH + 1)) is not None


def test_loads_limited_refuses_deep_documents_even_past_the_parser() -> None:
    assert loads_limited('{"a": [1, 2]}') == {"a": [1, 2]}
    for depth in (MAX_JSON_DEPTH + 1, 1_000_000):
        with pytest.raises(JsonTooDeep):
            loads_limited("[" * depth + "]" * depth)
    with pytest.raises(json.JSONDecodeError):
        loads_limited("{nope")


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("a/b", "'/'"),
        ("a:b", "':'"),
        ("a\x00b", "U+0000"),
        ("line\nbreak", "U+000A"),
        ("a\x7f", "U+007F"),
        (" lead", "white space"),
        ("x" * 256, "256 characters"),
    ],
)
def test_names_that_cannot_travel_are_refused_with_the_reason(name: str, fragment: str) -> None:
    problem = name_problem(name)
    assert problem is not None and fragment in problem


@pytest.mark.parametrize("name", ["invoice_intake", "Month-End Close v2", "ünïcode.ok", "x" * 255])
def test_ordinary_names_are_allowed(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(
    "document",
    [
        b'{"a": "\\ud800"}',
        b'{"a": "\\uDFFF"}',
        b'{"a": "\\uDbFf"}',
        b'["\\udc00x"]',
        b'{"\\ud800": 1}',
        b'"\xed\xa0\x80"',  # the three bytes a surrogate would take in UTF-8
        b'"\xed\xbf\xbf"',
    ],
)
def test_every_spelling_of_a_surrogate_is_seen_and_found(document: bytes) -> None:
    value = json.loads(document)
    assert may_spell_surrogates(document)
    problem = surrogate_problem(value, "the body")
    assert problem is not None and "surrogate" in problem[0]


@pytest.mark.parametrize(
    "document",
    ['{"a": "plain"}', '{"a": "h\u00e9llo \\u00e9"}', '"\ud55c\uad6d\uc5b4"', '"\U0001f600"'],
)
def test_documents_that_cannot_hold_a_surrogate_are_cleared_without_parsing(
    document: str,
) -> None:
    """Unicode text, Korean (whose UTF-8 starts with the byte a surrogate's would) and
    escapes of other characters spell no surrogate."""
    assert not may_spell_surrogates(document.encode("utf-8"))
    assert surrogate_problem(json.loads(document)) is None


def test_a_surrogate_is_found_where_it_is_in_document_order() -> None:
    value = {"a": ["ok", {"b": "x\ud800"}], "c\udc00": 1, "d": "\udfff"}
    problem = surrogate_problem(value, "the body")
    assert problem is not None
    message, path = problem
    assert path == "$.a[1].b"
    assert message.startswith("the body holds U+D800 at $.a[1].b")
    assert surrogate_problem({"k\udc00": 1}) == (
        "value holds U+DC00 at $.k\\udc00, a UTF-16 surrogate that is not half of a pair: "
        "strings must be Unicode text",
        "$.k\\udc00",
    )
    # the message itself is text (an error body can carry it)
    message.encode("utf-8")
    assert surrogate_problem({"a": "\ud83d\ude00"}) is not None  # a pair, but unjoined
    assert surrogate_problem({"a": "\U0001f600"}) is None  # the pair joined: one character


def test_a_surrogate_far_deeper_than_the_recursion_limit_is_found() -> None:
    deep = _nested(100_000)
    node = deep
    while node:
        node = node[0]  # type: ignore[assignment]
    node.append("\ud800")
    problem = surrogate_problem(deep)
    assert problem is not None and problem[1].endswith("...")


def test_nan_and_infinity_are_found_where_they_are() -> None:
    document = b'{"a": "NaN", "b": [1, 2.5, {"c": -Infinity}], "d": NaN}'
    assert needs_checking(document)
    assert non_number_problem(document, "the body") == (
        "the body holds -Infinity at $.b[2].c: JSON numbers must be finite",
        "$.b[2].c",
    )
    # as text they are text; large and small finite numbers are numbers
    assert non_number_problem(b'{"a": "NaN", "b": "Infinity", "c": 1e308, "d": -1e-308}') is None


def test_numbers_beyond_a_double_are_found_and_refused_by_loads_limited() -> None:
    """``1e999`` reads as an infinity in Python (and would be stored as null); an
    integer longer than Python reads raised a bare ValueError."""
    document = b'{"ok": [1e308, -1e-999, "1e999"], "bad": {"x": -1E+309}}'
    assert needs_checking(document)
    assert non_number_problem(document) == (
        "value holds -1E+309 at $.bad.x: the number is beyond the range of a double "
        "(about 1.8e308)",
        "$.bad.x",
    )
    with pytest.raises(NotFiniteNumber) as refused:
        loads_limited(document.decode(), what="the answer")
    assert refused.value.path == "$.bad.x" and str(refused.value).startswith("the answer holds")
    with pytest.raises(NotFiniteNumber, match=r"an integer of 4301 digits at \$\.n"):
        loads_limited(b'{"n": ' + b"1" * 4301 + b"}")
    assert loads_limited(b'{"n": ' + b"1" * 4300 + b"}") == {"n": int("1" * 4300)}
    assert loads_limited('{"a": "1e999", "b": 1.5}') == {"a": "1e999", "b": 1.5}
    for alone in (b"1e999", " -1E+400", b"9" * 309 + b".5"):
        with pytest.raises(NotFiniteNumber):
            loads_limited(alone)


def test_most_documents_need_no_check() -> None:
    assert not needs_checking(b'{"taskId": "t", "status": "COMPLETED", "outputData": {"x": 1.5}}')
    # ids whose hex spells an exponent are text, not numbers: a result naming them stays
    # on the Task API's fast path
    ids = b'{"taskId": "3f2be123-4e56-8e901e234", "outputData": {"n": 1e30, "m": [2E-999]}}'
    assert not needs_checking(ids)
    assert needs_checking(b'{"n": [1, 1e309]}') and needs_checking(b'{"n": -2.5E+400}')
    # a document that is the number alone (an HTTP answer's body may be)
    assert needs_checking(b"1e999") and needs_checking(b" -1E+400")
    assert needs_checking(b'{"a": NaN}')
    assert needs_checking(b'{"a": "\\ud800"}')
    assert needs_checking(b"[" * (MAX_JSON_DEPTH + 1))


def test_nul_is_found_where_it_is() -> None:
    assert needs_checking(b'{"a": "\\u0000"}')
    assert nul_problem({"a": ["ok", {"b": "x\x00"}]}, "the body") == (
        "the body holds the NUL character (\\u0000) at $.a[1].b: strings must not hold it",
        "$.a[1].b",
    )
    assert nul_problem({"k\x00": 1}) is not None
    assert nul_problem({"k\x00": 1})[1] == "$.k\\u0000"  # type: ignore[index]
    assert nul_problem({"a": "\\u0000"}) is None  # a backslash, then u0000


def test_text_no_store_can_keep_is_found_in_values_the_engine_made() -> None:
    output = {"response": {"statusCode": 200, "body": {"a": ["ok", "x\x00y"]}}}
    assert unstorable_text_problem(output, "the output") == (
        "the output holds the NUL character (\\u0000) at $.response.body.a[1]: strings "
        "must not hold it",
        "$.response.body.a[1]",
    )
    assert unstorable_text_problem({"s": "a\ud800"}) is not None
    assert unstorable_text_problem({"s": "\\u0000", "n": 1.5, "e": "\U0001f600"}) is None
