"""Coming from the systems Guaipeca replaces: what reads their data and code as ours, as thin
layers over the public API (above the Index facade, beside ``agentic`` and ``ingest``).

- ``original``: the original Guaipeca's data folder (FAISS index, metadata.json), imported;
- ``arara``: arara-rag's ``Arara`` class.

Their config keys are read by config/legacy.py, below every layer."""
