"""The HTTP API (FastAPI): thin routers over ``tickwork.app.services``."""
