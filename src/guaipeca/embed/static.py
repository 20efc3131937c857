"""Static embeddings: a text's vector is the mean of its tokens' vectors, looked up in a table.

No transformer runs at index or query time, so embedding costs a tokenizer pass and a gather
(hundreds of times faster than the bundled MiniLM; docs/benchmarks.md). The table and its
tokenizer come in the model2vec folder format (https://github.com/MinishLab/model2vec):

* ``config.json`` — ``normalize`` (default true), optionally the distillation settings, and
  Guaipeca's own ``fusion_weight`` (a number in [0, 1]: how much hybrid search trusts this
  model's dense list, a factor on ``search.dense_weight``; absent: ``STATIC_FUSION_WEIGHT``);
* ``tokenizer.json`` — a Hugging Face ``tokenizers`` file;
* ``model.safetensors`` — ``embeddings`` ``[rows, dim]`` (any float or int8 dtype), and
  optionally ``weights`` ``[vocab]`` (a scale per token id, applied before pooling) and
  ``mapping`` ``[vocab]`` (token id → row, for vocabulary-quantised models).

The default static model ships inside the package (``guaipeca/data/static-minilm``): it is
distilled from the bundled MiniLM by ``scripts/distill_static.py``. Any model2vec folder, such
as the potion models (multilingual ones included), loads from a local path the same way.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from importlib import resources
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from guaipeca.embed.base import Vector, Vectors, check_texts
from guaipeca.embed.identity import EmbedderIdentity, file_sha256
from guaipeca.embed.safetensors import read_safetensors
from guaipeca.errors import InvalidArgumentError, ModelError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_STATIC_MODEL_NAME",
    "DEFAULT_STATIC_RESOURCE",
    "STATIC_FUSION_WEIGHT",
    "StaticEmbedder",
]

#: The bundled static model, relative to the ``guaipeca`` package.
DEFAULT_STATIC_RESOURCE = "data/static-minilm"
#: The name its vectors carry (part of an index's identity).
DEFAULT_STATIC_MODEL_NAME = "static-minilm-v1"

#: The fusion weight of a static model whose folder declares none. A mean of token vectors
#: ranks far below a transformer (the bundled static model: SciFact dense nDCG@10 0.45 against
#: MiniLM's 0.66), and at full weight its list pulled RRF below keyword search on both English
#: sets. Chosen by cross-validation on the shared sets (tune on two, check on the third; the
#: three folds all chose 0.1 or 0.125): hybrid >= keyword on all three, squad-pt scored without
#: the language rule so it stands for a model of unknown languages (docs/benchmarks-quality.md).
STATIC_FUSION_WEIGHT = 0.1

# model2vec's own default: enough for any chunk the chunker makes, and a bound on the work a
# pathological input can cause.
_DEFAULT_MAX_TOKENS = 512
# Texts tokenised per call: bounds the Encoding objects alive at once.
_WINDOW = 1024
# ASCII characters BertNormalizer deletes (controls other than tab, newline, return).
_ASCII_CONTROL = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]")
# BertPreTokenizer on ASCII: every punctuation character (!-/ :-@ [-` {-~) is a piece of its
# own, and runs of anything else but whitespace are pieces.
_ASCII_PIECES = re.compile(r"[!-/:-@\[-`{-~]|[^\s!-/:-@\[-`{-~]+")


class StaticEmbedder:
    """An :class:`~guaipeca.embed.base.Embedder` over a model2vec-format folder.

    ``folder=None`` is the bundled default. A text is tokenised without special tokens, unknown
    pieces are dropped (as model2vec does), the first ``max_tokens`` pieces are kept, and the
    vector is the mean of their (weighted) rows, L2-normalised. A text with no known piece gets
    the vector of the unknown token, so no vector is ever zero. Every text is pooled on its own,
    in the same order of additions, so a batch gives exactly the vectors one-by-one calls give.
    """

    name: str
    dimension: int
    #: Wall-clock seconds the constructor took.
    load_seconds: float
    #: Where the model was loaded from, for ``guaipeca check-model``.
    source: str
    #: Where the tokenizer was loaded from (the folder's tokenizer.json).
    tokenizer_source: str

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        name: str | None = None,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        if max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be at least 1, got {max_tokens}")
        started = time.perf_counter()
        self.max_tokens = max_tokens
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        if folder is None:
            path = Path(str(resources.files("guaipeca").joinpath(DEFAULT_STATIC_RESOURCE)))
            default_name = DEFAULT_STATIC_MODEL_NAME
        else:
            path = Path(folder).expanduser()
            default_name = f"static:{path.resolve().name}"
        self.source = str(path)
        self.name = name or default_name
        config = _read_config(path)
        self.tokenizer_source = str(path / "tokenizer.json")
        self._tokenizer = _load_tokenizer(path / "tokenizer.json")
        self._table, self._row_scale, self.dimension = _load_table(
            path / "model.safetensors", self._tokenizer.get_vocab_size(with_added_tokens=True)
        )
        self.normalize = bool(config.get("normalize", True))
        #: How much hybrid search trusts this model's dense list (search/fusion.py).
        self.fusion_weight = _fusion_weight(config, path / "config.json")
        #: sha256 of model.safetensors: two folders of one name can hold different tables.
        self.weights_sha256 = file_sha256(path / "model.safetensors")
        self._unk_id = _unknown_id(self._tokenizer)
        self._words = _WordCache.for_tokenizer(self._tokenizer, self._unk_id)
        self.load_seconds = time.perf_counter() - started

    @classmethod
    def from_folder(cls, path: str | Path, **kwargs: Any) -> StaticEmbedder:
        """Load a model2vec folder (same as the constructor; for symmetry with OnnxEmbedder)."""
        return cls(path, **kwargs)

    @property
    def identity(self) -> EmbedderIdentity:
        """What this model's vectors are (recorded in each corpus's catalog)."""
        return EmbedderIdentity(
            provider="static",
            model=self.name,
            dimension=self.dimension,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            weights_sha256=self.weights_sha256,
        )

    # -- embedding ----------------------------------------------------------------------------

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed documents (``passage_prefix`` prepended); see the protocol."""
        check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), _WINDOW):
            window = [self.passage_prefix + t for t in texts[start : start + _WINDOW]]
            out[start : start + len(window)] = self._embed(window)
        return out

    def embed_query(self, text: str) -> Vector:
        """Embed one query (``query_prefix`` prepended); see the protocol."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        vector: Vector = self._embed([self.query_prefix + text])[0]
        return vector

    def _embed(self, texts: list[str]) -> Vectors:
        pooled = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, ids in enumerate(self._token_ids(texts)):
            pooled[row] = self._pool(ids)
        if not self.normalize:
            return pooled
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = pooled / np.maximum(norms, 1e-12)
        return result

    def _token_ids(self, texts: list[str]) -> list[npt.NDArray[np.int64]]:
        """Each text's token ids, unknown pieces dropped, at most ``max_tokens``."""
        if self._words is not None:
            return self._words.token_ids(texts, self.max_tokens)
        encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        out = []
        for encoding in encodings:
            ids = np.asarray(encoding.ids, dtype=np.int64)
            if self._unk_id is not None:
                ids = ids[ids != self._unk_id]
            out.append(ids[: self.max_tokens])
        return out

    def _pool(self, ids: npt.NDArray[np.int64]) -> Vector:
        """The mean of the rows of ``ids``; the unknown token's row stands in for none."""
        if len(ids) == 0:
            # An empty text, or one of unknown pieces only. Its vector must not be zero (a zero
            # row is how the vector file marks an unwritten slot): the unknown token's row, or
            # the first row when the vocabulary has no unknown token, is a fixed stand-in.
            ids = np.array([self._unk_id or 0], dtype=np.int64)
        rows = self._table[ids].astype(np.float32)
        if self._row_scale is not None:
            rows *= self._row_scale[ids][:, None]
        # One text at a time, rows added in order: a batch gives bit-identical vectors.
        vector: Vector = rows.mean(axis=0, dtype=np.float32)
        return vector

    def __repr__(self) -> str:
        return (
            f"StaticEmbedder(name={self.name!r}, dimension={self.dimension}, "
            f"source={self.source!r}, max_tokens={self.max_tokens})"
        )


