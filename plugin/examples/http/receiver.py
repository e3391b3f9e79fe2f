#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An infinity-bus handler, standard library only: --plugin http.so --plugin-config
http=url=http://127.0.0.1:8080/ POSTs each event here. It dedups nothing: ibus sends
each event once per Idempotency-Key; a repeat after a crash carries the same key."""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: ibus reuses its connections

    def do_POST(self):
        event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers["Idempotency-Key"]  # one line, one write: threads share stdout
        print(f"{key} {event['type']} {event['payload']}\n", end="", flush=True)
        self.send_response(204)  # 2xx: done. 503 retries, 422 dead-letters.
        self.send_header("Content-Length", "0")
        self.end_headers()


ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8080"))), Handler).serve_forever()
