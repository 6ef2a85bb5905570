"""End-to-end tests of the ingest sources: dev server, simulator, real worker."""
