"""Ingest settings: defaults, and refusals naming the field path and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.ingest.settings import IngestSettings, SettingsError, load_ingest_settings, parse_ingest_settings


def errors(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SettingsError) as caught:
        parse_ingest_settings(text, "test.yaml")
    return caught.value.errors


def test_no_file_and_an_empty_file_are_the_defaults() -> None:
    assert load_ingest_settings(None) == IngestSettings() == parse_ingest_settings("")
    http = IngestSettings().http
    assert (http.host, http.port, http.max_body_bytes, http.max_batch) == ("127.0.0.1", 8088, 1 << 20, 1000)
    assert http.token_env == "PODMEDIC_INGEST_TOKEN" and not http.allow_unauthenticated
    assert (IngestSettings().dedup.ttl_s, IngestSettings().dedup.max_entries) == (300, 200_000)


def test_a_full_file_is_read() -> None:
    s = parse_ingest_settings("""
http: {host: 0.0.0.0, port: 9000, token_file: /run/token, max_batch: 50,
       tls_cert_file: /tls/crt.pem, tls_key_file: /tls/key.pem}
dedup: {ttl_s: 60}
alertmanager: {driver: gpu.amd.com}
state_dir: /var/lib/podmedic
""")
    assert (s.http.port, s.http.max_batch, s.dedup.ttl_s, s.alertmanager.driver) == (9000, 50, 60, "gpu.amd.com")
    assert s.http.token_file == Path("/run/token") and s.state_dir == Path("/var/lib/podmedic")


@pytest.mark.parametrize(("text", "where", "says"), [
    ("http: {port: 70000}", "http.port", "less than or equal to 65535"),
    ("http: {max_batch: 0}", "http.max_batch", "greater than or equal to 1"),
    ("http: {max_body: 10}", "http.max_body", "Extra inputs"),
    ("dedup: {ttl_s: -1}", "dedup.ttl_s", "greater than or equal to 0"),
    ("http: {tls_cert_file: /a.pem}", "http", "set both or neither"),
    ("alertmanager: {rules: {X: {health: Healthy}}}", "alertmanager.rules.X.health", "Unhealthy"),
    ("listen: 8088", "listen", "Extra inputs"),
    ("- a list", "(top)", "must be a mapping"),
    ("http: {port: [1", "line 1, column 16", "not valid YAML"),
])
def test_bad_settings_name_the_field_and_the_reason(text: str, where: str, says: str) -> None:
    found = errors(text)
    assert any(w == where and says in what for w, what in found), found


def test_every_problem_is_listed_at_once() -> None:
    assert {w for w, _ in errors("http: {port: -1, max_batch: 0}\ndedup: {max_entries: 0}")} == {
        "http.port", "http.max_batch", "dedup.max_entries"}


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read") as caught:
        load_ingest_settings(tmp_path / "absent.yaml")
    assert str(tmp_path / "absent.yaml") in str(caught.value)
