"""The gateway's connection: the API client, who is calling (User-Agent), and how a call's
answer or error is read. ``KubeGateway`` (``podmedic/kube/gateway.py``) builds every call on it."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from podmedic import __version__
from podmedic.domain.base import Obj
from podmedic.kube.api_requests import JSON, ApiRequest
from podmedic.kube.api_versions import GROUP, TAINT_RULE_VERSIONS, TaintRuleApi, choose
from podmedic.kube.errors import (
    KubeConfigError,
    KubeError,
    NotFound,
    NotServed,
    ProxyTimeout,
    ServerError,
    Throttled,
    from_answer,
)
from podmedic.kube.json_text import parse
from podmedic.kube.loop_http import Answer, LoopHttp
from podmedic.kube.object_cache import CLAIMS, TAINT_RULES, ObjectCache
from podmedic.kube.pod_cache import PodCache
from podmedic.kube.pool_nodes import PoolNodes
from podmedic.kube.throttle import MAX_RETRIES, BudgetedRetry, TokenBucket, sleep_for_retry, throttle_wait
from podmedic.settings.groups import Cluster

# Every request carries ``podmedic-<component>/<version>`` (``podmedic/<version>`` when no component is set),
# so API server audit logs and the simulator's recorder (podmedic_sim/audit.py) can tell who called.
USER_AGENT = "podmedic"
READ_RETRY_PAUSES_S = (0.1, 0.3)
"""Pauses between the tries of a read that met a 429 or a 5xx (``KubeGateway._read``)."""
POOL_CONNECTIONS = 48
"""Kept-alive connections to the API server: one per thread that calls it at once (the ingest's sources
and watches, the caches' watches, a command's calls); the client's default, 5 per CPU, would open and
drop the rest."""

URLLIB3_RETRIES = 3
"""urllib3's tries again of a request whose connection broke (its default, ``Retry.DEFAULT``)."""


def user_agent(component: str = "") -> str:
    """The User-Agent of ``component``'s requests: ``podmedic-worker/0.1.0``, or ``podmedic/0.1.0``."""
    return f"{USER_AGENT}-{component}/{__version__}" if component else f"{USER_AGENT}/{__version__}"


def translate(exc: ApiException, what: str) -> KubeError:
    """The ``KubeError`` an ``ApiException`` stands for."""
    return from_answer(int(exc.status or 0), exc.body, exc.reason, what)


def _default_kubeconfig() -> str:
    """Where the client looked for a kubeconfig, named as kubectl would: ``$KUBECONFIG`` is a list of files
    joined by the path separator, merged in order, a missing one skipped (the client's ``KubeConfigMerger``
    does so too); without it, ``~/.kube/config``."""
    listed = os.environ.get("KUBECONFIG", "")
    paths = [p for p in listed.split(os.pathsep) if p]
    if not paths:
        return "no in-cluster service account, and no ~/.kube/config (KUBECONFIG is not set)"
    missing = [p for p in paths if not Path(p).expanduser().is_file()]
    none = " (none of them exists)" if len(missing) == len(paths) else ""
    gone = f"; no such file: {', '.join(missing)}{none}" if missing else ""
    return f"no in-cluster service account, and KUBECONFIG={listed}{gone}"


