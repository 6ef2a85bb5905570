"""Every side effect of podmedic: Kubernetes API calls, checkpoint requests, tickets."""
