"""Ingestion: uploads, links and texts in, chunks stored (ingest.py), admitted and run on a pool of its own
(pool.py); the readers: an upload's name and kind (files.py), each kind read as bounded sections (readers.py,
sections.py, html_text.py), links fetched behind an address guard (links.py) and decoded within a bound
(decoding.py)."""
