"""Mutants of the engine's safety claims: nothing lost or duplicated, least privilege, parsers, replay-safe
upgrades, placement, attribution, operators' steering, the fleet guard and the rule sweep, bounded histories."""

from __future__ import annotations

from tests.mutants.mutant import Mutant

SAFETY: tuple[Mutant, ...] = (
    Mutant(
        "rbac-exec-create-only", "least-privilege RBAC: an exec needs get (and create from 1.35)",
        "deploy/kustomize/base/rbac-worker.yaml",
        "    resources: [pods/exec]\n    verbs: [get, create]",
        "    resources: [pods/exec]\n    verbs: [create]",
        ("tests/e2e_recover/test_in_place.py", "tests/deploy/test_rbac_proof.py")),
    Mutant(
        "audit-exec-as-create", "least-privilege RBAC: the simulator authorizes an exec as the API server does",
        "podmedic_sim/audit.py",
        'if websocket_create and resource == "pods" and sub in STREAMING and verb == "get":\n'
        '        return [kind, ("create", group, resource, sub)]',
        'if websocket_create and resource == "pods" and sub in STREAMING and verb == "get":\n'
        '        return [("create", group, resource, sub)]',
        ("tests/deploy/test_rbac_proof.py",)),
    Mutant(
        "guard-change-without-patch", "replay-safe upgrades: a changed workflow keeps old runs' path",
        "workflows/fleet/guard.py",
        "        self.dirty = self.dirty or self.to_open is not None",
        "        self.dirty = True",
        ("tests/replay/test_replay.py",)),
    Mutant(
        "ingest-acks-before-delivering", "no event lost after a 202",
        "workers/ingest/http/app.py",
        "                if len(items) == 1:\n"
        "                    done = [await self.deliverer.deliver(items[0])]",
        "                if len(items) == 1:\n"
        "                    asyncio.get_running_loop().create_task(self.deliverer.deliver(items[0]))\n"
        "                    done = []",
        ("tests/reliability/test_fault_suite.py",)),
    Mutant(
        "ingest-never-answers-202", "no event lost after a 202: the fault suite checks the answers it got",
        "workers/ingest/http/app.py",
        "        return web.json_response(body, status=202)",
        "        return web.json_response(body, status=503)",
        ("tests/reliability/test_fault_suite.py",)),
    Mutant(
        "taint-retry-makes-a-second-rule", "no duplicated effect: a retried taint takes over its own rule",
        "activities/taint.py",
        "            except Conflict:  # the rule exists: read it live (the rule cache may not have seen it yet)\n"
        "                existing = await self.api.get_taint_rule(name, fresh=True)",
        '            except Conflict:\n                body["metadata"]["name"] = name = name + "-again"\n'
        "                continue",
        ("tests/reliability/test_fault_suite.py",)),
    Mutant(
        "cloudevents-refuses-every-event", "parsers accept every valid input",
        "workers/ingest/http/cloudevents.py",
        "        ce = _ONE.validate_json(body)",
        '        ce = _ONE.validate_json(b"{}")',
        ("tests/fuzz/test_cloudevents_contract.py",)),
    Mutant(
        "cloudevents-drops-the-code", "parsers carry a valid input unchanged",
        "workers/ingest/http/cloudevents.py",
        "        code=d.code,",
        "        code=None,",
        ("tests/fuzz/test_cloudevents_contract.py",)),
    Mutant(
        "cloudevents-refuses-at-the-wrong-place", "parsers refuse an invalid input at its exact place",
        "workers/ingest/http/cloudevents.py",
        '        problems.append((path_of(prefix, tuple(err["loc"])), message))',
        '        problems.append((path_of(prefix, ("data",)), message))',
        ("tests/fuzz/test_cloudevents_contract.py",)),
    Mutant(
        "policy-refuses-every-file", "parsers accept every valid input",
        "podmedic/domain/policy_file.py",
        "    if not isinstance(drivers, Mapping) or not drivers:",
        "    if True:",
        ("tests/fuzz/test_policy_contract.py",)),
    Mutant(
        "policy-refuses-at-the-wrong-place", "parsers refuse an invalid input at its exact place",
        "podmedic/domain/policy_file.py",
        '                errors.append((_path(str(name), tuple(err["loc"])), err["msg"]))',
        '                errors.append((f"drivers.{name}", err["msg"]))',
        ("tests/fuzz/test_policy_contract.py",)),
    Mutant(
        "sim-patch-edits-the-stored-object", "the simulated API server: a refused write changes nothing",
        "podmedic_sim/patching.py",
        "        return json_copy(patch)\n    out = dict(target) if isinstance(target, dict) else {}",
        "        return json_copy(patch)\n    out = target if isinstance(target, dict) else {}",
        ("tests/sim/test_fuzz_api.py",)),
    Mutant(
        "temporal-client-ignores-tls", "mTLS to Temporal",
        "podmedic/temporal/connect.py",
        "tls=security.tls, api_key=",
        "tls=False, api_key=",
        ("tests/security/test_temporal_tls.py",)),
    Mutant(
        "temporal-client-sends-no-certificate", "mTLS to Temporal: the client presents its certificate",
        "podmedic/temporal/connect.py",
        "tls=security.tls, api_key=",
        "tls=security.tls if isinstance(security.tls, bool) else dataclasses.replace(\n"
        "                                    security.tls, client_cert=None, client_private_key=None), api_key=",
        ("tests/security/test_temporal_tls.py",)),
    Mutant(
        "vendor-wait-polls-at-a-fixed-gap", "a vendor wait of weeks stays far below Temporal's history limits",
        "workflows/closing/vendor_ticket.py",
        "        gap = min(gap * 2, max(ticket.poll_s, ticket.poll_max_s))",
        "        gap = ticket.poll_s",
        ("tests/workflow/test_vendor_wait.py",)),
    Mutant(
        "gate-removal-lists-the-remaining-gates", "podmedic removes its scheduling gate and no other's",
        "activities/recovery/reschedule.py",
        '        gate = {"name": placement.GATE, "$patch": "delete"}\n'
        '        await api.patch_pod(namespace, name, {"spec": {"schedulingGates": [gate]}})',
        '        kept = [g for g in present if g.get("name") != placement.GATE]\n'
        '        await api.patch_pod(namespace, name, {"spec": {"schedulingGates": kept}})',
        ("tests/fidelity/test_patch_and_update.py",)),
    Mutant(
        "jira-cloud-uses-the-removed-search", "Jira Cloud tickets go through the current search",
        "activities/tickets/jira.py",
        'path = "search/jql" if self.settings.deployment == "cloud" else "search"',
        'path = "search"',
        ("tests/unit/test_jira_search.py", "tests/e2e_tickets")),
    Mutant(
        "cdi-ids-read-as-device-names", "the kubelet's CDI-form device IDs open the incident on the right device",
        "podmedic/kube/resource_ids.py",
        "    pod_claim = entry.removeprefix",
        "    return f\"{resource_id} is not driver/pool/device\"\n    pod_claim = entry.removeprefix",
        ("tests/e2e_ingest/test_resource_ids.py",)),
    Mutant(
        "failed-restart-told-as-done", "a failed or unverified attempt is never recorded as done",
        "workflows/device/recovery_ladder.py",
        '        step = "restarted" if result.verified else "restart_failed"',
        '        step = "restarted"',
        ("tests/e2e_recover/test_in_place.py",)),
    Mutant(
        "same-node-onto-a-failing-node", "same-node placement avoids a node whose other devices just failed",
        "workflows/device/node_takes_over.py",
        "    if wf.state.node_failures:",
        "    if False:",
        ("tests/workflow/test_node_quarantine.py",)),
    Mutant(
        "elsewhere-counted-as-same-node", "recovery is attributed to what really happened",
        "activities/recovery/reschedule.py",
        '        if self.action == "same_node" and not same:',
        "        if False:",
        ("tests/e2e_recover/test_reschedule.py",)),
    Mutant(
        "webhook-pins-nothing", "a same_node replacement of a controller's pod is held on its node",
        "workers/admission/review.py",
        "    hold = matching_hold(pod, namespace, holds, now)",
        "    hold = None",
        ("tests/e2e_recover/test_same_node_workloads.py",)),
    Mutant(
        "probe-trusted-blindly", "with the webhook down, the rung falls back to a preference and says so",
        "activities/recovery/same_node.py",
        "        if pinned_to(probed) != node:",
        "        if False:",
        ("tests/e2e_recover/test_same_node_workloads.py",)),
    Mutant(
        "stale-healthy-report-heals", "only a Healthy report newer than the failure heals a device",
        "workflows/closing/close.py",
        "            if healthy_after_the_failure(self.wf.events) or await self.read_health() is Health.HEALTHY:",
        "            if any(e.health is Health.HEALTHY for e in self.wf.events) or await self.read_health() is "
        "Health.HEALTHY:",
        ("tests/workflow/test_detection_workflow.py",)),
    Mutant(
        "unknown-reading-verifies-a-fix", "a device nothing can see is not untainted on no evidence",
        "workflows/closing/vendor_ticket.py",
        "        if health is Health.HEALTHY or report is not None or trusted:",
        "        if health is not Health.UNHEALTHY or report is not None or trusted:",
        ("tests/e2e_tickets/test_resolution.py",)),
    Mutant(
        "ticket-per-incident", "one ticket per fault episode",
        "activities/tickets/__init__.py",
        "        prior = latest if ticket.one_per_episode and not inp.escalate else None",
        "        prior = None",
        ("tests/e2e_tickets/test_episodes.py",)),
    Mutant(
        "placed-pods-stay-on-a-failing-node", "a pod placed back on a node that turns bad moves off",
        "workflows/device/move_off.py",
        "        if self.node_incident_at is None:",
        "        if True:",
        ("tests/e2e_node/test_move_off_e2e.py",)),
    Mutant(
        "listed-failure-reopened", "two ingest replicas: a hand-over opens no second incident for a device",
        "workers/ingest/delivery.py",
        "            handled = await closed_run_that_saw(self.client, item, self._key) if listed else None",
        "            handled = None",
        ("tests/e2e_ingest/test_listed_failures.py", "tests/e2e_ingest/test_replicas.py")),
    Mutant(
        "leader-never-steps-down", "two ingest replicas: a leader that cannot renew stops watching",
        "workers/ingest/leader.py",
        "            elif self._clock() - renewed >= c.renew_deadline_s:",
        "            elif False:",
        ("tests/ingest_sources/test_leader_election.py",)),
    Mutant(
        "policy-by-digest-not-loaded", "an incident runs under the policy its input names by digest",
        "workflows/policy_memo.py",
        "    built-in defaults only so that the incident can close and say why; it acts on nothing.\"\"\"\n",
        "    built-in defaults only so that the incident can close and say why; it acts on nothing.\"\"\"\n"
        "    return DriverPolicy(driver=ref.driver), \"\"\n",
        ("tests/workflow/test_policy_by_reference.py",)),
    Mutant(
        "policy-memo-trusted-without-digest", "a memo that is not the policy the input names is refused",
        "workflows/policy_memo.py",
        "    if digest != ref.digest:",
        "    if digest == '':",
        ("tests/workflow/test_policy_by_reference.py",)),
    Mutant(
        "cancel-swallowed-by-a-step", "a Temporal Cancel closes an incident at any stage: no step's error "
        "handling can swallow it",
        "workflows/device/incident.py",
        "            outcome = await asyncio.shield(work)",
        "            outcome = await work",
        ("tests/workflow/test_cancel.py",)),
    Mutant(
        "abort-waits-for-the-step", "abort stops an incident at any wait or step, by construction",
        "workflows/device/incident.py",
        "        if self.work is not None:",
        "        if False:",
        ("tests/workflow/test_cancel.py",)),
    Mutant(
        "replacement-of-any-workload", "each incident's recovery names its own workload's pod",
        "activities/recovery/reschedule.py",
        "        return await self.api.list_pods(self.inp.pod.namespace, self.selector)",
        "        return await self.api.list_pods(self.inp.pod.namespace, \"\")",
        ("tests/e2e_recover/test_reschedule.py",)),
    Mutant(
        "timeline-grows-without-bound", "a chatty device keeps an incident's record and queries bounded",
        "podmedic/domain/incident.py",
        "    if extra > 0:\n        del state.timeline",
        "    if extra > 10**9:\n        del state.timeline",
        ("tests/workflow/test_vendor_wait.py",)),
    Mutant(
        "reset-run-never-releases", "a run reset away does not keep its device tainted after the new run closes",
        "activities/taint.py",
        "            if plan.action == \"keep\" and self.closed_run is not None:",
        "            if False:",
        ("tests/unit/test_untaint_holders.py",)),
    Mutant(
        "guard-never-reclaims", "a run terminated from Temporal does not keep its fleet-guard permit",
        "workflows/fleet/guard.py",
        "        if not self._holders_due():",
        "        if True:",
        ("tests/workflow/test_guard.py",)),
    Mutant(
        "flapping-healthy-ends-vendor-wait", "a flapping device stays one incident until its ticket is resolved",
        "workflows/closing/vendor_ticket.py",
        "        return not wf.state.flapping and not lemon and reported_healthy()",
        "        return not lemon and reported_healthy()",
        ("tests/workflow/test_vendor_wait.py", "tests/e2e_tickets/test_flapping.py")),
    Mutant(
        "sweep-never-runs", "a DeviceTaintRule held by a terminated run is swept and settled by its device's health",
        "workflows/fleet/guard.py",
        "        if self._sweep_wait() > 0:",
        "        if True:",
        ("tests/e2e_guard/test_rule_sweep_e2e.py",)),
    Mutant(
        "sweep-takes-deliberate-holds", "a hold kept for an operator by a completed incident is not swept",
        "activities/rule_sweep.py",
        'LEAKED = frozenset({"terminated", "failed", "timed_out", "not found"})',
        'LEAKED = frozenset({"terminated", "failed", "timed_out", "not found", "completed", "canceled"})',
        ("tests/e2e_guard/test_rule_sweep_e2e.py",)),
    Mutant(
        "sweep-drops-unseen-devices", "a rule nobody holds stays while nothing can see its device",
        "activities/rule_sweep.py",
        "        if reading.health is Health.HEALTHY:",
        "        if reading.health is not Health.UNHEALTHY:",
        ("tests/e2e_guard/test_rule_sweep_e2e.py",)),
    Mutant(
        "sweep-keeps-healed-devices", "a rule nobody holds goes once a source that can see its device reads it Healthy",
        "activities/rule_sweep.py",
        "        if reading.health is Health.HEALTHY:",
        "        if False:",
        ("tests/e2e_guard/test_rule_sweep_healthy_e2e.py",)),
    Mutant(
        "stopped-run-keeps-its-rule", "an incident canceled, terminated or reset at any stage leaves no rule held by "
        "a closed run", "workflows/closing/close.py",
        "    if outcome.outcome not in STOPPED or not rule or wf.state.taint_removed or wf.policy.dry_run:",
        "    if True:",
        ("tests/e2e_guard/test_stop_at_each_stage_e2e.py",)),
    Mutant(
        "vendor-wait-never-continues", "a device reporting through a weeks-long vendor wait keeps every run's "
        "history bounded", "workflows/closing/vendor_ticket.py",
        "    return info.is_continue_as_new_suggested() or info.get_current_history_length() > "
        "record.VENDOR_WAIT_HISTORY",
        "    return False",
        ("tests/workflow/test_vendor_wait.py",)),
)
