"""A real browser on the Temporal UI of a running stack: an operator finds the incident
waiting for approval by its search attributes and reads its summary, details and the
pending approval. Screenshots go to test-artifacts/operators/."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By

from tests.e2e_operators.browser import ensure_chromium, headless_chrome
from tests.e2e_operators.stack import REPO, Ops

pytestmark = pytest.mark.asyncio(loop_scope="session")
ARTIFACTS = REPO / "test-artifacts" / "operators"
T = TypeVar("T")


@pytest.fixture(scope="module")
def chrome() -> Iterator[webdriver.Chrome]:
    browser, driver = ensure_chromium()
    session = headless_chrome(browser, driver)
    yield session
    session.quit()


def _until(what: str, check: Callable[[], T | None], timeout: float = 30) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except WebDriverException:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"the Temporal UI did not show {what} within {timeout:g}s")
        time.sleep(0.3)


def _frames_text(chrome: webdriver.Chrome) -> list[str]:
    """The rendered Markdown panes (the UI puts each in its own iframe)."""
    texts = []
    for frame in chrome.find_elements(By.TAG_NAME, "iframe"):
        chrome.switch_to.frame(frame)
        texts.append(chrome.find_element(By.TAG_NAME, "body").text)
        chrome.switch_to.default_content()
    return texts


async def test_operator_finds_the_incident_and_its_pending_approval_in_the_ui(
    ops: Ops, chrome: webdriver.Chrome
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    device = "gpu.nvidia.com/rack-8/gpu-5"
    wid = ops.post("rack-8", "gpu-5", 79, "XID 79: GPU has fallen off the bus")
    await ops.wait_phase(wid, "AwaitingApproval")
    started = time.monotonic()

    query = f"PodmedicAwaitingApproval = 'taint' AND PodmedicDevice = '{device}'"
    chrome.get(f"{ops.ep['ui_url']}/namespaces/default/workflows?query={urllib.parse.quote(query)}")
    link = _until(f"{wid} in the filtered list", lambda: next(iter(chrome.find_elements(By.LINK_TEXT, wid)), None))
    rows = _until("the rows", lambda: chrome.find_elements(By.XPATH, "//a[starts-with(normalize-space(.), 'device/')]"))
    chrome.save_screenshot(str(ARTIFACTS / "1-list-awaiting-approval.png"))
    assert [r.text for r in rows] == [wid]  # the search attributes single it out

    link.click()
    _until("the incident page", lambda: "/workflows/" in chrome.current_url or None)
    tab = _until("the User Metadata tab",
                 lambda: next(iter(chrome.find_elements(By.XPATH, "//*[normalize-space(text())='User Metadata']")),
                              None))
    tab.click()

    def panes() -> list[str] | None:
        texts = _frames_text(chrome)
        return texts if len(texts) >= 3 and all(texts[:3]) and "Pending approval" in texts[2] else None

    summary, details, current = _until("summary, details and current details", panes)[:3]
    chrome.save_screenshot(str(ARTIFACTS / "2-incident-user-metadata.png"))
    assert summary.strip() == f"{device} Unhealthy — XID 79: GPU has fallen off the bus"
    for text in (f"Device incident {device}", "Node: rack-8", "Classification: device_failed, permanent",
                 "Policy in force (gpu.nvidia.com@", "Approval gates: taint_no_execute (900s, then abort)"):
        assert text in details, f"{text!r} not in the details pane:\n{details}"
    for text in ("AwaitingApproval — waiting for an operator to approve taint",
                 "Pending approval: taint — DeviceTaintRule NoExecute on " + device,
                 f"podmedic incidents approve {wid} taint --by NAME"):
        assert text in current, f"{text!r} not in the current details pane:\n{current}"

    chrome.find_element(By.XPATH, "//*[normalize-space(text())='Search Attributes']").click()
    _until("the search attributes", lambda: "PodmedicAwaitingApproval" in chrome.page_source or None)
    chrome.save_screenshot(str(ARTIFACTS / "3-incident-search-attributes.png"))
    print(f"browser steps took {time.monotonic() - started:.1f}s")

    aborted = ops.cli("incidents", "abort", wid, "--reason", "browser test done")
    assert aborted.returncode == 0, aborted.stderr
