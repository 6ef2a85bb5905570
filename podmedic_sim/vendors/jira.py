"""A fake Jira speaking the REST v2/v3 shapes podmedic uses, strict about auth and fields.

Routes (``{v}`` is 2 or 3): ``POST /rest/api/{v}/issue``, the search (only ``labels = "<label>"``
is understood), ``GET /rest/api/{v}/issue/{key}``, ``GET|POST /rest/api/{v}/issue/{key}/comment``.
Issues start in status "To Do" (category ``new``); resolving moves them to "Done" (category
``done``).

The search is the deployment's: Jira Cloud (the default) serves ``GET /rest/api/{v}/search/jql``
(``nextPageToken`` paging, ``isLast``, only the ``fields`` asked for) and answers the old
``/rest/api/{v}/search`` with 410 Gone and Atlassian's message (changelog CHANGE-2046, removed in
2025); Jira Data Center serves ``GET /rest/api/2/search`` (``startAt``, ``total``) and no
``/search/jql``.
"""

from __future__ import annotations

import re
import time
from typing import Any

from aiohttp import web

from podmedic_sim.vendors.base import FakeDesk, basic, device_in

LABEL_JQL = re.compile(r'labels\s*=\s*"([^"]+)"')
# Jira Cloud's answer to the removed search endpoints (410 Gone), as Atlassian's API returns it.
SEARCH_REMOVED = ("The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full "
                  "migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046")
TODO = {"name": "To Do", "statusCategory": {"key": "new", "name": "To Do"}}
DONE = {"name": "Done", "statusCategory": {"key": "done", "name": "Done"}}


