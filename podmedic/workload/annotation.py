"""Method ``annotation``: watch the pod's own annotations, save, and answer on the pod.

The pod's annotations come from a downward-API volume file (no API read needed) or from
the API server; the answer is a merge patch of the pod, so the pod's service account needs
``patch`` on ``pods`` in its namespace (and ``get`` when no downward-API file is used).
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import urllib.request
from pathlib import Path
from typing import Any

from podmedic.workload.protocol import ACK, CHECKPOINT_ID, ERROR, LOCATION, REQUEST, Save, read_annotations

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiServer:
    """The few calls the responder makes to the Kubernetes API (stdlib HTTP)."""

    def __init__(self, url: str, token: str | None = None, ca_file: str | None = None, timeout_s: float = 10.0):
        self.url = url.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
        self.timeout_s = timeout_s

    @classmethod
    def in_cluster(cls) -> ApiServer:
        """The API server and service-account token every pod gets."""
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = (SERVICE_ACCOUNT / "token").read_text().strip()
        return cls(f"https://{host}:{port}", token, str(SERVICE_ACCOUNT / "ca.crt"))

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None,
              ctype: str = "application/json") -> dict[str, Any]:
        headers = {"Accept": "application/json", "Content-Type": ctype}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout_s, context=self.context) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
            return answer

    def pod_annotations(self, namespace: str, name: str) -> dict[str, str]:
        """A pod's annotations, read from the API."""
        pod = self._send("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        notes: dict[str, str] = pod.get("metadata", {}).get("annotations") or {}
        return notes

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        """Merge-patch a pod's annotations (``None`` removes one)."""
        self._send("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}",
                   {"metadata": {"annotations": annotations}}, "application/merge-patch+json")


class AnnotationResponder:
    """Answers ``podmedic.io/checkpoint-request`` on its own pod by calling ``save`` once per request id."""

    def __init__(self, save: Save, api: ApiServer, namespace: str, pod: str,
                 annotations_file: str | Path | None = None):
        self.save, self.api, self.namespace, self.pod = save, api, namespace, pod
        self.annotations_file = annotations_file
        self.answered: set[str] = set()
        self._stop = threading.Event()

    @classmethod
    def in_cluster(cls, save: Save, annotations_file: str | None = "/etc/podinfo/annotations") -> AnnotationResponder:
        """Inside a pod: namespace and name from ``POD_NAMESPACE``/``POD_NAME`` (downward API env)."""
        return cls(save, ApiServer.in_cluster(), os.environ["POD_NAMESPACE"], os.environ["POD_NAME"],
                   annotations_file if annotations_file and Path(annotations_file).exists() else None)

    def annotations(self) -> dict[str, str]:
        """The pod's annotations now: the downward-API file when there is one, else the API."""
        if self.annotations_file is not None:
            return read_annotations(self.annotations_file)
        return self.api.pod_annotations(self.namespace, self.pod)

    def poll_once(self) -> str | None:
        """Answer a new request if there is one; returns the request id answered."""
        notes = self.annotations()
        request = notes.get(REQUEST)
        if not request or request in self.answered or notes.get(ACK) == request:
            return None
        answer: dict[str, str | None]
        try:
            checkpoint_id, location = self.save(request)
            answer = {ACK: request, CHECKPOINT_ID: str(checkpoint_id), LOCATION: str(location), ERROR: None}
        except Exception as err:  # tell podmedic it failed instead of letting it wait for the timeout
            answer = {ACK: request, ERROR: f"save failed: {err}"[:1000]}
        self.api.annotate_pod(self.namespace, self.pod, answer)
        self.answered.add(request)
        return request

    def run(self, interval_s: float = 1.0) -> None:
        """Poll until ``stop``; API hiccups are retried at the next poll."""
        while not self._stop.wait(interval_s):
            try:
                self.poll_once()
            except OSError:
                continue

    def start(self, interval_s: float = 1.0) -> AnnotationResponder:
        """Poll in a daemon thread; returns ``self``."""
        threading.Thread(target=self.run, args=(interval_s,), name="podmedic-annotation", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
