"""The HTTP reranker client (SPEC §6.3) against real HTTP on 127.0.0.1.

No reranker server (Cohere, Jina, TEI, vLLM, Infinity) can run offline here, so the server
below is a stand-in started by the test: it speaks each product's request and response shape
(as their API references give them), refuses the other shapes the way those servers do
(HTTP 422 for a body it cannot read), and scores a text by how many query words it holds.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from guaipeca import Index
from guaipeca.config import EngineSettings, load_settings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import ConfigError, RerankError
from guaipeca.search.rerank_http import HttpReranker

# The answers each product gives, keyed by the shape the stand-in is asked to speak.
SHAPES = ("cohere", "jina", "tei", "vllm", "infinity")


def word_overlap(query: str, text: str) -> float:
    return float(len(set(query.lower().split()) & set(text.lower().split())))


class StandIn:
    """A /rerank endpoint on 127.0.0.1 speaking one product's shape (``shape``)."""

    def __init__(self, shape: str = "cohere") -> None:
        self.shape = shape
        self.mode = "good"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append(body)
                stand_in.headers.append(dict(self.headers))
                status, payload = stand_in.answer(self.path, body)
                raw = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/rerank"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path != "/rerank":
            return 404, {"error": "not found"}
        if self.mode == "slow":
            time.sleep(1.0)
        if self.mode == "down":
            return 503, {"error": "model loading"}
        if self.mode == "garbage":
            return 200, b"<html>oops</html>"
        if self.mode == "bad-index":
            return 200, {"results": [{"index": 99, "relevance_score": 1.0}]}
        texts = body.get("texts" if self.shape == "tei" else "documents")
        if not isinstance(texts, list) or not isinstance(body.get("query"), str):
            # TEI answers 422 to a body without "texts"; the others to one without "documents".
            return 422, {"error": "Failed to deserialize the JSON body"}
        scores = [word_overlap(body["query"], t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        if self.shape == "tei":
            return 200, [{"index": i, "score": scores[i]} for i in order]
        top_n = body.get("top_n", len(texts))
        ranked = [{"index": i, "relevance_score": scores[i]} for i in order[:top_n]]
        if self.shape == "infinity":
            return 200, {"object": "rerank", "data": ranked, "model": "m", "usage": {}}
        return 200, {"id": "r1", "model": body.get("model"), "results": ranked}

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


TEXTS = ["the cat sat", "a dog and a cat sat down", "nothing here"]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_product_shape_gives_scores_in_input_order(shape: str) -> None:
    with StandIn(shape) as server:
        api: Any = shape
        reranker = HttpReranker(server.url, api=api, model="bge-reranker", api_key="k1")
        assert reranker.scores("dog cat sat", TEXTS) == [2.0, 3.0, 0.0]
        body, headers = server.requests[-1], server.headers[-1]
        assert headers["Authorization"] == "Bearer k1"
        if shape == "tei":
            assert body["texts"] == TEXTS and "documents" not in body and "model" not in body
        else:
            assert body["documents"] == TEXTS and body["model"] == "bge-reranker"
            assert body["top_n"] == 3
        reranker.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_auto_detects_the_shape_once_and_keeps_it(shape: str) -> None:
    with StandIn(shape) as server:
        reranker = HttpReranker(server.url)  # api="auto"
        assert reranker.scores("dog cat", TEXTS) == [1.0, 2.0, 0.0]
        assert reranker.api == ("tei" if shape == "tei" else "cohere")
        tries = len(server.requests)
        assert tries == (2 if shape == "tei" else 1)
        reranker.scores("cat", TEXTS)
        assert len(server.requests) == tries + 1  # no second detection
        reranker.close()


def test_texts_left_out_by_the_server_rank_last() -> None:
    with StandIn("cohere") as server:
        reranker = HttpReranker(server.url, api="cohere")
        server.answer = lambda path, body: (  # type: ignore[method-assign]
            200,
            {"results": [{"index": 1, "relevance_score": 0.5}]},
        )
        assert reranker.scores("q", TEXTS) == [-math.inf, 0.5, -math.inf]
        assert reranker.scores("q", []) == []


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("slow", "timed out"),
        ("down", "HTTP 503"),
        ("garbage", "not JSON"),
        ("bad-index", "malformed result"),
    ],
)
def test_failures_are_one_line_rerank_errors(stand_in: StandIn, mode: str, message: str) -> None:
    stand_in.mode = mode
    reranker = HttpReranker(stand_in.url, api="cohere", timeout=0.3)
    with pytest.raises(RerankError, match=message) as info:
        reranker.scores("q", TEXTS)
    assert "\n" not in str(info.value)
    reranker.close()


