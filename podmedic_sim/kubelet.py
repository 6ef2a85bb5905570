"""The simulated kubelets of all nodes: image pulls, container starts, crashes and restarts.

Restart decisions follow the kubelet: a container's ``restartPolicyRules`` (KEP-5307) first,
then its restart policy, with the exponential crash back-off; ``RestartAllContainers``
(KEP-5532) restarts the whole pod in place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from podmedic.domain.base import Obj
from podmedic_sim.kubelet_pods import NODE_LOST_EXIT_CODE, KubeletHooks, KubeletPods
from podmedic_sim.kubelet_status import ContainerRt, PodRt
from podmedic_sim.store import NotFound, now_rfc3339

CRASH_EXIT_CODE = 134  # SIGABRT: what a CUDA program dies with when its GPU faults

__all__ = ["CRASH_EXIT_CODE", "Kubelet", "KubeletHooks", "rule_action"]


def rule_action(c: ContainerRt, code: int) -> str | None:
    """KEP-5307: the action of the first ``restartPolicyRules`` entry matching the exit code."""
    for rule in c.rules:
        codes = rule.get("exitCodes") or {}
        values = codes.get("values") or []
        op = codes.get("operator", "In")
        if (op == "In" and code in values) or (op == "NotIn" and code not in values):
            return str(rule.get("action", "Restart"))
    return None


class Kubelet(KubeletPods):
    """Runs bound pods on their nodes."""

    # -- lifecycle ---------------------------------------------------------------------
    def _start_pod(self, rt: PodRt) -> None:
        pod = self._store.find("pods", *rt.key)
        if pod is None or rt.gone:
            return
        rt.devices = self._claims.pod_devices(pod)
        for name, key in self._claims.pod_claim_keys(pod):
            claim = self._store.find("resourceclaims", *key) if key else None
            if key is not None:
                rt.pod_claims[key[1]] = name
            if claim is not None:
                rt.claim_uids[claim["metadata"]["name"]] = str(claim["metadata"].get("uid", ""))
        self._write(rt)
        if self._prepare_failed(rt):
            return
        for c in rt.containers:
            self._prepare(rt, c)

    def _prepare_failed(self, rt: PodRt) -> bool:
        """The DRA driver refusing to prepare a device: a Warning Event, containers stay
        ``ContainerCreating``, and another try after a back-off (as the real kubelet does)."""
        failing = sorted((dev, msg) for _, _, dev in rt.devices if (msg := self._devices.prepare_faults.get(dev)))
        if not failing:
            rt.prepare_failures = 0
            return False
        (driver, _, _), message = failing[0]
        self._event(
            rt,
            "FailedPrepareDynamicResources",
            f"failed to prepare dynamic resources: {driver}: {message}",
            warning=True,
        )
        delay = min(self._t.backoff_base_s * 2**rt.prepare_failures, self._t.backoff_max_s)
        rt.prepare_failures += 1

        def retry() -> None:
            if not rt.gone and not rt.deleting:
                self._start_pod(rt)

        self._timers.call_later(delay, retry)
        return True

    def _prepare(self, rt: PodRt, c: ContainerRt) -> None:
        gen = c.bump()
        c.state, c.reason, c.message = "waiting", "ContainerCreating", ""
        if self.node_has_image(rt.node, c.image):
            if c.restart_count == 0:
                self._event(rt, "Pulled", f'Container image "{c.image}" already present on machine')
            self._timers.call_later(self._t.container_start_s, lambda: self._run(rt, c, gen))
            return
        waiters = self._pulls.setdefault((rt.node, c.image), [])
        waiters.append((rt, c))
        self._event(rt, "Pulling", f'Pulling image "{c.image}"')
        if len(waiters) == 1:
            self._timers.call_later(self._t.image_pull_s, lambda: self._pulled(rt.node, c.image))

    def _pulled(self, node: str, image: str) -> None:
        def add_image(n: Obj) -> None:
            images = n.setdefault("status", {}).setdefault("images", [])
            if not any(image in (i.get("names") or []) for i in images):
                images.append({"names": [image], "sizeBytes": self._config.image_size_bytes})

        with contextlib.suppress(NotFound):
            self._store.mutate("nodes", None, node, add_image)
        for rt, c in self._pulls.pop((node, image), []):
            if rt.gone:
                continue
            self._event(rt, "Pulled", f'Successfully pulled image "{image}" in {self._t.image_pull_s:.3g}s')
            self._timers.call_later(self._t.container_start_s, self._runner(rt, c, c.gen))

    def _rebooted(self, rt: PodRt) -> None:
        """The pod's node is back: what died with it exits now (and may restart), what was starting starts."""
        lost, rt.lost = rt.lost, []
        for c in rt.containers:
            if c.name in lost:
                self._after_exit(rt, c, NODE_LOST_EXIT_CODE)
            elif c.state == "waiting":
                self._prepare(rt, c)
        self._write(rt)

    def _run(self, rt: PodRt, c: ContainerRt, gen: int) -> None:
        if rt.gone or rt.deleting or c.gen != gen or rt.node in self.down_nodes:
            return
        if c.restart_count > 0:
            self._reset_transient(rt, rt.container_devices(c))
        gen = c.bump()
        c.new_id()
        c.hung = False
        c.state, c.reason, c.message = "running", "", ""
        c.started_at, c.started_mono = now_rfc3339(), self._timers.now()
        rt.phase = "Running"
        self._event(rt, "Created", f"Created container: {c.name}")
        self._event(rt, "Started", f"Started container {c.name}")
        self._write(rt)
        for hook in self.hooks:
            hook.on_container_started(rt, c)
        if self.crashing(rt, c):
            self._timers.call_later(self._t.crash_after_s, lambda: self._crash(rt, c, gen))

    def crashing(self, rt: PodRt, c: ContainerRt) -> bool:
        return any(
            self._devices.fault(d).crash and self._devices.fault(d).health == "Unhealthy"
            for _, _, d in rt.container_devices(c)
        )

    def _crash(self, rt: PodRt, c: ContainerRt, gen: int) -> None:
        if c.gen != gen or c.state != "running" or c.hung or not self.crashing(rt, c):
            return  # a hung process is stuck in the device, not killed by it
        if not any(hook.absorbs_failure(rt, c) for hook in self.hooks):
            self.exit_container(rt, c, CRASH_EXIT_CODE, "Error")

    def rearm_crash(self, rt: PodRt, c: ContainerRt, gen: int) -> None:
        """Workers restarted inside a running container (in-job restarts) meet their device again."""
        if c.gen == gen and c.state == "running" and self.crashing(rt, c):
            self._timers.call_later(self._t.crash_after_s, lambda: self._crash(rt, c, gen))

    def exit_container(self, rt: PodRt, c: ContainerRt, code: int, reason: str = "Error") -> None:
        """The container's process exits with ``code``; restart rules and policy decide next."""
        if rt.gone or c.state != "running":
            return
        self._terminate(rt, c, code, reason)
        self._after_exit(rt, c, code)

    def _after_exit(self, rt: PodRt, c: ContainerRt, code: int) -> None:
        """Restart rules and policy decide what follows a container's exit with ``code``."""
        if rt.deleting:
            return
        action = rule_action(c, code)
        if action is None:
            policy = c.restart_policy
            action = "Restart" if policy == "Always" or (policy == "OnFailure" and code != 0) else "DoNotRestart"
        if action == "Restart":
            self._back_off(rt, c)
        elif action == "RestartAllContainers":
            self._restart_all(rt, c)
        else:
            self._write(rt)
            self._maybe_finish(rt)

    def _back_off(self, rt: PodRt, c: ContainerRt) -> None:
        delay = min(self._t.backoff_base_s * 2 ** (c.crashes - 1), self._t.backoff_max_s)
        c.last_terminated = c.terminated_json()
        gen = c.bump()
        pod_ref = f"{rt.key[1]}_{rt.key[0]}({rt.uid})"
        c.state, c.reason = "waiting", "CrashLoopBackOff"
        c.message = f"back-off {delay:.3g}s restarting failed container={c.name} pod={pod_ref}"
        self._event(
            rt,
            "BackOff",
            f"Back-off restarting failed container {c.name} in pod {pod_ref}",
            warning=True,
        )
        self._write(rt)

        def restart() -> None:
            if c.gen != gen or rt.gone or rt.deleting:
                return
            c.restart_count += 1
            self._prepare(rt, c)
            self._write(rt)

        self._timers.call_later(delay, restart)

    def _restart_all(self, rt: PodRt, trigger: ContainerRt) -> None:
        """KEP-5532: the trigger's exit restarts every container of the pod in place (same
        pod UID, IP and claims); the others are stopped first, then all start afresh."""
        self._event(
            rt,
            "RestartAllContainers",
            f"Container {trigger.name} exited with {trigger.exit_code}: restarting all containers in place",
        )
        for c in rt.containers:
            if c is not trigger and c.state == "running":
                self._event(rt, "Killing", f"Stopping container {c.name}")
                c.bump()
                c.state, c.exit_code, c.term_reason, c.finished_at = "terminated", 137, "Error", now_rfc3339()
                for hook in self.hooks:
                    hook.on_container_stopped(rt, c)
        for c in rt.containers:
            c.last_terminated = c.terminated_json() if c.state == "terminated" else c.last_terminated
            c.restart_count += 1
            self._prepare(rt, c)
        self._write(rt)

    def exec_signal(self, namespace: str, name: str, container: str | None, signum: int) -> str | None:
        """pods/exec ``kill -s <sig> 1``: PID 1 of the container dies of the signal (exit code
        128 + signum; the workload handles the signal, or runs under an init that forwards it).
        Returns why it could not, or ``None``."""
        rt = self.pods.get((namespace, name))
        if rt is None or rt.deleting:
            return f"pod {namespace}/{name} is not running on a node"
        c = next((c for c in rt.containers if container in (None, c.name)), None)
        if c is None:
            return f"container {container} is not valid for pod {name}"
        if c.state != "running":
            return f"container {c.name} is not running"
        self._timers.call_later(0, lambda: self.exit_container(rt, c, 128 + signum, "Error"))
        return None

    def _maybe_finish(self, rt: PodRt) -> None:
        if any(c.state != "terminated" for c in rt.containers):
            return
        rt.phase = "Succeeded" if all(c.exit_code == 0 for c in rt.containers) else "Failed"
        self._write(rt)
        # A pod that ended is no longer active: the device manager frees its devices (UpdateAllocatedDevices).
        self._plugin_devices.release(rt.uid)
        self._reset_transient(rt, rt.devices)
        pod = self._store.find("pods", *rt.key)
        if pod is not None:
            self._claims.release_pod(pod, delete_generated=False)

    # -- helpers -----------------------------------------------------------------------
    def _runner(self, rt: PodRt, c: ContainerRt, gen: int) -> Callable[[], None]:
        return lambda: self._run(rt, c, gen)

    def _crasher(self, rt: PodRt, c: ContainerRt, gen: int) -> Callable[[], None]:
        return lambda: self._crash(rt, c, gen)
