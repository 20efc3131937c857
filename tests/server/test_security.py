"""Security of the HTTP face: auth (token and JWT), path traversal, body and rate
limits, CORS, Host checks, sanitised errors; each helper also on its own.

Live checks run against a real uvicorn server on 127.0.0.1 (ephemeral port) in a
background thread; every response is checked for leaks (the tmp folder's path, a
traceback).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from guaipeca import Index
from guaipeca.config import LoadedSettings, OidcSettings, ServerSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import ConfigError
from guaipeca.server import Service, build_server
from guaipeca.server.http import build_app
from guaipeca.server.limits import (
    BodyLimitMiddleware,
    SearchBusyError,
    SearchGate,
    SearchTimeoutError,
    TokenBucket,
    search_gate,
)
from guaipeca.server.oidc import OidcVerifier
from guaipeca.server.security import (
    AllowedHostsMiddleware,
    Authenticator,
    AuthError,
    AuthMiddleware,
    SanitizedErrorsMiddleware,
    UnsafePathError,
    cors_middleware,
    resolve_inside,
    safe_relative_path,
)
from support import free_port
from support.http import LiveServer

TOKEN = "s3cret-token-for-tests-0123456789"
JWT_SECRET = "a-jwt-secret-long-enough-for-hs256-and-hs512-0123456789abcdefghij"
ALLOWED_ORIGIN = "https://chat.example.org"
MAX_BODY = 4096
PROTOCOL = "2025-06-18"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
SECRET_TEXT = "TOP SECRET: the launch code is 0000"
DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun the zebra installer twice.\n",
    "notes/tax.txt": "Tax notes: the quokka rule applies to every receipt.\n",
    "victim.md": "# Victim\n\nDeleted by the one authorised request.\n",
}


def make_service(root: Path, server: dict[str, Any]) -> Service:
    docs = root / "docs"
    for rel, text in DOCS.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    (docs / ".hidden.md").write_text("# Hidden\n", encoding="utf-8")
    (root / "secret.md").write_text(SECRET_TEXT + "\n", encoding="utf-8")
    (docs / "link.md").symlink_to(root / "secret.md")
    data = root / "data"
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(docs)}],
            "upload": {"allow": ["docs"]},
            "storage": {"data_dir": str(data)},
            "server": server,
        },
        env={},
        cwd=root,
    )
    index = Index(data / "index", embedder=HashingEmbedder(), settings=settings.engine())
    service = Service(index, LoadedSettings(settings, None, data))
    service.reindex("docs")
    assert service.index.wait_for_embedding(60)  # the embedding phase runs behind the server
    return service


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("security")


@pytest.fixture(scope="module")
def service(root: Path) -> Iterator[Service]:
    service = make_service(
        root,
        {
            "auth_token": TOKEN,
            "jwt_secret": JWT_SECRET,
            "cors_origins": [ALLOWED_ORIGIN],
            "max_body_bytes": MAX_BODY,
            "rate_limit_rps": 1000,
            "rate_limit_burst": 1000,
            "auth_failures_per_minute": 100_000,  # these tests send many wrong tokens
        },
    )
    yield service
    service.index.close()


def server_with_a_failing_route(service: Service, root: Path) -> MCPServer:
    server = build_server(service)

    async def boom(request: Request) -> Response:
        raise RuntimeError(f"cannot open {root / 'data' / 'index'}")

    server.custom_route("/boom", methods=["GET"])(boom)
    return server


@pytest.fixture(scope="module")
def live(service: Service, root: Path) -> Iterator[LiveServer]:
    mcp = server_with_a_failing_route(service, root)
    with LiveServer(lambda p: build_app(service, mcp_server=mcp, host="127.0.0.1", port=p)) as live:
        yield live


def assert_clean(response: httpx2.Response, root: Path) -> None:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return
    response.read()
    assert "Traceback" not in response.text
    assert str(root) not in response.text
    assert SECRET_TEXT not in response.text


@pytest.fixture
def anon(live: LiveServer, root: Path) -> Iterator[httpx2.Client]:
    """A client without credentials."""
    hooks = {"response": [lambda r: assert_clean(r, root)]}
    with httpx2.Client(base_url=live.url, event_hooks=hooks, timeout=30) as client:
        yield client


@pytest.fixture
def authed(live: LiveServer, root: Path) -> Iterator[httpx2.Client]:
    """A client with the right token."""
    hooks = {"response": [lambda r: assert_clean(r, root)]}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx2.Client(base_url=live.url, headers=headers, event_hooks=hooks, timeout=30) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def initialize_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


def raw(client: httpx2.Client, method: str, target: str) -> httpx2.Response:
    """A request whose target goes out byte for byte (no dot-segment normalisation)."""
    return client.request(method, target, extensions={"target": target.encode("ascii")})


# -- auth on every route -----------------------------------------------------------------
def open_sse_session(client: httpx2.Client, headers: dict[str, str]) -> int:
    """Open ``GET /sse``; with a session, POST initialize to it. The last status."""
    with client.stream("GET", "/sse", headers=headers) as stream:
        if stream.status_code != 200:
            stream.read()
            return stream.status_code
        # Keep the line iterator referenced until the POST is answered: a generator dropped
        # after `break` is closed, which can close the stream, and the server then ends the
        # session before the POST arrives (a flaky 404).
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                endpoint = line[5:].strip()
                break
        else:
            raise AssertionError("no endpoint event")
        posted = client.post(endpoint, headers=headers, json=initialize_request())
        del lines
        return posted.status_code


ROUTES: list[tuple[str, str, dict[str, Any], int]] = [
    ("GET", "/tools", {}, 200),
    ("GET", "/download/docs/guide.md", {}, 200),
    ("POST", "/mcp", {"json": initialize_request(), "headers": MCP_HEADERS}, 200),
    ("GET", "/sse", {}, 202),  # through open_sse_session
    ("POST", "/messages/?session_id=" + "0" * 32, {"json": {"jsonrpc": "2.0"}}, 404),
    ("DELETE", "/mcp", {"headers": {"mcp-session-id": "0" * 32}}, 404),
    ("GET", "/nowhere", {}, 404),
    ("DELETE", "/documents?corpus=docs&filename=victim.md", {}, 200),  # last: it deletes
]


@pytest.mark.parametrize(
    ("credential", "expected_error"),
    [(None, "missing bearer token"), ("wrong-token", "invalid token"), (TOKEN, None)],
    ids=["no-token", "wrong-token", "right-token"],
)
def test_every_route_but_health_needs_the_token(
    anon: httpx2.Client, service: Service, credential: str | None, expected_error: str | None
) -> None:
    headers = bearer(credential) if credential else {}
    for method, path, kwargs, ok in ROUTES:
        if expected_error is None and method == "DELETE" and path.startswith("/documents"):
            assert (service.corpus_root("docs") / "victim.md").exists()
        if path == "/sse":
            status = open_sse_session(anon, headers)
        else:
            merged = {**kwargs, "headers": {**kwargs.get("headers", {}), **headers}}
            response = anon.request(method, path, **merged)
            status = response.status_code
            if expected_error is not None:
                assert response.json() == {"error": expected_error}, path
                assert response.headers["www-authenticate"].startswith("Bearer")
        assert status == (401 if expected_error else ok), (method, path)
    health = anon.get("/health", headers=headers)
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    # Nothing was deleted without the right token.
    victim = service.corpus_root("docs") / "victim.md"
    assert victim.exists() == (expected_error is not None)


def jwt_token(claims: dict[str, Any], key: str = JWT_SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=algorithm)


@pytest.mark.parametrize(
    ("make_token", "status", "error"),
    [
        (lambda: jwt_token({"sub": "alice", "exp": int(time.time()) + 600}), 200, None),
        (lambda: jwt_token({"id": "openwebui-user-7"}), 200, None),  # OpenWebUI: `id`, no `exp`
        (lambda: jwt_token({"sub": "alice", "exp": int(time.time()) - 60}), 401, "token expired"),
        (lambda: jwt_token({"sub": "alice"}, key=JWT_SECRET[::-1]), 401, None),
        (lambda: jwt_token({"sub": "alice"}, algorithm="HS512"), 401, None),
        (lambda: jwt.encode({"sub": "alice"}, "", algorithm="none"), 401, None),
        (lambda: jwt_token({"sub": "alice", "nbf": int(time.time()) + 600}), 401, None),
        (lambda: jwt_token({"sub": "alice"})[:-4] + "AAAA", 401, None),  # tampered signature
        (lambda: "not.a.jwt", 401, None),
    ],
    ids=[
        "valid",
        "openwebui-id",
        "expired",
        "wrong-key",
        "wrong-alg",
        "alg-none",
        "not-yet-valid",
        "tampered",
        "garbage",
    ],
)
def test_jwt(
    anon: httpx2.Client, make_token: Callable[[], str], status: int, error: str | None
) -> None:
    # Tokens are made when the test runs, not at collection: "valid" and "not yet valid" are
    # relative to now, and a long suite would otherwise age them past their 600 s.
    response = anon.get("/tools", headers=bearer(make_token()))
    assert response.status_code == status
    if status == 401:
        assert response.json() == {"error": error or "invalid token"}
        assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_an_mcp_session_belongs_to_the_identity_that_opened_it(anon: httpx2.Client) -> None:
    opened = anon.post("/mcp", json=initialize_request(), headers={**MCP_HEADERS, **bearer(TOKEN)})
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
    other = jwt_token({"sub": "mallory", "exp": int(time.time()) + 600})
    assert anon.post("/mcp", json=ping, headers={**headers, **bearer(other)}).status_code == 404
    assert anon.post("/mcp", json=ping, headers={**headers, **bearer(TOKEN)}).status_code == 200


# -- path traversal ------------------------------------------------------------------------
TRAVERSALS = [
    "../secret.md",
    "notes/../../secret.md",
    "..%2fsecret.md",
    "..%2Fsecret.md",
    "%2e%2e/secret.md",
    "%2E%2E%2Fsecret.md",
    "notes/%2e%2e/%2e%2e/secret.md",
    "%252e%252e/secret.md",
    "%252e%252e%252fsecret.md",
    "..%252fsecret.md",
    "/etc/passwd",
    "%2fetc%2fpasswd",
    "..%5csecret.md",
    "notes%5c..%5c..%5csecret.md",
    "guide.md%00.txt",
    "%00",
    "%EF%BC%8E%EF%BC%8E%EF%BC%8Fsecret.md",  # ．．／secret.md (full width)
    "%EF%BC%8E%EF%BC%8E/secret.md",  # ．．/secret.md
    "..%EF%BC%8Fsecret.md",  # ..／secret.md
    "%E2%80%A5/secret.md",  # ‥ (two dot leader)
    ".hidden.md",
    "link.md",  # a link inside the folder to the secret outside
    "notes",  # a folder
    "",
]


def test_download_refuses_traversal(authed: httpx2.Client) -> None:
    for attempt in TRAVERSALS:
        response = raw(authed, "GET", f"/download/docs/{attempt}")
        assert response.status_code in (400, 404), attempt
        assert SECRET_TEXT not in response.text
        assert "error" in response.json()


def test_delete_refuses_traversal_and_deletes_nothing(
    authed: httpx2.Client, service: Service, root: Path
) -> None:
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    docs_before = len(service.index.list_documents(corpus="docs"))
    for attempt in TRAVERSALS:
        response = raw(authed, "DELETE", f"/documents?corpus=docs&filename={attempt}")
        assert response.status_code in (400, 404), attempt
    # The corpus name goes through the same checks.
    for corpus in ("..", "%2e%2e", "docs%2f..", "nope"):
        response = raw(authed, "DELETE", f"/documents?corpus={corpus}&filename=guide.md")
        assert response.status_code in (400, 404), corpus
    after = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert after == before
    assert (root / "secret.md").read_text(encoding="utf-8").startswith(SECRET_TEXT)
    assert len(service.index.list_documents(corpus="docs")) == docs_before


# -- body size -----------------------------------------------------------------------------
def test_a_declared_body_over_the_limit_is_413(authed: httpx2.Client) -> None:
    big = b'{"jsonrpc": "2.0", "padding": "' + b"x" * MAX_BODY + b'"}'
    response = authed.post(
        "/mcp", content=big, headers={**MCP_HEADERS, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert "too large" in response.json()["error"]


def test_a_streamed_body_is_cut_off_at_the_limit(authed: httpx2.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(8):  # twice the limit, without a Content-Length
            yield b"x" * (MAX_BODY // 4)

    response = authed.post(
        "/mcp", content=chunks(), headers={**MCP_HEADERS, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert "too large" in response.json()["error"]


def test_a_body_within_the_limit_passes(authed: httpx2.Client) -> None:
    response = authed.post("/mcp", json=initialize_request(), headers=MCP_HEADERS)
    assert response.status_code == 200


# -- rate limit ----------------------------------------------------------------------------
def status_call(client: httpx2.Client, credential: str) -> httpx2.Response:
    return client.post("/api/tools/status", json={}, headers=bearer(credential))


def test_rate_limit_per_identity_answers_429_with_retry_after(root: Path) -> None:
    service = make_service(
        root / "limited",
        {
            "auth_token": TOKEN,
            "jwt_secret": JWT_SECRET,
            "rate_limit_rps": 0.01,
            "rate_limit_burst": 2,
        },
    )
    try:
        with (
            LiveServer(lambda p: build_app(service, host="127.0.0.1", port=p)) as live,
            httpx2.Client(base_url=live.url, timeout=30) as client,
        ):
            # Tool calls count; listing the tools (protocol traffic) never does.
            for _ in range(2):
                assert status_call(client, TOKEN).status_code == 200
            limited = status_call(client, TOKEN)
            assert limited.status_code == 429
            assert int(limited.headers["retry-after"]) >= 1
            assert "too many requests" in limited.json()["error"]
            assert client.get("/tools", headers=bearer(TOKEN)).status_code == 200
            # Another identity has its own bucket; health is never limited.
            bob = jwt_token({"sub": "bob", "exp": int(time.time()) + 600})
            assert status_call(client, bob).status_code == 200
            assert client.get("/health").status_code == 200
    finally:
        service.index.close()


def test_rate_limit_without_auth_is_per_client_ip(root: Path) -> None:
    service = make_service(root / "open", {"rate_limit_rps": 0.01, "rate_limit_burst": 1})
    try:
        with (
            LiveServer(lambda p: build_app(service, host="127.0.0.1", port=p)) as live,
            httpx2.Client(base_url=live.url, timeout=30) as client,
        ):
            assert client.post("/api/tools/status", json={}).status_code == 200
            limited = client.post("/api/tools/status", json={})
            assert limited.status_code == 429
            assert int(limited.headers["retry-after"]) >= 1
    finally:
        service.index.close()


def test_token_bucket_refills_at_its_rate() -> None:
    now = [100.0]
    bucket = TokenBucket(2.0, 3, clock=lambda: now[0], max_keys=2)
    assert [bucket.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert bucket.take("a") == 0.0
    assert bucket.take("b") == 0.0  # keys are independent
    now[0] += 100
    assert [bucket.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]  # never above burst
    assert bucket.take("a") > 0
    bucket.take("c")  # a third key evicts the least recently used one ("b")
    assert bucket.take("b") == 0.0


# -- CORS ----------------------------------------------------------------------------------
def preflight(client: httpx2.Client, origin: str) -> httpx2.Response:
    return client.options(
        "/mcp",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id",
        },
    )


def test_cors_preflight_from_an_allowed_origin(anon: httpx2.Client) -> None:
    response = preflight(anon, ALLOWED_ORIGIN)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "mcp-session-id" in allowed
    assert "DELETE" in response.headers["access-control-allow-methods"]


def test_cors_preflight_from_another_origin_is_refused(anon: httpx2.Client) -> None:
    response = preflight(anon, "https://evil.example")
    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


def test_cors_headers_on_answers(anon: httpx2.Client, authed: httpx2.Client) -> None:
    ok = authed.get("/tools", headers={"Origin": ALLOWED_ORIGIN})
    assert ok.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "mcp-session-id" in ok.headers["access-control-expose-headers"].lower()
    refused = anon.get("/tools", headers={"Origin": ALLOWED_ORIGIN})
    assert refused.status_code == 401  # a browser script can read why
    assert refused.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    foreign = authed.get("/tools", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in foreign.headers
    assert all(v != "*" for v in ok.headers.get_list("access-control-allow-origin"))


def test_mcp_checks_the_origin_too(authed: httpx2.Client) -> None:
    ok = authed.post(
        "/mcp", json=initialize_request(), headers={**MCP_HEADERS, "Origin": ALLOWED_ORIGIN}
    )
    assert ok.status_code == 200
    evil = authed.post(
        "/mcp",
        json=initialize_request(),
        headers={**MCP_HEADERS, "Origin": "https://evil.example"},
    )
    assert evil.status_code == 403


def test_cors_wildcard_is_refused_with_auth() -> None:
    with pytest.raises(ConfigError, match=r"'\*' is not allowed"):
        cors_middleware(["*"], auth_enabled=True)
    cors_middleware(["*"], auth_enabled=False)


# -- Host header (DNS rebinding) -------------------------------------------------------------
def test_a_foreign_host_header_is_refused_but_health_answers(authed: httpx2.Client) -> None:
    for path in ("/tools", "/download/docs/guide.md"):
        response = authed.get(path, headers={"Host": "rebind.attacker.example"})
        assert response.status_code == 421, path
    assert authed.get("/health", headers={"Host": "rebind.attacker.example"}).status_code == 200
    assert (
        authed.get("/tools", headers={"Host": "LOCALHOST:" + str(authed.base_url.port)}).status_code
        == 200
    )


# -- sanitised errors ----------------------------------------------------------------------
def test_an_unexpected_error_is_a_bare_500(
    authed: httpx2.Client, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="guaipeca.server"):
        response = authed.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert any(r.exc_info and "cannot open" in str(r.exc_info[1]) for r in caplog.records)


# -- the helpers on their own ----------------------------------------------------------------
def test_authenticator_token_and_identities() -> None:
    auth = Authenticator(TOKEN, JWT_SECRET)
    assert auth.enabled
    token_id = auth.authenticate(f"Bearer {TOKEN}")
    assert token_id.startswith("token:") and TOKEN not in token_id
    assert auth.authenticate(f"bearer   {TOKEN} ") == token_id
    assert auth.authenticate(f"Bearer {jwt_token({'sub': 'alice'})}") == "jwt:alice"
    assert auth.authenticate(f"Bearer {jwt_token({'id': 7})}") == "jwt:7"
    assert auth.authenticate(f"Bearer {jwt_token({'role': 'x'})}").startswith("jwt:#")
    for header in (None, "", "Bearer", "Basic dXNlcjpwYXNz", f"Token {TOKEN}"):
        with pytest.raises(AuthError, match="missing bearer token"):
            auth.authenticate(header)
    for wrong in (TOKEN + "x", TOKEN[:-1], "ñandú-ü", "x" * 10_000):
        with pytest.raises(AuthError, match="invalid token"):
            auth.authenticate(f"Bearer {wrong}")
    assert not Authenticator(None, None).enabled


def test_authenticator_with_only_a_token_ignores_jwts() -> None:
    auth = Authenticator(TOKEN, None)
    with pytest.raises(AuthError, match="invalid token"):
        auth.authenticate(f"Bearer {jwt_token({'sub': 'alice'})}")


def test_a_short_jwt_secret_works_without_a_warning_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="guaipeca.server"):
        auth = Authenticator(None, "t0p-s3cr3t")  # OpenWebUI's default key
    assert "shorter than 32 bytes" in caplog.text
    with pytest.warns(jwt.InsecureKeyLengthWarning):
        token = jwt_token({"sub": "u"}, key="t0p-s3cr3t")
    assert auth.authenticate(f"Bearer {token}") == "jwt:u"  # no warning: pytest errors on one


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x.md",
        "a/../../x.md",
        "./x.md",
        "a//x.md",
        "/etc/passwd",
        "C:/x.md",
        "c:x.md",
        "a\\..\\x.md",
        "x.md\x00.txt",
        "x\n.md",
        "%2e%2e/x.md",
        "a%2fb.md",
        "．．/x.md",
        "..／x.md",
        "a／b.md",
        "‥/x.md",
        "a＼x.md",
        ".git/config.md",
        "a/.hidden.md",
        "x" * 5000,
    ],
)
def test_safe_relative_path_refuses(bad: str) -> None:
    with pytest.raises(UnsafePathError):
        safe_relative_path(bad)


def test_safe_relative_path_accepts_and_normalises() -> None:
    assert safe_relative_path("notes/tax 2024.md") == "notes/tax 2024.md"
    assert safe_relative_path("ação.md") == "ação.md"
    assert safe_relative_path("a\u0301.md") == "\u00e1.md"  # NFC
    assert safe_relative_path("v1.2..3.md") == "v1.2..3.md"  # dots inside a name are fine


def test_resolve_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.md").write_text("a", encoding="utf-8")
    (root / "b.txt").write_text("b", encoding="utf-8")
    (root / "drafts").mkdir()
    (root / "drafts" / "d.md").write_text("d", encoding="utf-8")
    (tmp_path / "outside.md").write_text("o", encoding="utf-8")
    (root / "out.md").symlink_to(tmp_path / "outside.md")
    (root / "in.md").symlink_to(root / "sub" / "a.md")
    (root / "dir.md").mkdir()
    (root / "txt.md").symlink_to(root / "b.txt")
    exts = (".md",)
    assert resolve_inside(root, "sub/a.md", extensions=exts) == (root / "sub" / "a.md").resolve()
    assert resolve_inside(root, "in.md", extensions=exts) == (root / "sub" / "a.md").resolve()
    for bad in ("out.md", "b.txt", "missing.md", "dir.md", "txt.md", "sub/../../outside.md"):
        with pytest.raises(UnsafePathError):
            resolve_inside(root, bad, extensions=exts)
    with pytest.raises(UnsafePathError):
        resolve_inside(root, "drafts/d.md", extensions=exts, exclude=["drafts/*"])


def http_scope(path: str = "/x", headers: dict[str, str] | None = None) -> Scope:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 5000),
    }


def drive(
    app: Callable[[Scope, Receive, Send], Any], scope: Scope, bodies: list[bytes]
) -> list[Message]:
    """Run one ASGI request through ``app``; the messages it sent."""
    incoming: list[Message] = [
        {"type": "http.request", "body": b, "more_body": i < len(bodies) - 1}
        for i, b in enumerate(bodies)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    return sent


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    body = await Request(scope, receive).body()
    await PlainTextResponse(f"{len(body)} bytes")(scope, receive, send)


def status_of(sent: list[Message]) -> int:
    return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))


def test_body_limit_middleware_on_its_own() -> None:
    app = BodyLimitMiddleware(echo, max_bytes=10)
    assert status_of(drive(app, http_scope(), [b"12345", b"12345"])) == 200
    # Streamed past the limit: 413, and the app's own answer never goes out.
    sent = drive(app, http_scope(), [b"123456", b"123456", b"123456"])
    assert status_of(sent) == 413
    assert sum(m["type"] == "http.response.start" for m in sent) == 1
    declared = drive(app, http_scope(headers={"Content-Length": "11"}), [b"x" * 11])
    assert status_of(declared) == 413
    assert status_of(drive(app, http_scope(headers={"Content-Length": "x"}), [b""])) == 400


def test_sanitized_errors_middleware_on_its_own(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise OSError("/srv/private/index.sqlite: disk I/O error")

    with caplog.at_level(logging.ERROR, logger="guaipeca.server"):
        sent = drive(SanitizedErrorsMiddleware(broken), http_scope(), [b""])
    assert status_of(sent) == 500
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert body == b'{"error":"internal error"}'
    assert "/srv/private" in caplog.text  # the log has it all, the client nothing


def test_auth_and_host_middlewares_close_websockets() -> None:
    async def never(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("reached the app")

    ws: Scope = {**http_scope(headers={"Host": "evil.example"}), "type": "websocket"}
    for app in (
        AuthMiddleware(never, Authenticator(TOKEN, None)),
        AllowedHostsMiddleware(never, ["127.0.0.1:*"]),
    ):
        assert drive(app, ws, []) == [{"type": "websocket.close", "code": 1008}]


def test_allowed_hosts_middleware_patterns() -> None:
    app = AllowedHostsMiddleware(echo, ["127.0.0.1:*", "localhost:8090"])
    for host, status in [
        ("127.0.0.1:1234", 200),
        ("LOCALHOST:8090", 200),
        ("localhost:8091", 421),
        ("127.0.0.1.evil.example:80", 421),
        ("127.0.0.1", 421),
        ("", 421),
    ]:
        assert status_of(drive(app, http_scope(headers={"Host": host}), [b""])) == status, host


# -- SearchGate ----------------------------------------------------------------------------
def test_search_gate_runs_in_a_thread_and_passes_errors_on() -> None:
    gate = SearchGate(2, 5.0)

    async def main() -> None:
        loop_thread = threading.get_ident()
        assert await gate.run(lambda a, b: (a + b, threading.get_ident()), 2, 3) != (
            5,
            loop_thread,
        )
        with pytest.raises(ZeroDivisionError):
            await gate.run(lambda: 1 / 0)
        assert gate.running == 0

    anyio.run(main)


def test_search_gate_busy_and_timeout_errors_and_the_slot_of_an_overrun() -> None:
    gate = SearchGate(1, 0.2)
    release = threading.Event()

    async def main() -> None:
        with pytest.raises(SearchTimeoutError, match=r"longer than 0.2 s; retry with a narrower"):
            await gate.run(release.wait, 10.0)
        # The overrunning search still runs in its thread, and keeps its slot.
        assert gate.running == 1
        with pytest.raises(
            SearchBusyError, match=r"^the server is busy: 1 searches are running; retry"
        ):
            await gate.run(lambda: 1)
        release.set()
        # Its slot is given back when it really ends.
        assert await gate.run(lambda: 2) == 2
        assert gate.running == 0

    try:
        anyio.run(main)
    finally:
        release.set()


def test_one_identity_cannot_hold_every_search_slot() -> None:
    # Issue 38: eight abandoned searches of one caller held all eight slots.
    who = ["alice"]
    gate = SearchGate(3, 0.3, caller=lambda: who[0])
    assert gate.per_identity == 2  # the last tenth (at least one) is kept for others
    release = threading.Event()

    async def hold() -> None:  # overruns its deadline, and keeps its slot till it ends
        with contextlib.suppress(SearchTimeoutError):
            await gate.run(release.wait, 10.0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(hold)
            await anyio.wait_all_tasks_blocked()
            assert gate.running == 2
            busy = r"^busy: 2 searches of this caller are running \(at most 2 at once\)"
            with pytest.raises(SearchBusyError, match=busy):
                await gate.run(lambda: 1)
            who[0] = "bob"
            assert await gate.run(lambda: 2) == 2  # another caller still gets a slot
            release.set()
        # The abandoned searches' threads give their slots back when they end, a moment
        # after their callers left (bounded wait: a slot still held after 5 s fails below).
        with anyio.move_on_after(5):
            while gate.running:
                await anyio.sleep(0.01)
        who[0] = "alice"
        assert await gate.run(lambda: 3) == 3 and gate.running == 0

    try:
        anyio.run(main)
    finally:
        release.set()


def test_search_gate_from_settings() -> None:
    server = ServerSettings(max_concurrent_searches=3, search_timeout_seconds=2.5)
    gate = search_gate(server)
    assert (gate.max_concurrent, gate.timeout) == (3, 2.5)
    settings = parse_settings({"corpora": [], "server": {"max_concurrent_searches": 4}}, env={})
    assert search_gate(settings).max_concurrent == 4
    loaded = LoadedSettings(settings, None, Path("/nonexistent"))
    assert search_gate(loaded).timeout == settings.server.search_timeout_seconds


def test_an_unreachable_identity_provider_is_a_503_not_a_wrong_credential() -> None:
    # Nothing listens on the provider's port: its keys cannot be fetched.
    settings = OidcSettings(
        issuer=f"http://127.0.0.1:{free_port()}", resource="http://127.0.0.1:8090/mcp"
    )
    failures = TokenBucket(1 / 60, 1)
    app = AuthMiddleware(echo, Authenticator(oidc=OidcVerifier(settings)), failures=failures)
    header = jwt.utils.base64url_encode(b'{"alg":"ES256","kid":"k"}').decode()
    token = f"{header}.eyJzdWIiOiJhbmEifQ.c2lnbmF0dXJl"  # an ES256 JWT as far as its header goes
    for _ in range(3):
        sent = drive(app, http_scope(headers={"Authorization": f"Bearer {token}"}), [b""])
        assert status_of(sent) == 503
        start = next(m for m in sent if m["type"] == "http.response.start")
        assert (b"retry-after", b"5") in start["headers"]
    assert failures.wait("127.0.0.1") == 0  # not counted against the caller
