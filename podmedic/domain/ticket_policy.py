"""Vendor ticket settings: the ``ticket:`` section of a driver's policy.

Kept apart from the rest of the driver policy (``podmedic/domain/policy.py``) because the backends
(``activities/tickets/``) read only this part: where to file, how to authenticate, when to
file and how long to wait for the vendor. Credentials are named (a file or an environment
variable), never written into the policy, so they stay out of workflow history.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from podmedic.domain.base import ConfigModel

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

MAX_VENDOR_POLLS = 600
"""Status calls one vendor wait may make. Each costs about 11 history events (an activity's three, a
timer's two, two workflow tasks), so 600 stay under Temporal's warning at 10,240 events a history, far
from the 51,200 at which the server terminates the run (dynamic config ``limit.historyCount.warn`` and
``.error``, Temporal's "Self-hosted Temporal Cluster defaults")."""


def vendor_polls(wait_s: float, poll_s: float, poll_max_s: float) -> int:
    """How many status calls a vendor wait of ``wait_s`` makes: the gap starts at ``poll_s`` and doubles
    up to ``poll_max_s`` (or ``poll_s``, when that is longer)."""
    ceiling, gap, spent, polls = max(poll_s, poll_max_s), poll_s, 0.0, 0
    while spent < wait_s:
        polls += 1
        spent += gap
        gap = min(gap * 2, ceiling)
        if gap == ceiling and spent < wait_s:
            return polls + int(-(-(wait_s - spent) // gap))
    return polls


def _file_field(what: str) -> str | None:
    return Field(None, min_length=1, description=f"File holding the {what} (e.g. a mounted Secret); wins over env.")


def _env_field(what: str, default: str) -> str | None:
    return Field(default, pattern=_ENV_NAME, description=f"Environment variable holding the {what}.")


class JiraTicket(ConfigModel):
    """Jira REST (v2 or v3 shape): one issue per incident, a comment when the device fails again."""

    url: str = Field(..., min_length=1, description="Base URL, e.g. https://acme.atlassian.net; ${VAR} expanded.")
    project: str = Field(..., min_length=1, description="Project key the issues go to.")
    issue_type: str = Field("Bug", min_length=1, description="Issue type name.")
    api_version: Literal["2", "3"] = Field("2", description="REST API version: 3 sends Atlassian Document Format.")
    deployment: Literal["cloud", "datacenter"] = Field(
        "cloud", description="cloud: Jira Cloud (search through /search/jql; the old /search answers 410 Gone "
                             "there); datacenter: Jira Data Center or Server (/search, REST API 2 only).")
    auth: Literal["basic", "bearer"] = Field("basic", description="basic: email + API token; bearer: a PAT.")
    email: str | None = Field(None, description="Account email for basic auth (may be ${VAR}).")
    token_file: str | None = _file_field("API token (basic) or personal access token (bearer)")
    token_env: str | None = _env_field("API token (basic) or personal access token (bearer)", "PODMEDIC_JIRA_TOKEN")
    labels: tuple[str, ...] = Field(("podmedic",), description="Labels added to every issue.")
    comment_on_recurrence: bool = Field(True, description="Comment on the device's still-open issue instead of "
                                                          "filing another.")

    @model_validator(mode="after")
    def _basic_needs_email(self) -> JiraTicket:
        if self.auth == "basic" and not self.email:
            raise ValueError("email is required when auth is basic (or set auth: bearer for a PAT)")
        if self.deployment == "datacenter" and self.api_version == "3":
            raise ValueError('api_version "3" is Jira Cloud only: Jira Data Center serves REST API 2')
        return self


class ServiceNowTicket(ConfigModel):
    """ServiceNow Table API: one record per incident, found again by ``correlation_id``."""

    url: str = Field(..., min_length=1, description="Instance URL, e.g. https://acme.service-now.com; ${VAR} expanded.")
    table: str = Field("incident", pattern=r"^[a-z0-9_]+$", description="Table the records go to.")
    user: str = Field(..., min_length=1, description="Basic auth user (may be ${VAR}).")
    password_file: str | None = _file_field("basic auth password")
    password_env: str | None = _env_field("basic auth password", "PODMEDIC_SERVICENOW_PASSWORD")
    category: str = Field("hardware", description="The record's category.")
    assignment_group: str | None = Field(None, description="Group the record is assigned to.")
    resolved_states: tuple[str, ...] = Field(("6", "7"),
                                             description="state values meaning resolved (6 Resolved, 7 Closed).")


class Ticket(ConfigModel):
    """Vendor tickets: when to file and where.

    ``backend`` picks the system: ``webhook`` (generic JSON, signed), ``jira`` (needs ``jira:``),
    ``servicenow`` (needs ``servicenow:``), or ``none``.
    """

    backend: Literal["none", "webhook", "jira", "servicenow"] = "webhook"
    url: str = Field(
        "${PODMEDIC_TICKET_URL}",
        description="Webhook endpoint; ${VAR} is expanded by the worker, so the URL and any "
        "credentials stay out of workflow history. Empty after expansion disables filing.",
    )
    secret_file: str | None = _file_field("webhook signing secret: a Standard Webhooks secret (whsec_ and base64) "
                                          "or any text, used as its bytes; the request is signed when one is set")
    secret_env: str | None = _env_field("webhook HMAC secret", "PODMEDIC_TICKET_SECRET")
    legacy_signature: bool = Field(False, description="Also send X-Podmedic-Signature: sha256=<hex HMAC of the "
                                                      "body>, the scheme before Standard Webhooks. It carries no "
                                                      "timestamp, so a captured request can be replayed: for "
                                                      "receivers not yet moved. Deprecated: running 0.1.0 "
                                                      "workflows carry it in their policy memo, so it goes with "
                                                      "0.1.0's histories (docs/deploy.md).")
    token_file: str | None = _file_field("webhook bearer token (sent when one is set)")
    token_env: str | None = _env_field("webhook bearer token", "PODMEDIC_TICKET_TOKEN")
    jira: JiraTicket | None = None
    servicenow: ServiceNowTicket | None = None
    file_when_permanent: bool = True
    one_per_episode: bool = Field(True, description="A device that fails again while its last ticket is open "
                                                    "adds the new incident's evidence to that ticket instead of "
                                                    "filing another; the repeat-offender threshold files a new one.")
    file_when_unhealed: bool = Field(True, description="File when the device stays unhealthy.")
    wait_resolution_s: float = Field(86400.0, gt=0, description="Wait for the vendor this long.")
    poll_s: float = Field(30.0, gt=0, description="How soon the backend is first asked for status.")
    poll_max_s: float = Field(3600.0, gt=0, description="The longest gap between status calls: the gap "
                                                         "doubles from poll_s up to this, so a wait of days "
                                                         "is a few hundred calls (a resolve callback or a "
                                                         "Healthy report ends the wait at once).")
    verify_s: float = Field(300.0, ge=0, description="After the vendor resolves: wait this long for the "
                                                     "device to verify healthy before untainting.")

    @model_validator(mode="after")
    def _backend_settings(self) -> Ticket:
        if self.backend == "jira" and self.jira is None:
            raise ValueError("backend jira needs a 'jira:' section (url, project, ...)")
        if self.backend == "servicenow" and self.servicenow is None:
            raise ValueError("backend servicenow needs a 'servicenow:' section (url, user, ...)")
        polls = vendor_polls(self.wait_resolution_s, self.poll_s, self.poll_max_s)
        if polls > MAX_VENDOR_POLLS:
            raise ValueError(
                f"waiting {self.wait_resolution_s:g}s for the vendor with status calls at most "
                f"{max(self.poll_s, self.poll_max_s):g}s apart makes {polls} calls, over {MAX_VENDOR_POLLS} "
                f"(about 11 history events each; Temporal warns at 10,240 events): raise poll_max_s to at least "
                f"{self.wait_resolution_s / (MAX_VENDOR_POLLS - 20):.0f} or shorten wait_resolution_s")
        return self


_TEMPLATE_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def ticket_variables(ticket: Ticket) -> dict[str, str]:
    """The environment variables the worker reads to file ``ticket``'s backend: name -> what it holds.

    Only the chosen backend's: its ``*_env`` secrets, and every ``${VAR}`` in its URL, user or email.
    """
    section: ConfigModel | None = {"webhook": ticket, "jira": ticket.jira, "servicenow": ticket.servicenow}.get(
        ticket.backend)
    if section is None:
        return {}
    where = "ticket" if section is ticket else f"ticket.{ticket.backend}"
    found: dict[str, str] = {}
    for name in type(section).model_fields:
        value = getattr(section, name)
        if not isinstance(value, str):
            continue
        if name.endswith("_env"):
            found[value] = f"{ticket.backend} {name.removesuffix('_env').replace('_', ' ')} ({where}.{name})"
        for variable in _TEMPLATE_VARIABLE.findall(value):
            found.setdefault(variable, f"{ticket.backend} {name} (in {where}.{name})")
    return found


def signing_key(secret: str) -> str | bytes:
    """The key a webhook secret stands for under Standard Webhooks (https://www.standardwebhooks.com): a
    ``whsec_`` secret is the spec's base64 text, given to ``standardwebhooks.Webhook`` as it is; any other
    text is used as its bytes. The sender (``activities/tickets``) and the simulator's desk both use it."""
    return secret if secret.startswith("whsec_") else secret.encode()
