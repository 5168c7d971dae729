"""The console's web application: Starlette (ASGI) routes rendering Jinja2
templates on the server. Pages need no script: forms post back and the
answer is a new page, so the Content-Security-Policy forbids every script
and a name or record that holds one can at worst show as text (Jinja2
escapes every value it puts in a page).

Changes (create a topic, produce a record) are POSTs carrying the page's
form token, refused in read-only mode, and written to the audit log with
who asked, whether made or refused."""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pylog.console.admin import ConsoleAdmin
from pylog.console.audit import AuditLog
from pylog.console.client_telemetry import ClientTelemetrySource
from pylog.console.lag_history import LagHistory
from pylog.console.record_format import FORMATS, render_bytes
from pylog.console.security_admin import (
    ACL_OPERATIONS,
    ACL_RESOURCE_TYPES,
    QUOTA_KEYS,
    SCRAM_MECHANISMS,
    AclSpec,
)
from pylog.console.sessions import COOKIE, Sessions
from pylog.errors import KafkaError

__all__ = ["ConsoleSettings", "create_app"]

HERE = Path(__file__).resolve().parent
MAX_LIMIT = 500
MAX_PRODUCED = 1024 * 1024  # bytes of key + value + headers one form may send

# No script anywhere: what escaping might miss cannot run either.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self' data:; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class ConsoleSettings:
    def __init__(
        self,
        *,
        read_only: bool = False,
        refresh_s: int = 0,
        lag_interval_s: float = 10.0,
        sign_in: bool = False,
    ) -> None:
        self.read_only = read_only
        self.sign_in = sign_in  # each person signs in with SASL credentials (sessions.py)
        self.refresh_s = refresh_s  # pages reload themselves this often (0: never)
        self.lag_interval_s = lag_interval_s  # a watched group's lag is sampled this often


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _number(value: float) -> str:
    """A quota's value as written: 1048576, not 1.04858e+06."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _timestamp(ms: int) -> str:
    if ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value shown is text, whatever it holds
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = _size
    env.filters["timestamp"] = _timestamp
    env.filters["shown"] = render_bytes
    env.filters["ids"] = lambda ids: ",".join(str(i) for i in ids)
    env.filters["number"] = _number
    return env


class _SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


SCOPE_ADMIN = "pylog.console.admin"  # the signed-in person's ConsoleAdmin
SCOPE_SESSION = "pylog.console.session"


class _SignIn:
    """With sign-in: a request without a live session goes to the sign-in
    page (only it and the stylesheet are open); with one, the session's
    admin is put in the scope for the pages to ask as."""

    OPEN = ("/signin", "/static/")

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.OPEN):
            await self.app(scope, receive, send)
            return
        session = self.sessions.get(HTTPConnection(scope).cookies.get(COOKIE))
        if session is None:
            await RedirectResponse("/signin", status_code=303)(scope, receive, send)
            return
        scope[SCOPE_ADMIN] = session.admin
        scope[SCOPE_SESSION] = session.id
        await self.app(scope, receive, send)


def _int(text: str | None, default: int | None = None) -> int | None:
    if text is None or not text.strip():
        return default
    try:
        return int(text.strip())
    except ValueError:
        return default


def parse_timestamp(text: str) -> int | None:
    """Milliseconds since the epoch, or an ISO-8601 date-time (UTC unless it
    names its offset); None when it is neither."""
    text = text.strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def parse_headers(text: str) -> list[tuple[str, bytes | None]]:
    """``key: value`` per line (as an HTTP header is written)."""
    out: list[tuple[str, bytes | None]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        out.append((key.strip(), value.strip().encode() if sep else None))
    return out


def create_app(
    admin: ConsoleAdmin,
    settings: ConsoleSettings | None = None,
    telemetry: ClientTelemetrySource | None = None,
) -> ASGIApp:
    """The console's ASGI application over ``admin``'s cluster connection;
    ``telemetry``: where the Clients pages read pushed client metrics."""
    settings = settings or ConsoleSettings()
    env = _environment()
    audit = AuditLog()
    token = secrets.token_urlsafe(24)  # a form from another site cannot know it

    sessions = Sessions(admin) if settings.sign_in else None

    def cur(request: Request) -> ConsoleAdmin:
        """Whom the cluster sees for this request: the signed-in person's
        admin (set by :class:`_SignIn`), else the console's own."""
        got = request.scope.get(SCOPE_ADMIN)
        return got if isinstance(got, ConsoleAdmin) else admin

    def lag_key(request: Request, group_id: str) -> str:
        # per principal: what one person's view sampled, another does not see
        return f"{cur(request).principal}\n{group_id}"

    def total_lag(key: str) -> int | None:
        principal, _, group_id = key.partition("\n")
        by = sessions.admin_of(principal) if sessions is not None else admin
        view = by.group(group_id) if by is not None else None
        return None if view is None or not view.offsets else view.total_lag

    lag_history = LagHistory(total_lag, settings.lag_interval_s)

    def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            read_only=settings.read_only,
            refresh_s=settings.refresh_s,
            principal=cur(request).principal
            if sessions is None or SCOPE_ADMIN in request.scope
            else "nobody: not signed in",
            bootstrap=admin.bootstrap_servers,
            sign_in=sessions is not None and SCOPE_ADMIN in request.scope,
            csrf=token,
            path=request.url.path,
            formats=FORMATS,
            **values,
        )
        return HTMLResponse(html, status_code=status)

    def who(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    async def blocking(request: Request, template: str, what: Callable[[], Any]) -> Any:
        """``what`` on a worker thread; an unreachable cluster is a 503 page."""
        try:
            return await run_in_threadpool(what)
        except KafkaError as e:
            return page(request, "error.html", 503, title="Cluster unreachable", error=str(e))

    async def change(
        request: Request, action: str, target: str, form: FormData
    ) -> HTMLResponse | None:
        """A refusal page when a change may not be made (read-only, or no
        form token), audited; None when it may."""
        reason = None
        if settings.read_only:
            reason = "read-only console"
        elif not secrets.compare_digest(str(form.get("csrf", "")), token):
            reason = "the form's token is missing or stale"
        if reason is None:
            return None
        audit.record(cur(request).principal, who(request), action, target, f"refused: {reason}")
        return page(request, "error.html", 403, title="Refused", error=f"Refused: {reason}.")

    # -------------------------------------------------- pages

    async def home(request: Request) -> Response:
        return RedirectResponse("/cluster", status_code=303)

    async def cluster(request: Request) -> Response:
        view = await blocking(request, "cluster.html", cur(request).cluster)
        if isinstance(view, Response):
            return view
        return page(request, "cluster.html", cluster=view)

    async def topics(request: Request, error: str | None = None, status: int = 200) -> Response:
        rows = await blocking(request, "topics.html", cur(request).topics)
        if isinstance(rows, Response):
            return rows
        internal = request.query_params.get("internal") == "1"
        shown = [r for r in rows if internal or not r.internal]
        return page(
            request,
            "topics.html",
            status,
            topics=shown,
            internal=internal,
            error=error,
            deleted=request.query_params.get("deleted") == "1",
        )

    async def create_topic(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        refused = await change(request, "create topic", name, form)
        if refused is not None:
            return refused
        partitions = _int(str(form.get("partitions", "")), -1)
        replication = _int(str(form.get("replication_factor", "")), -1)
        configs: dict[str, str] = {}
        for line in str(form.get("configs", "")).splitlines():
            key, _, value = line.partition("=")
            if key.strip():
                configs[key.strip()] = value.strip()
        assert partitions is not None and replication is not None
        result = await blocking(
            request,
            "topics.html",
            lambda: cur(request).create_topic(name, partitions, replication, configs),
        )
        if isinstance(result, Response):
            return result
        detail = f"partitions={partitions} replication_factor={replication} configs={configs}"
        audit.record(
            cur(request).principal,
            who(request),
            "create topic",
            name,
            "ok " + detail if result is None else f"failed: {result}",
        )
        if result is not None:
            return await topics(request, f"Creating topic {name}: {result}", 400)
        return RedirectResponse(f"/topics/{name}?created=1", status_code=303)

    async def topic(request: Request) -> Response:
        name = request.path_params["name"]
        view = await blocking(request, "topic.html", lambda: cur(request).topic(name))
        if isinstance(view, Response):
            return view
        if view is None:
            return page(
                request, "error.html", 404, title="No such topic", error=f"No topic {name}."
            )
        if isinstance(view, str):
            return page(request, "error.html", 403, title="Not allowed", error=view)
        return page(
            request,
            "topic.html",
            topic=view,
            created=request.query_params.get("created") == "1",
            altered=request.query_params.get("altered") == "1",
            grown=request.query_params.get("grown") == "1",
        )

    async def alter_config(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        key = str(form.get("key", "")).strip()
        refused = await change(request, "alter config of", name, form)
        if refused is not None:
            return refused
        value = None if form.get("default") is not None else str(form.get("value", ""))
        result = await blocking(
            request, "topic.html", lambda: cur(request).alter_topic_config(name, key, value)
        )
        if isinstance(result, Response):
            return result
        what = f"{key}={value}" if value is not None else f"{key} to its default"
        audit.record(
            cur(request).principal,
            who(request),
            "alter config of",
            name,
            f"ok {what}" if result is None else f"failed: {what}: {result}",
        )
        if result is not None:
            return page(request, "error.html", 400, title="Not altered", error=result)
        return RedirectResponse(f"/topics/{name}?altered=1", status_code=303)

    async def delete_topic(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        refused = await change(request, "delete topic", name, form)
        if refused is not None:
            return refused
        if str(form.get("confirm", "")) != name:
            result: str | None = "type the topic's name to confirm"
        else:
            got = await blocking(request, "topics.html", lambda: cur(request).delete_topic(name))
            if isinstance(got, Response):
                return got
            result = got
        audit.record(
            cur(request).principal,
            who(request),
            "delete topic",
            name,
            "ok" if result is None else f"failed: {result}",
        )
        if result is not None:
            return page(request, "error.html", 400, title="Not deleted", error=result)
        return RedirectResponse("/topics?deleted=1", status_code=303)

    async def messages(
        request: Request, error: str | None = None, produced: bool = False, status: int = 200
    ) -> Response:
        name = request.path_params["name"]
        q = request.query_params
        partition = _int(q.get("partition"), 0) or 0
        offset = _int(q.get("offset"))
        ts_text = q.get("timestamp", "")
        timestamp = parse_timestamp(ts_text)
        limit = min(max(_int(q.get("limit"), 50) or 50, 1), MAX_LIMIT)
        fmt = q.get("format", "text")
        fmt = fmt if fmt in FORMATS else "text"
        committed = q.get("isolation") == "read_committed"
        view = await blocking(
            request,
            "messages.html",
            lambda: cur(request).messages(
                name,
                partition,
                offset=offset,
                timestamp_ms=timestamp,
                limit=limit,
                read_committed=committed,
            ),
        )
        if isinstance(view, Response):
            return view
        if view is None:
            return page(
                request,
                "error.html",
                404,
                title="No such partition",
                error=f"No partition {partition} of topic {name}.",
            )
        return page(
            request,
            "messages.html",
            status,
            view=view,
            fmt=fmt,
            limit=limit,
            offset=offset,
            timestamp=ts_text,
            read_committed=committed,
            error=error,
            produced=produced,
        )

    async def produce(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        refused = await change(request, "produce to", name, form)
        if refused is not None:
            return refused
        key_text = str(form.get("key", ""))
        value_text = str(form.get("value", ""))
        key = key_text.encode() if key_text else None  # no key: null, as Kafka's tools send
        value = None if form.get("null_value") is not None else value_text.encode()
        headers = parse_headers(str(form.get("headers", "")))
        part_text = str(form.get("partition", "")).strip()
        partition = _int(part_text) if part_text else None
        size = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers)
        if size > MAX_PRODUCED:
            result: str | None = f"the record is {size} bytes, more than {MAX_PRODUCED}"
        else:
            got = await blocking(
                request,
                "messages.html",
                lambda: cur(request).produce(name, partition, key, value, headers),
            )
            if isinstance(got, Response):
                return got
            result = got
        audit.record(
            cur(request).principal,
            who(request),
            "produce to",
            f"{name}" + ("" if partition is None else f"-{partition}"),
            "ok" if result is None else f"failed: {result}",
        )
        if result is not None:
            return await messages(request, error=f"Producing to {name}: {result}", status=400)
        return await messages(request, produced=True)

    async def groups(request: Request) -> Response:
        rows = await blocking(request, "groups.html", cur(request).groups)
        if isinstance(rows, Response):
            return rows
        return page(request, "groups.html", groups=rows)

    async def group(request: Request) -> Response:
        group_id = request.query_params.get("id", "")
        view = await blocking(request, "group.html", lambda: cur(request).group(group_id))
        if isinstance(view, Response):
            return view
        if view is None:
            return page(
                request, "error.html", 404, title="No such group", error=f"No group {group_id}."
            )
        if view.offsets:
            lag_history.add(lag_key(request, group_id), view.total_lag)
        return page(
            request,
            "group.html",
            group=view,
            chart=lag_history.chart(lag_key(request, group_id)),
            lag_interval_s=settings.lag_interval_s,
            reset=request.query_params.get("reset") == "1",
        )

    async def clients_page(request: Request) -> Response:
        rows = await run_in_threadpool(telemetry.clients) if telemetry is not None else []
        errors = getattr(telemetry, "errors", [])
        now_ms = int(time.time() * 1000)
        return page(
            request, "clients.html", clients=rows, source=telemetry, errors=errors, now_ms=now_ms
        )

    async def client_page(request: Request) -> Response:
        instance = request.query_params.get("id", "")
        rows = await run_in_threadpool(telemetry.clients) if telemetry is not None else []
        found = next((c for c in rows if c.client_instance_id == instance), None)
        if found is None:
            return page(request, "error.html", 404, title="No such client",
                        error=f"No client instance {instance} has pushed telemetry.")  # fmt: skip
        return page(request, "client.html", client=found, source=telemetry)

    async def audit_page(request: Request) -> Response:
        return page(request, "audit.html", entries=audit.entries())

    async def audited(
        request: Request,
        form: FormData,
        action: str,
        target: str,
        detail: str | Callable[[], str],
        do: Callable[[], str | None],
        then: str,
    ) -> Response:
        """A change the page asked: refused (read-only, no token), or made
        on a worker thread; audited either way, with who asked. ``detail``
        (or what it returns once the change is done) says what was asked
        and done; ``then``: where the browser goes once it is made."""
        refused = await change(request, action, target, form)
        if refused is not None:
            return refused
        result = await blocking(request, "error.html", do)
        if isinstance(result, Response):
            return result
        if callable(detail):
            detail = detail()
        outcome = f"ok {detail}".strip() if result is None else f"failed: {detail}: {result}"
        audit.record(cur(request).principal, who(request), action, target, outcome)
        if result is not None:
            return page(request, "error.html", 400, title="Not done", error=result)
        return RedirectResponse(then, status_code=303)

    # -------------------------------------------------- groups and topics: changes

    async def reset_offsets(request: Request) -> Response:
        form = await request.form()
        group_id = str(form.get("id", ""))
        topic = str(form.get("topic", "")).strip() or None
        to = str(form.get("to", ""))
        value_text = str(form.get("value", "")).strip()
        value = parse_timestamp(value_text) if to == "timestamp" else _int(value_text)
        plan: dict[tuple[str, int], int] = {}

        def reset() -> str | None:
            got, error = cur(request).reset_offsets(group_id, topic, to, value)
            plan.update(got)
            return error

        asked = f"topic={topic or '(all)'} to={to}" + (f" {value_text}" if value_text else "")

        def detail() -> str:
            new = ", ".join(f"{t}-{p}={o}" for (t, p), o in sorted(plan.items()))
            return f"{asked}: {new}" if new else asked

        return await audited(
            request, form, "reset offsets of", group_id, detail, reset,
            f"/group?id={quote(group_id, safe='')}&reset=1",
        )  # fmt: skip

    async def add_partitions(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        count = _int(str(form.get("count", ""))) or 0
        return await audited(
            request, form, "add partitions to", name, f"count={count}",
            lambda: cur(request).add_partitions(name, count),
            f"/topics/{quote(name, safe='')}?grown=1",
        )  # fmt: skip

    # -------------------------------------------------- ACLs, SCRAM users, quotas

    async def acls_page(request: Request) -> Response:
        view = await blocking(request, "acls.html", cur(request).acls)
        if isinstance(view, Response):
            return view
        return page(
            request,
            "acls.html",
            view=view,
            resource_types=ACL_RESOURCE_TYPES,
            operations=ACL_OPERATIONS,
            done=request.query_params.get("done", ""),
        )

    def _acl(form: FormData) -> AclSpec:
        return AclSpec(
            str(form.get("resource_type", "")),
            str(form.get("pattern_type", "LITERAL")),
            str(form.get("resource_name", "")).strip(),
            str(form.get("principal", "")).strip(),
            str(form.get("host", "")).strip() or "*",
            str(form.get("operation", "")),
            str(form.get("permission", "ALLOW")),
        )

    async def create_acl(request: Request) -> Response:
        form = await request.form()
        acl = _acl(form)
        return await audited(
            request, form, "create ACL", str(acl), "", lambda: cur(request).create_acl(acl),
            "/acls?done=created",
        )  # fmt: skip

    async def delete_acl(request: Request) -> Response:
        form = await request.form()
        acl = _acl(form)
        return await audited(
            request, form, "delete ACL", str(acl), "", lambda: cur(request).delete_acl(acl),
            "/acls?done=deleted",
        )  # fmt: skip

    async def users_page(request: Request) -> Response:
        view = await blocking(request, "users.html", cur(request).scram_users)
        if isinstance(view, Response):
            return view
        return page(
            request,
            "users.html",
            view=view,
            mechanisms=SCRAM_MECHANISMS,
            done=request.query_params.get("done", ""),
        )

    async def upsert_user(request: Request) -> Response:
        form = await request.form()
        user = str(form.get("user", "")).strip()
        mechanism = str(form.get("mechanism", ""))
        iterations = _int(str(form.get("iterations", "")), 8192) or 8192
        password = str(form.get("password", ""))  # never logged nor audited
        return await audited(
            request, form, "set SCRAM credential of", user,
            f"{mechanism} iterations={iterations}",
            lambda: cur(request).upsert_scram_user(user, mechanism, password, iterations),
            "/users?done=set",
        )  # fmt: skip

    async def delete_user(request: Request) -> Response:
        form = await request.form()
        user = str(form.get("user", "")).strip()
        mechanism = str(form.get("mechanism", ""))
        return await audited(
            request, form, "delete SCRAM credential of", user, mechanism,
            lambda: cur(request).delete_scram_user(user, mechanism),
            "/users?done=deleted",
        )  # fmt: skip

    async def quotas_page(request: Request) -> Response:
        view = await blocking(request, "quotas.html", cur(request).quotas)
        if isinstance(view, Response):
            return view
        return page(
            request,
            "quotas.html",
            view=view,
            keys=QUOTA_KEYS,
            done=request.query_params.get("done", ""),
        )

    def _entity(form: FormData) -> list[tuple[str, str | None]]:
        """``user`` / ``client-id`` / ``ip`` fields: a name, or with its
        ``*_default`` box the default entity; left out when neither."""
        entity: list[tuple[str, str | None]] = []
        for kind, field_name in (("user", "user"), ("client-id", "client_id"), ("ip", "ip")):
            name = str(form.get(field_name, "")).strip()
            if form.get(f"{field_name}_default") is not None:
                entity.append((kind, None))
            elif name:
                entity.append((kind, name))
        return entity

    def _entity_text(entity: list[tuple[str, str | None]]) -> str:
        # as the quotas page names it (entity types in order)
        parts = sorted(entity, key=lambda e: e[0])
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in parts)

    async def set_quota(request: Request) -> Response:
        form = await request.form()
        entity = _entity(form)
        key = str(form.get("key", ""))
        value_text = str(form.get("value", "")).strip()
        try:
            value: float | None = float(value_text)
        except ValueError:
            value = None

        def alter() -> str | None:
            if value is None:
                return f"{value_text!r} is not a number"
            return cur(request).alter_quota(entity, key, value)

        return await audited(
            request, form, "set quota of", _entity_text(entity), f"{key}={value_text}", alter,
            "/quotas?done=set",
        )  # fmt: skip

    async def remove_quota(request: Request) -> Response:
        form = await request.form()
        entity = _entity(form)
        key = str(form.get("key", ""))
        return await audited(
            request, form, "remove quota of", _entity_text(entity), key,
            lambda: cur(request).alter_quota(entity, key, None),
            "/quotas?done=removed",
        )  # fmt: skip

    # -------------------------------------------------- sign-in

    async def signin_page(request: Request, error: str | None = None) -> Response:
        if sessions is None:
            return RedirectResponse("/cluster", status_code=303)
        return page(request, "signin.html", 401 if error else 200, error=error)

    async def signin(request: Request) -> Response:
        if sessions is None:
            return RedirectResponse("/cluster", status_code=303)
        form = await request.form()
        user = str(form.get("user", "")).strip()
        if not secrets.compare_digest(str(form.get("csrf", "")), token):
            audit.record(f"User:{user}", who(request), "sign in", user, "refused: no form token")
            return page(request, "error.html", 403, title="Refused", error="Refused: no token.")
        got = await run_in_threadpool(sessions.sign_in, user, str(form.get("password", "")))
        if isinstance(got, str):
            audit.record(f"User:{user}", who(request), "sign in", user, f"failed: {got}")
            return await signin_page(request, got)
        audit.record(got.admin.principal, who(request), "sign in", user, "ok")
        response = RedirectResponse("/cluster", status_code=303)
        response.set_cookie(
            COOKIE,
            got.id,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def signout(request: Request) -> Response:
        if sessions is not None:
            gone = sessions.sign_out(request.cookies.get(COOKIE))
            if gone is not None:
                audit.record(gone.admin.principal, who(request), "sign out", "", "ok")
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        lag_history.start()
        yield
        await run_in_threadpool(lag_history.stop)
        if sessions is not None:
            await run_in_threadpool(sessions.close)
        await run_in_threadpool(admin.close)

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/cluster", cluster),
            Route("/topics", topics, methods=["GET"]),
            Route("/topics", create_topic, methods=["POST"]),
            Route("/topics/{name}", topic),
            Route("/topics/{name}/configs", alter_config, methods=["POST"]),
            Route("/topics/{name}/delete", delete_topic, methods=["POST"]),
            Route("/topics/{name}/messages", messages, methods=["GET"]),
            Route("/topics/{name}/messages", produce, methods=["POST"]),
            Route("/topics/{name}/partitions", add_partitions, methods=["POST"]),
            Route("/groups", groups),
            Route("/group", group),
            Route("/group/offsets", reset_offsets, methods=["POST"]),
            Route("/acls", acls_page, methods=["GET"]),
            Route("/acls", create_acl, methods=["POST"]),
            Route("/acls/delete", delete_acl, methods=["POST"]),
            Route("/users", users_page, methods=["GET"]),
            Route("/users", upsert_user, methods=["POST"]),
            Route("/users/delete", delete_user, methods=["POST"]),
            Route("/quotas", quotas_page, methods=["GET"]),
            Route("/quotas", set_quota, methods=["POST"]),
            Route("/quotas/delete", remove_quota, methods=["POST"]),
            Route("/clients", clients_page),
            Route("/client", client_page),
            Route("/audit", audit_page),
            Route("/signin", signin_page, methods=["GET"]),
            Route("/signin", signin, methods=["POST"]),
            Route("/signout", signout, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        lifespan=lifespan,
    )
    if sessions is not None:
        return _SecurityHeaders(_SignIn(app, sessions))
    return _SecurityHeaders(app)
