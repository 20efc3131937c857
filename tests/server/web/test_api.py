"""The page's routes over a real socket: the page itself (public, no data), its JSON API
(same token as /mcp, refuses cross-site requests), raw uploads, and server.allowed_hosts."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.errors import ConfigError
from guaipeca.server import Service
from guaipeca.server.http import allowed_hosts, build_app
from support.http import LiveServer
from support.web import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def http(web_live: LiveServer, web_root: Path) -> Iterator[httpx2.Client]:
    def clean(response: httpx2.Response) -> None:
        response.read()
        assert str(web_root) not in response.text
        assert "Traceback" not in response.text

    with httpx2.Client(
        base_url=web_live.url, timeout=60, event_hooks={"response": [clean]}
    ) as client:
        yield client


def call(http: httpx2.Client, tool: str, args: object, **kw: object) -> httpx2.Response:
    headers = {**AUTH, "Content-Type": "application/json", **kw.pop("headers", {})}  # type: ignore[dict-item]
    return http.post(f"/api/tools/{tool}", content=json.dumps(args), headers=headers)


def test_the_page_and_its_assets_need_no_token_and_forbid_framing(http: httpx2.Client) -> None:
    page = http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<title>Guaipeca</title>" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    for asset, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        got = http.get(f"/ui/{asset}")
        assert got.status_code == 200 and got.headers["content-type"].startswith(kind)
        assert "http://" not in got.text and "https://" not in got.text  # no CDN, nothing remote
    icon = http.get("/ui/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert 'rel="icon" href="/ui/favicon.svg"' in page.text
    assert http.get("/ui/nope.js").status_code == 401  # not a public path: auth first
    assert http.get("/ui/nope.js", headers=AUTH).status_code == 404


def test_the_api_needs_the_same_token_as_mcp(http: httpx2.Client) -> None:
    no_token = http.post("/api/tools/status", json={})
    assert no_token.status_code == 401
    wrong = call(http, "status", {}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "invalid token"}
    ok = call(http, "status", {})
    assert ok.status_code == 200
    assert {c["name"] for c in ok.json()["corpora"]} == {"docs", "inbox"}


def test_search_through_the_api_equals_the_tool(http: httpx2.Client) -> None:
    out = call(http, "search", {"query": "heron spears fish", "top_k": 3, "mode": "keyword"})
    assert out.status_code == 200, out.text
    hit = out.json()["hits"][0]
    assert hit["source_path"] == "guide.md"
    assert hit["heading_path"][:2] == ["Field guide", "Birds"]
    assert "**heron**" in hit["snippet"].lower()


def test_api_errors_are_one_clear_line(http: httpx2.Client) -> None:
    unknown = call(http, "nope", {})
    assert unknown.status_code == 404 and unknown.json() == {"error": "no tool named 'nope'"}
    bad = call(http, "search", {"query": "x", "topk": 3})
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("unknown argument 'topk' (did you mean 'top_k'?)")
    missing = call(http, "get_document", {"doc_id": "missing.md"})
    assert missing.status_code == 400 and "missing.md" in missing.json()["error"]
    not_json = http.post(
        "/api/tools/status", content=b"{", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert not_json.status_code == 400 and not_json.json() == {
        "error": "the body is not valid JSON"
    }
    not_object = call(http, "status", [1, 2])
    assert not_object.status_code == 400


def test_render_turns_markdown_into_sanitised_html(http: httpx2.Client) -> None:
    def render(body: object) -> httpx2.Response:
        return http.post(
            "/api/render",
            content=json.dumps(body),
            headers={**AUTH, "Content-Type": "application/json"},
        )

    text = (
        "## Birds\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>x()</script> ![p](http://h/p.png)"
    )
    got = render({"texts": [text, "a **duck**"], "spans": [[0, 8], None]})
    assert got.status_code == 200
    doc, bold = got.json()["html"]
    assert bold == "<p>a <strong>duck</strong></p>\n"
    (snippet,) = render({"texts": ["a **duck** here"], "snippet": True}).json()["html"]
    assert doc.startswith(
        '<h2><span class="hit-start"></span>Birds<span class="hit-end"></span></h2>'
    )
    assert "<table>" in doc and "&lt;script&gt;" in doc and "<img" not in doc
    assert snippet == "a <mark>duck</mark> here"
    assert http.post("/api/render", json={"texts": ["x"]}).status_code == 401
    for bad, error in (
        ({"texts": "x"}, "texts must be a list of strings"),
        ({"texts": ["x"], "spans": [[1]]}, "each span is null or [start, end]"),
        ({"texts": ["x"], "spans": []}, "spans must be a list as long as texts"),
        ({"texts": ["x" * 2_000_001]}, "at most 2,000,000 characters in one call"),
    ):
        refused = render(bad)
        assert refused.status_code == 400 and refused.json() == {"error": error}


def test_cross_site_requests_are_refused(http: httpx2.Client) -> None:
    # A web form can POST text/plain to any site without a preflight: refused.
    form = http.post(
        "/api/tools/status", content=b"{}", headers={**AUTH, "Content-Type": "text/plain"}
    )
    assert form.status_code == 415
    evil = call(http, "status", {}, headers={"Origin": "https://evil.example"})
    assert evil.status_code == 403 and evil.json() == {"error": "origin not allowed"}
    own = call(http, "status", {}, headers={"Origin": str(http.base_url).rstrip("/")})
    assert own.status_code == 200
    upload = http.put(
        "/api/upload?corpus=inbox&filename=x.md",
        content=b"# X\n",
        headers={**AUTH, "Origin": "https://evil.example"},
    )
    assert upload.status_code == 403


def test_raw_upload_indexes_the_file(http: httpx2.Client, web_root: Path) -> None:
    body = b"# Lichen survey\n\nThe xanthoria lichen grows on the old pier.\n"
    out = http.put(
        "/api/upload?corpus=inbox&filename=lichen.md&subfolder=surveys",
        content=body,
        headers={**AUTH, "Content-Type": "application/octet-stream"},
    )
    assert out.status_code == 200, out.text
    got = out.json()
    assert got["doc_id"] == "surveys/lichen.md" and got["bytes"] == len(body)
    assert got["indexed"]["corpus"] == "inbox"
    assert (web_root / "inbox" / "surveys" / "lichen.md").read_bytes() == body
    found = call(http, "search", {"query": "xanthoria", "mode": "keyword", "corpora": ["inbox"]})
    assert found.json()["hits"][0]["doc_id"] == "surveys/lichen.md"
    # The same bytes again (a retry) are accepted; other bytes under the name are not.
    again = http.put(
        "/api/upload?corpus=inbox&filename=lichen.md&subfolder=surveys", content=body, headers=AUTH
    )
    assert again.status_code == 200 and again.json()["replaced"] is False
    other = http.put(
        "/api/upload?corpus=inbox&filename=lichen.md&subfolder=surveys",
        content=body + b"More.\n",
        headers=AUTH,
    )
    assert other.status_code == 400 and "already exists" in other.json()["error"]


@pytest.mark.parametrize(
    ("query", "status", "error"),
    [
        ("corpus=docs&filename=a.md", 403, "does not accept uploads"),
        ("corpus=nope&filename=a.md", 404, "no corpus named 'nope'"),
        ("corpus=inbox", 400, "give corpus and filename"),
        ("corpus=inbox&filename=../a.md", 400, "filename"),
        ("corpus=inbox&filename=a.exe", 400, "not accepted"),
    ],
)
def test_bad_uploads_are_refused(http: httpx2.Client, query: str, status: int, error: str) -> None:
    out = http.put(f"/api/upload?{query}", content=b"# A\n", headers=AUTH)
    assert out.status_code == status, out.text
    assert error in out.json()["error"]


def test_an_upload_over_the_limit_is_refused_before_it_is_saved(
    http: httpx2.Client, web_root: Path
) -> None:
    big = b"# Big\n" + b"a" * 1_000_000
    out = http.put("/api/upload?corpus=inbox&filename=big.md", content=big, headers=AUTH)
    assert out.status_code == 413
    assert not (web_root / "inbox" / "big.md").exists()

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield big[:600_000]
        yield big[600_000:]

    streamed = http.put("/api/upload?corpus=inbox&filename=big.md", content=chunks(), headers=AUTH)
    assert streamed.status_code == 413
    assert not (web_root / "inbox" / "big.md").exists()


# -- server.allowed_hosts ------------------------------------------------------------------
def test_allowed_hosts_lets_other_host_names_in(http: httpx2.Client) -> None:
    # The fixture's config lists "guaipeca" (a compose service name), at any port.
    for host, status in (("guaipeca:8090", 200), ("guaipeca", 200), ("evil.example:8090", 421)):
        out = call(http, "status", {}, headers={"Host": host})
        assert out.status_code == status, (host, out.text)
    mcp = http.post(
        "/mcp",
        headers={**AUTH, "Host": "guaipeca:8090", "Accept": "application/json, text/event-stream"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    )
    assert mcp.status_code == 200, mcp.text


def test_allowed_hosts_patterns() -> None:
    hosts = allowed_hosts("0.0.0.0", 8090, ["Guaipeca", "search.example.org:443", "fe80::1"])
    assert "127.0.0.1:8090" in hosts and "localhost:8090" in hosts
    assert {"guaipeca:*", "guaipeca", "search.example.org:443", "[fe80::1]:*"} <= set(hosts)
    assert "search.example.org:*" not in hosts
    assert allowed_hosts("0.0.0.0", 8090, ["*"])[-1] == "*"


def test_allowed_hosts_star_turns_the_check_off(web_service: Service) -> None:
    app = build_app(web_service, host="0.0.0.0", port=8090, extra_allowed_hosts=["*"])
    with LiveServer(lambda port: app) as live, httpx2.Client(base_url=live.url) as client:
        out = client.post(
            "/api/tools/status",
            json={},
            headers={**AUTH, "Host": "anything.example"},
        )
        assert out.status_code == 200


def test_bad_allowed_hosts_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"server\.allowed_hosts\.0: 'http://x' is not a host"):
        parse_settings({"server": {"allowed_hosts": ["http://x"]}}, env={})


def test_default_body_limit_fits_a_base64_upload_of_the_largest_file() -> None:
    s = parse_settings({}, env={})
    encoded = len(base64.b64encode(b"\0" * 3)) * -(-s.upload.max_file_size // 3)
    assert encoded + 64 * 1024 <= s.server.max_body_bytes


def test_a_body_limit_too_small_for_base64_uploads_is_logged(
    web_service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    settings = web_service.settings.model_copy(
        update={
            "server": web_service.settings.server.model_copy(update={"max_body_bytes": 1_000_000})
        }
    )
    small = Service(web_service.index, LoadedSettings(settings, None, web_service.loaded.data_dir))
    with caplog.at_level("WARNING", logger="guaipeca.server"):
        build_app(small, host="127.0.0.1", port=8090)
    assert "server.max_body_bytes (1000000) is below" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="guaipeca.server"):
        build_app(web_service, host="127.0.0.1", port=8090)  # 1 MB files, 68 MiB bodies
    assert "max_body_bytes" not in caplog.text
