"""Text handling shared by the lexical index and enrichment: normalisation, stopwords and
language names."""
