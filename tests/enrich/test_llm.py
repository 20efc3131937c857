"""LLM enrichment (§8.2) against a real HTTP server speaking the OpenAI chat-completions wire
format. No LLM runs on these machines: the server below is started by the test on
127.0.0.1 and answers well, slowly, with garbage or with errors, as each test asks."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca import Index, agentic
from guaipeca.config import EngineSettings, EnrichSettings, load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.enrich.llm import LLMEnricher, parse_answer
from support import CountingEmbedder

MEMO = (
    "# Board memo\n\n## Budget\n\nThe Banco do Brasil approved the budget on 3 March 2024.\n\n"
    "## Staff\n\nMaria Silva joined NASA in 2019 as an engineer.\n\n"
    "## Plans\n\nThe launch is planned for 2025-06-01 with ESA.\n"
)


class FakeLLM:
    """An OpenAI-compatible /v1/chat/completions endpoint on 127.0.0.1 (a real socket)."""

    def __init__(self) -> None:
        self.mode = "good"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append(dict(self.headers))
                    mode, count = fake.mode, len(fake.requests)
                if self.path != "/v1/chat/completions":
                    return self.reply(404, {"error": "not found"})
                if mode == "slow":
                    time.sleep(1.5)
                if mode == "failing":
                    return self.reply(500, {"error": "boom"})
                if mode == "rate-limited" and count % 2 == 1:
                    return self.reply(429, {"error": "slow down"}, {"Retry-After": "0"})
                text = body["messages"][-1]["content"]
                content = (
                    "Sure! Here is what I think: {not json"
                    if mode == "malformed"
                    else json.dumps(
                        {
                            "context": f"A memo section; it begins {text.split()[-1]!r}.",
                            "keywords": ["Board Memo", "budget"],
                            "questions": ["What does the memo say?"],
                            "entities": ["Jet Propulsion Laboratory"],
                            "dates": ["2019", "yesterday"],
                        }
                    )
                )
                if mode == "fenced":
                    content = f"```json\n{content}\n```"
                self.reply(
                    200, {"choices": [{"message": {"role": "assistant", "content": content}}]}
                )

            def reply(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True  # a slow answer must not hold up shutdown
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def settings_for(url: str, **extra: Any) -> EngineSettings:
    enrich = EnrichSettings(url=url, model="test-model", workers=2, **extra)
    return EngineSettings(chunking={"max_size": 80}, enrich=enrich)


def test_good_answers_are_stored_merged_with_local_fields_and_cached(
    llm: FakeLLM, tmp_path: Path
) -> None:
    with Index(tmp_path / "ix", embedder=HashingEmbedder(64), settings=settings_for(llm.url)) as ix:
        report = ix.add_documents({"memo": MEMO})
        assert len(llm.requests) == report.chunks  # one request per chunk
        body = llm.requests[0]
        assert body["model"] == "test-model" and body["messages"][0]["role"] == "system"
        staff = agentic.filtered_search(ix, "engineer", entities=["Maria Silva"])[0]
        e = agentic.enrichment(ix, staff.chunk_id)[staff.chunk_id]
        assert e is not None and e.source == "llm"
        assert e.context and e.context.startswith("A memo section")
        assert e.questions == ("What does the memo say?",)
        # LLM fields first, local ones kept; a date the LLM wrote badly is dropped
        assert e.entities[0] == "Jet Propulsion Laboratory" and "NASA" in e.entities
        assert "2019" in e.dates and "yesterday" not in e.dates
        assert agentic.filtered_search(ix, "memo", entities=["jet propulsion laboratory"])
        sent = len(llm.requests)
        ix.add_documents({"copy": MEMO})  # same chunks under another id: all cached
        assert len(llm.requests) == sent
        ix.add_documents({"memo": MEMO.replace("ESA", "JAXA")})  # one chunk changed
        assert len(llm.requests) == sent + 1
    # the cache lives in the index: a new process sends nothing for known chunks
    with Index(tmp_path / "ix", embedder=HashingEmbedder(64), settings=settings_for(llm.url)) as ix:
        ix.add_documents({"third": MEMO})
        assert len(llm.requests) == sent + 1


def test_enriched_fields_are_embedded_when_configured(llm: FakeLLM) -> None:
    embedder = CountingEmbedder()
    with Index(embedder=embedder, settings=settings_for(llm.url, embed=True)) as ix:
        ix.add_documents({"memo": MEMO})
    assert embedder.passages and all("A memo section" in p for p in embedder.passages)
    assert all("Questions: What does the memo say?" in p for p in embedder.passages)
    plain = CountingEmbedder()
    with Index(embedder=plain, settings=settings_for(llm.url)) as ix:
        ix.add_documents({"memo": MEMO})
    assert not any("A memo section" in p for p in plain.passages)


@pytest.mark.parametrize("mode", ["slow", "malformed", "failing"])
def test_bad_endpoints_never_stop_indexing(llm: FakeLLM, mode: str) -> None:
    llm.mode = mode
    conf = settings_for(llm.url, timeout_seconds=0.3, retries=1)
    with Index(embedder=HashingEmbedder(64), settings=conf) as ix:
        report = ix.add_documents({"memo": MEMO})
        assert report.added == 1 and report.chunks >= 3
        for cid, e in agentic.enrichment(
            ix, [f"default:{i}" for i in range(1, report.chunks + 1)]
        ).items():
            assert e is not None and e.source == "local", cid  # local enrichment stays
        assert agentic.filtered_search(ix, "engineer", entities=["NASA"])
    # each chunk was tried (retried once) until the circuit breaker gave up on the endpoint
    assert 2 <= len(llm.requests) <= 2 * report.chunks


def test_an_endpoint_that_is_down_costs_nothing_but_a_warning(
    llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    url = llm.url
    llm.server.shutdown()
    llm.server.server_close()  # nothing listens on that port any more
    with Index(embedder=HashingEmbedder(64), settings=settings_for(url, retries=0)) as ix:
        report = ix.add_documents({"memo": MEMO})
        assert report.chunks >= 3
        assert agentic.enrichment(ix, "default:1")["default:1"] is not None
    assert "LLM" in caplog.text


def test_fenced_answers_and_rate_limits_are_handled(llm: FakeLLM) -> None:
    llm.mode = "fenced"
    enricher = LLMEnricher(llm.url, "m", retries=0)
    assert (e := enricher.enrich_one("NASA joined.")) is not None and e.source == "llm"
    enricher.close()
    llm.requests.clear()
    llm.mode = "rate-limited"  # every other request gets 429 with Retry-After: 0
    enricher = LLMEnricher(llm.url, "m", retries=2, backoff=0.01)
    assert enricher.enrich_one("NASA joined.") is not None
    assert enricher.requests == 2
    enricher.close()


def test_api_key_comes_from_the_environment(llm: FakeLLM, tmp_path: Path) -> None:
    config = tmp_path / "guaipeca.yaml"
    config.write_text(f"enrich:\n  url: {llm.url}\n  model: m\n", encoding="utf-8")
    loaded = load_settings(config, env={"GUAIPECA_ENRICH_API_KEY": "s3cret-token"}, cwd=tmp_path)
    with Index(embedder=HashingEmbedder(64), settings=loaded.settings.engine()) as ix:
        ix.add_documents({"memo": "# Memo\n\nNASA hired Maria Silva."})
    assert llm.headers and all(h["Authorization"] == "Bearer s3cret-token" for h in llm.headers)


def test_parse_answer_accepts_only_the_expected_shape() -> None:
    e = parse_answer('{"keywords": ["Tax", "tax"], "entities": ["Receita Federal"], "x": 1}')
    assert e.keywords == ("tax",) and e.entities == ("Receita Federal",)
    for bad in ("[]", '{"keywords": "tax"}', "{}", '{"context": 3}', "nonsense"):
        with pytest.raises(ValueError):
            parse_answer(bad)


@given(st.text(max_size=300))
def test_parse_answer_never_fails_other_than_with_value_error(content: str) -> None:
    try:
        e = parse_answer(content)
    except ValueError:
        return
    assert e.source == "llm" and (e.context or e.keywords or e.entities or e.questions)
