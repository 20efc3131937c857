"""The long-document sets of bench/context.py and the scores it gives: pure functions.

A BEIR set with titles (squad-pt: Wikipedia paragraphs) is regrouped by title into one
Markdown file per title, ``# Title`` then its paragraphs in corpus order separated by blank
lines; each paragraph keeps its exact character span ``[start, end)`` in its file, so a
query's answer (its qrel paragraphs) is a set of spans. A system's results are spans too
(document, start, end, text), read in rank order and cut at a budget of characters.
"""

from __future__ import annotations

import gzip
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Span:
    """``[start, end)`` characters of document ``doc`` (a file name of the set)."""

    doc: str
    start: int
    end: int


@dataclass
class LongSet:
    """Files (name -> text), each paragraph's span by BEIR id, the test queries and their
    answers (the spans of their judged paragraphs)."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    paragraphs: dict[str, Span] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    answers: dict[str, list[Span]] = field(default_factory=dict)
    dropped_titles: int = 0


def slug(title: str, limit: int = 60) -> str:
    """A file-name-safe ASCII form of a title."""
    ascii_ = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    s = re.sub(r"[^A-Za-z0-9]+", "-", ascii_).strip("-").lower()
    return s[:limit].strip("-") or "untitled"


def group_documents(
    rows: Iterable[dict[str, str]], min_docs: int = 1
) -> tuple[dict[str, str], dict[str, Span], int]:
    """BEIR rows (``_id``, ``title``, ``text``) -> ``(files, spans, dropped_titles)``.

    Titles keep the order of their first row; paragraphs keep corpus order. A title with
    fewer than ``min_docs`` non-empty paragraphs is left out (it is no long document).
    """
    by_title: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        text = str(row.get("text") or "").strip()
        title = " ".join(str(row.get("title") or "").split())
        if text:
            by_title.setdefault(title, []).append((str(row["_id"]), text))
    files: dict[str, str] = {}
    spans: dict[str, Span] = {}
    dropped = 0
    for i, (title, paras) in enumerate(by_title.items()):
        if len(paras) < min_docs:
            dropped += 1
            continue
        name = f"{i:03d}-{slug(title)}.md"
        parts = [f"# {title or 'Untitled'}\n\n"]
        pos = len(parts[0])
        for j, (pid, text) in enumerate(paras):
            if j:
                parts.append("\n\n")
                pos += 2
            spans[pid] = Span(name, pos, pos + len(text))
            parts.append(text)
            pos += len(text)
        parts.append("\n")
        files[name] = "".join(parts)
    return files, spans, dropped


def read_qrels(path: Path) -> dict[str, list[str]]:
    """``{qid: [judged doc ids]}`` (score > 0) of a BEIR qrels file."""
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3 and float(parts[2]) > 0:
                out.setdefault(parts[0], []).append(parts[1])
    return out


def load_long_set(root: Path, min_docs: int = 1, limit: int | None = None) -> LongSet:
    """A BEIR folder (``corpus.jsonl.gz`` or ``corpus.jsonl``, ``queries.jsonl``,
    ``qrels/test.tsv``) as a long-document set; ``limit``: the first N answerable test
    queries (in qrels order)."""
    corpus = root / "corpus.jsonl.gz"
    opener = gzip.open if corpus.exists() else open
    with opener(corpus if corpus.exists() else root / "corpus.jsonl", "rt", encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh if line.strip())
        files, spans, dropped = group_documents(rows, min_docs)
    out = LongSet(root.name, files, spans, dropped_titles=dropped)
    qrels = read_qrels(root / "qrels" / "test.tsv")
    texts: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                q = json.loads(line)
                texts[str(q["_id"])] = q["text"]
    for qid, pids in qrels.items():
        answer = [spans[p] for p in pids if p in spans]
        if answer and qid in texts:
            out.queries[qid], out.answers[qid] = texts[qid], answer
            if limit is not None and len(out.queries) >= limit:
                break
    return out


# -- scores ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Result:
    """One returned piece: its document, where its text starts there, and how many
    characters it hands the reader (``end - start`` for an exact span)."""

    doc: str
    start: int
    end: int


def _union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for a, b in sorted(intervals):
        if reach is None or a > reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def coverage(results: Sequence[Result], answers: Sequence[Span], budget: int) -> float:
    """The share of the answer's characters among the first ``budget`` characters of the
    results read in rank order (each result's text in full, the last one cut at the
    budget). A document character returned twice counts once; so does an answer character
    that two overlapping answer spans share."""
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for a in answers:
        by_doc.setdefault(a.doc, []).append((a.start, a.end))
    wanted = sum(_union_length(v) for v in by_doc.values())
    if not wanted:
        return 0.0
    got: dict[str, list[tuple[int, int]]] = {}
    left = budget
    for r in results:
        if left <= 0:
            break
        end = r.start + min(r.end - r.start, left)
        left -= r.end - r.start
        for a0, a1 in by_doc.get(r.doc, ()):
            lo, hi = max(a0, r.start), min(a1, end)
            if lo < hi:
                got.setdefault(r.doc, []).append((lo, hi))
    return sum(_union_length(v) for v in got.values()) / wanted


def overlaps_half(result: Result, answers: Sequence[Span]) -> bool:
    """The result holds at least half of one of the answer paragraphs."""
    for a in answers:
        if a.doc == result.doc:
            inter = min(a.end, result.end) - max(a.start, result.start)
            if inter > 0 and 2 * inter >= a.end - a.start:
                return True
    return False


def hit_at(results: Sequence[Result], answers: Sequence[Span], k: int) -> bool:
    """One of the first ``k`` results holds at least half of an answer paragraph."""
    return any(overlaps_half(r, answers) for r in results[:k])
