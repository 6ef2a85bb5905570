"""``podmedic incidents ...`` and ``podmedic report``: find, read, steer and write up incidents.

Exit codes: 0 done, 1 the incident refused (the reason is printed), 2 no such incident
or it is closed (or a bad flag), 3 Temporal unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import urllib.parse
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.service import RPCError

from podmedic.domain.incident import (
    STEPS,
    TIMELINE_HEAD,
    AbortRequest,
    ApprovalRequest,
    Phase,
    Resolution,
    SkipRequest,
)
from podmedic.domain.policy_ref import ref_of
from podmedic.incidents.query import (
    KINDS,
    OperatorError,
    Row,
    Shown,
    incident_id,
    list_incidents,
    list_query,
    show,
    steer,
)
from podmedic.incidents.report import fetch_report, markdown
from podmedic.temporal.connect import connect_failure
from workers.cli import connection
from workers.cli.exiting import exit_now
from workers.cli.output import add_output_flag, render

INCIDENTS_HELP = """\
Find, read and steer incidents (Temporal visibility, queries and validated updates).

  podmedic incidents list --phase AwaitingApproval          who waits for an operator
  podmedic incidents show device/gpu.nvidia.com/node-0001/gpu-3
  podmedic incidents approve ID taint --by alice            a gated step goes ahead
  podmedic incidents skip ID checkpoint --reason "job saves every 5 min"
  podmedic incidents abort ID --reason "wrong node; handled by hand"
  podmedic incidents resolve ID --note "board replaced"     the device is fixed: untaint and close
