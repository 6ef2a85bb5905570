"""The one Kubernetes adapter: the only code that imports the ``kubernetes`` client."""
