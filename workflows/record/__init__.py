"""What an incident says, and to whom: Kubernetes Events on the pods, search attributes, metrics, and the
plain-line timeline of the stall and maintenance incidents."""
