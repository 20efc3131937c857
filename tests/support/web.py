"""What the web page's tests share (tests/server/web): the server's Bearer token, and a
headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

TOKEN = "web-page-test-token-0123456789abcdef"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def need_chromium() -> None:
    """Skip the calling test module without a browser, except under CI (``CI=true``),
    where the browser must be there (``.ci/run`` installs it)."""
    pytest.importorskip("selenium", reason="selenium is not installed")
    if CHROMIUM and DRIVER:
        return
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI: chromium and chromedriver must be installed (.ci/run does it)")
    pytest.skip(
        "no chromium/chromedriver (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )


def chromium(downloads: Path | None = None) -> WebDriver:
    """A headless Chromium; the caller quits it. ``downloads``: where files it downloads go."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in CI
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--lang=en-US",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        options.add_argument(arg)
    if downloads is not None:
        options.add_experimental_option(
            "prefs",
            {"download.default_directory": str(downloads), "download.prompt_for_download": False},
        )
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(str(DRIVER)))
    driver.set_page_load_timeout(60)
    return driver
