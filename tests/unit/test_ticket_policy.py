"""The ticket section of the policy: backends, their settings and credential names."""

from __future__ import annotations

import pytest

from podmedic.domain.policy_file import PolicyError, parse_policy


def _errors(text: str) -> str:
    with pytest.raises(PolicyError) as err:
        parse_policy(text)
    return str(err.value)


def test_a_driver_switches_to_jira_over_the_default_webhook() -> None:
    policies = parse_policy("""
drivers:
  default: {ticket: {url: "${PODMEDIC_TICKET_URL}"}}
  gpu.nvidia.com:
    ticket: {backend: jira, jira: {url: "https://acme.atlassian.net", project: GPU, email: bot@acme.io,
                                   token_file: /secrets/jira-token}}
""")
    ticket = policies.for_driver("gpu.nvidia.com").ticket
    assert ticket.backend == "jira" and ticket.jira is not None and ticket.jira.project == "GPU"
    assert ticket.jira.token_file == "/secrets/jira-token" and ticket.jira.api_version == "2"
    assert policies.for_driver("other").ticket.backend == "webhook"


def test_bad_ticket_settings_name_the_field() -> None:
    text = _errors("""
drivers:
  default: {}
  a: {ticket: {backend: jira}}
  b: {ticket: {backend: servicenow, servicenow: {url: "https://x", user: u, password_env: "bad name"}}}
  c: {ticket: {backend: jira, jira: {url: "https://x", project: P}}}
  d: {ticket: {backend: email}}
""")
    assert "drivers.a.ticket: Value error, backend jira needs a 'jira:' section" in text
    assert "drivers.b.ticket.servicenow.password_env: String should match pattern" in text
    assert "drivers.c.ticket.jira: Value error, email is required when auth is basic" in text
    assert "drivers.d.ticket.backend: Input should be 'none', 'webhook', 'jira' or 'servicenow'" in text


def test_a_vendor_wait_that_would_poll_past_temporals_history_warning_is_refused_with_the_fix() -> None:
    # 14 days with a status call every 300 s is 4,032 calls, some 44,000 history events: Temporal warns
    # at 10,240 and terminates the run at 51,200 (limit.historyCount.warn/.error).
    text = _errors("""
drivers:
  default: {}
  gpu.amd.com: {ticket: {wait_resolution_s: 1209600, poll_s: 300, poll_max_s: 300}}
""")
    assert "drivers.gpu.amd.com.ticket: Value error, waiting 1.2096e+06s for the vendor with status calls at " \
           "most 300s apart makes 4032 calls, over 600" in text
    assert "raise poll_max_s to at least 2086 or shorten wait_resolution_s" in text
    # The same wait with the gaps allowed to grow to an hour is a few hundred calls: accepted.
    assert parse_policy("""
drivers:
  default: {ticket: {wait_resolution_s: 1209600, poll_s: 300}}
""").for_driver("x").ticket.poll_max_s == 3600
