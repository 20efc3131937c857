"""The built-in page in a real headless Chromium (Debian's chromium + chromium-driver,
driven by Selenium) against a live server: token prompt, search with its filters,
highlighted snippets, the document view with its table of contents, an upload, the
status tab. Screenshots land in ``docs/screenshots/`` when ``GUAIPECA_SCREENSHOTS=1``.

Without a browser the tests skip, except under CI (``CI=true``), where they must run:
``.ci/run`` installs the browser.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from support import REPO
from support.http import LiveServer
from support.web import TOKEN, chromium, need_chromium

selenium = pytest.importorskip("selenium", reason="selenium is not installed")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow  # browser: headless Chromium against a real server

SHOTS = REPO / "docs" / "screenshots"
_TMP_SHOTS = Path(tempfile.mkdtemp(prefix="guaipeca-screenshots-"))
DOWNLOADS = Path(tempfile.mkdtemp(prefix="guaipeca-downloads-"))
need_chromium()


@pytest.fixture(scope="module")
def browser(web_live: LiveServer) -> Iterator[WebDriver]:
    # "Download original" saves into DOWNLOADS (the page fetches the file with the token).
    driver = chromium(DOWNLOADS)
    try:
        driver.get(web_live.url + "/")
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver, seconds: float = 60) -> WebDriverWait[WebDriver]:
    # A re-render (Back runs the search again) replaces elements between two polls.
    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))


def first_source(driver: WebDriver) -> str:
    """The first hit's source line, read in one go (the list may be re-rendered at any time)."""
    found = driver.find_elements(By.CSS_SELECTOR, "#results .hit .where")
    return found[0].text if found else ""


def visible(driver: WebDriver, selector: str) -> WebElement:
    return wait(driver).until(ec.visibility_of_element_located((By.CSS_SELECTOR, selector)))


def shot(driver: WebDriver, name: str) -> None:
    """A screenshot: into docs/screenshots/ with GUAIPECA_SCREENSHOTS=1 (to refresh the
    ones checked in), else into a temporary folder (the tree stays clean)."""
    folder = SHOTS if os.environ.get("GUAIPECA_SCREENSHOTS") == "1" else _TMP_SHOTS
    folder.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(folder / name))
    assert (folder / name).stat().st_size > 10_000  # a real picture, not a blank page


def no_script_ran(driver: WebDriver) -> None:
    assert driver.execute_script("return window.pwned === undefined")


def current_text(driver: WebDriver) -> str:
    """The highlighted span of the document view, read in one go (it is re-rendered)."""
    text = driver.execute_script(
        "return [...document.querySelectorAll('#doc-text .current')]"
        ".map((c) => c.textContent).join('')"
    )
    return str(text)


def search(driver: WebDriver, query: str) -> list[WebElement]:
    driver.find_element(By.ID, "tab-search").click()
    box = visible(driver, "#q")
    box.clear()
    box.send_keys(query)
    old = driver.find_elements(By.CSS_SELECTOR, "#results .hit")
    box.send_keys(Keys.ENTER)  # Enter searches
    if old:
        wait(driver).until(ec.staleness_of(old[0]))
    wait(driver).until(lambda d: d.find_element(By.ID, "result-count").text.endswith(")"))
    return driver.find_elements(By.CSS_SELECTOR, "#results .hit")


# The tests share one browser and run in order, as a user would go.
def test_a_wrong_token_is_refused_then_the_right_one_unlocks_the_page(browser: WebDriver) -> None:
    visible(browser, "#auth")  # the first API call got 401: the page asks for the token
    assert Select(browser.find_element(By.ID, "corpus")).options[-1].text == "all"
    browser.find_element(By.ID, "token").send_keys("wrong-token")
    browser.find_element(By.CSS_SELECTOR, "#auth-form button").click()
    visible(browser, "#auth")
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "#auth-form button").click()
    wait(browser).until(
        lambda d: (
            [o.text for o in Select(d.find_element(By.ID, "corpus")).options]
            == ["all", "docs", "inbox"]
        )
    )
    assert not browser.find_element(By.ID, "auth").is_displayed()


