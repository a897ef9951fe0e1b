"""Where gcp-storage-emulator does not answer as Cloud Storage does, the small fixes that make
it (each says what TensorFlow sent and what the emulator did), installed by `install`."""

import urllib.parse

from gcp_storage_emulator import server as emulator
from gcp_storage_emulator.handlers import objects

__all__ = ["install", "body_prefix"]

_read_raw_data = emulator._read_raw_data
_read_data = emulator._read_data


def _read_body(handler):
    """The request's body. TensorFlow's libcurl sends uploads with both Transfer-Encoding:
    chunked and a Content-Length; the chunked framing wins (RFC 9112, 6.3), where the
    emulator reads Content-Length bytes of the framing into the object."""
    if "chunked" not in (handler.headers.get("Transfer-Encoding") or "").lower():
        return _read_raw_data(handler)
    body = bytearray()
    while True:
        size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return bytes(body)
        body += handler.rfile.read(size)
        handler.rfile.readline()


def body_prefix(handler, limit):
    """Up to `limit` bytes of the request's body, read as `_read_body` reads it."""
    if "chunked" not in (handler.headers.get("Transfer-Encoding") or "").lower():
        return handler.rfile.read(min(limit, int(handler.headers.get("Content-Length") or 0)))
    body = bytearray()
    while len(body) < limit:
        size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        body += handler.rfile.read(size)
        handler.rfile.readline()
    return bytes(body[:limit])


def _resumable_incomplete(response, storage, upload_id, fallback_end=0):
    """A resumable upload's status: 308, and the bytes kept as `Range`, none when none are.
    The emulator says `bytes=0-0` (one byte kept) when it has none: a client resuming
    after a cut upload would skip the object's first byte."""
    response.status = objects.GoogleHTTPStatus.RESUME_INCOMPLETE
    received = storage.get_resumable_byte_count(upload_id)
    if received > 0:
        response["Range"] = "bytes=0-%d" % (received - 1)


_finalize_resumable_object = objects._finalize_resumable_object


def _finalize_and_keep(response, storage, obj, data, upload_id):
    """The emulator's end of a resumable upload, the object kept by its session's id
    (`storage.finished_uploads`): a finished session is asked for again (`_finished_session`)."""
    _finalize_resumable_object(response, storage, obj, data, upload_id)
    storage.finished_uploads[upload_id] = dict(obj)


def _read_data_or_empty(handler, query):
    """An empty upload is an empty object (TensorFlow makes a directory's marker so); the
    emulator fails on its missing body."""
    data = _read_data(handler, query)
    return b"" if data is None else data


class _Request(emulator.Request):
    """The emulator's request, its own URL https as the client's was: it hands out the
    address of a resumable upload from it, and libcurl must come back over TLS."""

    def __init__(self, request_handler, method):
        super().__init__(request_handler, method)
        self._base_url = "https://" + self._base_url[len("http://") :]
        self._full_url = self._base_url + self._path
        self._parsed_url = urllib.parse.urlparse(self._full_url)


def install():
    """Puts the fixes in the emulator's modules (idempotent: every server of a process shares them)."""
    emulator._read_raw_data, emulator._read_data, emulator.Request = _read_body, _read_data_or_empty, _Request
    objects._resumable_incomplete, objects._finalize_resumable_object = _resumable_incomplete, _finalize_and_keep
