"""The HTTP side: routing, discovery, Status bodies, watch and log streams, faults, the request log.

Built on ``http.server.ThreadingHTTPServer`` (one thread per connection, HTTP/1.1 keep-alive), so
a blocked watch or log stream never holds up other requests and a dropped connection is just a
closed socket. Streams are chunked and wait on the store's condition variable.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from .errors import ApiError, bad_request, canned, internal, method_not_allowed, resource_not_found
from .logs import parse_rfc3339, render, select
from .resources import ResourceType
from .store import CRD_KEY, Obj, Store, WatchEvent

MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's request body limit
KUBERNETES_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.0"}


@dataclass
class RequestRecord:
    """One request as the server saw it. ``status`` is 0 for a dropped connection."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None
    time: float
    status: int = 0


@dataclass
class Fault:
    """A scripted failure for the next ``times`` requests matching ``method`` and ``path_regex``."""

    method: str | None
    path_regex: re.Pattern[str] | None
    status: int | None
    times: int
    drop: bool = False
    delay: float = 0.0
    retry_after: int | None = None
    message: str | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method:
            return False
        return self.path_regex is None or self.path_regex.search(path) is not None


@dataclass
class Response:
    code: int
    body: Any
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class _Stream:
    """A chunked response body; ``write`` returns False once the client has gone away."""

    def __init__(self, handler: BaseHTTPRequestHandler, content_type: str) -> None:
        self.handler = handler
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()
        self.open = True

    def write(self, data: bytes) -> bool:
        if not data or not self.open:
            return self.open
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        except OSError:
            self.open = False
            self.handler.close_connection = True
        return self.open

    def end(self) -> None:
        if self.open:
            try:
                self.handler.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.handler.close_connection = True
            self.open = False


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    raw: bytes
    content_type: str
    handler: BaseHTTPRequestHandler

    def q(self, name: str) -> str | None:
        return self.query.get(name)

    def flag(self, name: str) -> bool:
        return (self.q(name) or "").lower() in ("true", "1")

    def integer(self, name: str) -> int | None:
        value = self.q(name)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise bad_request(f"invalid {name}: {value!r} is not an integer") from None

    def body(self) -> Any:
        if not self.raw:
            return None
        text = self.raw.decode("utf-8", errors="replace")
        try:
            if "yaml" in self.content_type:
                return yaml.safe_load(text)
            return json.loads(text)
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"error decoding request body: {e}") from None

    def dry_run(self) -> bool:
        values = [v for v in (self.q("dryRun") or "").split(",") if v]
        if any(v != "All" for v in values):
            raise bad_request(f'Invalid dry run value {values}: supported values: "All"')
        return bool(values)