def test_search_shows_ranked_hits_with_highlighted_snippets(browser: WebDriver) -> None:
    hits = search(browser, "duck feathers waterproof")
    assert len(hits) >= 3
    first = hits[0]
    marks = [m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, ".snippet mark")]
    assert marks and set(marks) <= {"duck", "ducks", "feathers", "waterproof", "feather"}
    sources = [h.find_element(By.CSS_SELECTOR, ".where").text for h in hits]
    assert all(s.startswith(("docs / ", "inbox / ")) for s in sources)
    ranks = [h.find_element(By.CSS_SELECTOR, ".rank").text for h in hits]
    assert ranks == [f"{i}." for i in range(1, len(hits) + 1)]
    assert not any(word in h.text for h in hits for word in ("undefined", "null", "NaN"))
    shot(browser, "search.png")
    no_script_ran(browser)


def test_filters_narrow_the_results(browser: WebDriver) -> None:
    Select(browser.find_element(By.ID, "extension")).select_by_visible_text(".pdf")
    hits = search(browser, "firearm background checks by state")
    assert hits
    for hit in hits:
        assert hit.find_element(By.CSS_SELECTOR, ".where").text.endswith(".pdf")
        assert hit.find_element(By.CSS_SELECTOR, ".page").text.startswith("page")
    Select(browser.find_element(By.ID, "extension")).select_by_visible_text("any")

    Select(browser.find_element(By.ID, "corpus")).select_by_visible_text("inbox")
    hits = search(browser, "notes")
    assert hits and all(
        h.find_element(By.CSS_SELECTOR, ".where").text.startswith("inbox / ") for h in hits
    )
    Select(browser.find_element(By.ID, "corpus")).select_by_visible_text("all")

    Select(browser.find_element(By.ID, "mode")).select_by_visible_text("keyword")
    where = browser.find_element(By.ID, "where")
    browser.find_element(By.CSS_SELECTOR, "details summary").click()
    where.send_keys("{not json")
    browser.find_element(By.ID, "search-button").click()
    message = visible(browser, "#message")
    assert "not valid JSON" in message.text
    where.clear()


def test_the_document_view_shows_the_hit_in_place_and_the_toc(
    browser: WebDriver, web_root: Path
) -> None:
    Select(browser.find_element(By.ID, "mode")).select_by_visible_text("hybrid")
    hits = search(browser, "grey heron spears fish")
    first = hits[0]
    assert first.find_element(By.CSS_SELECTOR, ".where").text == "docs / guide.md"
    snippet_words = first.find_element(By.CSS_SELECTOR, ".path").text
    assert "Field guide › Birds › Herons" in snippet_words  # the full heading trail
    first.find_element(By.CSS_SELECTOR, "button.open").click()
    visible(browser, "#view-document")
    assert browser.find_element(By.ID, "doc-title").text == "guide.md"
    visible(browser, "#doc-text .current")
    assert "grey heron" in current_text(browser)
    # The Markdown is rendered: headings, a table; links and images reduced to their text.
    text = browser.find_element(By.ID, "doc-text")
    assert [h.text for h in text.find_elements(By.TAG_NAME, "h2")] == ["Birds", "Safety"]
    table = text.find_element(By.TAG_NAME, "table")
    assert [c.text for c in table.find_elements(By.TAG_NAME, "th")] == ["Bird", "Call"]
    assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == 2
    assert "##" not in text.text and "|---" not in text.text
    assert not text.find_elements(By.CSS_SELECTOR, "a, img, script")
    assert "pond map" in text.text and "[a heron]" in text.text
    # The hit's span is marked in place, inside the rendered blocks.
    marked = browser.execute_script(
        "return [...document.querySelectorAll('#doc-text .current')]"
        ".map((m) => m.parentElement.tagName)"
    )
    assert marked and set(marked) <= {"P", "H3", "TD", "TH", "LI", "SPAN"}
    toc = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#toc button")]
    assert toc[:3] == ["Field guide", "Birds", "Ducks"] and "Safety" in toc
    # The document's text is shown as text: its markup never runs.
    assert "<script>window.pwned = true</script>" in browser.find_element(By.ID, "doc-text").text
    no_script_ran(browser)
    browser.find_element(By.ID, "download").click()
    saved = DOWNLOADS / "guide.md"
    wait(browser).until(lambda d: saved.exists() and saved.stat().st_size > 0)
    assert saved.read_bytes() == (web_root / "docs" / "guide.md").read_bytes()

    # A long document: its headings jump to their section.
    browser.find_element(By.ID, "back").click()
    visible(browser, "#view-search")  # Back went to the search's address
    hits = search(browser, "duck anatomy")
    duck = next(
        h for h in hits if h.find_element(By.CSS_SELECTOR, ".where").text.endswith("duck.html")
    )
    duck.find_element(By.CSS_SELECTOR, "button.open").click()
    visible(browser, "#doc-text .current")
    headings = browser.find_elements(By.CSS_SELECTOR, "#toc button")
    assert len(headings) > 5
    target = next(b for b in headings if b.text.strip() == "Taxonomy")
    browser.execute_script("arguments[0].scrollIntoView()", target)
    before = current_text(browser)
    target.click()
    wait(browser).until(lambda d: current_text(d) != before)
    assert current_text(browser).startswith("Taxonomy")
    heading = browser.execute_script(
        "return document.querySelector('#doc-text .current').parentElement.tagName"
    )
    assert heading == "H2"
    assert browser.find_elements(By.CSS_SELECTOR, "#doc-text table")  # the infobox
    browser.execute_script("window.scrollTo(0, 0)")
    shot(browser, "document.png")
    # Esc closes the document view.
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    visible(browser, "#view-search")
    assert not browser.find_element(By.ID, "view-document").is_displayed()


