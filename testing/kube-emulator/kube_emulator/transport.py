"""HTTP plumbing: requests, responses, chunked streams, scripted faults, the request log records.

Built on ``http.server.ThreadingHTTPServer``: one thread per connection with HTTP/1.1 keep-alive, so
a blocked watch or log stream never holds up other requests, and a dropped connection is just a
closed socket.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import sys
import time
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import yaml

from .errors import ApiError, bad_request, canned, internal


@dataclass
class RequestRecord:
    """One request as the server saw it. ``status`` is 0 for a dropped connection; 200 for a stream."""

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


class Stream:
    """A chunked response body; ``write`` returns False once the client has gone away."""

    def __init__(self, handler: Handler, content_type: str) -> None:
        self.handler = handler
        handler.streaming = True
        if handler.record is not None:
            handler.record.status = 200
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
    handler: Handler

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


def parse_body(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    try:
        if "yaml" in content_type:
            return yaml.safe_load(raw.decode())
        return json.loads(raw)
    except (ValueError, yaml.YAMLError, UnicodeDecodeError):
        return raw.decode("utf-8", errors="replace")


class Routes(Protocol):
    """What the handler needs from the server behind it."""

    server_errors: list[str]

    def record(self, method: str, path: str, query: dict[str, str], raw: bytes, ctype: str) -> RequestRecord: ...

    def take_fault(self, method: str, path: str) -> Fault | None: ...

    def handle(self, req: Request) -> Response | None: ...


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a watch or log stream stopped, a process ended) is how streams end, as for
        a real API server: not worth a traceback. Anything else is printed as the standard server does."""
        if isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):  # a client that refused our certificate
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: Routes  # set on the subclass ApiServer.start() builds
    streaming = False  # once a chunked body has begun, an error can only close the connection
    record: RequestRecord | None = None

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()  # here, in the connection's thread (see ApiServer.start)
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
        rec = self.record = api.record(method, url.path, query, raw, ctype)
        self.streaming = False
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
            if self.streaming:
                self.close_connection = True
                return
            err = internal(f"emulator error: {e!r}")
            resp = Response(err.code, err.status())
        if resp is None:  # a stream, already answered
            return
        rec.status = resp.code
        if isinstance(resp.body, bytes):
            data = resp.body
        elif isinstance(resp.body, str):
            data = resp.body.encode()
        else:
            data = json.dumps(resp.body, separators=(",", ":")).encode()
        try:
            self.send_response(resp.code)
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in resp.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client went away
            self.close_connection = True
