"""Settings of every process: defaults < TOML file < environment < command-line options."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwork.app.settings import Settings, load_settings
from tickwork.core.errors import ValidationError


def test_precedence_toml_then_env_then_options(tmp_path: Path) -> None:
    config = tmp_path / "tickwork.toml"
    config.write_text(
        'database_url = "postgresql://db/one"\nconcurrency = 3\nqueues = ["a", "b"]\n'
        "lease_ttl = 7.5\n"
    )
    env = {"TICKWORK_CONCURRENCY": "5", "TICKWORK_REDIS_URL": "redis://r:6379/2"}

    settings = load_settings(config, env, lease_ttl=None, port=9000)

    assert settings.database_url == "postgresql://db/one"
    assert settings.concurrency == 5  # the environment beats the file
    assert settings.queues == ("a", "b")
    assert settings.lease_ttl == 7.5  # an option left unset (None) changes nothing
    assert settings.port == 9000
    assert settings.redis_url == "redis://r:6379/2"


def test_the_config_file_may_come_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('queues = "default, gpu"\n')

    assert load_settings(env={"TICKWORK_CONFIG": str(config)}).queues == ("default", "gpu")


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("concurrency = 'many'\n", "concurrency", "'many' is not a valid int"),
        ("colour = 'blue'\n", "config.colour", "unknown setting"),
        ("database_url = \n", "config", "is not valid TOML"),
        ("lease_ttl = true\n", "lease_ttl", "True is not a valid float"),
    ],
)
def test_bad_settings_name_the_field(tmp_path: Path, text: str, field: str, reason: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)

    with pytest.raises(ValidationError) as caught:
        load_settings(config, {})

    assert caught.value.field == field
    assert reason in caught.value.reason


def test_a_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read"):
        load_settings(tmp_path / "nope.toml", {})


def test_distributed_mode_refuses_a_database_that_is_not_postgresql() -> None:
    with pytest.raises(ValidationError, match="needs PostgreSQL"):
        Settings(database_url="sqlite:///x.db").require_database()
    assert Settings(database_url="postgresql://h/db").require_database()


def test_retention_keeps_everything_by_default_and_refuses_negative_days() -> None:
    assert load_settings(env={}).retention_days == 0  # 0: keep every run
    assert load_settings(env={"TICKWORK_RETENTION_DAYS": "90"}).retention_days == 90
    with pytest.raises(ValidationError) as caught:
        load_settings(env={"TICKWORK_RETENTION_DAYS": "-1"})
    assert caught.value.field == "retention_days"


def test_the_sdk_and_the_cli_default_to_the_same_server() -> None:
    from tickwork.app.settings import DEFAULT_URL
    from tickwork.sdk.clients import DEFAULT_URL as SDK_DEFAULT_URL

    assert SDK_DEFAULT_URL == DEFAULT_URL
