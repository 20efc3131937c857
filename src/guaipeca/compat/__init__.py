"""The APIs of the systems Guaipeca replaces, as thin layers over the public API
(``guaipeca.compat.arara``: arara-rag's ``Arara``). They sit above the Index facade, beside
``agentic`` and ``ingest``."""
