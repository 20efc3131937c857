"""Crash-test child for progressive indexing: commits documents for keyword search
(``add_documents(wait=False)``), then embeds the pending chunks round by round, announcing
on stdout "begin {json}" before a keyword commit, "keyword" after it, and "embedded N" (how
many chunks have their vector) after each embedding round, until killed."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from support.reliability import doc_text


def _embedded(index: Index) -> int:
    stats = index.stats()
    return stats.chunks - stats.pending_chunks


def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    index = Index(path, embedder=HashingEmbedder())
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        new = {
            f"p{seed}-{n}-{k}": doc_text(rng, f"p{seed}-{n}-{k}", 1, paragraphs=rng.randint(1, 40))
            for k in range(rng.randint(1, 6))
        }
        print("begin " + json.dumps(new), flush=True)
        index.add_documents(new, wait=False)
        print("keyword", flush=True)
        if rng.random() < 0.6:  # sometimes leave work pending across several commits
            index.embed_pending(
                progress=lambda _done, _left: print(f"embedded {_embedded(index)}", flush=True)
            )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
