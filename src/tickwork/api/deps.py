"""Request dependencies: the services of the app, and the shared ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tickwork.app.services import Services


def get_services(request: Request) -> Services:
    """The one Services instance the app was built with."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