ID is the workflow id, or just driver/pool/device. Add --stack DIR to use a `podmedic up` stack.
"""


def _by() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def ui_link(t: connection.Target, wid: str, run_id: str) -> str:
    """The incident's page in the Temporal UI, when the UI's address is known."""
    if not t.ui_url:
        return ""
    return (f"{t.ui_url.rstrip('/')}/namespaces/{urllib.parse.quote(t.namespace, safe='')}/workflows/"
            f"{urllib.parse.quote(wid, safe='')}/{run_id}/history")


PHASES = tuple(sorted({p.value for p in Phase} | {"NodeIncident", "Quarantined", "Fenced", "Storm", "Acting",
                                                  "Waiting"}))
"""What ``PodmedicPhase`` holds: a device incident's phases, a node incident's own two, a pool fence's and a
storm's, a stall's and a maintenance's ``Acting`` and a maintenance's ``Waiting``."""


def _print_rows(rows: list[Row], *, wide: bool = False) -> None:
    if not rows:
        print("no incidents match", file=sys.stderr)
        return
    more = f" {'DRIVER':<16} {'JOB':<20} {'TICKET':<12} RUN" if wide else ""
    print(f"{'ID':<48} {'STATUS':<10} {'PHASE':<16} {'MODE':<16} {'NODE':<12} {'OUTCOME':<22} {'AWAITING':<10} "
          f"{'STARTED':<19}{more}")
    for r in rows:
        a = r.attributes
        extra = (f" {a.get('PodmedicDriver', '-'):<16} {a.get('PodmedicJob', '-'):<20} "
                 f"{a.get('PodmedicTicket', '-'):<12} {r.run_id}") if wide else ""
        print(f"{r.id:<48} {r.status:<10} {a.get('PodmedicPhase', '-'):<16} {a.get('PodmedicFailureMode', '-'):<16} "
              f"{a.get('PodmedicNode', '-'):<12} {a.get('PodmedicOutcome', '-'):<22} "
              f"{a.get('PodmedicAwaitingApproval', '-'):<10} {r.started:%Y-%m-%d %H:%M:%S}{extra}")


def _print_shown(s: Shown, link: str) -> None:
    print(f"{s.id}  run {s.run_id}  {s.type}  {s.status}")
    if s.summary:
        print(f"summary: {s.summary}")
    if link:
        print(f"ui: {link}")
    if s.policy is not None:
        print(f"policy: {ref_of(s.policy).short} (-o yaml prints it whole)")
    st = s.state
    if st is not None:
        print(f"phase: {st.phase.value} — {st.doing}")
        if st.why:
            print(f"why: {st.why}")
        if st.pending_approval:
            p = st.pending_approval
            print(f"PENDING APPROVAL: {p.step}: {p.action} (gate {p.gate}; {p.on_timeout} after {p.timeout_s:g}s)\n"
                  f"  approve: podmedic incidents approve {s.id} {p.step} --by NAME")
        for pod in st.pods:
            print(f"pod: {pod.namespace}/{pod.name} on {pod.node or '-'}" + (f" (job {pod.job})" if pod.job else ""))
    out = s.outcome
    if out is not None:
        print(f"outcome: {out.outcome.value} — {out.explanation}")
    decisions = (st.decisions if st else out.decisions if out else [])
    for d in decisions:
        print(f"decision: {d.at:%H:%M:%S} {d.step} {d.decision} by {d.by}" + (f": {d.note}" if d.note else ""))
    timeline = st.timeline if st else out.timeline if out else []
    folded = st.timeline_folded if st else out.timeline_folded if out else 0
    for i, t in enumerate(timeline):
        if folded and i == TIMELINE_HEAD:
            print(f"  ... {folded} line(s) folded (the first {TIMELINE_HEAD} and the latest are kept) ...")
        print(f"  {t.at:%H:%M:%S} {t.step:<10} {t.message}")
    if s.other is not None:
        print(json.dumps(s.other, indent=2, default=str))


def _run(args: argparse.Namespace, job: Callable[[connection.Target], Coroutine[Any, Any, int]]) -> int:
    try:
        target = connection.target(args)
    except connection.TargetError as exc:
        print(f"podmedic: {exc}", file=sys.stderr)
        return 2
    try:
        return exit_now(asyncio.run(job(target)))
    except OperatorError as exc:
        print(f"podmedic: {exc}", file=sys.stderr)
        return exit_now(exc.code)
    except RuntimeError as exc:  # the SDK's "Failed client connect"
        if "connect" not in str(exc).lower():
            raise
        print(f"podmedic: cannot reach Temporal at {target.address} (namespace {target.namespace}): "
              f"{connect_failure(exc)}", file=sys.stderr)
        return exit_now(3)


def cmd_list(args: argparse.Namespace) -> int:
    """``incidents list``."""
    async def job(t: connection.Target) -> int:
        query = list_query(args.type, driver=args.driver, node=args.node, phase=args.phase,
                           namespace=args.pod_namespace, job=args.job, pod=args.pod, open_only=args.open)
        rows = await list_incidents(await connection.client_for(t), query, args.limit)
        if args.output in ("json", "yaml"):
            sys.stdout.write(render(rows, args.output))
        elif args.output == "name":
            sys.stdout.write("".join(f"{r.id}\n" for r in rows))
        else:
            _print_rows(rows, wide=args.output == "wide")
        return 0
    return _run(args, job)


def cmd_show(args: argparse.Namespace) -> int:
    """``incidents show``."""
    async def job(t: connection.Target) -> int:
        shown = await show(await connection.client_for(t), incident_id(args.id), args.run)
        if args.output:
            sys.stdout.write(render(shown, args.output))
        else:
            _print_shown(shown, ui_link(t, shown.id, shown.run_id))
        return 0
    return _run(args, job)


def _steering(update: str, request: Callable[[argparse.Namespace], BaseModel]) -> Callable[[argparse.Namespace], int]:
    def cmd(args: argparse.Namespace) -> int:
        async def job(t: connection.Target) -> int:
            answer = await steer(await connection.client_for(t), incident_id(args.id), update, request(args))
            print(f"{answer.incident_id}: {answer.accepted} (phase {answer.phase.value})")
            return 0
        return _run(args, job)
    return cmd


def cmd_report(args: argparse.Namespace) -> int:
    """``report``."""
    async def job(t: connection.Target) -> int:
        client = await connection.client_for(t)
        wid = incident_id(args.id)
        try:
            rep = await fetch_report(client, wid, args.run)
        except RPCError as exc:
            raise OperatorError(f"no incident {wid}: {exc.message}", 2) from exc
        rep.ui_url = ui_link(t, rep.incident_id, rep.run_id)
        text = markdown(rep) if (args.output or "markdown") == "markdown" else render(rep, args.output)
        if args.file:
            args.file.write_text(text)
            print(f"wrote {args.file}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    return _run(args, job)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``incidents`` and ``report`` to the ``podmedic`` command tree."""
    p = sub.add_parser("incidents", help="list, show, approve, skip, abort, resolve incidents",
                       description=INCIDENTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    isub = p.add_subparsers(dest="incidents_command", required=True, metavar="ACTION")

    q = isub.add_parser("list", help="incidents by search attributes (Temporal visibility), newest first")
    q.add_argument("--type", choices=[*KINDS, "all"], default="device", help="incident kind (default %(default)s)")
    q.add_argument("--driver", help="DRA driver, e.g. gpu.nvidia.com")
    q.add_argument("--node", help="node name")
    q.add_argument("--phase", choices=PHASES, metavar="PHASE", help=f"one of: {', '.join(PHASES)}")
    q.add_argument("-n", "--namespace", dest="pod_namespace", help="Kubernetes namespace of the affected pods")
    q.add_argument("--job", help="the affected pods' Job")
    q.add_argument("--pod", metavar="NAMESPACE/NAME", help="a pod the incident touched (replacements too)")
    q.add_argument("--open", action="store_true", help="only incidents still running")
    q.add_argument("--limit", type=int, default=100, help="at most this many (default %(default)s)")
    add_output_flag(q, ("json", "yaml", "wide", "name"), "a table")
    q.set_defaults(func=cmd_list)

    q = isub.add_parser("show", help="an incident's state, pending approval, decisions and timeline")
    q.add_argument("id", help="workflow id, or driver/pool/device")
    q.add_argument("--run", help="run id (default: the latest run)")
    add_output_flag(q, ("json", "yaml"), "text")
    q.set_defaults(func=cmd_show)

    steps = ", ".join(STEPS)
    q = isub.add_parser("approve", help="approve the step a gated incident waits on")
    q.add_argument("id")
    q.add_argument("step", help=f"the pending step ({steps})")
    q.add_argument("--by", default=_by(), help="who approves (default: your user name)")
    q.add_argument("--note", default="", help="why, for the record")
    q.set_defaults(func=_steering("approve", lambda a: ApprovalRequest(step=a.step, by=a.by, note=a.note)))

    q = isub.add_parser("skip", help="do not take a step (the pending one, or one still ahead)")
    q.add_argument("id")
    q.add_argument("step", help=f"one of {steps}")
    q.add_argument("--reason", required=True, help="why, for the record")
    q.add_argument("--by", default=_by(), help="who decides (default: your user name)")
    q.set_defaults(func=_steering("skip", lambda a: SkipRequest(step=a.step, by=a.by, reason=a.reason)))

    q = isub.add_parser("abort", help="stop the incident now, at whatever it waits on (what was done stays done)")
    q.add_argument("id")
    q.add_argument("--reason", required=True, help="why, for the record")
    q.add_argument("--by", default=_by(), help="who aborts (default: your user name)")
    q.set_defaults(func=_steering("abort", lambda a: AbortRequest(by=a.by, reason=a.reason)))

    q = isub.add_parser("resolve", help="the device is fixed: the incident untaints and closes")
    q.add_argument("id")
    q.add_argument("--by", default=_by(), help="who resolves (default: your user name)")
    q.add_argument("--note", default="", help="what was done, e.g. board replaced")
    q.set_defaults(func=_steering("resolve", lambda a: Resolution(by=a.by, note=a.note)))
    for action in isub.choices.values():
        connection.add_flags(action)

    p = sub.add_parser("report", help="an incident's post-mortem: health at failure, every action with its time")
    p.add_argument("id", help="workflow id, or driver/pool/device")
    p.add_argument("--run", help="run id (default: the latest run)")
    add_output_flag(p, ("markdown", "json", "yaml"), "markdown")
    p.add_argument("--file", type=Path, help="write the report here instead of to standard output")
    connection.add_flags(p)
    p.set_defaults(func=cmd_report)
