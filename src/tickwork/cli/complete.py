"""Shell completion from the server: job names, run ids and pool names.

Typer calls these while the shell completes a word (``tickwork --install-completion`` sets
it up). They talk to the server the command would (``--url``, ``--token``, ``TICKWORK_*``,
the config file) and complete nothing, silently, when it does not answer: a completion
must never print an error into the middle of a command line.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

from tickwork.cli.common import CliDeps, find_token
from tickwork.cli.options import settings_of
from tickwork.sdk import Client

#: Candidates asked of the server per completion.
LIMIT = 200


def complete_job(ctx: typer.Context, incomplete: str) -> list[str]:
    return _ask(
        ctx, lambda c: [j["name"] for j in c.list_jobs(limit=LIMIT, prefix=incomplete)["jobs"]]
    )


def complete_run(ctx: typer.Context, incomplete: str) -> list[str]:
    # Typer keeps only candidates that start with what was typed: a short id typed is
    # completed to the short id (every run command takes it), a whole id to the whole id.
    def runs(client: Client) -> list[str]:
        ids = [r["id"] for r in client.list_runs(limit=LIMIT)["runs"]]
        whole = [i for i in ids if i.startswith(incomplete)]
        return whole or [i[-8:] for i in ids if i[-8:].startswith(incomplete)]

    return _ask(ctx, runs)


def complete_pool(ctx: typer.Context, incomplete: str) -> list[str]:
    return _ask(
        ctx, lambda c: [p["name"] for p in c.list_pools() if p["name"].startswith(incomplete)]
    )


def _ask(ctx: typer.Context, fetch: Callable[[Client], list[str]]) -> list[str]:
    try:
        settings = settings_of(ctx)
        deps = ctx.find_object(CliDeps) or CliDeps()
        token = find_token(settings.token, settings.data_dir)
        with deps.make_client(settings.url, token) as client:
            return fetch(client)
    except (Exception, typer.Exit):  # the server is away, the token wrong: no candidates
        return []
