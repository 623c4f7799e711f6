"""Processes that serve: `tickwork up` (embedded) wires the runtime and the HTTP API together."""
