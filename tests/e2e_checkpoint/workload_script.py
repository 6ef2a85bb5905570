"""A training script's side of the protocol, run as a real process by the tests:
``python -m tests.e2e_checkpoint.workload_script http|annotation SAVES_FILE [API_URL NAMESPACE POD]``.

Every save appends the request id to SAVES_FILE; the http mode prints its port first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from podmedic.workload import AnnotationResponder, ApiServer, CheckpointServer


def main(argv: list[str]) -> None:
    mode, saves = argv[0], Path(argv[1])

    def save(request_id: str) -> tuple[str, str]:
        with saves.open("a") as out:
            out.write(request_id + "\n")
        count = len(saves.read_text().splitlines())
        return f"helper-{count}", f"file:///ckpt/helper-{count}"

    if mode == "http":
        server = CheckpointServer(save, port=0, host="127.0.0.1").start()
        print(server.port, flush=True)
    else:
        AnnotationResponder(save, ApiServer(argv[2]), argv[3], argv[4]).start(interval_s=0.1)
        print("ready", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
