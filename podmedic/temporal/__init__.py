"""Temporal client plumbing: connecting, the data converter, the payload codec and TLS."""