def _read_config(folder: Path) -> dict[str, Any]:
    if not folder.is_dir():
        raise ModelError(f"static model folder not found: {folder}")
    missing = [n for n in ("tokenizer.json", "model.safetensors") if not (folder / n).is_file()]
    if missing:
        raise ModelError(
            f"static model folder {folder} lacks {' and '.join(missing)} "
            "(a model2vec folder has config.json, tokenizer.json and model.safetensors)"
        )
    config_file = folder / "config.json"
    if not config_file.is_file():
        return {}
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {config_file}: {exc}") from None
    if not isinstance(config, dict):
        raise ModelError(f"{config_file} is not a JSON object")
    return config


def _fusion_weight(config: dict[str, Any], file: Path) -> float:
    value = config.get("fusion_weight")
    if value is None:
        return STATIC_FUSION_WEIGHT
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModelError(f"{file}: fusion_weight must be a number from 0 to 1, not {value!r:.30}")
    return float(value)


def _load_tokenizer(file: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises bare Exception subclasses for bad JSON
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot read tokenizer {file}: {first}") from None
    # Pooling needs every piece of one text and never pads: a file's own padding or truncation
    # settings (the bundled one pads to 128) must not apply.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _load_table(
    file: Path, vocab: int
) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.float32] | None, int]:
    """The per-token-id table and optional per-token-id scale (``mapping`` resolved)."""
    tensors = read_safetensors(file)
    table = tensors.get("embeddings")
    if table is None:
        # sentence-transformers' StaticEmbedding layout names the same table this way.
        table = tensors.get("embedding.weight")
    if table is None or table.ndim != 2:
        raise ModelError(f"{file} has no 2-D 'embeddings' tensor (is it a model2vec model?)")
    if not (np.issubdtype(table.dtype, np.floating) or table.dtype == np.int8):
        raise ModelError(f"{file}: 'embeddings' has dtype {table.dtype}; expected float or int8")
    mapping = tensors.get("mapping")
    if mapping is not None:
        # Vocabulary quantisation: many token ids share a row. Resolving it once turns the
        # table into a plain per-id one (a copy of vocab x dim; these models are small).
        if mapping.shape != (vocab,) or int(mapping.max(initial=0)) >= len(table):
            raise ModelError(f"{file}: 'mapping' does not match the tokenizer's {vocab} tokens")
        table = np.asarray(table)[np.asarray(mapping, dtype=np.int64)]
    if len(table) < vocab:
        raise ModelError(
            f"{file}: {len(table)} embedding rows for a tokenizer of {vocab} tokens; "
            "the tokenizer does not belong to this table"
        )
    weights = tensors.get("weights")
    scale = None
    if weights is not None:
        if weights.shape != (len(table),) and weights.shape != (vocab,):
            raise ModelError(f"{file}: 'weights' does not match the tokenizer's {vocab} tokens")
        scale = np.asarray(weights, dtype=np.float32)
    # A plain ndarray view of the mapping: np.memmap's indexing overhead is per call.
    return table.view(np.ndarray), scale, int(table.shape[1])


