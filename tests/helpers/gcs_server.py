"""A Cloud Storage server for the tests: gcp-storage-emulator's JSON/XML API over TLS,
reached by TensorFlow's own gs:// file system (libcurl) through a CONNECT proxy.

TensorFlow's gs:// client has its hosts built in (www.googleapis.com, storage.googleapis.com)
and no endpoint setting, so nothing in it or in tf2_mapreduce is pointed elsewhere. Its
processes get only standard settings: `https_proxy` (libcurl sends every request through
the proxy here, which tunnels the two storage hosts to this server and refuses any other),
`CURL_CA_BUNDLE` (TensorFlow hands it to libcurl: the server's self-signed certificate for
those names is trusted), and the token and no-metadata-server settings TensorFlow reads
for tests. The TLS, the HTTP and the requests are what a real bucket gets.

Where the emulator does not answer as Cloud Storage does, a small fix makes it
(emulator_fixes.py, and here what needs the server's state); nothing else is changed.

`faults` (storage_faults.py) makes it fail as a real bucket can: statuses such as 503 and
429, connections reset mid-response, uploads cut off mid-body, stalls, and every
connection refused for a while.
"""

import json
import os
import re
import selectors
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.parse
from functools import partial
from http import server as http_server

from gcp_storage_emulator import server as emulator
from gcp_storage_emulator.handlers import buckets, objects
from gcp_storage_emulator.storage import Storage

from helpers import emulator_fixes
from helpers.emulator_fixes import body_prefix
from helpers.storage_faults import CUT, RESET, STALL, STATUS, Faults

__all__ = ["GcsServer"]

HOSTS = ("www.googleapis.com", "storage.googleapis.com")


def _make_certificate(directory):
    """A self-signed certificate for both storage hosts (openssl); returns (cert, key)."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2"]
        + ["-subj", "/CN=%s" % HOSTS[0], "-addext", "subjectAltName=" + ",".join("DNS:" + h for h in HOSTS)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def _reset(connection):
    """Cuts `connection` at once, with a reset (RST) once the last of its files is closed.
    shutdown() first: close() alone ends nothing while a handler's rfile and wfile hold the
    socket, and the client would wait for the rest of the response until its time-out."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.shutdown(socket.SHUT_RDWR)
        connection.close()
    except OSError:
        pass


