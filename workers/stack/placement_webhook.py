"""The placement webhook in ``podmedic up``: registered with the local API server, then served.

In a cluster the webhook is a Deployment behind a Service (deploy/); here it is a child process on
a local port, registered by URL, with the same configuration otherwise
(``workers.admission.registration``). It writes its self-signed CA into the configuration at
start, as it does in a cluster, so the simulator calls it over verified TLS.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from workers.admission.registration import PATH, placement_webhook_configuration

CONFIGURATION = "podmedic-placement"
NAMESPACE = "podmedic"
"""The namespace podmedic's own pods would run in: never sent to the webhook, as in deploy/."""
COLLECTION = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _send(method: str, url: str, body: object | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10):
        return


def register(api_url: str, port: int) -> None:
    """Create the configuration for a webhook on 127.0.0.1:``port``, replacing one a previous start left."""
    config = placement_webhook_configuration(CONFIGURATION, {"url": f"https://127.0.0.1:{port}{PATH}"},
                                             [NAMESPACE, "kube-system"])
    try:
        _send("DELETE", f"{api_url}{COLLECTION}/{CONFIGURATION}")
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise
    _send("POST", f"{api_url}{COLLECTION}", config)


def argv(kubeconfig: Path, port: int, state_dir: Path) -> list[str]:
    """``podmedic admission``'s flags: serve on ``port``, self-signed for 127.0.0.1, CA into the configuration."""
    return ["admission", "--kubeconfig", str(kubeconfig), "--listen", f"127.0.0.1:{port}",
            "--self-signed-dir", str(state_dir / "admission-tls"), "--extra-names", "127.0.0.1",
            "--service-namespace", NAMESPACE, "--webhook-configuration", CONFIGURATION]
