"""Hostile input, fuzzed with hypothesis for a bounded number of inputs each (more under
``scripts/reliability``): the chunker (through a whole index), the filter parser, the config
loader, the JSON-RPC endpoint and the upload path. Each may only succeed or raise one of our
errors (one clear line) — never another exception, never a traceback to a client, never a
file outside the corpus folder. Findings are kept below as explicit regression cases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guaipeca import Index, NewDocument
from guaipeca.chunk import canonicalize, chunk_text
from guaipeca.config import load_settings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import GuaipecaError
from guaipeca.server import Service
from guaipeca.server.http import build_app
from guaipeca.store import parse_where_json
from support.http import LiveServer
from support.reliability import make_service, report, scaled

pytestmark = pytest.mark.slow  # fuzz: many generated inputs per target

EXAMPLES = scaled(100, 3000)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = ["corpus", "doc_id", "source_path", "extension", "page", "modified", "year", "tags", "a.b"]
OPERATORS = [
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$contains",
    "$startswith",
    "$endswith",
    "$and",
    "$or",
    "$not",
    "$regex",
]
filters = st.recursive(
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from(OPERATORS) | st.sampled_from(FIELDS),
        inner | st.lists(inner, max_size=3) | json_values,
        max_size=3,
    ),
    max_leaves=12,
)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=3000) | st.lists(
    st.sampled_from(
        ["# H\n", "## S\n", "```\n", "\r\n", "\n\n", "word ", "x" * 700, "\t", "|a|b|\n"]
    ),
    max_size=60,
).map("".join)


class Counter:
    def __init__(self) -> None:
        self.n = 0


@pytest.fixture(scope="module")
def memory_index() -> Iterator[Index]:
    index = Index(embedder=HashingEmbedder())
    index.add_documents(
        [
            NewDocument(
                f"d{i}",
                f"# Doc {i}\n\nriver stone {i}",
                metadata={"year": 2000 + i, "tags": ["a", str(i)]},
            )
            for i in range(20)
        ]
    )
    yield index
    index.close()


def test_fuzz_chunker_through_an_index() -> None:
    """Any text (markup, CRLF, huge lines, control characters) indexes into chunks that are
    exact spans, and the index passes its integrity check."""
    seen = Counter()
    index = Index(embedder=HashingEmbedder())

    @FUZZ
    @given(text=texts, max_size=st.integers(min_value=50, max_value=2000))
    @example(text="雔\x00´\U0004792f:", max_size=1699)  # finding: NUL cut SQLite's spans
    @example(text="a" * 24_000, max_size=50)
    @example(text="\r" * 50 + "\u2028\u0085" * 40, max_size=50)
    def check(text: str, max_size: int) -> None:
        seen.n += 1
        canonical = canonicalize(text)
        chunks = chunk_text(canonical, doc_key="k", max_size=max_size)
        end = 0
        for c in chunks:
            assert canonical[c.start : c.end] == c.text and c.text.strip()
            assert c.start >= end and len(c.text) <= max_size
            assert not canonical[end : c.start].strip()
            end = c.end
        assert not canonical[end:].strip()
        index.add_documents({f"t{seen.n}": text})
        if seen.n % 25 == 0:
            assert index.verify().ok

    check()
    assert index.verify().ok  # every stored chunk resolves to its span, in every store
    index.close()
    report(
        "fuzz",
        target="chunker (chunk_text, then Index.add_documents + verify)",
        inputs=seen.n,
        findings=1,  # NUL characters: SQLite's substr/length stop there (fixed in canonicalize)
    )


def test_fuzz_filter_parser(memory_index: Index) -> None:
    seen = Counter()

    @FUZZ
    @given(where=filters, raw=st.text(max_size=200))
    @example(where={"$and": [{"$or": []}]}, raw='{"year": {"$gt": 1e999}}')
    @example(where={"page": {"$in": [2**70]}}, raw='{"a": {"$in": "x"}}')
    @example(where={"year": "'; DROP TABLE chunks; --"}, raw="[" * 5000)
    def check(where: dict[str, Any], raw: str) -> None:
        seen.n += 1
        for candidate in (where, raw):
            try:
                parsed = parse_where_json(candidate) if isinstance(candidate, str) else candidate
                memory_index.search("river", where=parsed, top_k=3)
                memory_index.list_documents(where=parsed, limit=3)
            except GuaipecaError as exc:
                assert "\n" not in str(exc) and str(exc)

    check()
    assert len(memory_index.list_documents(limit=100)) == 20  # nothing changed
    report(
        "fuzz",
        target="filter parser (parse_where_json, search, list_documents)",
        inputs=seen.n,
        findings=0,
    )


def test_fuzz_config_loader(tmp_path: Path) -> None:
    seen = Counter()
    keys = st.sampled_from(
        [
            "corpora",
            "embedding",
            "chunking",
            "search",
            "server",
            "upload",
            "storage",
            "enrich",
            "name",
            "path",
            "weight",
            "language",
            "max_size",
            "port",
            "allow",
            "mode",
            "top_k",
        ]
    )
    configs = st.dictionaries(
        keys | st.text(max_size=10),
        json_values | st.dictionaries(keys, json_values, max_size=4),
        max_size=5,
    )

    @FUZZ
    @given(config=configs, yaml_text=st.text(max_size=400))
    @example(
        config={"corpora": [{"name": "x", "path": "/"}]},
        yaml_text="corpora: !!python/object:os.system ls",
    )
    @example(config={"server": {"port": 10**30}}, yaml_text="a: &a [*a]")
    @example(config={}, yaml_text="\x00\xff")
    def check(config: dict[str, Any], yaml_text: str) -> None:
        seen.n += 1
        try:
            parse_settings(config, env={}, cwd=tmp_path)
        except GuaipecaError as exc:
            assert str(exc)
        path = tmp_path / "fuzz.yaml"
        path.write_text(yaml_text, encoding="utf-8", errors="surrogatepass")
        try:
            load_settings(path, env={}, cwd=tmp_path, check_paths=False)
        except GuaipecaError as exc:
            assert str(exc)

    check()
    report(
        "fuzz", target="config loader (parse_settings, load_settings)", inputs=seen.n, findings=0
    )


@pytest.fixture(scope="module")
def fuzz_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = make_service(tmp_path_factory.mktemp("fuzz"), docs=5)
    yield service
    service.index.close()


def test_fuzz_json_rpc(fuzz_service: Service) -> None:
    """Arbitrary bodies and JSON-RPC messages to /mcp: never a 500, never a traceback, and
    the server answers normally afterwards."""
    seen = Counter()
    methods = st.sampled_from(
        [
            "initialize",
            "tools/call",
            "tools/list",
            "ping",
            "resources/list",
            "prompts/get",
            "notifications/initialized",
            "x" * 300,
            "",
        ]
    )
    messages = st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "method": methods},
        optional={
            "id": json_values,
            "params": json_values
            | st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["search", "upload", "get_chunk", "delete", "nope"]),
                    "arguments": json_values,
                }
            ),
        },
    )
    bodies = (
        st.binary(max_size=300)
        | messages.map(json.dumps)
        | st.lists(messages, max_size=5).map(json.dumps)
    )
    with (
        LiveServer(lambda port: build_app(fuzz_service, host="127.0.0.1", port=port)) as live,
        httpx2.Client(base_url=live.url, timeout=60) as http,
    ):
        session = _session(http)

        @FUZZ
        @given(
            body=bodies,
            with_session=st.booleans(),
            content_type=st.sampled_from(
                ["application/json", "text/plain", "application/json; charset=latin-1"]
            ),
        )
        @example(
            body=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"\\ud800"}}}',
            with_session=True,
            content_type="application/json",
        )
        def check(body: bytes | str, with_session: bool, content_type: str) -> None:
            seen.n += 1
            headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": content_type,
            }
            if with_session:
                headers.update(session)
            response = http.post("/mcp", headers=headers, content=body)
            assert response.status_code < 500, (response.status_code, response.text[:300])
            assert "Traceback" not in response.text and "/tmp" not in response.text

        check()
        assert http.get("/health").status_code == 200
    report("fuzz", target="JSON-RPC over Streamable HTTP (/mcp)", inputs=seen.n, findings=0)


def _session(http: httpx2.Client) -> dict[str, str]:
    response = http.post(
        "/mcp",
        headers={"Accept": "application/json, text/event-stream"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        },
    )
    assert response.status_code == 200
    return {
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_fuzz_upload_path(fuzz_service: Service) -> None:
    """Arbitrary names, sub-folders and bytes: uploaded into the corpus folder or refused
    with one of our errors; nothing is ever written anywhere else."""
    seen = Counter()
    root = fuzz_service.corpus_root("docs").parent
    outside = {p for p in _tree(root) if not p.startswith(("docs", "data"))}
    names = st.text(max_size=40) | st.sampled_from(
        [
            "../x.md",
            "..",
            "a/b.md",
            "/etc/passwd.md",
            "x.md\x00.pdf",
            "CON.md",
            " .md",
            ".md",
            "x" * 300 + ".md",
            "ok.md",
            "ok.pdf",
            "ok.docx",
            "ok.html",
            "ok.xlsx",
        ]
    )
    folders = (
        st.none()
        | st.text(max_size=30)
        | st.sampled_from(["..", "../..", "a/../../b", "/abs", "ok/sub"])
    )
    data = st.binary(max_size=2000) | st.text(max_size=500).map(
        lambda t: t.encode("utf-8", "surrogatepass")
    )

    @FUZZ
    @given(name=names, folder=folders, content=data, overwrite=st.booleans())
    @example(name="evil.pdf", folder=None, content=b"%PDF-1.7\n" + b"\x00" * 100, overwrite=False)
    @example(name="zip.docx", folder="x", content=b"PK\x03\x04" + b"\xff" * 200, overwrite=True)
    def check(name: str, folder: str | None, content: bytes, overwrite: bool) -> None:
        seen.n += 1
        try:
            fuzz_service.upload("docs", name, content, subfolder=folder, overwrite=overwrite)
        except GuaipecaError as exc:
            assert str(exc) and "\n" not in str(exc)
        now_outside = {p for p in _tree(root) if not p.startswith(("docs", "data"))}
        assert now_outside == outside

    check()
    assert fuzz_service.index.verify().ok
    report("fuzz", target="upload path (Service.upload)", inputs=seen.n, findings=0)
