"""A storage URL is printed without its password."""

from __future__ import annotations

import pytest

from transfersearch.redact import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://tuner:s3cret@db-host:5432/proxy",
            "postgresql://tuner:***@db-host:5432/proxy",
        ),
        ("postgresql+psycopg://u:p@ss:w@rd@h/db", "postgresql+psycopg://u:***@h/db"),
        ("postgresql://tuner@db-host:5432/proxy", "postgresql://tuner@db-host:5432/proxy"),
        ("sqlite:///proxy.db", "sqlite:///proxy.db"),
        ("journal:///tmp/proxy.log", "journal:///tmp/proxy.log"),
        ("not a url", "not a url"),
    ],
)
def test_password_is_hidden_and_nothing_else_changes(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url) and "p@ss:w@rd" not in redact_url(url)
