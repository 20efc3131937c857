"""Crash-test child: writes to an index forever through the library, announcing each
operation before it starts ("begin {json}") and after it returns ("done"), until killed."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from support.reliability import doc_text


def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    index = Index(path, embedder=HashingEmbedder())
    docs = sorted(d.doc_id for d in index.list_documents(limit=10_000)) if index.corpora else []
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        r = rng.random()
        new: dict[str, str | None] = {}
        if r < 0.45 or len(docs) < 4:
            op = "add"
            for k in range(rng.randint(1, 4)):
                new[f"s{seed}-{n}-{k}"] = doc_text(rng, f"s{seed}-{n}-{k}", 1)
        elif r < 0.65:
            op = "replace"
            doc_id = rng.choice(docs)
            new[doc_id] = doc_text(rng, doc_id, n)
        elif r < 0.8 or len(docs) > 60:
            op = "delete"
            new[rng.choice(docs)] = None
        elif r < 0.93:
            op = "metadata"
            target = rng.choice(docs)
        else:
            op = "compact"
        print("begin " + json.dumps({"op": op, "docs": new}), flush=True)
        if op in ("add", "replace"):
            index.add_documents({k: v for k, v in new.items() if v is not None})
        elif op == "delete":
            for doc_id in new:
                index.delete_document(doc_id)
        elif op == "metadata":
            index.update_metadata(target, {"touched": n})
        else:
            index.compact()
        print("done", flush=True)
        docs = sorted(
            (set(docs) | {k for k, v in new.items() if v})
            - {k for k, v in new.items() if v is None}
        )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
