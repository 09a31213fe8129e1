"""A tiny scripted Kubernetes API server for unit tests of jobs.kube.client.

The client under test talks real HTTP through the official ``ApiClient`` (so timeouts,
refused connections and chunked watch streams are the real thing); each test scripts
the replies and reads back the requests it made.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    body: Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str -> text
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Watch-style reply: each item is sent as one chunk of newline-terminated JSON.
    stream: list[Any] | None = None
    # End the stream by dropping the connection in the middle of a chunk.
    cut: bool = False


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def error(code: int, reason: str, message: str, headers: dict[str, str] | None = None, **details: Any) -> Reply:
    return Reply(code, status_body(code, reason, message, **details), headers=headers or {})


class FakeApi:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.replies: deque[Reply] = deque()
        # Answers requests once the scripted replies are used up.
        self.fallback: Callable[[Request], Reply] = lambda request: error(
            404, "NotFound", f"nothing scripted for {request.method} {request.path}"
        )
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> FakeApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_reply(self, request: Request) -> Reply:
        self.requests.append(request)
        return self.replies.popleft() if self.replies else self.fallback(request)


def _handler_for(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode()
            request = Request(
                method=self.command,
                path=parts.path,
                query=dict(parse_qsl(parts.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            reply = api.next_reply(request)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                if reply.stream is not None:
                    self._send_stream(reply)
                else:
                    self._send(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (timeout tests)

        def _send(self, reply: Reply) -> None:
            if isinstance(reply.body, str):
                payload, content_type = reply.body.encode(), "text/plain"
            else:
                payload, content_type = (
                    json.dumps(reply.body if reply.body is not None else {}).encode(),
                    "application/json",
                )
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        def _send_stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for item in _chunks(reply.stream or []):
                self.wfile.write(f"{len(item):x}\r\n".encode() + item + b"\r\n")
                self.wfile.flush()
            if reply.cut:
                self.wfile.write(b"ff\r\n" + b'{"type": "MODIFIED", "obj')
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            else:
                self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

        do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _handle

    return Handler


def _chunks(items: list[Any]) -> Iterator[bytes]:
    for item in items:
        yield item if isinstance(item, bytes) else (json.dumps(item) + "\n").encode()