def test_upload_saves_indexes_and_finds_the_file(browser: WebDriver, web_root: Path) -> None:
    note = web_root / "upload" / "pond-survey.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text(
        "# Pond survey\n\n## Amphibians\n\nWe counted forty natterjack toads by the reeds.\n",
        encoding="utf-8",
    )
    browser.find_element(By.ID, "tab-upload").click()
    visible(browser, "#upload-form")
    assert [o.text for o in Select(browser.find_element(By.ID, "upload-corpus")).options] == [
        "inbox"
    ]
    browser.find_element(By.ID, "upload-file").send_keys(str(note))
    browser.find_element(By.ID, "upload-subfolder").send_keys("surveys/2026")
    browser.find_element(By.ID, "upload-button").click()
    done = visible(browser, "#upload-result .upload-ok")
    assert done.text.startswith("Uploaded surveys/2026/pond-survey.md (")
    assert "into inbox" in done.text
    shot(browser, "upload.png")
    saved = web_root / "inbox" / "surveys" / "2026" / "pond-survey.md"
    assert saved.read_bytes() == note.read_bytes()

    # Another file of the same name: refused with a clear message, nothing replaced (the
    # same bytes again would be accepted: a retry of an interrupted upload).
    first = note.read_bytes()
    note.write_text(note.read_text(encoding="utf-8") + "\nA heron too.\n", encoding="utf-8")
    browser.find_element(By.ID, "upload-file").send_keys(str(note))
    browser.find_element(By.ID, "upload-subfolder").send_keys("surveys/2026")
    browser.find_element(By.ID, "upload-button").click()
    assert "already exists" in visible(browser, "#message").text
    assert saved.read_bytes() == first

    hits = search(browser, "natterjack toads")
    assert hits[0].find_element(By.CSS_SELECTOR, ".where").text == (
        "inbox / surveys/2026/pond-survey.md"
    )


