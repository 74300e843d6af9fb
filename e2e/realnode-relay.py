#!/usr/bin/env python3
"""Byte relays between e2e/realnode's node (its own network namespace) and the host.

A unix socket's path crosses network namespaces, a TCP address does not:

  relay.py unix-to-tcp SOCK HOST PORT   host side: SOCK -> HOST:PORT (the API server)
  relay.py tcp-to-unix ADDR PORT SOCK   node side: ADDR:PORT -> SOCK (the API server, as the
                                        kubelet and the pods see it)
  relay.py connect SOCK                 node side: an HTTP CONNECT proxy on SOCK, the API
                                        server's egress ("cluster") to the kubelets

Each prints nothing while it works and runs until it is killed.
"""
import os
import socket
import socketserver
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(a, b):
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def unix_server(path, handler):
    if os.path.exists(path):
        os.unlink(path)
    return UnixServer(path, handler)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "unix-to-tcp" and len(sys.argv) == 5:
        sock, host, port = sys.argv[2], sys.argv[3], int(sys.argv[4])

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                up = socket.create_connection((host, port), timeout=10)
                up.settimeout(None)
                splice(self.request, up)

        unix_server(sock, H).serve_forever()
    elif mode == "tcp-to-unix" and len(sys.argv) == 5:
        addr, port, sock = sys.argv[2], int(sys.argv[3]), sys.argv[4]

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                u.connect(sock)
                splice(self.request, u)

        TCPServer((addr, port), H).serve_forever()
    elif mode == "connect" and len(sys.argv) == 3:

        class H(socketserver.BaseRequestHandler):
            def handle(self):
                c = self.request
                head = b""
                while b"\r\n\r\n" not in head:
                    data = c.recv(4096)
                    if not data or len(head) > 65536:
                        c.close()
                        return
                    head += data
                line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
                if len(line) < 2 or line[0] != "CONNECT":
                    c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                    c.close()
                    return
                host, _, port = line[1].rpartition(":")
                try:
                    up = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
                except (OSError, ValueError) as e:
                    c.sendall(f"HTTP/1.1 502 Bad Gateway\r\n\r\n{e}\n".encode())
                    c.close()
                    return
                up.settimeout(None)
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
                if rest:
                    up.sendall(rest)
                splice(c, up)

        unix_server(sys.argv[2], H).serve_forever()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
