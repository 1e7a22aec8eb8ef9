#!/usr/bin/env python3
"""Prints a TCP port on 127.0.0.1 that was free a moment ago, below the
kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), as
tests/support/process_util.cc's FreePort does: a coordinator's port that
processes connect to before it listens must not be one the kernel can give a
connection as its own source port, or a node can connect to itself."""
import random
import socket
import sys

try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
if low <= 11000:
    sys.exit("free_port.py: ephemeral ports start at %d: no room below them for test ports" % low)
for _ in range(1000):
    port = random.randint(10000, low - 1)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("free_port.py: no free port in 10000..%d after 1000 tries" % (low - 1))