def test_an_unreachable_server_is_a_rerank_error() -> None:
    with StandIn() as server:
        url = server.url
    reranker = HttpReranker(url, api="jina", timeout=0.5)  # the port is closed now
    with pytest.raises(RerankError, match="failed"):
        reranker.scores("q", TEXTS)


def test_a_wrong_shape_named_explicitly_is_not_retried() -> None:
    with StandIn("tei") as server:
        reranker = HttpReranker(server.url, api="cohere")
        with pytest.raises(RerankError, match="HTTP 422"):
            reranker.scores("q", TEXTS)
        assert len(server.requests) == 1


# -- through Index.search (rerank.provider: http) ----------------------------------------
DOCS = {
    "cats": "Cats sleep most of the day and purr.",
    "dogs": "Dogs bark at the mail carrier and sleep at night.",
    "birds": "Birds sing at dawn; some cats watch the birds sing.",
    "fish": "Fish swim in the pond all day.",
}


def index_for(url: str, **rerank: Any) -> Index:
    settings = EngineSettings(rerank={"provider": "http", "url": url, **rerank})
    index = Index(embedder=HashingEmbedder(64), settings=settings)
    index.add_documents(DOCS)
    return index


def test_search_reranks_the_fused_candidates_by_the_server_scores(stand_in: StandIn) -> None:
    with index_for(stand_in.url) as index:
        fused = index.search("birds sing cats", rerank=False)
        hits = index.search("birds sing cats")  # search.rerank unset: on with provider http
        assert stand_in.requests[-1]["documents"] == [h.text for h in fused]
        scores = [word_overlap("birds sing cats", h.text) for h in hits]
        assert scores == sorted(scores, reverse=True) and hits[0].doc_id == "birds"
        assert all(h.score == h.scores.rerank for h in hits)
        assert all(h.rerank_error is None for h in hits)
        assert len(hits) == len(fused)  # all candidates were sent (top_k_before 50)
        sent = len(stand_in.requests)
        index.search("birds", mode="keyword")  # single retrievers are not reranked by default
        assert len(stand_in.requests) == sent


def test_score_threshold_leaves_out_low_scores(stand_in: StandIn) -> None:
    with index_for(stand_in.url, score_threshold=1.0) as index:
        hits = index.search("cats purr", top_k=10)
        assert {h.doc_id for h in hits} == {"cats", "birds"}  # the others share no word


@pytest.mark.parametrize("mode", ["down", "slow", "garbage"])
def test_a_failing_reranker_falls_back_to_the_fused_order_and_flags_the_hits(
    stand_in: StandIn, mode: str
) -> None:
    stand_in.mode = mode
    with index_for(stand_in.url, timeout_seconds=0.3) as index:
        fused = index.search("cats sleep", rerank=False)
        hits = index.search("cats sleep")
        assert [h.chunk_id for h in hits] == [h.chunk_id for h in fused]
        assert [h.score for h in hits] == [h.score for h in fused]
        assert all(h.rerank_error and "reranker at" in h.rerank_error for h in hits)
        assert hits[0].to_dict()["rerank_error"] == hits[0].rerank_error
        stand_in.mode = "good"
        assert index.search("cats sleep")[0].rerank_error is None  # recovers on the next call


def test_an_unset_url_or_a_timeout_past_the_search_deadline_is_a_config_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValidationError, match=r"rerank\.provider is http"):
        EngineSettings(rerank={"provider": "http"})
    path = tmp_path / "guaipeca.yaml"
    path.write_text(
        "rerank:\n  provider: http\n  url: http://127.0.0.1:1/rerank\n  timeout_seconds: 12\n"
    )
    with pytest.raises(ConfigError, match=r"rerank\.timeout_seconds") as info:
        load_settings(path)
    assert "server.search_timeout_seconds" in str(info.value) and str(path) in str(info.value)


def test_the_lexical_reranker_has_no_timeout_to_respect(tmp_path: Path) -> None:
    """Only an HTTP reranker's timeout must fit under the search deadline: a short deadline
    with the default (lexical) reranker is a valid configuration."""
    settings = parse_settings({"server": {"search_timeout_seconds": 1}}, env={}, cwd=tmp_path)
    assert settings.rerank.provider == "lexical" and settings.rerank.timeout_seconds >= 1
