"""The routes: discovery, resources, lists, and the dispatch to watch and log streams.

Paths follow the real server: ``/api/v1/...`` for the core group, ``/apis/{group}/{version}/...``
otherwise, ``namespaces/{ns}/`` for namespaced resources, ``{name}/{subresource}`` for status and log,
and the legacy ``/watch/`` prefix.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from typing import Any
from urllib.parse import unquote

from .errors import ApiError, bad_request, method_not_allowed, resource_not_found
from .resources import ResourceType
from .store import CRD_KEY, Obj, Store
from .streams import serve_log, serve_watch
from .transport import Fault, Handler, HTTPServer, Request, RequestRecord, Response, parse_body

MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's request body limit
KUBERNETES_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.0"}


class ApiServer:
    """The routes. Owned by a :class:`~kube_emulator.emulator.KubeEmulator`, which holds the store."""

    def __init__(self, store: Store, token: str, anonymous: bool = True) -> None:
        self.store = store
        self.token = token
        self.anonymous = anonymous
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self.server_errors: list[str] = []
        self.watch_timeout = 60.0  # when a watch names no timeoutSeconds
        self.follow_timeout = 60.0  # the longest a followed log stays open
        self._lock = threading.Lock()
        #: (kind, namespace, selectors, resourceVersion) → the list then: what its continue pages are served from
        self._list_snapshots: dict[tuple[Any, ...], list[Obj]] = {}
        self._http: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> str:
        """Serve on ``host:port`` (0: a free port); over HTTPS with ``tls`` (:mod:`.tls`). Returns the URL."""
        handler = type("BoundHandler", (Handler,), {"api": self})
        self._http = HTTPServer((host, port), handler)
        if tls is not None:
            # The handshake is each connection's own thread's (Handler.setup), never the accepting thread's:
            # a client that stalls or fails it must not hold up the others.
            self._http.socket = tls.wrap_socket(self._http.socket, server_side=True, do_handshake_on_connect=False)
        # A short poll interval keeps stop() (and so the session teardown) quick.
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name="kube-emulator", daemon=True
        )
        self._thread.start()
        bound_host, bound_port = self._http.server_address[:2]
        return f"{'https' if tls is not None else 'http'}://{bound_host!s}:{bound_port}"

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
        rec = RequestRecord(method, path, query, parse_body(raw, ctype), ctype or None, time.time())
        with self._lock:
            self.requests.append(rec)
        return rec

    # ------------------------------------------------------------------ dispatch

    def handle(self, req: Request) -> Response | None:
        self._authenticate(req.handler.headers.get("Authorization"), req.handler.connection)
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

    def _authenticate(self, authorization: str | None, connection: object = None) -> None:
        """The emulator serves plain HTTP on loopback: the API server's old insecure port (its
        ``--insecure-bind-address``, loopback only), which served requests with no credentials. A client
        that follows client-go's rules (kubectl) sends none to an ``http://`` server: credentials from a
        kubeconfig are applied only where the transport is TLS. A request that does present a bearer
        token is checked as the secure port's token authenticator does: a wrong one is 401, never
        downgraded to anonymous. ``anonymous=False`` refuses requests without the token too. Over HTTPS, a
        client certificate the TLS context verified (signed by the client CA) authenticates the request, as the
        API server's x509 authenticator does."""
        if not self.token:
            return
        if isinstance(connection, ssl.SSLSocket) and connection.getpeercert():
            return
        if authorization is None and self.anonymous:
            return
        if authorization != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

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
                    serve_watch(store, req, rt, ns, None, self.present, self.watch_timeout)
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
            serve_watch(store, req, rt, ns, name, self.present, self.watch_timeout)
            return None
        if sub == "log":
            if m != "GET":
                raise method_not_allowed()
            return serve_log(store, req, ns or "", name, self.follow_timeout)
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
        """A list, in pages of ``limit`` when asked. As the API server, every page of one list is served from the
        state of its first page (the continue token names that resourceVersion) and says that version: a client
        that watches from it misses nothing that changed while it read the pages. A token of a list no longer kept
        (16 are) answers 410 Expired, as the server's does once etcd has compacted that version."""
        selectors = (rt.storage_key, ns, req.q("labelSelector"), req.q("fieldSelector"))
        token = req.q("continue")
        if token:
            try:
                at, *after_key = json.loads(base64.urlsafe_b64decode(token.encode()))
                after = tuple(after_key)
                snapshot = self._list_snapshots.get((*selectors, int(at)))
            except (ValueError, TypeError):
                raise bad_request("continue key is not valid") from None
            if snapshot is None:  # the server's etcd compacted it (here: 16 lists later)
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                               "list result. You can start a new list without the continue parameter.")
            rv = int(at)
            items = [o for o in snapshot if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        else:
            items, rv = self.store.list_objects(rt, ns, req.q("labelSelector"), req.q("fieldSelector"))
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = req.integer("limit")
        if limit and len(items) > limit:
            if not token:
                with self._lock:  # the stored objects are never changed in place: the list holds references
                    self._list_snapshots[(*selectors, rv)] = items
                    while len(self._list_snapshots) > 16:
                        del self._list_snapshots[next(iter(self._list_snapshots))]
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps([rv, last.get("namespace", ""), last["name"]]).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if rt.is_builtin:
            # Typed lists from the real server carry no apiVersion/kind on their items.
            out = [{k: v for k, v in self.present(rt, o).items() if k not in ("apiVersion", "kind")} for o in items]
        else:
            out = [self.present(rt, o) for o in items]
        return Response(200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": out})
