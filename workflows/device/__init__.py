"""The device incident's pipeline: settle the event, fence, checkpoint and taint, recover, move off.

``incident.py`` is the workflow and reads top-down; each other module is one stage it calls.
"""
