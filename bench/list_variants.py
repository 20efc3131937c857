"""Issue 28 experiments on the *lists* (not the fusion): index a shared set once, exactly as
``guaipeca eval`` does (same defaults apart from the model, same ``index_beir`` and
``evaluate_index``), then score each variant's modes on that one index.

    PYTHONPATH=src nice -n 10 python bench/list_variants.py --model static --set scifact \\
        --variants VARIANTS.json --modes dense,hybrid [--out results.jsonl]

``VARIANTS.json`` maps a name to ``{"search": {...}}`` (search settings replaced for that
variant, e.g. ``{"phrase_weight": 0.1}``) and/or ``{"query_weights": {...}}`` (the static
model's query vector re-weighted from the corpus's own document frequencies; see
``weighted_query``). Both act at query time only, so one index serves every variant.
Snippets are switched off: they are 96% of an eval's search time (cProfile, NFCorpus) and
change no ranking. With them on and no variant, the figures equal ``guaipeca eval``'s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

LANGUAGES = {"scifact": "english", "nfcorpus": "english", "squad-pt": "portuguese"}
MODELS: dict[str, dict[str, Any]] = {"bundled": {}, "static": {"provider": "static"}}
DATA = Path(os.environ.get("GUAIPECA_BENCH_DATA", "/work/shared/data/beir"))


def sif_weights(rows: int, coefficient: float = 1e-4) -> np.ndarray:
    """scripts/distill_static.py's SIF weights, baked into the bundled static table."""
    inverse_rank = 1.0 / np.arange(2, rows + 2, dtype=np.float64)
    probability = inverse_rank / inverse_rank.sum()
    return (coefficient / (coefficient + probability)).astype(np.float32)


def weighted_query(static: Any, query: str, store: Any, knobs: dict[str, Any]) -> np.ndarray:
    """The static model's query vector with each word's token rows scaled by the corpus's
    BM25 idf of that word (``mode`` ``mult``: on top of the table's SIF weights; ``replace``:
    instead of them; ``none``: no idf), ``stop`` for a piece the analyzer drops (stopwords,
    punctuation), ``unseen`` for a word no chunk holds (0: dropped), idf to the ``power``."""
    mode = knobs.get("mode", "mult")
    stop_w, unseen_w = float(knobs.get("stop", 1)), float(knobs.get("unseen", 1))
    power = float(knobs.get("power", 1))
    words = static._words
    pieces = words._pieces(static.query_prefix + query)
    tokens = {p: store.analyzer.tokens(p) for p in pieces}
    total, freqs = store.lexical.doc_freqs([t for ts in tokens.values() for t in ts])
    total = max([total, *freqs.values()])
    ids: list[int] = []
    scale: list[float] = []
    for piece in pieces:
        dfs = [freqs.get(t, 0) for t in tokens[piece]]
        if not dfs:
            w = stop_w
        elif not any(dfs):
            w = unseen_w
        elif mode == "none":
            w = 1.0
        else:
            w = max(math.log(1 + (total - d + 0.5) / (d + 0.5)) for d in dfs if d) ** power
        if w <= 0:
            continue
        piece_ids = words.token_ids([piece], static.max_tokens)[0].tolist()
        ids += piece_ids
        scale += [w] * len(piece_ids)
    if not ids:
        return static.embed_query(query)
    arr = np.asarray(ids, dtype=np.int64)
    rows = static._table[arr].astype(np.float32)
    if static._row_scale is not None:
        rows *= static._row_scale[arr][:, None]
    sc = np.asarray(scale, dtype=np.float32)
    if mode == "replace":
        sc = sc / sif_weights(len(static._table))[arr]
    vector = (rows * sc[:, None]).mean(axis=0)
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def patch_query_vectors(knobs_of: dict[str, Any]) -> None:
    """Models.query_vectors through weighted_query while ``knobs_of["now"]`` is set."""
    from guaipeca.embed.static import StaticEmbedder
    from guaipeca.index.models import Models

    original = Models.query_vectors

    def query_vectors(self: Models, query: str, stores: Any) -> dict[str, Any]:
        knobs = knobs_of.get("now")
        if not knobs:
            return original(self, query, stores)
        out = {}
        for store in stores:
            static = self.of(store.name).embedder
            while not isinstance(static, StaticEmbedder):
                static = static.inner
            out[store.name] = weighted_query(static, query, store, knobs)
        return out

    Models.query_vectors = query_vectors  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=list(MODELS))
    ap.add_argument("--set", required=True, choices=list(LANGUAGES))
    ap.add_argument(
        "--variants",
        required=True,
        help='JSON file: {name: {"search": {...}, "query_weights": {...}}}',
    )
    ap.add_argument("--modes", default="keyword,dense,hybrid")
    ap.add_argument("--vector-cache", default="/tmp/q-vectors")
    ap.add_argument("--out", default="/tmp/q/variants.jsonl")
    ap.add_argument("--snippets", action="store_true", help="build snippets, as eval does")
    args = ap.parse_args()

    import guaipeca.index.results as results
    from guaipeca.config.loading import load_settings
    from guaipeca.embed import load_embedder
    from guaipeca.embed.vector_cache import VectorCache
    from guaipeca.evaluate import evaluate_index, index_beir, load_beir
    from guaipeca.index import Index

    # Snippets are 96% of an eval's search time (cProfile, NFCorpus) and change no ranking:
    # the hits keep their scores and order without them.
    if not args.snippets:
        results.with_snippets = lambda found, *_a, **_k: found  # type: ignore[assignment]
    variants = json.loads(Path(args.variants).read_text())
    with tempfile.TemporaryDirectory(prefix="q-variants-") as home:
        config = Path(home) / "guaipeca.yaml"
        emb = MODELS[args.model]
        config.write_text(json.dumps({"embedding": emb}) if emb else "{}")
        os.environ["GUAIPECA_HOME"] = home
        loaded = load_settings(config, cwd=Path(home), check_paths=False)
        embedder = load_embedder(
            loaded.settings.embedding, source=str(config), data_dir=loaded.data_dir
        )
        cache = VectorCache(embedder, Path(args.vector_cache))
        beir = load_beir(DATA / args.set)
        idx = Index(embedder=cache, settings=loaded.settings.engine(), language=LANGUAGES[args.set])
        base = idx.settings
        knobs: dict[str, Any] = {}
        patch_query_vectors(knobs)
        t0 = time.perf_counter()
        index_beir(idx, beir, batch=64)
        cache.save()
        print(
            f"indexed {args.set} with {args.model} in {time.perf_counter() - t0:.0f} s "
            f"(cache found {cache.hits}, embedded {cache.misses})",
            file=sys.stderr,
            flush=True,
        )
        for name, env in variants.items():
            idx.settings = base.model_copy(
                update={"search": base.search.model_copy(update=env.get("search", {}))}
            )
            knobs["now"] = env.get("query_weights")
            row = {"variant": name, "change": env, "model": args.model, "set": args.set}
            t1 = time.perf_counter()
            for mode in args.modes.split(","):
                result = evaluate_index(idx, beir, mode=mode, top_k=100)
                row[mode] = round(result.metrics["nDCG@10"], 4)
                row[f"{mode}_recall@100"] = round(result.metrics["Recall@100"], 4)
            row["seconds"] = round(time.perf_counter() - t1, 1)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            cells = " ".join(f"{m} {row[m]:.4f}" for m in args.modes.split(","))
            print(
                f"{args.model:8s} {args.set:9s} {name:24s} {cells} ({row['seconds']:.0f} s)",
                flush=True,
            )
        idx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