class _ResetAfter:
    """A response stream that resets its connection once `limit` bytes have been written."""

    def __init__(self, stream, connection, limit):
        self._stream, self._connection, self._left = stream, connection, limit

    def write(self, data):
        if len(data) > self._left:
            self._stream.write(data[: self._left])
            self._stream.flush()
            _reset(self._connection)
            raise ConnectionResetError("reset by the test's fault")
        self._left -= len(data)
        return self._stream.write(data)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class GcsServer:
    """The server and its proxy on loopback ports, started at once; `env()` is what a
    process needs to reach it; `stop()` ends both. `writes` records every object written
    (bucket, name, size), in order, for tests of what readers could have seen; `reads`
    every GET (path, Range header); `faults` the rules of what it does wrong
    (storage_faults.py), none at first."""

    def __init__(self, directory):
        self.cert, key = _make_certificate(directory)
        self.storage = Storage(use_memory_fs=True)
        self.lock = threading.Lock()  # the emulator's storage is not safe across threads
        self.writes = []
        self.reads = []  # (path asked, Range header) of every GET, in order
        self.faults = Faults()
        emulator_fixes.install()
        self.storage.finished_uploads = {}
        create = self.storage.create_file

        def create_file(bucket, name, content, file_obj, file_id=None):
            self.writes.append((bucket, name, len(content)))
            return create(bucket, name, content, file_obj, file_id)

        self.storage.create_file = create_file
        self.httpd = http_server.ThreadingHTTPServer(("127.0.0.1", 0), partial(self._handler(), self.storage))
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        # The handshake in each connection's thread, not in the loop that accepts.
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.proxy = socket.create_server(("127.0.0.1", 0))
        self.stopped = False
        self.threads = [
            threading.Thread(target=self.httpd.serve_forever, daemon=True),
            threading.Thread(target=self._proxy_loop, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _handler(self):
        lock = self.lock
        storage = self.storage
        reads = self.reads
        faults = self.faults
        finished = self.storage.finished_uploads

        class Handler(emulator.RequestHandler):
            # HTTP/1.1: libcurl waits a second for "100 Continue" from an HTTP/1.0 server
            # before each upload.
            protocol_version = "HTTP/1.1"
            # A response is written in pieces (headers, then body): with Nagle's algorithm
            # each later piece waited for the client's delayed ACK, 40 ms a request.
            disable_nagle_algorithm = True

            def _serve(self, method):
                fault = faults.verdict(method, self.path)
                if fault is not None and fault.action == STATUS:
                    self._fail_with(fault.status)
                    return
                if fault is not None and fault.action in (STALL, RESET, CUT):
                    time.sleep(fault.stall)  # a reset or a cut may come after a stall
                if fault is not None and fault.action == CUT:
                    self._cut(fault.after_bytes)
                    return
                if fault is not None and fault.action == RESET:
                    self.wfile = _ResetAfter(self.wfile, self.connection, fault.after_bytes)
                if method == "GET":
                    reads.append((urllib.parse.unquote(self.path), self.headers.get("Range")))
                if self._finished_session(method):
                    return
                with lock:
                    if self._storage_layout(method):
                        return
                    getattr(super(), "do_" + method)()

            def _fail_with(self, status):
                """Answers `status` as Cloud Storage does, the request's body unread: the
                connection is then closed."""
                body = json.dumps({"error": {"code": status, "message": "injected by the test"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def _cut(self, limit):
                """Reads `limit` bytes of the body, keeps them in the upload's session (a
                resumable upload's data: Cloud Storage keeps what came), and resets."""
                kept = body_prefix(self, limit)
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                sent = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", self.headers.get("Content-Range") or "")
                if query.get("upload_id") and sent and int(sent.group(1)) + len(kept) <= int(sent.group(2)):
                    with lock:
                        storage.add_to_resumable_upload(
                            query["upload_id"][0],
                            kept,
                            total_size=int(sent.group(3)),
                            expected_start=int(sent.group(1)),
                        )
                _reset(self.connection)
                self.close_connection = True

            def _finished_session(self, method):
                """A session's upload done is answered 200 and its object, as Cloud Storage
                does (a client asks so where the answer to its last data was lost); the
                emulator forgets the session and says 404, an upload to start over."""
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                done = finished.get((query.get("upload_id") or [None])[0])
                if method != "PUT" or done is None:
                    return False
                body_prefix(self, 1 << 40)
                body = json.dumps(done).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return True

            def _storage_layout(self, method):
                """A bucket's storage layout, which TensorFlow asks before renaming a
                directory; the emulator has none. Flat, not hierarchical."""
                parts = urllib.parse.urlparse(self.path).path.split("/")
                if method != "GET" or len(parts) != 6 or parts[1:4] != ["storage", "v1", "b"]:
                    return False
                if parts[5] != "storageLayout":
                    return False
                found = storage.buckets.get(parts[4])
                body = json.dumps({"kind": "storage#storageLayout", "bucket": parts[4]}).encode() if found else b""
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return True

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_PUT(self):
                self._serve("PUT")

            def do_DELETE(self):
                self._serve("DELETE")

            def do_PATCH(self):
                self._serve("PATCH")

        return Handler

    def _proxy_loop(self):
        while True:
            try:
                client, _ = self.proxy.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client):
        """One CONNECT to a storage host, tunnelled to the server; any other refused."""
        upstream = None
        if self.faults.refusing():  # as a host that is down: the connection reset at once
            _reset(client)
            client.close()
            return
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            request = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(request) < 2 or request[0] != "CONNECT" or request[1] not in ["%s:443" % h for h in HOSTS]:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            upstream = socket.create_connection(self.httpd.server_address)
            for end in (client, upstream):  # bytes passed on as they come (see Handler)
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(head.split(b"\r\n\r\n", 1)[1])
            with selectors.DefaultSelector() as ready:  # epoll: no limit on descriptor numbers
                ready.register(client, selectors.EVENT_READ, upstream)
                ready.register(upstream, selectors.EVENT_READ, client)
                while not self.stopped:
                    if self.faults.refusing():
                        _reset(client)
                        return
                    for key, _ in ready.select(timeout=1):
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        key.data.sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            if upstream is not None:
                upstream.close()

    def env(self, base):
        """`base` (an environment) with what TensorFlow's gs:// client needs to reach the
        server, and no other proxy or credentials."""
        env = dict(base)
        for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "grpc_proxy"):
            env.pop(name, None)
        env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
        proxy = "http://127.0.0.1:%d" % self.proxy.getsockname()[1]
        env.update(
            https_proxy=proxy,
            HTTPS_PROXY=proxy,
            # gRPC takes https_proxy too: the cluster's own connections stay direct.
            no_proxy="localhost,127.0.0.1",
            NO_PROXY="localhost,127.0.0.1",
            CURL_CA_BUNDLE=self.cert,
            GOOGLE_AUTH_TOKEN_FOR_TESTING="test-token",
            NO_GCE_CHECK="true",
            # A failing request is retried 10 times from 1 s, doubling (about 200 s): twice
            # at once here, so that a test of a failure takes a second, not minutes.
            GCS_RETRY_CONFIG_INIT_DELAY_TIME_US="0",
            GCS_RETRY_CONFIG_MAX_RETRIES="2",
        )
        return env

    def create_bucket(self, name):
        with self.lock:
            buckets.create_bucket(name, self.storage)

    def put(self, bucket, name, data):
        """Writes an object straight into the server's storage."""
        resource = objects._make_object_resource(
            "https://www.googleapis.com", bucket, name, "application/octet-stream", str(len(data))
        )
        with self.lock:
            self.storage.create_file(bucket, name, data, objects._checksums(data, resource))

    def get(self, bucket, name):
        """An object's bytes, or None if there is none."""
        with self.lock:
            try:
                return self.storage.get_file(bucket, name)
            except Exception:  # noqa: BLE001 - the emulator's own NotFound
                return None

    def names(self, bucket):
        with self.lock:
            return sorted(o["name"] for o in self.storage.get_file_list(bucket)[0])

    def stop(self):
        self.stopped = True  # ends the tunnels within a second
        self.httpd.shutdown()
        self.httpd.server_close()
        self.proxy.shutdown(socket.SHUT_RDWR)  # wakes its accept(), which close() alone does not
        self.proxy.close()
        for thread in self.threads:
            thread.join(10)