def _parse_body(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    try:
        if "yaml" in content_type:
            return yaml.safe_load(raw.decode())
        return json.loads(raw)
    except (ValueError, yaml.YAMLError, UnicodeDecodeError):
        return raw.decode("utf-8", errors="replace")


class ApiServer:
    """The routes. Owned by a :class:`~kube_emulator.emulator.KubeEmulator`, which holds the store."""

    def __init__(self, store: Store, token: str) -> None:
        self.store = store
        self.token = token
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self.server_errors: list[str] = []
        self.watch_timeout = 60.0  # when a watch names no timeoutSeconds
        self.follow_timeout = 60.0  # the longest a followed log stays open
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        handler = type("Handler", (_Handler,), {"api": self})
        self._http = _HTTPServer((host, port), handler)
        # A short poll interval keeps stop() (and so the session teardown) quick.
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name="kube-emulator", daemon=True
        )
        self._thread.start()
        bound_host, bound_port = self._http.server_address[:2]
        return f"http://{bound_host!s}:{bound_port}"

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    # ------------------------------------------------------------------ faults and records

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault
        return None

    def record(self, method: str, path: str, query: dict[str, str], raw: bytes, ctype: str) -> RequestRecord:
        rec = RequestRecord(method, path, query, _parse_body(raw, ctype), ctype or None, time.time())
        with self._lock:
            self.requests.append(rec)
        return rec

    # ------------------------------------------------------------------ dispatch

    def handle(self, req: Request) -> Response | None:
        if self.token and req.handler.headers.get("Authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")
        if len(req.raw) > MAX_BODY_BYTES:
            raise ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY_BYTES}")
        parts = [unquote(p) for p in req.path.split("/") if p]
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return Response(200, "ok", "text/plain")
        if parts == ["version"]:
            return Response(200, {**KUBERNETES_VERSION, "platform": "linux/amd64"})
        if not parts or parts[0] not in ("api", "apis"):
            raise resource_not_found()
        if parts == ["api"]:
            return self._discovery(req, self._api_versions())
        if parts == ["apis"]:
            return self._discovery(req, self._group_list())
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group = parts[1]
            if len(parts) == 2:
                return self._discovery(req, self._group(group))
            version, rest = parts[2], parts[3:]
        if not rest:
            return self._discovery(req, self._resource_list(group, version))
        return self._resource(req, group, version, rest)

    # ------------------------------------------------------------------ discovery

    def _discovery(self, req: Request, body: Obj | None) -> Response:
        if req.method != "GET":
            raise method_not_allowed()
        if body is None:
            raise resource_not_found()
        return Response(200, body)

    def _api_versions(self) -> Obj:
        host = self._http.server_address if self._http else ("127.0.0.1", 0)
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"{host[0]!s}:{host[1]}"}],
        }

    @staticmethod
    def _group_body(name: str, versions: list[str]) -> Obj:
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}

    def _group_list(self) -> Obj:
        groups = [self._group_body(g, vs) for g, vs in self.store.registry.groups().items()]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, group: str) -> Obj | None:
        versions = self.store.registry.groups().get(group)
        if not versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_body(group, versions)}

    def _resource_list(self, group: str, version: str) -> Obj | None:
        types = self.store.registry.in_group_version(group, version)
        if not types:
            return None
        resources = [entry for t in types for entry in t.discovery()]
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # ------------------------------------------------------------------ resources

    def _resource(self, req: Request, group: str, version: str, rest: list[str]) -> Response | None:
        legacy_watch = rest[0] == "watch"
        if legacy_watch:
            rest = rest[1:]
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise resource_not_found()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        rt = self.store.registry.lookup(group, version, plural)
        if rt is None or (not rt.namespaced and ns is not None) or (sub and sub not in rt.subresources):
            raise resource_not_found()
        if rt.namespaced and ns is None and not (name is None and req.method == "GET"):
            raise resource_not_found()
        store, m = self.store, req.method
        if name is None:
            if m == "GET":
                if legacy_watch or req.flag("watch"):
                    self._watch(req, rt, ns, None)
                    return None
                return self._list(req, rt, ns)
            if m == "POST":
                obj = store.create(rt, ns, req.body(), dry_run=req.dry_run())
                return Response(201, self.present(rt, obj))
            if m == "DELETE":
                opts = self._delete_options(req)
                return Response(
                    200,
                    store.delete_collection(
                        rt,
                        ns,
                        req.q("labelSelector"),
                        req.q("fieldSelector"),
                        propagation=opts.get("propagationPolicy"),
                        dry_run=opts["dryRun"],
                    ),
                )
            raise method_not_allowed()
        if legacy_watch:
            self._watch(req, rt, ns, name)
            return None
        if sub == "log":
            if m != "GET":
                raise method_not_allowed()
            return self._log(req, ns or "", name)
        if m == "GET":
            return Response(200, self.present(rt, store.get(rt, ns, name)))
        if m == "PUT":
            return Response(
                200, self.present(rt, store.replace(rt, ns, name, req.body(), subresource=sub, dry_run=req.dry_run()))
            )
        if m == "PATCH":
            ctype = req.content_type.split(";")[0].strip()
            obj = store.patch(
                rt,
                ns,
                name,
                ctype,
                req.body(),
                subresource=sub,
                dry_run=req.dry_run(),
                field_manager=req.q("fieldManager"),
            )
            return Response(200, self.present(rt, obj))
        if m == "DELETE" and sub is None:
            opts = self._delete_options(req)
            obj = store.delete(
                rt,
                ns,
                name,
                propagation=opts.get("propagationPolicy"),
                dry_run=opts["dryRun"],
                preconditions=opts.get("preconditions"),
            )
            return Response(200, self.present(rt, obj) if obj.get("kind") != "Status" else obj)
        raise method_not_allowed()

    @staticmethod
    def _delete_options(req: Request) -> dict[str, Any]:
        body = req.body() or {}
        if not isinstance(body, dict):
            raise bad_request("DeleteOptions must be a JSON object")
        opts = dict(body)
        if req.q("propagationPolicy"):
            opts["propagationPolicy"] = req.q("propagationPolicy")
        if req.q("orphanDependents") is not None or "orphanDependents" in opts:
            orphan = req.flag("orphanDependents") if req.q("orphanDependents") is not None else opts["orphanDependents"]
            opts.setdefault("propagationPolicy", "Orphan" if orphan else "Background")
        body_dry = opts.get("dryRun") or []
        if any(v != "All" for v in body_dry):
            raise bad_request(f'Invalid dry run value {body_dry}: supported values: "All"')
        opts["dryRun"] = req.dry_run() or bool(body_dry)
        return opts

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """The object as served by ``rt``'s version (multi-version CRDs share storage)."""
        if obj.get("kind") == "Status":
            return obj
        if rt.storage_key == CRD_KEY:
            # Installed CRDs are stored without their schemas; a client reading one gets the full file.
            source = self.store.available_crds.get(obj["metadata"]["name"])
            if source is not None and obj.get("spec") is source.summary["spec"]:
                obj = {**obj, "spec": source.full()["spec"]}
        if obj.get("apiVersion") != rt.api_version:
            return {**obj, "apiVersion": rt.api_version}
        return obj

    def _list(self, req: Request, rt: ResourceType, ns: str | None) -> Response:
        items, rv = self.store.list_objects(rt, ns, req.q("labelSelector"), req.q("fieldSelector"))
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        token = req.q("continue")
        if token:
            try:
                after = tuple(json.loads(base64.urlsafe_b64decode(token.encode())))
            except ValueError:
                raise bad_request("continue key is not valid") from None
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        limit = req.integer("limit")
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps([last.get("namespace", ""), last["name"]]).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if rt.is_builtin:
            # Typed lists from the real server carry no apiVersion/kind on their items.
            out = [{k: v for k, v in self.present(rt, o).items() if k not in ("apiVersion", "kind")} for o in items]
        else:
            out = [self.present(rt, o) for o in items]
        return Response(200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": out})

    # ------------------------------------------------------------------ watch

    def _watch(self, req: Request, rt: ResourceType, ns: str | None, name: str | None) -> None:
        fields = req.q("fieldSelector")
        if name is not None:
            fields = f"metadata.name={name}" + (f",{fields}" if fields else "")
        match = self.store.matcher(rt, ns, req.q("labelSelector"), fields)
        rv_param = req.q("resourceVersion")
        timeout = float(req.q("timeoutSeconds") or self.watch_timeout)
        bookmarks = req.flag("allowWatchBookmarks")
        store = self.store
        initial: list[Obj] = []
        with store.cond:
            generation = store.generation
            if rv_param in (None, "", "0"):
                # No version (or "0"): the current state first, as synthetic ADDED events.
                initial, last = store.list_objects(rt, ns, req.q("labelSelector"), fields)
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    raise bad_request(f"invalid resource version: {rv_param!r}") from None
        stream = _Stream(req.handler, "application/json")
        send = self._event_writer(stream, rt)
        for obj in initial:
            if not send("ADDED", obj):
                return None
        deadline = time.monotonic() + timeout
        timed_out = False
        while stream.open:
            with store.cond:
                if store.generation != generation:
                    break
                try:
                    events = store.events_after(last)
                except ApiError as gone:
                    send("ERROR", gone.status())
                    break
                if not events:
                    last = max(last, store.rv)
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        timed_out = True
                        break
                    store.cond.wait(remaining)
                    continue
            for event in events:
                last = event.rv
                out = self._translate(event, rt, match)
                if out and not send(*out):
                    return None
        if timed_out and bookmarks:
            send(
                "BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(last)}}
            )
        stream.end()
        return None

    def _event_writer(self, stream: _Stream, rt: ResourceType) -> Callable[[str, Obj], bool]:
        def send(etype: str, obj: Obj) -> bool:
            body = obj if etype in ("ERROR", "BOOKMARK") else self.present(rt, obj)
            return stream.write(json.dumps({"type": etype, "object": body}).encode() + b"\n")

        return send

    @staticmethod
    def _translate(event: WatchEvent, rt: ResourceType, match: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
        """The event a filtered watch sees: entering the selection is ADDED, leaving it DELETED."""
        if event.key != rt.storage_key:
            return None
        now_in = match(event.obj)
        if event.type != "MODIFIED":
            return (event.type, event.obj) if now_in else None
        was_in = event.old is not None and match(event.old)
        if now_in:
            return ("MODIFIED" if was_in else "ADDED", event.obj)
        return ("DELETED", event.obj) if was_in else None

    # ------------------------------------------------------------------ logs

    def _log(self, req: Request, ns: str, name: str) -> Response | None:
        store = self.store
        pods = store.registry.resolve("pods")
        pod = store.get(pods, ns, name)
        container = _log_container(pod, req.q("container"))
        if not (pod.get("spec") or {}).get("nodeName"):
            # Like the real server: a pod not yet on a node has no kubelet to ask, and an empty log.
            return Response(200, b"", "text/plain")
        uid = pod["metadata"]["uid"]
        tail = req.integer("tailLines")
        since: float | None = None
        if req.integer("sinceSeconds") is not None:
            since = time.time() - (req.integer("sinceSeconds") or 0)
        elif req.q("sinceTime"):
            try:
                since = parse_rfc3339(req.q("sinceTime") or "")
            except ValueError:
                raise bad_request(f"invalid sinceTime {req.q('sinceTime')!r}") from None
        stamps = req.flag("timestamps")
        previous = req.flag("previous")
        with store.cond:
            if previous:
                prev = store.logs.lines(uid, container, previous=True)
                if prev is None:
                    raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
                lines = prev
            else:
                state, reason = container_state(pod, container)
                if state == "waiting":
                    raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
                lines = store.logs.current.setdefault((uid, container), [])
            text = render(select(lines, tail=tail, since=since), stamps).encode()
            sent = len(lines)
        if not req.flag("follow") or previous:
            limit = req.integer("limitBytes")
            return Response(200, text[:limit] if limit else text, "text/plain")
        stream = _Stream(req.handler, "text/plain")
        stream.write(text)
        self._follow(stream, pod, container, lines, sent, stamps)
        return None

    def _follow(self, stream: _Stream, pod: Obj, container: str, lines: list[Any], sent: int, stamps: bool) -> None:
        """Stream new lines of one container instance until it terminates, restarts or its pod goes."""
        store = self.store
        pods = store.registry.resolve("pods")
        meta = pod["metadata"]
        generation = store.generation
        deadline = time.monotonic() + self.follow_timeout
        while stream.open:
            with store.cond:
                current = store.find(pods, meta["namespace"], meta["name"])
                gone = store.generation != generation or current is None or current["metadata"]["uid"] != meta["uid"]
                restarted = store.logs.current.get((meta["uid"], container)) is not lines
                state = container_state(current, container)[0] if current is not None else "terminated"
                done = gone or restarted or state == "terminated" or time.monotonic() >= deadline
                new = lines[sent:]
                sent = len(lines)
                if not new and not done:
                    store.cond.wait(max(0.0, deadline - time.monotonic()))
                    continue
            stream.write(render(new, stamps).encode())
            if done:
                break
        stream.end()


def _log_container(pod: Obj, container: str | None) -> str:
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers = [c["name"] for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    if not container:
        if len(containers) == 1:
            return containers[0]
        msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if init:
            msg += f" or one of the init containers: [{' '.join(init)}]"
        raise bad_request(msg)
    if container not in containers + init:
        raise bad_request(f"container {container} is not valid for pod {name}")
    return container


def container_state(pod: Obj, container: str) -> tuple[str, str]:
    """("waiting" | "running" | "terminated", reason) of one container, from the pod's status."""
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            state = cs.get("state") or {}
            for kind in ("terminated", "running", "waiting"):
                if kind in state:
                    return kind, (state[kind] or {}).get("reason", "")
    if status.get("phase") in ("Succeeded", "Failed"):
        return "terminated", ""
    return "waiting", "ContainerCreating"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: ApiServer  # set on the subclass ApiServer.start() builds

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle + delayed ACK add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        api = self.api
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = self.headers.get("Content-Type") or ""
        rec = api.record(method, url.path, query, raw, ctype)
        resp: Response | None
        try:
            fault = api.take_fault(method, url.path)
            if fault is not None:
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.status:
                    raise canned(fault.status, fault.message, fault.retry_after)
            resp = api.handle(Request(method, url.path, query, raw, ctype, self))
        except ApiError as e:
            resp = Response(e.code, e.status(), headers=e.headers)
        except Exception as e:  # an emulator bug: answer 500 and keep it for the test to see
            api.server_errors.append(traceback.format_exc())
            err = internal(f"emulator error: {e!r}")
            resp = Response(err.code, err.status())
        if resp is None:
            rec.status = 200
            return
        rec.status = resp.code
        if isinstance(resp.body, bytes):
            data = resp.body
        elif isinstance(resp.body, str):
            data = resp.body.encode()
        else:
            data = json.dumps(resp.body, separators=(",", ":")).encode()
        self.send_response(resp.code)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in resp.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
