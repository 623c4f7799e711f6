"""Operations for operators: pools, tokens and secrets (admin) and the health check."""

from __future__ import annotations

from typing import Any, Literal

from tickwork.sdk.calls import Call, operation, seg
from tickwork.sdk.types import PoolInfo, SecretInfo, TokenInfo, TokenSecret


class AdminOperations:
    """The pool, token and health operations of both clients."""

    @operation
    def set_pool(name: str, slots: int, description: str | None = None) -> Call[PoolInfo]:
        """Create a pool or change its slots, and its description when one is given (needs an
        admin token)."""
        body: dict[str, Any] = {"slots": slots}
        if description is not None:
            body["description"] = description
        return Call("PUT", f"/pools/{seg(name)}", json=body)

    @operation
    def list_pools() -> Call[list[PoolInfo]]:
        """Every pool by name, with the slots in use (``used``)."""
        return Call("GET", "/pools", pick="pools")

    @operation
    def get_pool(name: str) -> Call[PoolInfo]:
        return Call("GET", f"/pools/{seg(name)}")

    @operation
    def delete_pool(name: str) -> Call[None]:
        """Delete a pool (needs an admin token); tasks that declare it wait for a new one."""
        return Call("DELETE", f"/pools/{seg(name)}")

    # -- tokens (admin) ----------------------------------------------------------------------

    @operation
    def create_token(name: str, scope: Literal["read", "write", "admin"]) -> Call[TokenSecret]:
        """A new token; its ``secret`` is in this result only."""
        return Call("POST", "/tokens", json={"name": name, "scope": scope})

    @operation
    def list_tokens() -> Call[list[TokenInfo]]:
        """Every token (never a secret), revoked ones included."""
        return Call("GET", "/tokens", pick="tokens")

    @operation
    def revoke_token(id_or_name: str) -> Call[TokenInfo]:
        return Call("DELETE", f"/tokens/{seg(id_or_name)}")

    # -- secrets (admin) ---------------------------------------------------------------------

    @operation
    def set_secret(name: str, value: str) -> Call[SecretInfo]:
        """Create or replace a secret; tasks refer to it as ``{"$secret": name}``. Its value
        is never shown again."""
        return Call("PUT", f"/secrets/{seg(name)}", json={"value": value})

    @operation
    def list_secrets() -> Call[list[SecretInfo]]:
        """Every secret's name and times (never a value)."""
        return Call("GET", "/secrets", pick="secrets")

    @operation
    def delete_secret(name: str) -> Call[None]:
        return Call("DELETE", f"/secrets/{seg(name)}")

    @operation
    def health() -> Call[dict[str, str]]:
        return Call("GET", "/healthz", prefix="")

    @operation
    def status() -> Call[dict[str, Any]]:
        """The leader and standbys, workers, queues and warnings (``tickwork status``)."""
        return Call("GET", "/status")
