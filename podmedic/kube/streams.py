"""The gateway's calls that are not one JSON request and answer: lists by page, watches, exec.

Lists page through ``continue`` tokens; watches decode lines as plain JSON; exec speaks the WebSocket channel protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from podmedic.domain.base import Obj
from podmedic.kube.core import GatewayCore, translate
from podmedic.kube.errors import KubeError, ServerError
from podmedic.kube.json_text import parse
from podmedic.kube.watch_lines import stream_lines


class StreamCalls(GatewayCore):
    """List/watch for the ingest's cluster sources and the caches, exec for restarts."""

    # -- generic list/watch for the ingest's cluster sources ---------------------------------
    def _lister(self, kind: str) -> Callable[..., Any]:
        if kind == "devicetaintrules":  # at the version discovery found; NotServed when none is
            found: Callable[..., Any] = self.taint_rule_calls().list_device_taint_rule
            return found
        listers: dict[str, Callable[..., Any]] = {
            "pods": self.core.list_pod_for_all_namespaces,
            "resourceslices": self.resource.list_resource_slice,
            "resourceclaims": self.resource.list_resource_claim_for_all_namespaces,
            "events": self.core.list_event_for_all_namespaces,
            "nodes": self.core.list_node,
        }
        if kind not in listers:
            known = ", ".join(sorted([*listers, "devicetaintrules"]))
            raise ValueError(f"kind {kind!r} cannot be watched; one of {known}")
        return listers[kind]

    def list_objects(self, kind: str, *, field_selector: str | None = None,
                     page_size: int = 500) -> tuple[list[Obj], str]:
        """Every object of ``kind`` (``pods``, ``resourceslices``, ``resourceclaims``, ``events``, ``nodes`` or
        ``devicetaintrules``) across all namespaces, page by page, as plain dicts, with the resourceVersion
        to watch from.

        The first page's resourceVersion is returned: a watch from it replays anything that
        changed while later pages were read, so nothing falls between the list and the watch.
        """
        items: list[Obj] = []
        version = ""
        for page, first_version in self.list_pages(kind, field_selector=field_selector, page_size=page_size):
            items.extend(page)
            version = first_version
        return items, version

    def list_pages(self, kind: str, *, field_selector: str | None = None,
                   page_size: int = 500) -> Iterator[tuple[list[Obj], str]]:
        """``list_objects`` one page at a time, each with the first page's resourceVersion: a caller
        that keeps less than the whole answer never holds it all at once."""
        lister = self._lister(kind)
        selector = {"field_selector": field_selector} if field_selector else {}
        token: str | None = None
        version = ""
        while True:
            paging: dict[str, Any] = {"limit": page_size, **({"_continue": token} if token else {})}
            data = self._read(f"list {kind}", lister, **selector, **paging)
            meta = data.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            yield data.get("items") or [], version
            if not token:
                return

    def watch_objects(self, kind: str, resource_version: str | None, *, timeout_s: int = 30,
                      field_selector: str | None = None,
                      on_connect: Callable[[], None] | None = None) -> Iterator[tuple[str, Obj]]:
        """Changes of ``kind`` across all namespaces as ``(type, object dict)``, bookmarks
        included, until the server ends the watch after ``timeout_s``.

        Lines are decoded as plain JSON (no client models: ten times cheaper on busy
        clusters). Raises ``KubeError`` with status 410 when ``resource_version`` is too old
        (the caller relists) and ``ServerError`` when the stream breaks. ``on_connect`` is called
        once the API server has accepted the watch.
        """
        lister = self._lister(kind)
        selector = {"field_selector": field_selector} if field_selector else {}
        self._take()
        try:
            resp = lister(watch=True, resource_version=resource_version or None, timeout_seconds=timeout_s,
                          allow_watch_bookmarks=True, _preload_content=False,
                          _request_timeout=(self.timeout_s, timeout_s + self.timeout_s), **selector)
        except ApiException as exc:
            raise translate(exc, f"watch {kind}") from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ServerError(f"watch {kind}: {exc}") from exc
        if on_connect is not None:
            on_connect()  # the API server accepted the watch: from here on it streams every change
        try:
            for line in stream_lines(resp.stream(amt=None, decode_content=False)):
                event = parse(line)
                obj: Obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise KubeError(f"watch {kind}: {obj.get('message')}", int(obj.get("code") or 0))
                yield str(event.get("type")), obj
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            raise ServerError(f"watch {kind}: stream broke: {exc}") from exc
        finally:
            resp.close()
            resp.release_conn()

    # -- recovery: in-place restart and reschedule (activities/recovery/) -------------------
    def exec_in_container(self, namespace: str, name: str, container: str | None, command: list[str],
                          timeout_s: float = 10.0) -> tuple[int, str]:
        """Run ``command`` in the container through pods/exec (WebSocket channel protocol);
        returns ``(exit code, stdout + stderr)``. A container that does not run raises ``KubeError``."""
        from kubernetes.stream import stream  # imported here: it patches the ApiClient it is given

        # A private ApiClient: stream() swaps the client's request function while it runs,
        # which would send other threads' calls over the WebSocket.
        api = client.ApiClient(self._api.configuration)
        api.user_agent = self._api.user_agent
        try:
            kwargs: dict[str, Any] = {"command": command, "stderr": True, "stdout": True, "stdin": False,
                                      "tty": False, "_preload_content": False}
            if container:
                kwargs["container"] = container
            self._take()
            try:
                resp = stream(client.CoreV1Api(api).connect_get_namespaced_pod_exec, name, namespace, **kwargs)
            except ApiException as exc:
                raise KubeError(f"exec in {namespace}/{name}: {exc.reason}", int(exc.status or 0)) from exc
            try:
                resp.run_forever(timeout=timeout_s)
                if resp.is_open():
                    raise ServerError(f"exec in {namespace}/{name}: no answer within {timeout_s:g}s")
                output = (resp.read_stdout() or "") + (resp.read_stderr() or "")
                return int(resp.returncode), output.strip()
            finally:
                resp.close()
                # close() skips the socket when the server closed first: release it here.
                sock = getattr(resp, "sock", None)
                if sock is not None:
                    sock.shutdown()
        finally:
            api.close()
