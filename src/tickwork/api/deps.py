"""Request dependencies: the services of the app, and the shared ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError

from tickwork.app.services import Services


def get_services(request: Request) -> Services:
    """The one Services instance the app was built with."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def single_query_values(request: Request) -> None:
    """Refuse a query parameter given more than once (none of the API's takes a list).

    Otherwise ``?paused=nonsense&paused=true`` would be read as ``paused=true``.
    """
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen:
            error = {"type": "repeated", "loc": ("query", key), "msg": "given more than once"}
            raise RequestValidationError([error])
        seen.add(key)


#: Added after the auth dependency on every API router.
SingleQueryValues = Depends(single_query_values)
