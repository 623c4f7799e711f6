"""Callbacks in request and response bodies: ``{"on_failure": {"kind": "http", "url": ...}}``.

The same shape goes in and comes out, and it is the shape of a definition file. Shape is
checked here; meaning (a URL with a host, an import path) by the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tickwork.api.schemas.secret_ref import RefMap, UrlAuth
from tickwork.core.model import Callback, CallbackEvent, Callbacks, TaskKind
from tickwork.security.masking import mask_config


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class HttpCallbackIn(_Input):
    """A webhook: ``url`` is called when the event happens."""

    kind: Literal["http"]
    url: str = Field(examples=["https://hooks.example.org/tickwork"])
    url_auth: UrlAuth = None
    headers: RefMap = Field(default_factory=dict)


class PythonCallbackIn(_Input):
    """Calls ``module:function`` when the event happens; saving one needs an `admin` token."""

    kind: Literal["python"]
    target: str = Field(examples=["mypkg.hooks:notify"])


CallbackIn = Annotated[HttpCallbackIn | PythonCallbackIn, Field(discriminator="kind")]


class CallbacksIn(_Input):
    """Hooks by event. A task's hook wins over its job's for the same event; a hook never
    changes a run's outcome."""

    on_failure: CallbackIn | None = Field(None, description="After the last attempt failed.")
    on_success: CallbackIn | None = Field(None, description="After an attempt succeeded.")
    on_retry: CallbackIn | None = Field(None, description="After a failed attempt that retries.")
    on_missed: CallbackIn | None = Field(
        None, description="Job only: a tick's run did not start within `start_deadline`."
    )
    on_sla_miss: CallbackIn | None = Field(
        None, description="Job only: a tick's run did not finish within `sla`."
    )

    def to_core(self) -> Callbacks:
        hooks: dict[CallbackEvent, Callback] = {}
        for event in CallbackEvent:
            hook: HttpCallbackIn | PythonCallbackIn | None = getattr(self, event.value)
            if hook is not None:
                config = hook.model_dump(exclude={"kind"}, exclude_unset=True)
                hooks[event] = Callback(kind=TaskKind(hook.kind), config=config)
        return hooks


def callbacks_core(body: CallbacksIn | None) -> Callbacks:
    """The core value of an optional ``callbacks`` field (none: no hooks)."""
    return {} if body is None else body.to_core()


def callbacks_plain(value: Any) -> Any:
    """``Callbacks`` as the JSON the API shows (the input shape); anything else unchanged."""
    if not isinstance(value, Mapping):
        return value
    return {
        str(event): {"kind": hook.kind.value, **mask_config(hook.config)}
        if isinstance(hook, Callback)
        else hook
        for event, hook in value.items()
    }


#: How callbacks read in responses: event -> ``{kind, url, headers}`` or ``{kind, target}``.
CallbacksRead = dict[CallbackEvent, dict[str, Any]]
