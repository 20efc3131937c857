"""The one place where the caller's rights (server/access.py) meet the corpora: every door
(MCP tools, the web API, ``/download``, ``/documents``, ``/health``) asks the service, and
the service asks this guard.

A corpus the caller may not read is answered exactly as a missing one: the same error,
built by the same branch from the same data (the names the caller may read), after the
same set look-ups, so neither the text nor the timing tells them apart. Searches are
scoped to readable corpora before they run, never filtered after ranking. A denial is
written to the audit log (a missing corpus is not: nothing was denied).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from guaipeca.config import did_you_mean
from guaipeca.errors import AccessDeniedError, InvalidArgumentError, NotFoundError
from guaipeca.index import Index
from guaipeca.server.access import FULL, AccessPolicy, Rights, current_rights
from guaipeca.server.audit import AuditLog
from guaipeca.server.writes import current_caller
from guaipeca.types import Chunk, IndexStats

__all__ = ["CorpusGuard"]


class CorpusGuard:
    """Checks reads and writes of corpora against the current caller's rights.

    ``configured``: the configured corpus names (their order is the listing order);
    corpora only in the index count as existing too.
    """

    def __init__(
        self, policy: AccessPolicy, audit: AuditLog, configured: Sequence[str], index: Index
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.configured = list(configured)
        self.index = index

    # -- what the caller may see -----------------------------------------------------------
    @property
    def rights(self) -> Rights:
        return current_rights() if self.policy.enabled else FULL

    @property
    def limited(self) -> bool:
        return self.rights.limited

    def known(self) -> list[str]:
        """Every corpus that exists: the configured ones, then those only indexed."""
        configured = set(self.configured)
        return self.configured + [n for n in self.index.corpora if n not in configured]

    def readable(self, names: Sequence[str] | None = None) -> list[str]:
        """Those of ``names`` (default: every existing corpus) the caller may read."""
        r = self.rights
        return [n for n in (self.known() if names is None else names) if r.may_read(n)]

    def can_read(self, name: str) -> bool:
        return self.rights.may_read(name) and name in self.known()

    def can_write(self, name: str) -> bool:
        return self.rights.may_write(name) and self.can_read(name)

    def deny(self, corpus: str | None, detail: str) -> None:
        """Write a denial to the audit log."""
        self.audit.record(current_caller(), "denied", corpus, detail)

    def hidden(self, name: str) -> NotFoundError:
        """The one answer for a corpus that is missing or that the caller may not read."""
        if name in self.known():
            self.deny(name, "not readable")
        mine = self.readable()
        hint = did_you_mean(name, mine)
        return NotFoundError(
            f"no corpus named {name!r:.70}{'; ' + hint if hint else ''} "
            f"(corpora: {', '.join(mine) or 'none'})"
        )

    # -- checks ----------------------------------------------------------------------------
    def check_read(self, name: str) -> None:
        """Raises:
        NotFoundError: under grants, ``name`` is missing or not readable (one answer).
        """
        if self.limited and not self.can_read(name):
            raise self.hidden(name)

    def check_write(self, name: str) -> None:
        """Raises:
        NotFoundError: under grants, ``name`` is missing or not readable.
        AccessDeniedError: it is readable, not writable.
        """
        if not self.limited:
            return
        self.check_read(name)
        if not self.rights.may_write(name):
            self.deny(name, "not writable")
            raise AccessDeniedError(
                f"you may read corpus {name!r:.70} but not change it (no write grant)"
            )

    def scope(self, corpora: Sequence[str] | None, default: list[str] | None) -> list[str] | None:
        """The corpora a search or listing covers: ``corpora`` when given (each checked),
        else ``default`` (None: every corpus), cut to what the caller may read.

        Raises:
            NotFoundError: a named corpus is missing or not readable.
        """
        if not self.limited:
            return list(corpora) if corpora is not None else default
        if corpora is not None:
            for name in corpora:
                self.check_read(name)
            return list(corpora)
        return self.readable(default)

    def chunk_ids(
        self,
        ids: Sequence[str],
        get: Callable[[str], object],
        missing: Callable[[list[str]], Exception],
    ) -> None:
        """Check chunk ids before a read: under grants, an id of a corpus the caller may
        not read is missing, and the error (``missing`` of every id that is, in order;
        ``get`` reads one and raises NotFoundError) is the one a missing corpus gives.

        Raises:
            Exception: ``missing(ids)`` when one is not readable.
        """
        if not self.limited:
            return
        hidden = [i for i in ids if not self.can_read(i.rpartition(":")[0])]
        if not hidden:
            return
        for cid in hidden:
            if cid.rpartition(":")[0] in self.known():
                self.deny(cid.rpartition(":")[0], f"chunk {cid[:80]!r} not readable")
        lost = []
        for cid in ids:
            if cid in hidden:
                lost.append(cid)
                continue
            try:
                get(cid)
            except NotFoundError:
                lost.append(cid)
        raise missing(lost)

    def get_chunk(self, chunk_id: str) -> Chunk:
        """One chunk by id; under grants, one of a corpus the caller may not read is
        missing (the denial is audited).

        Raises:
            NotFoundError: no such chunk, or not readable.
        """
        name = chunk_id.rpartition(":")[0]
        if self.limited and not self.can_read(name):
            raise self.hidden(name)
        return self.index.get_chunk(chunk_id)

    def document_corpus(self, doc_id: str, corpus: str | None) -> str | None:
        """The corpus to read document ``doc_id`` from: ``corpus`` (checked), or, when None
        under grants, the one readable corpus that holds it.

        Raises:
            NotFoundError: the corpus is not readable, or no readable corpus holds it.
            InvalidArgumentError: several readable corpora hold it.
        """
        if corpus is not None or not self.limited:
            if corpus is not None:
                self.check_read(corpus)
            return corpus
        present = set(self.index.corpora)
        holders = [
            n
            for n in self.readable()
            if n in present and self.index.store(n).stored_signature(doc_id) is not None
        ]
        if not holders:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        if len(holders) > 1:
            raise InvalidArgumentError(
                f"document {doc_id!r:.80} exists in several corpora ({', '.join(sorted(holders))});"
                " name the corpus"
            )
        return holders[0]

    def stats(self, stats: IndexStats) -> IndexStats:
        """``stats`` with only the readable corpora (the totals follow)."""
        if not self.limited:
            return stats
        r = self.rights
        return dataclasses.replace(
            stats, corpora=tuple(c for c in stats.corpora if r.may_read(c.name))
        )
