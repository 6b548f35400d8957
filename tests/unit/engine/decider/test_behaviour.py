"""A run keeps the interpreter behaviour it was started under (protocol.runs.BEHAVIOUR):
a run started before ``asyncComplete`` and ``permissive`` were acted on (behaviour 0)
is decided as it was, so that its history replays after an upgrade."""

from __future__ import annotations

from typing import Any

from engine.language.definitions import RunStatus
from tests.unit.engine.decider.test_decider import Sim, decider, t


def _sim(behaviour: int, *tasks: dict[str, Any], **defs: dict[str, Any]) -> Sim:
    return Sim(decider(*tasks, defs=defs), behaviour=behaviour)


def test_permissive_lets_the_run_go_on_only_from_behaviour_1() -> None:
    for behaviour, pending, finished in ((1, ["b"], None), (0, [], RunStatus.FAILED)):
        sim = _sim(behaviour, t("a", permissive=True), t("b"), a={"retryCount": 0})
        sim.fail("a")
        assert sim.pending == pending, behaviour
        assert (sim.finished.status if sim.finished else None) == finished, behaviour


def test_async_complete_marks_the_call_only_from_behaviour_1() -> None:
    call = t("call", "HTTP", asyncComplete=True, inputParameters={"uri": "http://x.invalid"})
    assert _sim(1, call).actions["call"].async_complete
    assert not _sim(0, call).actions["call"].async_complete
