"""Wiring: builds services and runtimes from settings. The only layer that reads config."""
