"""One corpus on disk or in memory: its catalog, vector slots and lexical index kept in step.

This is our storage layout and write protocol (hand-written on purpose). A write is:
vectors into slots nobody references → flush; lexical deletes/adds → commit; catalog
commit last. A marker file says whether the lexical index is known to match a catalog
generation; if a crash leaves it dirty or behind, it is rebuilt from the catalog on open
(chunk text lives in the catalog, so no re-conversion or re-embedding is needed).
Readers use an immutable snapshot (``slot -> chunk``) that a writer swaps after commit.
"""

from guaipeca.store.embedded.corpus.reads import Corpus
from guaipeca.store.embedded.corpus.recovery import BACKUP_NAME, count_damaged

__all__ = ["BACKUP_NAME", "Corpus", "count_damaged"]
