"""A small server-sent events client for the tests (standard library only): opens
a stream, returns its events one at a time (comments too, as heartbeats), and can
read until the stream goes quiet (a heartbeat comes with nothing before it)."""
import http.client, json, socket, time


class Event:
    def __init__(self, event, id, data, comment=False):
        self.event, self.id, self.comment = event, id, comment
        self.raw = data
        try:
            self.data = json.loads(data) if data else None
        except ValueError:
            self.data = None

    def key(self):
        return (self.id, self.event, self.raw)

    def __repr__(self):
        return f"<{self.event} id={self.id} {self.raw[:120]}>" if not self.comment else "<comment>"


class Stream:
    def __init__(self, port, path, last_id=None, query_last_id=None, timeout=30.0):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        headers = {"Accept": "text/event-stream"}
        if last_id is not None:
            headers["Last-Event-ID"] = str(last_id)
        if query_last_id is not None:
            path += ("&" if "?" in path else "?") + f"last_event_id={query_last_id}"
        self.conn.request("GET", path, headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = dict((k.lower(), v) for k, v in self.resp.getheaders())
        self.body = None if self.status == 200 else self.resp.read()

    def next(self, timeout=30.0):
        """The next event or comment; None at the end of the stream; raises
        socket.timeout when nothing comes in time."""
        self.conn.sock.settimeout(timeout)
        event, id, data, saw = "message", None, [], False
        while True:
            line = self.resp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\r\n")
            if line == "":
                if saw:
                    return Event(event, id, "\n".join(data))
                continue
            if line.startswith(":"):
                return Event("comment", None, line[1:], comment=True)
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            saw = True
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                id = int(value)

    def events_until(self, pred, timeout=120.0):
        """Events (no comments) until one satisfies pred (included), or the deadline."""
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                e = self.next(timeout=max(0.1, deadline - time.monotonic()))
            except (socket.timeout, TimeoutError):
                break
            if e is None:
                break
            if e.comment:
                continue
            out.append(e)
            if pred(e):
                return out, True
        return out, False

    def until_quiet(self, timeout=60.0):
        """Every event until a heartbeat comment arrives with nothing left to send."""
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                e = self.next(timeout=max(0.1, deadline - time.monotonic()))
            except (socket.timeout, TimeoutError):
                break
            if e is None or e.comment:
                break
            out.append(e)
        return out

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
