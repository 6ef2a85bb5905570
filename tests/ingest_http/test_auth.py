"""Bearer-token authentication: where the token comes from, and what is refused."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from workers.ingest.http.auth import AuthConfigError, BearerAuth, load_auth


def test_token_from_file_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    monkeypatch.setenv("TOKEN_X", "from-env")
    auth = load_auth(token_file, "TOKEN_X", allow_unauthenticated=False)
    assert auth.check("Bearer from-file") is None
    assert auth.check("Bearer from-env") == "invalid bearer token"


def test_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_X", "s3cret")
    auth = load_auth(None, "TOKEN_X", allow_unauthenticated=False)
    assert auth.check("Bearer s3cret") is None
    assert auth.check("bearer s3cret") is None  # the scheme is case-insensitive (RFC 7235)


@pytest.mark.parametrize(("header", "says"), [
    (None, "missing Authorization"),
    ("", "missing Authorization"),
    ("Basic dXNlcjpwYXNz", "Bearer scheme"),
    ("Bearer", "Bearer scheme"),
    ("Bearer s3cre", "invalid"),
    ("Bearer s3cret2", "invalid"),
])
def test_wrong_credentials_are_refused_with_a_reason(header: str | None, says: str) -> None:
    why = BearerAuth(b"s3cret", "test").check(header)
    assert why is not None and says in why


def test_no_token_refuses_to_start_and_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKEN_X", raising=False)
    with pytest.raises(AuthConfigError, match=r"TOKEN_X.*allow_unauthenticated"):
        load_auth(None, "TOKEN_X", allow_unauthenticated=False)


def test_missing_or_empty_token_file_is_an_error_not_a_fallback(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_X", "from-env")
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_auth(tmp_path / "absent", "TOKEN_X", allow_unauthenticated=True)
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(AuthConfigError, match="empty"):
        load_auth(tmp_path / "empty", "TOKEN_X", allow_unauthenticated=True)


def test_unauthenticated_only_when_asked_and_loudly(monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("TOKEN_X", raising=False)
    with caplog.at_level(logging.WARNING, logger="podmedic.ingest.http"):
        auth = load_auth(None, "TOKEN_X", allow_unauthenticated=True)
    assert auth.check(None) is None
    assert "UNAUTHENTICATED" in caplog.text
