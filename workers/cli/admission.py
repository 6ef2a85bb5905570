"""``podmedic admission``: serve the same-node placement webhook."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from podmedic.settings import AdmissionSettings
from workers.cli.flags import host_port
from workers.cli.settings_args import use_settings

HELP = """\
Keep the replacement of a pod on its node while podmedic recovers it.

A same_node reschedule writes a placement hold (ConfigMap podmedic-placement-holds in the
pod's namespace) before it evicts; the API server calls this webhook for every new pod, and a
pod whose labels match a hold gets a required node affinity to the hold's node, so the Job,
JobSet, StatefulSet or LeaderWorkerSet replacement lands there and nowhere else. Without a
hold, or when the holds cannot be read, a pod is admitted unchanged (register it with
failurePolicy: Ignore, deploy/kustomize/base/admission.yaml): the webhook never stops pods being created.

TLS: mount a Secret with tls.crt/tls.key (cert-manager, --cert-dir), or let the webhook make a
self-signed CA and certificate for <service>.<namespace>.svc and write the CA into the
MutatingWebhookConfiguration's caBundle at start.

Example:
  podmedic admission --kubeconfig kc --listen 0.0.0.0:9443 --cert-dir /etc/podmedic/tls
"""


def cmd_admission(args: argparse.Namespace) -> int:
    """Serve the webhook until SIGTERM."""
    from podmedic.kube.errors import KubeConfigError, KubeError
    from podmedic.kube.gateway import KubeGateway
    from workers.admission import certs
    from workers.admission.server import serve

    try:
        kube = KubeGateway(args.kubeconfig, component="admission")
    except KubeConfigError as exc:
        print(f"podmedic admission: refusing to start: {exc}", file=sys.stderr)
        return 2
    try:
        if args.cert_dir is not None:
            cert = certs.mounted(args.cert_dir)
        else:
            service = f"{args.service}.{args.service_namespace}.svc"
            extra = [n.strip() for n in args.extra_names.split(",") if n.strip()]
            names = [service, f"{service}.cluster.local", *extra]
            cert = certs.self_signed(args.self_signed_dir, names)
            print(f"podmedic admission: self-signed certificate for {', '.join(names)} in {args.self_signed_dir}",
                  file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"podmedic admission: refusing to start: {exc}", file=sys.stderr)
        return 2
    if cert.ca is not None and args.webhook_configuration:
        try:
            changed = kube.set_webhook_ca(args.webhook_configuration, cert.ca.read_bytes())
            print(f"podmedic admission: caBundle of MutatingWebhookConfiguration {args.webhook_configuration}: "
                  f"{'written to ' + str(changed) + ' webhook(s)' if changed else 'already current'}", file=sys.stderr)
        except KubeError as exc:
            print(f"podmedic admission: WARNING: could not write the CA to MutatingWebhookConfiguration "
                  f"{args.webhook_configuration} ({exc}); the API server will not trust this webhook until its "
                  f"caBundle holds {cert.ca}", file=sys.stderr)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(kube, cert, args.admission_listen[0], args.admission_listen[1], stop)

    try:
        asyncio.run(main())
    except OSError as exc:
        print(f"podmedic admission: cannot listen on {args.admission_listen[0]}:{args.admission_listen[1]}: {exc}",
              file=sys.stderr)
        return 1
    finally:
        kube.close()
    return 0


def register(sub: Any) -> None:
    """Add ``admission`` to the ``podmedic`` command tree."""
    p = sub.add_parser("admission", help="serve the webhook that keeps a replacement pod on its node",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    use_settings(p, AdmissionSettings, "admission")
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig (env PODMEDIC_KUBECONFIG; unset: in-cluster)")
    p.add_argument("--listen", dest="admission_listen", metavar="HOST:PORT", type=host_port,
                   help="HTTPS address (env PODMEDIC_ADMISSION_LISTEN; default 0.0.0.0:9443)")
    p.add_argument("--cert-dir", type=Path, help="tls.crt and tls.key to serve (env PODMEDIC_ADMISSION_CERT_DIR)")
    p.add_argument("--self-signed-dir", type=Path, help="where a self-signed CA and certificate are kept")
    p.add_argument("--service", help="the webhook's Service name (the certificate's DNS name)")
    p.add_argument("--service-namespace", help="the Service's namespace")
    p.add_argument("--webhook-configuration", metavar="NAME",
                   help="MutatingWebhookConfiguration to write the self-signed CA into ('' to leave it)")
    p.add_argument("--extra-names", metavar="NAMES", help="more certificate names or IPs, comma-separated")
    p.set_defaults(func=cmd_admission)
