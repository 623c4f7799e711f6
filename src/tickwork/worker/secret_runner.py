"""Secrets reach a task only here, on the worker, right before the attempt runs.

``SecretRunner`` wraps the runner of each task kind: it resolves ``{"$secret": NAME}`` in
the task run's config (``security.secrets.resolve_secrets``), and masks the resolved values,
and every value of a secret-named env variable or header, in what the task writes to its
log and in its error, so a task that prints its secrets leaves ``***`` in the run log; what
merely looks secret (URL userinfo, ``token=...``) is masked too. A missing secret or a
process without the key fails the attempt, naming the secret; nothing runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace

from tickwork.core.errors import NotFound
from tickwork.core.model import TaskKind, TaskRun
from tickwork.ports import LogSink, Runner, RunResult, SecretStore
from tickwork.security.masking import MASK, mask_text, secret_name
from tickwork.security.secrets import SecretCipher, SecretKeyError, resolve_secrets

#: Values shorter than this are not masked in output: "1" or "on" would blank out logs.
MIN_MASKED = 4


class MaskingSink:
    """A ``LogSink`` that writes ``***`` for each of ``values`` found in the output, and
    masks what looks secret (URL userinfo, ``token=...``: ``mask_text``)."""

    def __init__(self, inner: LogSink, values: Iterable[str]) -> None:
        self._inner = inner
        # Longest first, so a value containing another is masked whole.
        self._values = sorted({v for v in values if len(v) >= MIN_MASKED}, key=len, reverse=True)

    def write(self, stream: str, data: str) -> None:
        self._inner.write(stream, self.mask(data))

    def mask(self, data: str) -> str:
        for value in self._values:
            if value in data:
                data = data.replace(value, MASK)
        return mask_text(data)


class SecretRunner:
    """A ``Runner`` that resolves secrets for ``inner`` and masks them in its output."""

    def __init__(self, inner: Runner, store: SecretStore, cipher: SecretCipher | None) -> None:
        self._inner, self._store, self._cipher = inner, store, cipher
        # The last config found to refer to no secret, and its secret-named values: the task
        # runs of one claim share one config object, and nothing changes one in place.
        self._plain: tuple[Mapping[str, object], list[str]] | None = None

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        plain = self._plain
        values: list[str] = []
        if plain is not None and plain[0] is task_run.config:
            config, named = task_run.config, plain[1]
        else:
            try:
                config, values = await resolve_secrets(self._store, self._cipher, task_run.config)
            except NotFound as e:
                return RunResult(ok=False, error=f"secret {e.key!r} does not exist")
            except SecretKeyError as e:
                return RunResult(ok=False, error=str(e))
            named = _named_values(config)
            if not values:
                self._plain = (config, named)
        sink = MaskingSink(log, [*values, *named])
        resolved = replace(task_run, config=config) if values else task_run
        result = await self._inner.run(resolved, sink, cancel)
        if result.error:  # stored, shown by the API and sent to callbacks
            result = replace(result, error=sink.mask(result.error))
        return result


def _named_values(config: Mapping[str, object]) -> list[str]:
    found: list[str] = []
    auth = config.get("url_auth")
    if isinstance(auth, str):  # resolved user:password: its password alone is masked too
        found += auth.split(":", 1)
    for key in ("env", "headers"):
        named = config.get(key)
        if isinstance(named, Mapping):
            found += [v for k, v in named.items() if secret_name(k) and isinstance(v, str)]
    return found


def with_secrets(
    runners: Mapping[TaskKind, Runner], store: SecretStore, cipher: SecretCipher | None
) -> dict[TaskKind, Runner]:
    """Every runner of ``runners`` wrapped in a ``SecretRunner``."""
    return {kind: SecretRunner(runner, store, cipher) for kind, runner in runners.items()}
