"""The live web dashboard, served at ``/`` by the API process: server-rendered pages, our own
small ES modules and CSS, SVG drawn in Python, live updates over Server-Sent Events."""

from tickwork.dashboard.site import end_streams_on_exit, with_dashboard

__all__ = ["end_streams_on_exit", "with_dashboard"]
