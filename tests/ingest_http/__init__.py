"""Unit tests of the HTTP ingest: parsing, auth, settings, refusals."""
