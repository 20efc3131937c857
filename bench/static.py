"""The static embedder against the bundled MiniLM: speed and retrieval quality, in one run.

    .venv/bin/python bench/static.py [--datasets scifact,nfcorpus,squad-pt] [--speed-docs 300]
                                     [--out bench/results/static.json]

1. **Speed.** SciFact documents are chunked and prepared exactly as ``Index.add_documents``
   does with the default settings; the bundled model embeds the inputs of the first
   ``--speed-docs`` documents, the static model those of all 5,183 (it is too fast to time on
   a few hundred), alternately in the same process (bundled, static, bundled, static) so both
   see the same machine load; chunks/s of each and the ratio. The static model is timed cold
   (a fresh embedder: empty word cache, every distinct word tokenised) and warm, in chunks
   per wall-clock second and per CPU-second of the process.
2. **Quality.** Each shared set (``/work/shared/data/beir/<name>``, test queries) is indexed
   into an in-memory :class:`guaipeca.Index` with the static model and the default settings
   (squad-pt with ``language="portuguese"``; the model's ``fusion_weight`` scales the dense
   list's weight in hybrid fusion), and every test query is run in modes keyword,
   dense and hybrid through ``Index.search`` (top 10 chunks, mapped to documents); nDCG@10,
   Recall@100 (from a top-100 search) and MRR@10 with pytrec_eval, as in bench/quality.py.
   The bundled model's figures for the same sets are in bench/results/quality*.json
   (indexing a set with it takes minutes; see docs/benchmarks-quality.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers
from quality import doc_list, evaluate, load_qrels, machine

DATA = Path(os.environ.get("BEIR_DIR", "/work/shared/data/beir"))
MODES = ("keyword", "dense", "hybrid")
LANGUAGE = {"squad-pt": "portuguese"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def speed_inputs(n_docs: int | None) -> list[str]:
    """The embedding inputs of the first ``n_docs`` SciFact documents, as the index makes them."""
    from guaipeca.chunk import canonicalize, chunk_text
    from guaipeca.config import EngineSettings
    from guaipeca.embed import embedding_input

    settings = EngineSettings()
    ch, emb = settings.chunking, settings.embedding
    docs, _ = peers.load_beir(DATA / "scifact")
    inputs: list[str] = []
    for doc_id, text in list(docs.items())[:n_docs]:  # None: all
        for c in chunk_text(canonicalize(text), doc_key=f"default/{doc_id}", max_size=ch.max_size):
            inputs.append(
                embedding_input(
                    c.text,
                    c.heading_path,
                    preprocess=emb.preprocess,
                    max_chars=emb.preprocess_chars,
                )
            )
    return inputs


def time_embed(embedder: Any, texts: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process, all threads) of embedding ``texts``."""
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed_passages(texts)
    return time.perf_counter() - started, time.process_time() - cpu


def speed(n_docs: int) -> dict[str, Any]:
    from guaipeca.embed import default_embedder
    from guaipeca.embed.static import StaticEmbedder

    texts = speed_inputs(n_docs)
    everything = speed_inputs(None)
    bundled = default_embedder()
    bundled.embed_passages(texts[:4])  # session warm-up, as the index's first batch pays
    rounds: list[dict[str, Any]] = []
    for r in range(2):
        b, b_cpu = time_embed(bundled, texts)
        fresh = StaticEmbedder()
        cold, cold_cpu = time_embed(fresh, everything)
        warm, warm_cpu = min(time_embed(fresh, everything) for _ in range(2))
        row = {
            "bundled_chunks_per_s": round(len(texts) / b, 2),
            "static_cold_chunks_per_s": round(len(everything) / cold, 1),
            "static_warm_chunks_per_s": round(len(everything) / warm, 1),
            # Per CPU-second: what each costs in arithmetic, whatever share of the cores the
            # process got (ONNX Runtime uses both cores, the static model one).
            "bundled_chunks_per_cpu_s": round(len(texts) / b_cpu, 2),
            "static_cold_chunks_per_cpu_s": round(len(everything) / cold_cpu, 1),
            "static_warm_chunks_per_cpu_s": round(len(everything) / warm_cpu, 1),
            "loadavg": list(os.getloadavg()),
        }
        for kind in ("cold", "warm"):
            row[f"ratio_{kind}"] = round(
                row[f"static_{kind}_chunks_per_s"] / row["bundled_chunks_per_s"], 1
            )
            row[f"ratio_{kind}_cpu"] = round(
                row[f"static_{kind}_chunks_per_cpu_s"] / row["bundled_chunks_per_cpu_s"], 1
            )
        log(f"[speed] round {r + 1}: {json.dumps(row)}")
        rounds.append(row)
    return {
        "sample": "SciFact documents, default chunking and embedding input",
        "bundled_chunks": len(texts),
        "bundled_docs": n_docs,
        "bundled_mean_chars_per_chunk": round(sum(map(len, texts)) / len(texts), 1),
        "static_chunks": len(everything),
        "static_mean_chars_per_chunk": round(sum(map(len, everything)) / len(everything), 1),
        "bundled_model": bundled.name,
        "static_model": StaticEmbedder().name,
        "rounds": rounds,
        "ratio_cold_min": min(r["ratio_cold"] for r in rounds),
        "ratio_cold_cpu_min": min(r["ratio_cold_cpu"] for r in rounds),
    }


