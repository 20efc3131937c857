"""The scale-out backend: a Qdrant server, cluster or qdrant-client's local mode behind the
same storage contract as the embedded store."""