def _text(doc: Any) -> str:
    """Plain text of a v2 string or a v3 Atlassian Document Format node."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, dict):
        return str(doc.get("text", "")) + "".join(_text(c) for c in doc.get("content") or [])
    return ""


class FakeJira(FakeDesk):
    """Issues of one project; accepts basic (email + token) or bearer (PAT) auth."""

    def __init__(self, *, project: str = "OPS", email: str = "bot@example.com", token: str = "jira-token",
                 bearer: bool = False, cloud: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.project = project
        self.cloud = cloud
        self.auth = f"Bearer {token}" if bearer else basic(email, token)
        self.comments: dict[str, list[dict[str, Any]]] = {}

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == self.auth

    def _version(self, request: web.Request) -> str:
        return request.match_info["v"]

    async def create(self, request: web.Request) -> web.Response:
        """``POST /rest/api/{v}/issue``."""
        self.creates_received += 1
        if not self._authorized(request):
            return self.refuse(401, "create: bad or missing Authorization")
        fields = (await request.json()).get("fields") or {}
        errors: dict[str, str] = {}
        if (fields.get("project") or {}).get("key") != self.project:
            errors["project"] = f"project is required and must be {self.project}"
        if not str(fields.get("summary") or "").strip() or len(str(fields.get("summary"))) > 255:
            errors["summary"] = "summary is required (at most 255 characters)"
        if not (fields.get("issuetype") or {}).get("name"):
            errors["issuetype"] = "issue type is required"
        desc = fields.get("description")
        if self._version(request) == "2" and not isinstance(desc, str):
            errors["description"] = "v2 takes the description as a string"
        if self._version(request) == "3" and not (isinstance(desc, dict) and desc.get("type") == "doc"):
            errors["description"] = "v3 takes the description in Atlassian Document Format"
        labels = fields.get("labels") or []
        if not all(isinstance(label, str) and " " not in label for label in labels):
            errors["labels"] = "labels are strings without spaces"
        if errors:
            return self.refuse(400, f"create: {errors}", {"errorMessages": [], "errors": errors})
        key = f"{self.project}-{len(self.tickets) + 1}"
        self.tickets[key] = {"id": str(10000 + len(self.tickets)), "key": key, "fields": {**fields, "status": TODO},
                             "created": time.time(), "device": device_in(str(fields["summary"])),
                             "text": _text(desc)}
        await self.held()
        return web.json_response({"id": self.tickets[key]["id"], "key": key, "self": f"/rest/api/2/issue/{key}"},
                                 status=201)

    def _labelled(self, request: web.Request) -> list[dict[str, Any]] | web.Response:
        if not self._authorized(request):
            return self.refuse(401, "search: bad or missing Authorization")
        jql = request.query.get("jql", "")
        if not jql.strip():  # Cloud refuses an unbounded query; Data Center would list everything
            return self.refuse(400, "search: unbounded JQL", {"errorMessages": ["Unbounded JQL queries are not "
                                                                                "allowed here."], "errors": {}})
        m = LABEL_JQL.search(jql)
        if not m:
            return self.refuse(400, "search: only labels = \"...\" is understood", {"errorMessages": ["bad JQL"]})
        ordered = sorted(self.tickets.values(), key=lambda t: t["created"])
        return [t for t in ordered if m.group(1) in t["fields"].get("labels", [])]

    def _page_size(self, request: web.Request) -> int:
        try:
            return max(1, min(int(request.query.get("maxResults", "50")), 5000))
        except ValueError:
            return 50

    @staticmethod
    def _issue_json(ticket: dict[str, Any], fields: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": ticket["id"], "key": ticket["key"], "self": f"/rest/api/2/issue/{ticket['id']}"}
        if fields:
            out["fields"] = {f: ticket["fields"][f] for f in fields if f in ticket["fields"]}
        return out

    async def search(self, request: web.Request) -> web.Response:
        """``GET /rest/api/{v}/search``: Data Center's search; removed (410) on Jira Cloud."""
        if self.cloud:
            return self.refuse(410, "search: /search was removed from Jira Cloud",
                               {"errorMessages": [SEARCH_REMOVED], "errors": {}})
        found = self._labelled(request)
        if isinstance(found, web.Response):
            return found
        fields = [f for f in request.query.get("fields", "*navigable").split(",") if f and not f.startswith("*")]
        size = self._page_size(request)
        return web.json_response({"startAt": 0, "maxResults": size, "total": len(found),
                                  "issues": [self._issue_json(t, fields or ["status"]) for t in found[:size]]})

    async def search_jql(self, request: web.Request) -> web.Response:
        """``GET /rest/api/{v}/search/jql``: Jira Cloud's enhanced search (token paging, no total)."""
        if not self.cloud:
            return web.json_response({"errorMessages": ["null for uri: /search/jql"]}, status=404)
        found = self._labelled(request)
        if isinstance(found, web.Response):
            return found
        fields = [f for f in request.query.get("fields", "").split(",") if f]
        size = self._page_size(request)
        try:
            start = int(request.query.get("nextPageToken") or 0)
        except ValueError:
            return self.refuse(400, "search: bad nextPageToken", {"errorMessages": ["Invalid nextPageToken"]})
        page = found[start:start + size]
        body: dict[str, Any] = {"issues": [self._issue_json(t, fields) for t in page],
                                "isLast": start + size >= len(found)}
        if not body["isLast"]:
            body["nextPageToken"] = str(start + size)
        return web.json_response(body)

    async def issue(self, request: web.Request) -> web.Response:
        """``GET /rest/api/{v}/issue/{key}``."""
        if not self._authorized(request):
            return self.refuse(401, "get: bad or missing Authorization")
        ticket = self.tickets.get(request.match_info["key"])
        if ticket is None:
            return web.json_response({"errorMessages": ["Issue does not exist"]}, status=404)
        return web.json_response({"key": ticket["key"], "fields": {"status": ticket["fields"]["status"]}})

    async def comments_of(self, request: web.Request) -> web.Response:
        """``GET|POST /rest/api/{v}/issue/{key}/comment``."""
        if not self._authorized(request):
            return self.refuse(401, "comment: bad or missing Authorization")
        key = request.match_info["key"]
        if key not in self.tickets:
            return web.json_response({"errorMessages": ["Issue does not exist"]}, status=404)
        comments = self.comments.setdefault(key, [])
        if request.method == "GET":
            return web.json_response({"startAt": 0, "total": len(comments), "comments": comments})
        body = (await request.json()).get("body")
        if not _text(body).strip():
            return self.refuse(400, "comment: body is required", {"errors": {"body": "Comment body can not be empty"}})
        comments.append({"id": str(len(comments) + 1), "body": body})
        return web.json_response(comments[-1], status=201)

    async def resolve(self, ticket_id: str) -> None:
        """Move the issue to Done."""
        self.tickets[ticket_id]["fields"]["status"] = DONE

    def rate_limited(self) -> web.Response:
        """Jira Cloud's 429 (developer.atlassian.com/cloud/jira/platform/rate-limiting): ``Retry-After``
        in seconds, ``X-RateLimit-Reset`` as ``yyyy-MM-ddTHH:mmZ`` (request time plus that wait) and
        ``RateLimit-Reason``; Atlassian documents no body, so none is sent."""
        reset = time.gmtime(time.time() + self.retry_after_s)
        return web.Response(status=429, headers={
            "Retry-After": str(self.retry_after_s), "X-RateLimit-Reset": time.strftime("%Y-%m-%dT%H:%MZ", reset),
            "RateLimit-Reason": "jira-quota-based"})

    def open_ids(self) -> list[str]:
        """Issues not in the done category."""
        return [k for k, t in self.tickets.items() if t["fields"]["status"] is not DONE]

    def routes(self) -> list[web.RouteDef]:
        """Jira's routes, for v2 and v3."""
        base = "/rest/api/{v:[23]}"
        return [web.post(f"{base}/issue", self.create), web.get(f"{base}/search", self.search),
                web.get(f"{base}/search/jql", self.search_jql),
                web.get(f"{base}/issue/{{key}}", self.issue),
                web.get(f"{base}/issue/{{key}}/comment", self.comments_of),
                web.post(f"{base}/issue/{{key}}/comment", self.comments_of)]
