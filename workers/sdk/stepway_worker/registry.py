"""``@worker_task``: register a handler and bind task input to its parameters."""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from stepway_worker.context import TaskContext, reset_current, set_current
from stepway_worker.results import InProgress, TerminalError

log = logging.getLogger("stepway_worker")

Status = Literal["COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "IN_PROGRESS"]
F = TypeVar("F", bound=Callable[..., Any])
MAX_REASON = 2000


@dataclass
class Outcome:
    """The result of running a handler once, before it is posted."""

    status: Status
    output: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    callback_after_seconds: int = 0
    extend_lease: bool = False
    logs: list[str] = field(default_factory=list)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _is_model(tp: Any) -> bool:
    return inspect.isclass(tp) and issubclass(tp, BaseModel)


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "(input)"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


class Handler:
    """A registered task handler: its binding model and its per-type options."""

    def __init__(
        self,
        task_type: str,
        fn: Callable[..., Any],
        *,
        threads: int | None = None,
        poll_interval: float | None = None,
        domain: str | None = None,
        payload_threshold: int | None = None,
    ) -> None:
        self.task_type = task_type
        self.fn = fn
        self.threads = threads
        self.poll_interval = poll_interval
        self.domain = domain
        self.payload_threshold = payload_threshold
        self._is_async = inspect.iscoroutinefunction(fn)
        hints = typing.get_type_hints(fn)
        sig = inspect.signature(fn)
        self._context_params: list[str] = []
        self._var_kw: str | None = None
        self._params: dict[str, str] = {}  # parameter name -> model field name
        fields: dict[str, Any] = {}
        for name, param in sig.parameters.items():
            ann = hints.get(name, Any)
            if ann is TaskContext:
                self._context_params.append(name)
                continue
            if param.kind is param.VAR_KEYWORD:
                self._var_kw = name
                continue
            if param.kind is param.VAR_POSITIONAL:
                continue
            default = ... if param.default is param.empty else param.default
            choices = [name] if _camel(name) == name else [name, _camel(name)]
            field_name = f"p_{name}"
            alias = AliasChoices(*choices)
            if isinstance(default, FieldInfo):  # def f(n: int = Field(default=5, ge=1))
                fields[field_name] = (Annotated[ann, default], Field(validation_alias=alias))
            else:
                fields[field_name] = (ann, Field(default, validation_alias=alias))
            self._params[name] = field_name
        self._model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{task_type}_input",
            __config__=ConfigDict(extra="ignore", arbitrary_types_allowed=True),
            **fields,
        )
        # one model-typed parameter may take the whole input
        self._whole: tuple[str, type[BaseModel]] | None = None
        if len(self._params) == 1:
            (only,) = self._params
            if _is_model(hints.get(only)):
                self._whole = (only, hints[only])
        ret = hints.get("return")
        self._return_model: type[BaseModel] | None = ret if _is_model(ret) else None

    def __repr__(self) -> str:
        return f"Handler({self.task_type!r}, {self.fn.__qualname__})"

    def bind(self, data: dict[str, Any], ctx: TaskContext | None = None) -> dict[str, Any]:
        """Keyword arguments for the handler; raises ``ValidationError``."""
        kwargs: dict[str, Any] = {}
        if self._whole is not None and self._whole[0] not in data:
            name, model = self._whole
            kwargs[name] = model.model_validate(data)
        else:
            validated = self._model.model_validate(data)
            for name, field_name in self._params.items():
                kwargs[name] = getattr(validated, field_name)
        if self._var_kw is not None:
            taken = set(self._params) | {_camel(p) for p in self._params}
            for key, value in data.items():
                if key not in taken and key.isidentifier() and key not in kwargs:
                    kwargs[key] = value
        for name in self._context_params:
            kwargs[name] = ctx
        return kwargs

    def _output(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if self._return_model is not None and not isinstance(value, BaseModel):
            value = self._return_model.model_validate(value)
        if isinstance(value, BaseModel):
            dumped = value.model_dump(mode="json", by_alias=True)
            return dumped if isinstance(dumped, dict) else {"result": dumped}
        jsonable = to_jsonable_python(value)
        return jsonable if isinstance(jsonable, dict) else {"result": jsonable}

    def execute(self, ctx: TaskContext) -> Outcome:
        """Run the handler on the context's input and turn what happens into an
        ``Outcome``. Never raises."""
        try:
            kwargs = self.bind(ctx.input, ctx)
        except ValidationError as exc:
            return Outcome(
                "FAILED_WITH_TERMINAL_ERROR",
                reason=f"invalid input for {self.task_type}: {describe_validation_error(exc)}"[
                    :MAX_REASON
                ],
            )
        token = set_current(ctx)
        try:
            value = asyncio.run(self.fn(**kwargs)) if self._is_async else self.fn(**kwargs)
        except TerminalError as exc:
            return Outcome(
                "FAILED_WITH_TERMINAL_ERROR", reason=(str(exc) or type(exc).__name__)[:MAX_REASON]
            )
        except Exception as exc:
            text = str(exc)
            reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            return Outcome("FAILED", reason=reason[:MAX_REASON], logs=[traceback.format_exc()])
        finally:
            reset_current(token)
        try:
            if isinstance(value, InProgress):
                return Outcome(
                    "IN_PROGRESS",
                    output=self._output(value.output),
                    callback_after_seconds=max(0, int(value.callback_after_seconds)),
                    extend_lease=bool(value.extend_lease),
                )
            return Outcome("COMPLETED", output=self._output(value))
        except ValidationError as exc:
            return Outcome(
                "FAILED_WITH_TERMINAL_ERROR",
                reason=f"invalid output of {self.task_type}: {describe_validation_error(exc)}"[
                    :MAX_REASON
                ],
            )
        except Exception as exc:
            return Outcome(
                "FAILED",
                reason=f"output of {self.task_type} is not JSON: {exc}"[:MAX_REASON],
                logs=[traceback.format_exc()],
            )


class Registry:
    """Task type -> handler. ``worker_task`` registers into the default one."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def add(self, handler: Handler) -> None:
        existing = self._handlers.get(handler.task_type)
        if existing is not None and existing.fn is not handler.fn:
            raise ValueError(f"task type {handler.task_type!r} already has a handler: {existing!r}")
        self._handlers[handler.task_type] = handler

    def get(self, task_type: str) -> Handler | None:
        return self._handlers.get(task_type)

    def handlers(self) -> list[Handler]:
        return list(self._handlers.values())

    def task_types(self) -> list[str]:
        return list(self._handlers)

    def clear(self) -> None:
        self._handlers.clear()

    def __len__(self) -> int:
        return len(self._handlers)

    def __contains__(self, task_type: object) -> bool:
        return task_type in self._handlers


registry = Registry()


def worker_task(
    task_type: str,
    *,
    threads: int | None = None,
    poll_interval: float | None = None,
    domain: str | None = None,
    payload_threshold: int | None = None,
    registry: Registry | None = None,
) -> Callable[[F], F]:
    """Register ``fn`` as the handler of ``task_type``.

    Parameters are bound by name from the task input (``snake_case`` parameters also
    accept the ``camelCase`` key), converted and validated by pydantic from their
    annotations; a single parameter annotated with a pydantic model receives the whole
    input. A parameter annotated ``TaskContext`` receives the task context. Options
    given here are overridden by ``STEPWAY_TASK_<TYPE>_*`` environment variables.
    """
    target = registry if registry is not None else globals()["registry"]

    def decorate(fn: F) -> F:
        target.add(
            Handler(
                task_type,
                fn,
                threads=threads,
                poll_interval=poll_interval,
                domain=domain,
                payload_threshold=payload_threshold,
            )
        )
        return fn

    return decorate
