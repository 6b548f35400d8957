"""Handler binding and validation, run over real HTTP against the fake Task API."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field
from stepway_worker import InProgress, Registry, TaskContext, TerminalError, worker_task
from stepway_worker.context import TaskContext as Ctx


class Invoice(BaseModel):
    number: str
    amount: float = Field(gt=0)


class Parsed(BaseModel):
    text: str
    pages: int


def _ctx(data: dict[str, Any]) -> Ctx:
    return Ctx(task_id="t1", task_type="x", input=data)


def test_parameters_bind_by_name_and_camel_case(reg: Registry) -> None:
    @worker_task("a", registry=reg)
    def handler(url: str, page_limit: int = 10, **rest: Any) -> dict[str, Any]:
        return {"url": url, "limit": page_limit, "rest": rest}

    out = reg.get("a").execute(_ctx({"url": "u", "pageLimit": "3", "extra": 1}))  # type: ignore[union-attr]
    assert out.status == "COMPLETED"
    assert out.output == {"url": "u", "limit": 3, "rest": {"extra": 1}}


def test_missing_or_invalid_field_is_a_terminal_error_naming_it(reg: Registry) -> None:
    @worker_task("a", registry=reg)
    def handler(url: str, pages: int) -> dict[str, Any]:
        return {}

    h = reg.get("a")
    assert h is not None
    out = h.execute(_ctx({"pages": "many"}))
    assert out.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "url: Field required" in (out.reason or "")
    assert "pages: Input should be a valid integer" in (out.reason or "")


def test_pydantic_model_takes_the_whole_input_and_return_model_is_dumped(reg: Registry) -> None:
    @worker_task("inv", registry=reg)
    def handler(invoice: Invoice) -> Parsed:
        return Parsed(text=invoice.number, pages=int(invoice.amount))

    h = reg.get("inv")
    assert h is not None
    assert h.execute(_ctx({"number": "N1", "amount": 2})).output == {"text": "N1", "pages": 2}
    # the same model also binds from a key named like the parameter
    assert h.execute(_ctx({"invoice": {"number": "N2", "amount": 1}})).output["text"] == "N2"
    bad = h.execute(_ctx({"number": "N1", "amount": -1}))
    assert bad.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "amount" in (bad.reason or "")


def test_return_model_validates_a_returned_dict(reg: Registry) -> None:
    @worker_task("p", registry=reg)
    def handler() -> Parsed:
        return {"text": "x", "pages": "lots"}  # type: ignore[return-value]

    out = reg.get("p").execute(_ctx({}))  # type: ignore[union-attr]
    assert out.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "invalid output" in (out.reason or "") and "pages" in (out.reason or "")


def test_context_scalars_async_and_errors(reg: Registry) -> None:
    @worker_task("c", registry=reg)
    def with_ctx(ctx: TaskContext, n: int) -> int:
        return n + len(ctx.task_id)

    @worker_task("async", registry=reg)
    async def run_async(n: int) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": n}

    @worker_task("boom", registry=reg)
    def boom() -> None:
        raise ValueError("no luck")

    @worker_task("term", registry=reg)
    def term() -> None:
        raise TerminalError("account closed")

    @worker_task("later", registry=reg)
    def later() -> InProgress:
        return InProgress(callback_after_seconds=7, output={"cursor": 3})

    def run(t: str, data: dict[str, Any]):  # type: ignore[no-untyped-def]
        h = reg.get(t)
        assert h is not None
        return h.execute(_ctx(data))

    assert run("c", {"n": 1}).output == {"result": 3}
    assert run("async", {"n": 2}).output == {"n": 2}
    failed = run("boom", {})
    assert (failed.status, failed.reason) == ("FAILED", "ValueError: no luck")
    assert "Traceback" in failed.logs[0] and "no luck" in failed.logs[0]
    terminal = run("term", {})
    assert (terminal.status, terminal.reason) == ("FAILED_WITH_TERMINAL_ERROR", "account closed")
    progress = run("later", {})
    assert (progress.status, progress.callback_after_seconds) == ("IN_PROGRESS", 7)
    assert progress.output == {"cursor": 3}


def test_validation_error_is_posted_as_terminal_over_http(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    @worker_task("parse_pdf", registry=reg)
    def parse_pdf(url: str) -> dict[str, Any]:
        return {"text": url, "pages": 1}

    start_worker()
    ok = server.enqueue("parse_pdf", {"url": "file:///a.pdf"})
    bad = server.enqueue("parse_pdf", {"uri": "typo"})
    assert server.wait_result(ok)["outputData"] == {"text": "file:///a.pdf", "pages": 1}
    result = server.wait_result(bad)
    assert result["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert "url: Field required" in result["reasonForIncompletion"]
    assert result["workerId"] == "test-worker"
    assert result["workflowInstanceId"] == "wf-1"
