"""The page under access grants, in a real headless Chromium against a live server with a
team's grants (tests/support/access.py): it says who is signed in, lists only the corpora
that person may read, and offers upload only into those they may write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guaipeca.server import Service
from guaipeca.server.http import build_app
from support import MemoEmbedder
from support.access import STATIC_TOKEN, person, team_service
from support.http import LiveServer
from support.web import chromium, need_chromium

need_chromium()
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow  # browser: headless Chromium against a real server


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, real_embedder: MemoEmbedder
) -> Iterator[Service]:
    with team_service(tmp_path_factory.mktemp("team-page"), real_embedder) as service:
        yield service


@pytest.fixture(scope="module")
def browser(team: Service) -> Iterator[WebDriver]:
    with LiveServer(lambda port: build_app(team, host="127.0.0.1", port=port)) as live:
        driver = chromium()
        try:
            driver.get(live.url + "/")
            yield driver
        finally:
            driver.quit()


def _options(driver: WebDriver, select: str) -> list[str]:
    # textContent: the upload form's select is on a tab that may be hidden.
    options = Select(driver.find_element(By.ID, select)).options
    return [str(o.get_attribute("textContent")) for o in options]


def _sign_in(driver: WebDriver, token: str) -> None:
    if driver.find_element(By.ID, "signout").is_displayed():
        driver.find_element(By.ID, "signout").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "auth").is_displayed())
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#auth-form button").click()


@pytest.mark.parametrize(
    ("who", "token", "reads", "writes", "says"),
    [
        ("alice", person("alice", "legal"), ["contracts", "handbook"], ["contracts"],
         "Signed in as alice · reads contracts, handbook; writes contracts"),
        ("bob", person("bob", "sales"), ["handbook"], ["handbook"],
         "Signed in as bob · reads handbook; writes handbook"),
        ("static token", STATIC_TOKEN, ["handbook"], [], "reads handbook; writes nothing"),
    ],
)  # fmt: skip
def test_the_page_shows_who_is_signed_in_and_only_their_corpora(
    browser: WebDriver, who: str, token: str, reads: list[str], writes: list[str], says: str
) -> None:
    _sign_in(browser, token)
    # the selectors are filled again as the page routes: an option may go stale mid-read
    wait = WebDriverWait(browser, 60, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda d: _options(d, "corpus") == ["all", *reads])
    wait.until(lambda d: says in d.find_element(By.ID, "whoami").text)
    wait.until(lambda d: _options(d, "upload-corpus") == writes)
    browser.find_element(By.ID, "tab-upload").click()
    assert browser.find_element(By.ID, "upload-off").is_displayed() == (not writes)
    assert "archive" not in browser.page_source
    browser.find_element(By.ID, "tab-search").click()


def test_a_forgotten_token_leaves_no_name_on_the_page(browser: WebDriver, tmp_path: Path) -> None:
    browser.find_element(By.ID, "signout").click()
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "auth").is_displayed())
    browser.refresh()
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "auth").is_displayed())
    assert not browser.find_element(By.ID, "whoami").is_displayed()
