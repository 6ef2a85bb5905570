"""The domain: models, per-driver policy, classification, guard limits, the search-attribute vocabulary.

Pure data and rules; it imports no other room of podmedic and does no I/O.
"""