def test_documents_and_status_tabs(browser: WebDriver) -> None:
    browser.find_element(By.ID, "tab-documents").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#doc-list tr")) >= 4)
    names = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#doc-list button")]
    assert "guide.md" in names and "surveys/2026/pond-survey.md" in names
    guide = next(
        b
        for b in browser.find_elements(By.CSS_SELECTOR, "#doc-list button")
        if b.text == "guide.md"
    )
    guide.click()
    wait(browser).until(lambda d: d.find_element(By.ID, "doc-title").text == "guide.md")
    assert browser.find_element(By.ID, "tab-documents").get_attribute("aria-selected") == "true"
    browser.find_element(By.ID, "back").click()
    visible(browser, "#view-documents")
    browser.find_element(By.ID, "tab-status").click()
    rows = wait(browser).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#status tbody tr") or False
    )
    cells = [r.find_elements(By.TAG_NAME, "td") for r in rows]
    assert [(c[0].text, c[5].text) for c in cells] == [("docs", "no"), ("inbox", "yes")]
    shown = browser.find_element(By.ID, "status").text
    assert "all-MiniLM-L6-v2" in shown and "null" not in shown and "undefined" not in shown
    shot(browser, "status.png")


def hits_shown(driver: WebDriver, mode: str) -> list[WebElement]:
    """The results once a search in ``mode`` has shown them."""
    wait(driver).until(
        lambda d: (
            d.find_element(By.ID, "result-count").text.endswith(f"({mode})")
            and d.find_elements(By.CSS_SELECTOR, "#results .hit")
        )
    )
    return driver.find_elements(By.CSS_SELECTOR, "#results .hit")


def test_deep_links_run_the_search_and_open_the_document_at_its_span(
    browser: WebDriver, web_live: LiveServer
) -> None:
    # Issue 31: the page can be linked to. A search's address runs it, as a new page load.
    browser.get(web_live.url + "/?q=grey+heron+spears+fish&corpus=docs&mode=keyword")
    hits = hits_shown(browser, "keyword")
    assert browser.find_element(By.ID, "q").get_attribute("value") == "grey heron spears fish"
    assert Select(browser.find_element(By.ID, "mode")).first_selected_option.text == "keyword"
    assert Select(browser.find_element(By.ID, "corpus")).first_selected_option.text == "docs"
    sources = [h.find_element(By.CSS_SELECTOR, ".where").text for h in hits]
    assert sources[0] == "docs / guide.md" and all(s.startswith("docs / ") for s in sources)

    # The document view has its own address, with the hit's span.
    hits[0].find_element(By.CSS_SELECTOR, "button.open").click()
    visible(browser, "#doc-text .current")
    assert "grey heron" in current_text(browser)
    document = browser.current_url
    params = parse_qs(urlsplit(document).query)
    assert (params["doc"], params["corpus"]) == (["guide.md"], ["docs"])
    start, end = int(params["start"][0]), int(params["end"][0])
    assert 0 <= start < end

    # Back returns to the search, Forward to the document.
    browser.back()
    visible(browser, "#view-search")
    assert parse_qs(urlsplit(browser.current_url).query) == {
        "q": ["grey heron spears fish"],
        "corpus": ["docs"],
        "mode": ["keyword"],
    }
    # Back runs the search again: wait for its list, which replaces the one shown before.
    wait(browser).until(lambda d: first_source(d) == "docs / guide.md")
    browser.forward()
    visible(browser, "#doc-text .current")
    assert "grey heron" in current_text(browser)

    # The document's address alone opens it at the span, and Back from there (no earlier
    # page of ours) goes to the search page.
    browser.get(
        web_live.url
        + "/?"
        + urlencode({"doc": "guide.md", "corpus": "docs", "start": start, "end": end})
    )
    visible(browser, "#doc-text .current")
    assert browser.find_element(By.ID, "doc-title").text == "guide.md"
    assert "grey heron" in current_text(browser)
    browser.find_element(By.ID, "back").click()
    visible(browser, "#view-search")

    # A tab's address, and a misspelt corpus in a link: the server's one-line answer.
    browser.get(web_live.url + "/?view=status")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#status tbody tr") or False)
    browser.get(web_live.url + "/?q=heron&corpus=doc")
    assert "did you mean 'docs'" in visible(browser, "#message").text


def test_forgetting_the_token_locks_the_page_again(browser: WebDriver) -> None:
    browser.find_element(By.ID, "signout").click()
    visible(browser, "#auth")
    browser.refresh()
    visible(browser, "#auth")
