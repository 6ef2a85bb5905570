"""Reading the Temporal security settings from the environment: what turns on, what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from podmedic.temporal.security import SecurityError, TemporalSecurity


def test_api_key_turns_tls_on_unless_told_otherwise(tmp_path: Path) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text("secret-key\n")
    cloud = TemporalSecurity.from_env({"PODMEDIC_TEMPORAL_API_KEY_FILE": str(key_file)})
    assert cloud.api_key == "secret-key" and isinstance(cloud.tls, TLSConfig)
    assert "secret-key" not in cloud.describe()
    plain = TemporalSecurity.from_env({"PODMEDIC_TEMPORAL_API_KEY": "k", "PODMEDIC_TEMPORAL_TLS": "0"})
    assert plain.api_key == "k" and plain.tls is False
    assert TemporalSecurity.from_env({}).tls is False


@pytest.mark.parametrize(("env", "named"), [
    ({"PODMEDIC_TEMPORAL_TLS_CERT": "/x.pem"}, "go together"),
    ({"PODMEDIC_TEMPORAL_TLS_CA": "/nonexistent/ca.pem"}, "PODMEDIC_TEMPORAL_TLS_CA=/nonexistent/ca.pem: cannot read"),
    ({"PODMEDIC_TEMPORAL_TLS": "maybe"}, "PODMEDIC_TEMPORAL_TLS='maybe'"),
    ({"PODMEDIC_PAYLOAD_KEY_FILE": "/nonexistent/key"}, "PODMEDIC_PAYLOAD_KEY_FILE"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SecurityError, match=named.replace("(", r"\(").replace(".", r"\.")):
        TemporalSecurity.from_env(env)