def quality(name: str) -> dict[str, Any]:
    from guaipeca import Index
    from guaipeca.config import EngineSettings
    from guaipeca.embed.static import StaticEmbedder

    root = DATA / name
    docs, queries = peers.load_beir(root)
    qrels = load_qrels(root)
    settings = EngineSettings.model_validate({"embedding": {"cache_max_entries": 0}})
    embedder = StaticEmbedder()
    kwargs = {"language": LANGUAGE[name]} if name in LANGUAGE else {}
    index = Index(embedder=embedder, settings=settings, **kwargs)
    started = time.perf_counter()
    report = index.add_documents(docs)
    seconds = time.perf_counter() - started
    log(f"[{name}] indexed {len(docs)} docs / {report.chunks} chunks in {seconds:.1f} s")
    out: dict[str, Any] = {
        "docs": len(docs),
        "chunks": report.chunks,
        "queries": len(qrels),
        "index_seconds": round(seconds, 2),
        "index_docs_per_s": round(len(docs) / seconds, 1),
        "language": kwargs.get("language", "default"),
        # the factor on search.dense_weight the model carries (hybrid fusion, search/fusion.py)
        "fusion_weight": embedder.fusion_weight,
        "modes": {},
    }
    for mode in MODES:
        top10: dict[str, list[str]] = {}
        top100: dict[str, list[str]] = {}
        for q in qrels:
            text = queries.get(q, "")
            hits = index.search(text, top_k=10, mode=mode)
            top10[q] = doc_list([(h.chunk_id, h.doc_id) for h in hits], 10)
            deep = index.search(text, top_k=100, candidates=100, mode=mode)
            top100[q] = doc_list([(h.chunk_id, h.doc_id) for h in deep], 100)
        at10 = evaluate(qrels, top10)
        at100 = evaluate(qrels, top100)
        out["modes"][mode] = {
            "ndcg@10": round(at10["ndcg@10"], 4),
            "mrr@10": round(at10["mrr@10"], 4),
            "recall@100": round(at100["recall@100"], 4),
        }
        log(f"[{name}] {mode}: {json.dumps(out['modes'][mode])}")
    index.close()
    hybrid, keyword = out["modes"]["hybrid"]["ndcg@10"], out["modes"]["keyword"]["ndcg@10"]
    out["hybrid_minus_keyword"] = round(hybrid - keyword, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="scifact,nfcorpus,squad-pt")
    ap.add_argument("--speed-docs", type=int, default=300)
    ap.add_argument("--out", default="bench/results/static.json")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args(argv)
    result: dict[str, Any] = {
        "command": "python bench/static.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    if not args.skip_speed:
        result["speed"] = speed(args.speed_docs)
    result["quality"] = {}
    for name in (n for n in args.datasets.split(",") if n):
        result["quality"][name] = quality(name)
        # Written after each set, so a failure later keeps what was measured.
        result["loadavg_at_end"] = list(os.getloadavg())
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
