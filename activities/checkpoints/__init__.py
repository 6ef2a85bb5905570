"""Checkpoint methods a pod can declare: annotation handshake, HTTP endpoint, kubelet API.

``spec`` reads a pod's declaration, ``answers`` judges what a workload or kubelet said, and
``methods`` runs one method against one pod; ``activities.checkpoints.checkpoint`` asks a whole job.
"""
