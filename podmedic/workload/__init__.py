"""A few lines for a training script to answer podmedic (stdlib only).

    from podmedic.workload import CheckpointServer, AnnotationResponder, exit_for_restart

    def save(request_id: str) -> tuple[str, str]:
        step = trainer.save("/ckpt")                    # your own checkpoint code
        return f"step-{step}", f"s3://ckpt/run7/step-{step}"

    CheckpointServer(save).start()                      # method: http
    AnnotationResponder.in_cluster(save).start()        # method: annotation

See docs/checkpoint-protocol.md for the protocol each helper speaks.
"""

from podmedic.workload.annotation import AnnotationResponder, ApiServer
from podmedic.workload.http_endpoint import CheckpointServer
from podmedic.workload.protocol import Save, read_annotations
from podmedic.workload.restart import DEFAULT_RESTART_EXIT_CODE, exit_for_restart, restart_exit_code, restart_requested

__all__ = [
    "DEFAULT_RESTART_EXIT_CODE",
    "AnnotationResponder",
    "ApiServer",
    "CheckpointServer",
    "Save",
    "exit_for_restart",
    "read_annotations",
    "restart_exit_code",
    "restart_requested",
]
