"""podmedic's Temporal client over TLS and mTLS, against the dev server behind a TLS proxy.

The Temporal CLI's dev server (``temporal server start-dev``, CLI 1.9.1 here) has no TLS options, so
TLS is terminated by the test's own proxy (tests/security/tls_proxy.py), which requires and verifies
a client certificate as a Temporal frontend with ``requireClientAuth: true`` does; what reaches the
dev server behind it is plain gRPC.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.testing import WorkflowEnvironment

from podmedic.temporal.connect import connect
from podmedic.temporal.security import TemporalSecurity
from tests.security.certs import Pki, make_pki
from tests.security.tls_proxy import TlsProxy

pytestmark = pytest.mark.asyncio(loop_scope="session")
SERVER = "temporal.podmedic.test"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), server_name=SERVER)


@pytest_asyncio.fixture(loop_scope="session")
async def proxy(pki: Pki, dev_env: WorkflowEnvironment) -> AsyncIterator[TlsProxy]:
    tls_proxy = TlsProxy(pki, dev_env.client.service_client.config.target_host)
    await tls_proxy.start()
    yield tls_proxy
    await tls_proxy.close()


def _env(pki: Pki, *, client_cert: bool = True, ca: Path | None = None) -> dict[str, str]:
    env = {"PODMEDIC_TEMPORAL_TLS_CA": str(ca or pki.ca), "PODMEDIC_TEMPORAL_TLS_SERVER_NAME": SERVER}
    if client_cert:
        env |= {"PODMEDIC_TEMPORAL_TLS_CERT": str(pki.client_cert), "PODMEDIC_TEMPORAL_TLS_KEY": str(pki.client_key)}
    return env


async def test_mtls_client_from_the_environment_reaches_temporal(pki: Pki, proxy: TlsProxy) -> None:
    security = TemporalSecurity.from_env(_env(pki))
    assert security.describe().startswith("TLS mTLS")
    before = proxy.accepted
    client = await connect(f"127.0.0.1:{proxy.port}", security=security)
    found = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
    assert found.namespace_info.name == "default"  # an answer from Temporal, through the mTLS connection
    assert proxy.accepted > before


# What each refusal looks like (the SDK's Rust core, rustls). In TLS 1.3 the client's side of the handshake
# is done before the server checks for a client certificate, so a server that requires one hangs up after
# it: the client reads an end without close_notify, or, writing first, a broken pipe or a connection reset,
# or, when its HTTP/2 preface already went out, hyper's "connection closed" (all seen here, the last two on
# a loaded machine in CI). A client that does not trust the server's CA refuses the server's certificate in
# the handshake.
REFUSALS = {"no client certificate": "peer closed connection without sending TLS close_notify|"
                                     "stream closed because of a broken pipe|ConnectionReset|"
                                     r'hyper::Error\(Canceled, "connection closed"\)',
            "server signed by another CA": re.escape("InvalidCertificate(UnknownIssuer)")}


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_a_client_the_server_or_the_client_does_not_trust_cannot_connect(
    pki: Pki, proxy: TlsProxy, tmp_path: Path, case: str
) -> None:
    if case == "no client certificate":
        env = _env(pki, client_cert=False)
    else:
        env = _env(pki, ca=make_pki(tmp_path, server_name=SERVER, ca_name="another CA").ca)
    before = proxy.accepted
    with pytest.raises(RuntimeError, match=REFUSALS[case]):
        await asyncio.wait_for(connect(f"127.0.0.1:{proxy.port}", security=TemporalSecurity.from_env(env)), 30)
    assert proxy.accepted == before  # refused in the handshake: no byte reached Temporal


async def test_the_temporal_clis_own_variables_reach_temporal_over_mtls(pki: Pki, proxy: TlsProxy) -> None:
    """A shell set up for the ``temporal`` CLI is set up for podmedic: the variables of Temporal's
    client environment configuration (docs.temporal.io/references/client-environment-configuration),
    read by the SDK's ``temporalio.envconfig``, when no PODMEDIC_TEMPORAL_* variable is set."""
    env = {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca), "TEMPORAL_TLS_SERVER_NAME": SERVER,
           "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.client_cert), "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.client_key),
           "TEMPORAL_CONFIG_FILE": str(pki.ca.parent / "no-temporal.toml")}
    security = TemporalSecurity.from_env(env)
    assert security.describe().startswith("TLS mTLS"), security.describe()
    client = await connect(f"127.0.0.1:{proxy.port}", security=security)
    found = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
    assert found.namespace_info.name == "default"
    plain = TemporalSecurity.from_env({"TEMPORAL_CONFIG_FILE": str(pki.ca.parent / "no-temporal.toml")})
    assert plain.describe().startswith("TLS off")
    ours = TemporalSecurity.from_env({**env, "PODMEDIC_TEMPORAL_TLS": "0"})  # podmedic's own settings win
    assert ours.describe().startswith("TLS off")
