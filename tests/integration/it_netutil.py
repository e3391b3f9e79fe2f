# SPDX-License-Identifier: Apache-2.0
"""Loopback helpers shared by the Python integration tests: a free port and
a probe for a listening one. Only 127.0.0.1, ever."""

import socket


def free_port():
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_open(port):
    """Whether something listens on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
