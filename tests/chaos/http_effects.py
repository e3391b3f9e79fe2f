#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The endpoint of the chaos test's http case (tests/chaos/chaos.c): each
POST is one side effect, appended to the effects file as the scripted
plugin writes them ("<consumer> <id> <type> <delivery> ok"), so the chaos
test counts keys seen twice as repeated effects. Sleeps --sleep-ms per
request (the handler time t of the crash window's bound, docs/design.md), then
answers 204; while the --down-flag file exists it answers 503 at once and
records nothing (the flap cases' downstream outage).
Listens on a free loopback port and writes it to --port-file."""
import argparse
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port-file", required=True)
ap.add_argument("--effects", required=True)
ap.add_argument("--sleep-ms", type=float, default=1)
ap.add_argument("--down-flag", default="")
args = ap.parse_args()
lock = threading.Lock()
out = open(args.effects, "a", buffering=1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if args.down_flag and os.path.exists(args.down_flag):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return
        h = self.headers
        with lock:
            out.write(f"{h['Ibus-Consumer']} {h['Idempotency-Key']} {h['Ibus-Event-Type']} "
                      f"{h['Ibus-Delivery-Count']} ok\n")
        time.sleep(args.sleep_ms / 1000.0)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
tmp = args.port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(f"{srv.server_address[1]}\n")
os.rename(tmp, args.port_file)
srv.serve_forever()
