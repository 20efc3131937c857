"""Coming from the systems Guaipeca replaces: what reads their data and code as ours.

- ``original``: the original Guaipeca's data folder (FAISS index, metadata.json), imported.

Their config keys are read by config/legacy.py, below every layer."""
