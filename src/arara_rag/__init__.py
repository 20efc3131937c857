"""arara-rag's import name, for code written for arara: ``from arara_rag import Arara``.

Only a re-export of :mod:`guaipeca.compat.arara` (import-linter checks it imports nothing
else of Guaipeca's)."""

from guaipeca.compat.arara import Arara

__all__ = ["Arara"]
