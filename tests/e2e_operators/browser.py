"""Headless Chromium for the UI test: Debian's ``chromium`` and ``chromium-driver``, installed
with apt when missing (the test machines run as root), driven through Selenium with the
system driver, so nothing is downloaded at run time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

PACKAGES = ("chromium", "chromium-driver")


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or ("/usr/lib/chromium/chromedriver"
                                              if Path("/usr/lib/chromium/chromedriver").exists() else None)
    return (browser, driver) if browser and driver else None


def ensure_chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installing the Debian packages if needed."""
    if os.environ.get("PODMEDIC_SKIP_BROWSER"):
        pytest.skip("PODMEDIC_SKIP_BROWSER is set")
    found = _binaries()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.fail(f"headless Chromium is missing: install the Debian packages {' '.join(PACKAGES)} "
                    "(or set PODMEDIC_SKIP_BROWSER=1 to skip the browser test)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    found = _binaries()
    if not found:
        pytest.fail(f"installed {' '.join(PACKAGES)} but chromium/chromedriver are not on PATH")
    return found


def headless_chrome(browser: str, driver: str) -> webdriver.Chrome:
    """A headless Chromium session; root needs --no-sandbox, small /dev/shm needs the disk."""
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for downloads
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1600,1400", "--lang=en-US"):
        options.add_argument(arg)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.set_page_load_timeout(60)
    return chrome
