"""Activity inputs encoded once: the converter passes them through, an activity reads
either form."""

from __future__ import annotations

import json

from durabletask.serialization import JsonDataConverter

from engine.runtime.activity_io import CheckInput
from engine.runtime.encoded_json import EncodedJsonConverter, encode, parse


def test_an_encoded_input_reaches_the_backend_as_it_is_and_reads_back() -> None:
    check = CheckInput(workflow_id="wf", task_id="t", attempt=2)
    text = encode(check)
    assert json.loads(text) == {"workflowId": "wf", "taskId": "t", "attempt": 2}  # no traceparent
    wire = EncodedJsonConverter().serialize(text)
    assert wire == text
    assert parse(CheckInput, EncodedJsonConverter().deserialize(wire)) == check


def test_an_activity_reads_the_text_a_worker_without_the_converter_sends() -> None:
    check = CheckInput(workflow_id="wf", task_id="t", attempt=1, traceparent="00-a-b-01")
    plain = JsonDataConverter()  # durabletask's own
    received = plain.deserialize(plain.serialize(encode(check)))
    assert isinstance(received, str)
    assert parse(CheckInput, received) == check
