"""Progressive indexing (SPEC §2.8): documents are searchable by keyword as soon as they are
committed and by meaning once their chunks are embedded; pending work lives in the catalog,
resumes in the next process, and no input is embedded twice."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from guaipeca import Index, NotFoundError
from guaipeca.embed import HashingEmbedder
from guaipeca.ingest import sync_folder
from support import CountingEmbedder, MemoEmbedder

DOCS = {
    "cats": "# Cats\n\nCats purr when they are content and sleep most of the day.",
    "dogs": "# Dogs\n\nDogs bark at strangers and wag their tails at friends.",
    "tides": "# Tides\n\nThe moon pulls the oceans and the tides follow it.",
}


def test_keyword_at_once_meaning_after_the_embedding_phase(
    tmp_path: Path, real_embedder: MemoEmbedder
) -> None:
    with Index(tmp_path / "ix", embedder=real_embedder) as index:
        report = index.add_documents(DOCS, wait=False)
        assert report.chunks_pending == 3 and report.chunks_embedded == 0
        stats = index.stats()
        assert stats.pending_chunks == 3 and stats.corpora[0].pending_chunks == 3
        # Keyword finds a committed document; dense sees nothing yet; hybrid says so.
        hits = index.search("purr", mode="keyword")
        assert [h.doc_id for h in hits] == ["cats"] and not hits[0].embedded
        assert index.search("feline companions", mode="dense") == []
        hybrid = index.search("cats purr", mode="hybrid")
        assert hybrid[0].doc_id == "cats" and hybrid[0].scores.dense is None
        assert hybrid[0].to_dict()["embedded"] is False
        # A filter on the dense side also keeps to embedded chunks.
        assert index.search("cats", mode="dense", where={"doc_id": "cats"}) == []

        assert index.embed_pending() == 3
        stats = index.stats()
        assert stats.pending_chunks == 0 and stats.pending_seconds == 0.0
        dense = index.search("feline companions", mode="dense", top_k=1)
        assert dense[0].doc_id == "cats" and dense[0].embedded
        hybrid = index.search("cats purr", mode="hybrid")
        assert hybrid[0].scores.dense is not None
        assert index.verify().ok


def test_pending_work_survives_a_reopen_and_has_an_estimate(tmp_path: Path) -> None:
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        index.add_documents({f"d{i}": f"# D{i}\n\nword{i} river stone" for i in range(40)})
        index.add_documents(
            {f"e{i}": f"# E{i}\n\nother{i} sea shell" for i in range(30)}, wait=False
        )
        assert index.pending_chunks() == 30
        # The rate of the last embedding round gives the estimate of the time left.
        assert index.stats().pending_seconds is not None
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        assert index.pending_chunks() == 30
        assert index.verify().ok
        assert index.search("other7 sea", mode="keyword")[0].doc_id == "e7"
        assert index.embed_pending() == 30
        assert index.search("other7 sea shell", mode="dense", top_k=1)[0].doc_id == "e7"


def test_a_repeated_input_is_embedded_once(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    same = "# Same\n\nExactly the same paragraph in two documents."
    with Index(tmp_path / "ix", embedder=embedder) as index:
        report = index.add_documents({"a": same, "b": same}, wait=False)
        assert report.chunks_pending == 2
        assert index.embed_pending() == 1
        assert len(embedder.passages) == 1
        assert index.embed_pending() == 0  # nothing left: nothing embedded again
        # Replacing a document by the same text again reuses its vector.
        index.add_documents({"c": same})
        assert len(embedder.passages) == 1
        assert {h.doc_id for h in index.search("same paragraph", mode="dense")} == {"a", "b", "c"}


def test_deleted_and_replaced_pending_chunks_are_not_filled(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    with Index(tmp_path / "ix", embedder=embedder) as index:
        index.add_documents(DOCS, wait=False)
        index.delete_document("dogs")
        index.add_documents({"tides": "# Tides\n\nNew text about the sea."}, wait=False)
        assert index.pending_chunks() == 2
        index.embed_pending()
        # Only cats and the new tides: the deleted and the replaced chunks are never embedded.
        assert len(embedder.passages) == 2
        assert not any("Dogs bark" in p or "moon pulls" in p for p in embedder.passages)
        assert index.pending_chunks() == 0 and index.verify().ok


def test_background_embedding_while_searching(tmp_path: Path) -> None:
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        docs = {f"d{i}": f"# D{i}\n\nmarker{i} " + "lorem ipsum " * 40 for i in range(600)}
        index.add_documents(docs, wait=False)
        rounds: list[tuple[int, int]] = []
        index.on_background_progress = lambda done, left: rounds.append((done, left))
        index.embed_in_background()
        while not index.wait_for_embedding(0.01):  # reads go on meanwhile, never blocked
            hits = index.search("marker5", mode="keyword")
            assert hits[0].doc_id == "d5"
        assert index.pending_chunks() == 0
        assert rounds and rounds[-1][1] == 0
        assert index.search("marker5 lorem", mode="dense", top_k=1)[0].embedded


def test_memory_index_waits_for_both_phases_and_ranks_as_on_disk(tmp_path: Path) -> None:
    memory = Index(embedder=HashingEmbedder())
    disk = Index(tmp_path / "ix", embedder=HashingEmbedder())
    for index in (memory, disk):
        report = index.add_documents(DOCS)
        assert report.chunks_pending == 0 and report.chunks_embedded == 3
        assert index.pending_chunks() == 0
    for query in ("cats purr", "moon tides", "bark"):
        assert [h.chunk_id for h in memory.search(query)] == [
            h.chunk_id for h in disk.search(query)
        ]
    memory.close()
    disk.close()


def test_sync_folder_returns_after_the_keyword_phase_and_names_the_slowest_files(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        report = sync_folder(index, folder, wait=False, workers=2)
        assert report.added == 3 and report.chunks_pending == 3
        assert 0 < report.keyword_seconds <= report.seconds
        assert [Path(p).name for p, _, _ in report.slowest] and len(report.slowest) == 3
        assert all(seconds >= 0 and chunks == 1 for _, seconds, chunks in report.slowest)
        assert index.search("purr", mode="keyword")[0].doc_id == "cats.md"
        index.embed_pending()
        assert index.pending_chunks() == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_stop_ends_the_embedding_phase_after_a_round(tmp_path: Path, workers: int) -> None:
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        index.add_documents(
            {f"d{i}": f"# D{i}\n\nunique{i} words" for i in range(300 * workers)}, wait=False
        )
        stop = threading.Event()
        stop.set()
        assert index.embed_pending(stop=stop) == 0
        assert index.pending_chunks() == 300 * workers


def test_embedding_progress_counts_chunks_so_its_total_never_moves(tmp_path: Path) -> None:
    # Issue 31: the total (done + pending) fell from 3,820 to 3,808 mid-run, because done
    # counted distinct inputs and repeated ones were not counted. It counts chunks now, and
    # the first round is small, so a rate is known early.
    with Index(tmp_path / "ix", embedder=HashingEmbedder()) as index:
        same = {f"copy{i}": "# Notes\n\nThe same paragraph, word for word." for i in range(40)}
        other = {f"d{i}": f"# D{i}\n\nmarker{i} " + "lorem ipsum " * 40 for i in range(300)}
        index.add_documents({**same, **other}, wait=False)
        pending = index.pending_chunks()
        calls: list[tuple[int, int]] = []
        embedded = index.embed_pending(progress=lambda done, left: calls.append((done, left)))
    assert embedded < pending  # the copies share one input, embedded once
    assert calls[0] == (0, pending)  # announced before the first round
    assert {done + left for done, left in calls} == {pending}
    assert 0 < calls[1][0] <= 16 and calls[-1] == (pending, 0)


def test_a_forced_rebuild_waits_for_the_embedding_phase_under_way(tmp_path: Path) -> None:
    # Issue 38: `guaipeca index --force` embeds in a helper thread while the keyword phase
    # drops the corpus; the helper, holding the old corpus, opened its catalog after the
    # folder was gone ("OperationalError: unable to open database file").
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    entered, release = threading.Event(), threading.Event()
    errors: list[Exception] = []

    def hold(done: int, left: int) -> None:
        entered.set()
        release.wait(10)

    def embed() -> None:
        try:
            index.embed_pending("default", progress=hold)
        except Exception as exc:
            errors.append(exc)

    with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as index:
        sync_folder(index, folder, wait=False)
        helper = threading.Thread(target=embed)
        helper.start()
        assert entered.wait(10)
        rebuild = threading.Thread(target=sync_folder, args=(index, folder), kwargs={"force": True})
        rebuild.start()
        rebuild.join(1.0)  # with the fault, the corpus is dropped under the helper here
        release.set()
        helper.join(10)
        rebuild.join(30)
        assert errors == []
        assert index.stats().pending_chunks == 0
        assert index.search("purr", mode="dense")[0].doc_id == "cats.md"


def test_a_dropped_corpus_is_never_reopened_by_a_late_reader(tmp_path: Path) -> None:
    with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as index:
        index.add_documents(DOCS)
        stale = index.store("default")
        index.drop_corpus("default")
        found: list[BaseException] = []

        def read() -> None:  # a thread with no reader connection yet opens one now
            try:
                stale.rows([1])
            except BaseException as exc:
                found.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(10)
        assert len(found) == 1 and isinstance(found[0], NotFoundError), found
        assert "closed" in str(found[0])
        assert not (tmp_path / "ix" / "corpora" / "default").exists()


def test_a_corpus_rebuilt_by_another_process_is_a_clear_error_for_a_reader(
    tmp_path: Path,
) -> None:
    # Issue 38, the other side of the race: a server reading a corpus that
    # `guaipeca index --force` (another process, here another Index) drops meanwhile.
    with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as server:
        server.add_documents(DOCS)
        store = server.store("default")
        with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as cli:
            cli.drop_corpus("default")
        found: list[BaseException] = []

        def read() -> None:  # a server thread with no reader connection yet
            try:
                store.rows([1])
            except BaseException as exc:
                found.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(10)
    assert len(found) == 1 and isinstance(found[0], NotFoundError), found
    assert "another process" in str(found[0])


def test_a_reader_follows_a_corpus_another_process_rebuilt(tmp_path: Path) -> None:
    # Issue 38: after `index --force` in another process, a server's threads read the old
    # catalog on their open connections and the new one on new connections.
    with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as server:
        server.add_documents({"old": "# Old\n\nCats purr in the old corpus."})
        assert [h.doc_id for h in server.search("cats", mode="keyword")] == ["old"]
        with Index(tmp_path / "ix", embedder=HashingEmbedder(32)) as cli:
            cli.drop_corpus("default")
            cli.add_documents({"new": "# New\n\nCats purr in the rebuilt corpus."})
        assert [h.doc_id for h in server.search("cats", mode="keyword")] == ["new"]
        assert [h.doc_id for h in server.search("cats", mode="hybrid")] == ["new"]