class GatewayCore:
    """One API client and the two ways a call goes through it: ``_call`` and ``_read`` (retried)."""

    def __init__(self, kubeconfig: Path | None = None, *, timeout_s: float = 15.0, component: str = "",
                 qps: float | None = None, burst: int | None = None) -> None:
        """Connect as ``kubeconfig`` says (else in-cluster, else ``~/.kube/config``).

        ``qps`` and ``burst`` limit this process's requests (client-side, as client-go's rate limiter);
        unset, they come from ``PODMEDIC_KUBE_QPS`` and ``PODMEDIC_KUBE_BURST``.
        """
        if qps is None or burst is None:
            limits = Cluster.load()
            qps, burst = (limits.kube_qps if qps is None else qps), (limits.kube_burst if burst is None else burst)
        self.limiter = TokenBucket(qps, burst)
        settings = client.Configuration()
        settings.connection_pool_maxsize = POOL_CONNECTIONS
        settings.retries = BudgetedRetry(URLLIB3_RETRIES, bucket=self.limiter)
        if kubeconfig is not None and not kubeconfig.is_file():
            raise KubeConfigError(f"kubeconfig {kubeconfig}: no such file")
        try:
            if kubeconfig is not None:
                config.load_kube_config(config_file=str(kubeconfig), client_configuration=settings)
            else:
                try:
                    config.load_incluster_config(client_configuration=settings)
                except config.ConfigException:
                    # $KUBECONFIG read now, not when the client was imported; a list of files is merged.
                    config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or "~/.kube/config",
                                            client_configuration=settings)
        except (config.ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            where = f"kubeconfig {kubeconfig}" if kubeconfig is not None else _default_kubeconfig()
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise KubeConfigError(f"{where}: {why}") from None
        # The loaders' refresh hook runs before every request and writes ``host`` back, and a host written
        # looks the proxy up again in the whole environment (a pod has a variable per Service); resolved
        # once here, the lookup is gone from every request (the environment does not change).
        settings.proxy = settings.proxy
        api_client = client.ApiClient(settings)
        self._api = api_client
        self._owns_pool = True
        self.component = component
        api_client.user_agent = user_agent(component)
        self.core = client.CoreV1Api(api_client)
        self.resource = client.ResourceV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)  # apps, batch and CRD kinds by group/version/plural
        self.timeout_s = timeout_s
        self.loop_http = LoopHttp(settings, self.limiter, timeout_s)  # the activities' writes (loop_calls.py)
        self._taint_rules: TaintRuleApi | None = None
        # The worker's watch-fed reads (start_caches): pods, ResourceClaims, DeviceTaintRules.
        self.pods: PodCache | None = None
        self.claims: ObjectCache | None = None
        self.rules: ObjectCache | None = None
        self.pool_nodes = PoolNodes()  # shared with the copies for_component makes, as the pod cache is

    def for_component(self, component: str) -> Self:
        """This gateway's connection, labelled as ``component`` (``worker``, ``ingest``) in the User-Agent.

        The copy shares the connection pool; closing it is a no-op, the original owns the pool.
        """
        clone = copy.copy(self)
        api = client.ApiClient(self._api.configuration)
        api.rest_client.close()
        api.rest_client = self._api.rest_client
        api.user_agent = user_agent(component)
        clone._api, clone._owns_pool, clone.component = api, False, component
        clone.core, clone.resource, clone.custom = client.CoreV1Api(api), client.ResourceV1Api(api), \
            client.CustomObjectsApi(api)
        return clone

    @property
    def user_agent(self) -> str:
        """This gateway's User-Agent (``user_agent(component)``)."""
        return str(self._api.user_agent)

    def discovered_taint_rules(self) -> TaintRuleApi | None:
        """What DeviceTaintRule discovery found, or ``None`` before it ran (``taint_rule_api``)."""
        return self._taint_rules

    def server_version(self) -> Obj:
        """``GET /version`` (major, minor, gitVersion)."""
        return self._read("get /version", client.VersionApi(self._api).get_code)

    def taint_rule_api(self) -> TaintRuleApi:
        """Which version serves DeviceTaintRule (``api_versions.py``): discovered on first use, then kept."""
        if self._taint_rules is None:
            self._taint_rules = self._discover_taint_rules()
        return self._taint_rules

    def _discover_taint_rules(self) -> TaintRuleApi:
        try:
            group = self._read(f"discover {GROUP}", client.ResourceApi(self._api).get_api_group)
        except NotFound:
            return choose([], {})
        versions = [str(v.get("version")) for v in group.get("versions") or []]
        resources: dict[str, list[str]] = {}
        for version in versions:
            if version in TAINT_RULE_VERSIONS:
                listing = self._read(f"discover {GROUP}/{version}", self._resource_api(version).get_api_resources)
                resources[version] = [str(r.get("name")) for r in listing.get("resources") or []]
        return choose(versions, resources)

    def _resource_api(self, version: str) -> Any:
        return getattr(client, f"Resource{version.capitalize()}Api")(self._api)

    def taint_rule_calls(self) -> Any:
        """The generated client of the served DeviceTaintRule version; ``NotServed`` when none is."""
        return self._resource_api(self.taint_rule_version())

    def taint_rule_version(self) -> str:
        """The version serving DeviceTaintRule (``v1``, ...); ``NotServed`` when none is."""
        found = self.taint_rule_api()
        if found.version is None:
            raise NotServed(found.describe(), 404)
        return found.version

    def start_caches(self, component: str, *, watch_timeout_s: int = 60,
                     backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        """Serve the pod, ResourceClaim and DeviceTaintRule reads of this gateway, and of its copies made
        after, from one watch of each kind (``pod_cache.py``, ``object_cache.py``), whose requests say
        they are ``component``'s. Each watch is renewed every ``watch_timeout_s``; a failed one is tried
        again after ``backoff_s`` (first, doubling up to last). A cluster that serves no DeviceTaintRule
        gets no rule cache (its thread ends)."""
        source: Any = self.for_component(component)  # the streams' mixin lists and watches
        timing: Any = {"watch_timeout_s": watch_timeout_s, "backoff_s": backoff_s}
        if self.pods is None:
            self.pods = PodCache(source, **timing)
            self.pods.start()
        if self.claims is None:
            self.claims = ObjectCache(source, CLAIMS, **timing)
            self.claims.start()
        if self.rules is None:
            self.rules = ObjectCache(source, TAINT_RULES, **timing)
            self.rules.start()

    def close(self) -> None:
        """Release the connection pool (and end the caches' watches)."""
        if self._owns_pool:
            for cache in (self.pods, self.claims, self.rules):
                if cache is not None:
                    cache.stop()
            self.loop_http.close()
            self._api.close()

    def _send(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One request, after a token of the QPS budget; a throttling 429 is tried again after its
        ``Retry-After`` (``podmedic/kube/throttle.py``): the server refused it before acting, so a write too.

        Returns the raw answer; any other refusal is raised as the client's ``ApiException``.
        """
        slept = 0.0
        for attempt in range(MAX_RETRIES + 1):
            self._take()
            try:
                return fn(*args, _preload_content=False, _request_timeout=self.timeout_s, **kwargs)
            except ApiException as exc:
                wait = throttle_wait(int(exc.status or 0), exc.headers, exc.body) if attempt < MAX_RETRIES else None
                if wait is None or not sleep_for_retry(wait, slept):
                    raise
                slept += wait
                self.limiter.note_refused()
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _take(self) -> None:
        """Before every request: a token of the QPS budget (which may wait for one)."""
        self.limiter.take()

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """``_send``, its answer parsed and its refusal translated to a ``KubeError``."""
        try:
            resp = self._send(fn, *args, **kwargs)
        except ApiException as exc:
            raise translate(exc, what) from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # urllib3 gave up its retries
            raise ServerError(f"{what}: {exc}") from exc
        data = resp.data
        result: Obj = parse(data) if data else {}
        return result

    def _request(self, req: ApiRequest) -> Obj:
        """``_call`` of a described request (``api_requests.py``), through the client's connection."""
        return self._call(req.what, self._described, req)

    def _read_request(self, req: ApiRequest) -> Obj:
        """``_read`` of a described request: tried again on a 429 or 5xx."""
        return self._read(req.what, self._described, req)

    def _described(self, req: ApiRequest, *, _preload_content: bool = False, _request_timeout: Any = None) -> Any:
        """``req`` sent as the generated client sends its calls; the raw answer, or ``ApiException`` for an
        answer not 2xx, as ``_send`` expects."""
        answer = self._sent(req, _request_timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            raise ApiException.from_response(http_resp=answer, body=None, data=None)
        return answer.response

    def _sent(self, req: ApiRequest, timeout: Any) -> Any:
        """``req`` through the client's connection (``ApiClient.param_serialize`` and ``call_api``, as the
        generated calls do); its ``RESTResponse`` whatever the status."""
        headers = {"Accept": JSON, **({"Content-Type": req.content_type} if req.body is not None else {}),
                   **dict(req.headers)}
        method, url, headers, body, _ = self._api.param_serialize(
            req.method, req.path, query_params=list(req.query), header_params=headers, body=req.body,
            auth_settings=["BearerToken"])
        return self._api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)

    def _exchange(self, req: ApiRequest, *, timeout_s: float | None = None) -> Answer:
        """``LoopHttp.exchange`` in this thread, without sending a throttled request again: the last answer
        whatever its status; ``ProxyTimeout`` when ``timeout_s`` passes with no answer."""
        self._take()
        timeout = (min(self.timeout_s, timeout_s), timeout_s) if timeout_s is not None else self.timeout_s
        try:
            answer = self._sent(req, timeout)
            data = answer.read() or b""
        except urllib3.exceptions.TimeoutError as exc:
            if timeout_s is not None:
                raise ProxyTimeout(f"{req.what}: no answer within {timeout_s:g}s") from exc
            raise ServerError(f"{req.what}: no answer within {self.timeout_s:g}s") from exc
        except (OSError, urllib3.exceptions.HTTPError, ApiException) as exc:  # ApiException: status 0, no answer
            raise ServerError(f"{req.what}: {exc}") from exc
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
        return Answer(int(answer.status), str(answer.reason or ""), answer.headers, text)

    def _read(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """``_call`` for a read: a 429 or 5xx is tried again twice (0.1 s, then 0.3 s later) before it fails.

        A step reads several objects per attempt: with a flaky API server (``python -m benchmarks faults``)
        all of discover's reads seldom succeed in one attempt, and an incident would run out of its step's
        attempts. A read changes nothing, so trying it again here is always safe.
        """
        for pause in READ_RETRY_PAUSES_S:
            try:
                return self._call(what, fn, *args, **kwargs)
            except (ServerError, Throttled):
                time.sleep(pause)
        return self._call(what, fn, *args, **kwargs)
