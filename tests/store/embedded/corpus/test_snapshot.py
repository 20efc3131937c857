"""The readers' snapshot (store/embedded/corpus/snapshot.py): searches running while a
writer adds and deletes documents always read a consistent corpus."""

from __future__ import annotations

import threading
from pathlib import Path

from guaipeca import Index
from support import CountingEmbedder


def test_searches_run_while_a_writer_adds_documents(
    tmp_path: Path, counting_embedder: CountingEmbedder
) -> None:
    index = Index(tmp_path / "idx", embedder=counting_embedder)
    index.add_documents({f"seed{i}": f"common seed text {i}" for i in range(20)})
    errors: list[BaseException] = []
    written: set[str] = {f"seed{i}" for i in range(20)}
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                for hit in index.search("common text", top_k=20):
                    assert hit.text == index.resolve(hit)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for batch in range(15):
        docs = {f"b{batch}-{i}": f"common batch text {batch} {i}" for i in range(5)}
        index.add_documents(docs)
        written.update(docs)
        if batch % 4 == 0:
            index.delete_document(f"b{batch}-0")
            written.discard(f"b{batch}-0")
    done.set()
    for t in threads:
        t.join()
    assert not errors
    assert {d.doc_id for d in index.list_documents(limit=1000)} == written
    index.close()