def _unknown_id(tokenizer: Tokenizer) -> int | None:
    model = json.loads(tokenizer.to_str()).get("model", {})
    unk = model.get("unk_token") if isinstance(model, dict) else None
    if isinstance(unk, str):
        return tokenizer.token_to_id(unk)
    if isinstance(unk, int):  # Unigram models store the id
        return unk
    return None


class _WordCache:
    """Token ids per word, for BERT-style (WordPiece) tokenizers: their normalizer works
    character by character and their pre-tokenizer splits on whitespace and punctuation, so a
    text's ids are exactly the concatenation of its pieces' WordPiece ids, and a corpus has
    far fewer distinct pieces than pieces. Each distinct piece goes through the WordPiece
    model once; a text then costs a split and lookups, ~5x faster than tokenising it whole.
    ASCII texts without control characters are normalised and split in Python (lowercasing is
    all BertNormalizer does to them, and ASCII punctuation is one regex class); others go
    through the tokenizer's own normalizer and pre-tokenizer. Identical ids to the full
    tokenizer are a tested property.
    """

    # Bounded so a stream of never-repeating words cannot grow it without end (~100 MB).
    MAX_WORDS = 500_000

    def __init__(
        self, tokenizer: Tokenizer, unk_id: int | None, lowercase: bool, added: list[str]
    ) -> None:
        self._tokenizer = tokenizer
        self._unk_id = unk_id
        self._lowercase = lowercase
        self._ids: dict[str, list[int]] = {}
        # Added tokens ("[CLS]", ...) are matched in the raw text before normalisation: a text
        # that spells one out takes the whole-text path.
        pattern = "|".join(re.escape(a) for a in sorted(added, key=len, reverse=True) if a)
        self._added = re.compile(pattern) if pattern else None

    @classmethod
    def for_tokenizer(cls, tokenizer: Tokenizer, unk_id: int | None) -> _WordCache | None:
        spec = json.loads(tokenizer.to_str())
        normalizer, pre = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}
        model = spec.get("model") or {}
        if (
            normalizer.get("type") != "BertNormalizer"
            or pre.get("type") != "BertPreTokenizer"
            or model.get("type") != "WordPiece"
        ):
            return None
        added = [str(a.get("content", "")) for a in spec.get("added_tokens") or []]
        return cls(tokenizer, unk_id, bool(normalizer.get("lowercase", True)), added)

    def token_ids(self, texts: list[str], max_tokens: int) -> list[npt.NDArray[np.int64]]:
        words_of = [self._pieces(t) for t in texts]
        out: list[npt.NDArray[np.int64]] = []
        lookup = self._ids.__getitem__
        for text, words in zip(texts, words_of, strict=True):
            if self._added is not None and self._added.search(text):
                out.append(self._whole(text, max_tokens))
                continue
            try:
                ids = islice(chain.from_iterable(map(lookup, words)), max_tokens)
                out.append(np.fromiter(ids, dtype=np.int64))
            except KeyError:
                self._learn(words_of)  # a new word: learn every new word of the batch at once
                ids = islice(chain.from_iterable(map(lookup, words)), max_tokens)
                out.append(np.fromiter(ids, dtype=np.int64))
        return out

    def _whole(self, text: str, max_tokens: int) -> npt.NDArray[np.int64]:
        ids = np.asarray(self._tokenizer.encode(text, add_special_tokens=False).ids, np.int64)
        if self._unk_id is not None:
            ids = ids[ids != self._unk_id]
        return ids[:max_tokens]

    def _learn(self, words_of: list[list[str]]) -> None:
        cache = self._ids
        missing = list({w for words in words_of for w in words if w not in cache})
        if len(cache) + len(missing) > self.MAX_WORDS:
            cache.clear()
            missing = list({w for words in words_of for w in words})
        # The pieces are normalised and pre-tokenised already: the WordPiece model alone.
        tokenize, unk = self._tokenizer.model.tokenize, self._unk_id
        for piece in missing:
            cache[piece] = [t.id for t in tokenize(piece) if t.id != unk]

    def _pieces(self, text: str) -> list[str]:
        """The normalised, pre-tokenised pieces of ``text``, as the tokenizer would cut them."""
        if text.isascii() and not _ASCII_CONTROL.search(text):
            pieces: list[str] = _ASCII_PIECES.findall(text.lower() if self._lowercase else text)
            return pieces
        normalizer, pre = self._tokenizer.normalizer, self._tokenizer.pre_tokenizer
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        return [piece for piece, _ in pre.pre_tokenize_str(normalized)]
