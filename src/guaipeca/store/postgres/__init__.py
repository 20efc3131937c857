"""The PostgreSQL + pgvector backend: primary, streaming replica, postgres_fdw shards."""
