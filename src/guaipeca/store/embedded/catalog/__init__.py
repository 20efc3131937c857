"""The SQLite catalog of one corpus: the source of truth.

Documents with their canonical text, chunks (offsets, heading path, section, pages,
vector slot, hash of what was embedded), metadata, the free-slot list and the generation
counter. The vector file and the lexical index are derived from it.
"""

from guaipeca.store.embedded.catalog.reads import Catalog
from guaipeca.store.embedded.catalog.txn import WriteTxn

__all__ = ["Catalog", "WriteTxn"]
