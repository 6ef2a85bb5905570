"""Payload encryption: histories on the server hold no readable incident data; the codec
server gives it back to whoever holds the key."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import load_policy
from podmedic.temporal.codec import CodecKeyError, EncryptionCodec, load_keys
from podmedic.temporal.codec_server import build_codec_app
from podmedic.temporal.connect import data_converter
from podmedic.temporal.security import TemporalSecurity
from tests.workflow.fakes import event
from workers.ingest.starts import deliver_event

ASYNC = pytest.mark.asyncio(loop_scope="session")
SECRET_MESSAGE = "driver says: uncorrectable ECC at row 0x7f3a (codec-marker-41)"


def _key_file(path: Path, *keys: bytes) -> Path:
    path.write_text("# newest first\n" + "".join(base64.b64encode(k).decode() + "\n" for k in keys))
    return path


@ASYNC
async def test_rotated_keys_still_open_old_payloads(tmp_path: Path) -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = EncryptionCodec(load_keys(_key_file(tmp_path / "k1", old)))
    after = EncryptionCodec(load_keys(_key_file(tmp_path / "k2", new, old)))
    sealed = await before.encode([Payload(metadata={"encoding": b"binary/plain"}, data=b"hello")])
    assert b"hello" not in sealed[0].data
    assert (await after.decode(sealed))[0].data == b"hello"
    with pytest.raises(ValueError, match="not in the key file"):
        await EncryptionCodec([new]).decode(sealed)


@pytest.mark.parametrize(("content", "why"), [
    ("", "no key in it"), ("not base64!\n", "line 1: not base64"),
    (base64.b64encode(b"short").decode(), "5 bytes, AES-256 needs 32"),
])
def test_bad_key_files_say_which_line_and_why(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "key"
    path.write_text(content)
    with pytest.raises(CodecKeyError, match=why):
        load_keys(path)


@ASYNC
async def test_incident_history_is_sealed_and_the_codec_server_opens_it(
    dev_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    codec = EncryptionCodec(load_keys(_key_file(tmp_path / "key", os.urandom(32))))
    sealed_client = await Client.connect(dev_env.client.service_client.config.target_host,
                                         data_converter=data_converter(TemporalSecurity(codec=codec)))
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-sealed", device=f"gpu-{task_queue}")
    ev = event(device=device, event_id="sealed").model_copy(update={"message": SECRET_MESSAGE})
    await deliver_event(sealed_client, ev, load_policy(None), task_queue=task_queue, search_attributes=False)
    handle = dev_env.client.get_workflow_handle(device.workflow_id)
    try:
        raw = (await handle.fetch_history()).to_json()
        assert "codec-marker-41" not in raw and base64.b64encode(b"codec-marker").decode() not in raw
        started = (await handle.fetch_history()).events[0].workflow_execution_started_event_attributes
        payload = started.input.payloads[0]
        assert payload.metadata["encoding"] == b"binary/encrypted"
        runner = web.AppRunner(build_codec_app(codec, ["http://ui.example"]))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        body = json_format.MessageToDict(Payloads(payloads=[payload]))
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{port}/decode", json=body,
                                    headers={"Origin": "http://ui.example"}) as resp:
                assert resp.status == 200 and resp.headers["Access-Control-Allow-Origin"] == "http://ui.example"
                opened = json_format.ParseDict(await resp.json(), Payloads()).payloads[0]
            async with session.post(f"http://127.0.0.1:{port}/decode", json={"payloads": "nope"}) as bad:
                assert bad.status == 400
        await runner.cleanup()
        assert device.device.encode() in opened.data and b"json/plain" in opened.metadata["encoding"]
    finally:
        await handle.terminate("test done")
