"""``podmedic guard status|resume``: read the fleet guard and end a storm pause.

Exit codes as ``podmedic incidents``: 0 done, 1 the guard refused (not tripped, no reason),
2 a bad flag, or ``resume`` with no guard running, 3 Temporal unreachable. ``status`` before any
incident asked the guard prints the configured limits and an idle state and exits 0, as kubectl
prints an empty list: a script or a probe on a quiet fleet does not break.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID, GuardStatus, ResumeRequest
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.incidents.query import OperatorError
from podmedic.settings.groups import PolicyFile
from workers.cli import connection
from workers.cli.flags import load_policy_or_exit, policy_flag
from workers.cli.output import add_output_flag
from workers.cli.output import render as dump

GUARD_HELP = """\
The fleet guard (docs/guard.md): permits held, incidents waiting, storms.

  podmedic guard status                                     limits, counts, who waits, the storm if tripped
  podmedic guard resume --by alice --reason "PDU fixed"     end a storm pause now
"""


async def fetch_status(t: connection.Target) -> GuardStatus:
    """The guard's ``status`` query; ``OperatorError`` (2) when no guard runs."""
    client = await connection.client_for(t)
    try:
        status: GuardStatus = await client.get_workflow_handle(GUARD_WORKFLOW_ID).query("status",
                                                                                        result_type=GuardStatus)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise OperatorError(f"no fleet guard in namespace {t.namespace} (no incident has asked one yet)",
                                2) from err
        raise
    return status


async def status_or_idle(t: connection.Target, configured: Callable[[], GuardPolicy]) -> GuardStatus:
    """The guard's status, or, before any incident asked one, an idle status with the ``configured`` limits
    (read only then: a running guard says its own)."""
    try:
        return await fetch_status(t)
    except OperatorError as err:
        if err.code != 2:
            raise
        return GuardStatus(state="idle", devices_tainted=0, nodes_disrupted=0, permits=[], waiting=[], storm=None,
                           clear_since=None, fleet=None, policy=configured(),
                           history=[f"no incident has asked the fleet guard in namespace {t.namespace} yet: "
                                    "these are the limits of the policy file in force here"])


async def resume(t: connection.Target, request: ResumeRequest) -> GuardStatus:
    """The ``resume`` update; ``OperatorError`` (1) with the guard's reason when refused."""
    await fetch_status(t)  # a clear "no guard" before the update
    client = await connection.client_for(t)
    try:
        status: GuardStatus = await client.get_workflow_handle(GUARD_WORKFLOW_ID).execute_update(
            "resume", request, result_type=GuardStatus)
    except WorkflowUpdateFailedError as err:
        raise OperatorError(f"the guard refused: {err.cause}", 1) from err
    return status


def _spares_lines(status: GuardStatus) -> list[str]:
    """The warm spares: per pool, who they are and how many are missing (podmedic/domain/spares.py)."""
    p, kept = status.policy.spares, status.spares
    if p.per_pool == 0 and (kept is None or kept.held == 0):
        return ["warm spares: none (guard.spares.per_pool 0)"]
    lines = [f"warm spares: {p.per_pool} per pool (node label {p.pool_label}), checked every {p.every_s:g}s"]
    if kept is None:
        return [*lines, "  not kept yet"]
    for pool in kept.pools:
        short = f"; {pool.short} short: no free fit node in the pool" if pool.short else ""
        lines.append(f"  spares {pool.pool}: {', '.join(pool.spares) or 'none'}{short}")
    return lines


def render(status: GuardStatus) -> str:
    """Text for a terminal."""
    p = status.policy
    off = "" if p.enabled else " (disabled by the policy: incidents act without asking)"
    lines = [f"fleet guard: {status.state.upper()}{off}",
             f"devices under remediation: {status.devices_tainted}/{p.max_devices_tainted}   "
             f"nodes disrupted: {status.nodes_disrupted}/{p.max_nodes_disrupted}",
             f"per {p.window_s:g}s: at most {p.max_driver_share:.0%} of a driver's devices, {p.max_pool_share:.0%} "
             f"of a pool's (never fewer than {p.min_devices}); on limit: {p.on_limit}",
             f"storm: {p.storm.share:.0%} of a driver within {p.storm.window_s:g}s (at least {p.storm.min_devices}); "
             f"clears after {p.storm.clear_s:g}s calm" + ("" if p.storm.enabled else " (off)")]
    if status.storm is not None:
        s = status.storm
        lines.append(f"TRIPPED at {s.tripped_at:%Y-%m-%d %H:%M:%S}: {s.summary}; fleet incident {s.fleet_incident}")
        if status.clear_since is not None:
            lines.append(f"calm since {status.clear_since:%H:%M:%S}")
    if status.fleet is not None:
        lines.append("fleet: " + (", ".join(f"{d} {n}" for d, n in sorted(status.fleet.drivers.items())) or "unknown"))
    lines += _spares_lines(status)
    for permit in status.permits:
        past = f" (approved past the limits by {permit.override_by})" if permit.override_by else ""
        lines.append(f"  holds  {permit.incident_id} on {permit.node} since {permit.since:%H:%M:%S}{past}")
    lines.append(status.waiting_summary)
    for incident in status.waiting:
        since = status.waiting_since.get(incident)
        lines.append(f"  waits  {incident}" + (f" since {since:%H:%M:%S}" if since else ""))
    lines += [f"  log    {line}" for line in status.history]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``guard`` to the ``podmedic`` command tree."""
    from workers.cli.incidents import _by, _run  # the incidents CLI's runner: same exit codes, same hard exit

    p = sub.add_parser("guard", help="the fleet guard: status, resume after a storm", description=GUARD_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = p.add_subparsers(dest="guard_command", required=True, metavar="ACTION")

    def cmd_status(args: argparse.Namespace) -> int:
        def configured() -> GuardPolicy:
            # An operator command reads its variables itself (connection.add_flags): the flag, else the variable.
            policy = args.policy or PolicyFile.load().policy
            return load_policy_or_exit(policy).guard or GuardPolicy(enabled=False)

        async def job(t: connection.Target) -> int:
            status = await status_or_idle(t, configured)
            sys.stdout.write(dump(status, args.output) if args.output else render(status) + "\n")
            return 0
        return _run(args, job)

    def cmd_resume(args: argparse.Namespace) -> int:
        async def job(t: connection.Target) -> int:
            status = await resume(t, ResumeRequest(by=args.by, reason=args.reason))
            print(render(status))
            return 0
        return _run(args, job)

    q = gsub.add_parser("status", help="limits, counts, permits, waiting incidents, storm")
    add_output_flag(q, ("json", "yaml"), "text")
    policy_flag(q, "policy YAML whose guard limits an idle guard shows")
    q.set_defaults(func=cmd_status)
    q = gsub.add_parser("resume", help="end a storm pause now (what tripped it cannot trip it again)")
    q.add_argument("--by", default=_by(), help="who resumes (default: your user name)")
    q.add_argument("--reason", required=True, help="why it is safe to act again")
    q.set_defaults(func=cmd_resume)
    for action in gsub.choices.values():
        connection.add_flags(action)
