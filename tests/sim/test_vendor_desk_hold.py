"""The vendor desk's hold over HTTP (``/desk/hold``): the fault suite kills the worker while the answer to
its ticket create is held, the ticket already filed, and needs to see that it is."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp.test_utils import TestServer

from podmedic_sim.vendors.desk import VendorDesk


async def test_a_held_create_is_filed_counted_and_answered_once_released() -> None:
    desk = VendorDesk()
    server = TestServer(desk.app(), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            base = str(server.make_url(""))
            async with http.post(f"{base}/desk/hold", json={"hold": "yes"}) as bad:
                assert bad.status == 400
            async with http.post(f"{base}/desk/hold", json={"hold": True}) as held:
                assert await held.json() == {"hold": True, "held": 0}
            create = asyncio.create_task(http.post(f"{base}/tickets", json={"title": "gpu-0"},
                                                   headers={"Idempotency-Key": "k1"}))
            for _ in range(200):
                async with http.get(f"{base}/desk/hold") as now:
                    if (await now.json())["held"] == 1:
                        break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError("the create was never held")
            assert len(desk.tickets) == 1 and not create.done(), "filed, its answer held"
            async with http.post(f"{base}/desk/hold", json={"hold": False}) as released:
                assert (await released.json())["hold"] is False
            answer = await asyncio.wait_for(create, 10)
            assert answer.status == 201
            answer.release()
    finally:
        await server.close()
