"""The load generator: posts CloudEvents to the ingest from its own process.

Detectors are other machines; running the sender in the benchmark's own interpreter would
charge its CPU to the ingest. ``python -m benchmarks.load`` reads a ``LoadSpec`` as JSON on
stdin, pre-encodes every request body, sends them with ``concurrency`` connections and
writes a ``LoadResult`` as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from workers.ingest.http.cloudevents import BATCH, EVENT_TYPE, STRUCTURED


class LoadSpec(BaseModel):
    """What to send."""

    url: str
    token: str
    devices: list[tuple[str, str, str]] = Field(description="(driver, pool, device); events go round-robin.")
    events: int
    batch: int = Field(1, ge=1, description="Events per request; 1 sends structured single events.")
    concurrency: int = Field(32, ge=1)
    code: int = 79
    run: str = Field("r", description="Prefix of CloudEvent ids, unique per run.")
    record: bool = Field(False, description="Return each request's send and answer times.")


class Sent(BaseModel):
    """One request: when it left, when its answer came, and for which devices."""

    devices: list[str]
    sent: float
    answered: float
    status: int


class LoadResult(BaseModel):
    """What happened."""

    elapsed_s: float
    requests: int
    events_accepted: int
    deduplicated: int
    status_counts: dict[str, int]
    first_sent: float
    cpu_s: float = Field(0.0, description="CPU time the load generator used while sending.")
    sends: list[Sent] = Field(default_factory=list)


def _event(spec: LoadSpec, i: int) -> dict[str, object]:
    driver, pool, device = spec.devices[i % len(spec.devices)]
    return {"specversion": "1.0", "id": f"{spec.run}-{i}", "source": f"bench/{pool}", "type": EVENT_TYPE,
            "data": {"driver": driver, "pool": pool, "device": device, "node": pool, "health": "Unhealthy",
                     "reason": "XidError", "code": spec.code, "message": f"XID {spec.code} (benchmark)"}}


def _requests(spec: LoadSpec) -> list[tuple[bytes, list[str]]]:
    out = []
    for start in range(0, spec.events, spec.batch):
        events = [_event(spec, i) for i in range(start, min(start + spec.batch, spec.events))]
        body = events[0] if spec.batch == 1 else events
        devices = [f"{e['data']['driver']}/{e['data']['pool']}/{e['data']['device']}"  # type: ignore[index]
                   for e in events]
        out.append((json.dumps(body).encode(), devices))
    return out


class _Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough HTTP for the ingest's answers.

    A hand-rolled client costs the sender a fraction of what aiohttp's does, which on a
    2-core machine leaves that CPU to the ingest under test.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        return cls(*await asyncio.open_connection(host, port))

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        self.writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
        header = await self.reader.readuntil(b"\r\n\r\n")
        status = int(header[9:12])
        length = 0
        for line in header.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def run_load(spec: LoadSpec) -> LoadResult:
    """Send everything ``spec`` says; return counts and (when recording) per-request times."""
    bodies = _requests(spec)
    target = urlsplit(spec.url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    ctype = BATCH if spec.batch > 1 else STRUCTURED
    head = (f"POST {target.path.rstrip('/')}/v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {spec.token}\r\nContent-Type: {ctype}\r\nContent-Length: ").encode()
    statuses: dict[str, int] = {}
    sends: list[Sent] = []
    totals = [0, 0]
    next_index = 0

    async def sender(conn: _Connection) -> None:
        nonlocal next_index
        while next_index < len(bodies):
            body, devices = bodies[next_index]
            next_index += 1
            sent = time.time()
            status, answer = await conn.request(head, body)
            answered = time.time()
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status == 202:
                parsed = json.loads(answer)
                totals[0] += parsed["accepted"]
                totals[1] += parsed["deduplicated"]
            if spec.record:
                sends.append(Sent(devices=devices, sent=sent, answered=answered, status=status))

    conns = await asyncio.gather(*(_Connection.open(host, port) for _ in range(spec.concurrency)))
    try:
        first = time.time()
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(sender(conn) for conn in conns))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        for conn in conns:
            conn.close()
    return LoadResult(elapsed_s=elapsed, requests=len(bodies), events_accepted=totals[0], deduplicated=totals[1],
                      status_counts=statuses, first_sent=first, cpu_s=round(cpu, 2), sends=sends)


async def run_in_child(spec: LoadSpec) -> LoadResult:
    """Run ``spec`` in a fresh ``python -m benchmarks.load`` process."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "benchmarks.load", stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate(spec.model_dump_json().encode())
    if proc.returncode != 0:
        raise RuntimeError(f"load generator exited with {proc.returncode}")
    return LoadResult.model_validate_json(out)


def main() -> None:
    """Entry point of the child process."""
    spec = LoadSpec.model_validate_json(sys.stdin.buffer.read())
    result = asyncio.run(run_load(spec))
    sys.stdout.write(result.model_dump_json())


if __name__ == "__main__":
    main()
