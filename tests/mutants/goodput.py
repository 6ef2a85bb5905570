"""Mutants of the claims that give GPU time back (issue 51's mechanisms): failing fast on a hang, restarting
the other ranks in place, lemons remembered by GPU, warm spares, announced maintenance."""

from __future__ import annotations

from tests.mutants.mutant import Mutant

GOODPUT: tuple[Mutant, ...] = (
    Mutant(
        "hung-job-waited-to-the-timeout", "a job found hung is not waited for to the checkpoint timeout",
        "activities/checkpoints/hang.py",
        "        if self.hang_s <= 0 or self._alive:",
        "        if True:",
        ("tests/e2e_checkpoint/test_checkpoint_hang.py", "tests/unit/test_checkpoint_hang.py")),
    Mutant(
        "hung-pod-restarted-in-place", "a hung pod skips an in-place restart it cannot act on",
        "workflows/device/recovery_ladder.py",
        '    if not hung or (in_place.mechanism == "exec_signal" and in_place.signal == "KILL"):',
        "    if True:",
        ("tests/e2e_recover/test_hung_in_place.py",)),
    Mutant(
        "stall-never-judged", "a workload that stops stepping with no device fault is restarted before its "
        "collective timeout",
        "workers/ingest/sources/progress.py",
        "        if window <= 0 or still < window:",
        "        if True:",
        ("tests/e2e_ingest/test_workload_stall.py", "tests/unit/test_progress_tracker.py")),
    Mutant(
        "stall-judges-a-leaderworkerset-whole", "a LeaderWorkerSet group that stops stepping is judged on its own, "
        "while another group steps on",
        "podmedic/domain/stall.py",
        '            group = str(labels.get(LWS_GROUP_LABEL) or "") if kind == "LeaderWorkerSet" else ""',
        '            group = ""',
        ("tests/e2e_ingest/test_workload_stall.py", "tests/unit/test_progress_tracker.py")),
    Mutant(
        "stall-judges-what-reports-nothing", "a workload that reports no progress is never judged stalled",
        "podmedic/kube/podview.py",
        '    if not reports_progress(pod) or "deletionTimestamp" in pod["metadata"] or not containers_running(pod):',
        '    if "deletionTimestamp" in pod["metadata"] or not containers_running(pod):',
        ("tests/unit/test_progress_tracker.py",)),
    Mutant(
        "lemon-given-back-on-a-reboot", "a repeat offender's Healthy report after a reboot does not give it back",
        "workflows/closing/vendor_ticket.py",
        "    lemon = wf.state.repeat_offender and workflow.patched(LEMON_WAITS_FOR_VENDOR)",
        "    lemon = False",
        ("tests/e2e_tickets/test_lemon_reboot.py", "tests/workflow/test_vendor_wait.py")),
    Mutant(
        "given-back-ticket-not-told", "a device back in service on its own report tells its open ticket",
        "workflows/closing/close.py",
        "                told = await vendor_ticket.note_given_back(self.wf)",
        '                told = ""',
        ("tests/e2e_tickets/test_lemon_reboot.py", "tests/workflow/test_vendor_wait.py")),
    Mutant(
        "other-ranks-said-recreated", "an in-place JobSet's recovery says its other ranks were kept, as they were",
        "activities/recovery/workload_status.py",
        "    kept = [uid for uid in before if uid in after]",
        "    kept: list[str] = []",
        ("tests/e2e_recover/test_same_node_workloads.py", "tests/unit/test_workload_status.py")),
    Mutant(
        "fellow-rank-not-kept-off", "a JobSet's other ranks leave the held replacement's GPUs alone",
        "workers/admission/review.py",
        "    elif (hold := fellow_rank_hold(pod, namespace, holds, now)) is not None:",
        "    elif (hold := None) is not None:",
        ("tests/e2e_recover/test_same_node_workloads.py", "tests/unit/test_placement_holds.py")),
    Mutant(
        "lemon-by-slot", "a device's history follows the GPU (its UUID), not the slot",
        "activities/history.py",
        "                                           exclude_run=inp.exclude_run, uuid=uuid)",
        "                                           exclude_run=inp.exclude_run, uuid=None)",
        ("tests/e2e_recover/test_repeat_offender.py",)),
    Mutant(
        "spare-never-used", "a rank whose node has no free healthy GPU moves to a warm spare of its pool",
        "activities/recovery/reschedule.py",
        "                self.spare = await room.warm_spare(self.api, self.claims, inp, pod)",
        "                self.spare = None",
        ("tests/e2e_recover/test_warm_spares.py",)),
    Mutant(
        "spare-toleration-kept", "only the replacements podmedic pins to a spare tolerate its taint",
        "podmedic/domain/spares.py",
        "    if not spare_tolerations(tolerations):",
        "    if True:",
        ("tests/e2e_recover/test_warm_spares.py", "tests/unit/test_spares.py")),
    Mutant(
        "used-spare-kept", "a spare a replacement landed on is given back and another free node takes its place",
        "podmedic/domain/spares.py",
        "            if why is None and name in fleet.busy:",
        "            if False:",
        ("tests/e2e_recover/test_warm_spares.py", "tests/unit/test_spares.py")),
    Mutant(
        "maintenance-moves-at-once", "an announced maintenance is acted on at the latest safe moment, not at once",
        "podmedic/domain/maintenance.py",
        "    return deadline - dt.timedelta(seconds=save_s + lead_s)",
        "    return deadline - dt.timedelta(days=1)",
        ("tests/e2e_ingest/test_maintenance.py", "tests/unit/test_maintenance.py")),
    Mutant(
        "maintenance-left-to-the-cloud", "the pods of a node under announced maintenance move before its deadline",
        "workflows/node/maintenance.py",
        "        results = await asyncio.gather(*(self._move_one(m, policy, rid) for m in plan.pods))",
        "        results = []",
        ("tests/e2e_ingest/test_maintenance.py",)),
    Mutant(
        "maintenance-told-over-http-ignored", "a maintenance deadline told by a CloudEvent is acted on as the node "
        "label's is",
        "workers/ingest/http/cloudevents.py",
        "    return announced(ce.data.node, ce.data.deadline, source, now)",
        '    return withdrawn(ce.data.node, source, now, "")',
        ("tests/e2e_ingest/test_maintenance.py", "tests/ingest_http/test_cloudevents.py")),
    Mutant(
        "maintenance-cordon-kept", "a node back from its maintenance is uncordoned",
        "workflows/node/maintenance.py",
        "            if back.back and gone:",
        "            if False:",
        ("tests/e2e_ingest/test_maintenance.py",)),
)
