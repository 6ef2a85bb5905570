"""Fake vendor ticket systems (Jira, ServiceNow shapes) for the demo and the end-to-end tests."""
