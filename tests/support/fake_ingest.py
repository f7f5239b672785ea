"""A stand-in for ddpd's event socket: a Unix socket server that keeps every byte each
connection sent, for the tests of the reporters and of ddp-run, which write to it as
they would to a real server's."""
import json, os, socket, threading, time


class Listener:
    """A socket server that keeps every byte each connection sent."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.connections = []
        self.peers = []
        self.ended = []  # per connection: set once its reader saw the end
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            buf, ended = bytearray(), threading.Event()
            self.ended.append(ended)
            self.connections.append(buf)
            self.peers.append(c)
            threading.Thread(target=self._read, args=(c, buf, ended), daemon=True).start()

    def _read(self, c, buf, ended):
        try:
            while True:
                b = c.recv(1 << 16)
                if not b:
                    return
                buf.extend(b)
        except OSError:
            return
        finally:
            ended.set()

    def drained(self, timeout=30):
        """Waits until every connection so far has been read to its end (the writer
        exited or closed it): events() then sees whole lines only."""
        deadline = time.monotonic() + timeout
        return all(e.wait(max(0.0, deadline - time.monotonic())) for e in list(self.ended))

    def events(self, i):
        return [json.loads(l) for l in bytes(self.connections[i]).decode().splitlines() if l.strip()]

    def close(self):
        """As a killed server does: the listener and every connection go."""
        for c in self.peers:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.sock.close()
        os.unlink(self.path)
