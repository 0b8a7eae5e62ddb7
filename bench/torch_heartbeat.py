#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The realistic benchmark victim: a Python process with torch loaded.

Usage: torch_heartbeat.py SHMFILE

gdb's pause is mostly symbol loading, so it grows with what the target maps;
bench/heartbeat.c maps little more than libc.  This victim maps what a
training job maps (python3 + torch: about 300 shared objects), runs one
matrix product on every CPU so torch's intra-op thread pool exists, starts
16 idle Python threads (a job's loader and logger threads), prints "ready"
and then keeps the same heartbeat as bench/heartbeat.c, in the same shared
page layout (struct beat_page): largest gap between ~100 µs ticks since the
last reset.  A Python tick costs a few µs, far below the gaps measured.
"""
import ctypes
import mmap
import os
import struct
import sys
import threading
import time

import torch

BEAT_MAGIC = 0x5441454248475442
OFF_MAGIC, OFF_REQ, OFF_ACK, OFF_MAX, OFF_TICKS = 0, 8, 16, 24, 32
PR_SET_TIMERSLACK = 29


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} SHMFILE", file=sys.stderr)
        return 2
    fd = os.open(sys.argv[1], os.O_RDWR)
    page = mmap.mmap(fd, 4096)
    os.close(fd)
    torch.set_num_threads(os.cpu_count())
    x = torch.ones(512, 512)
    (x @ x).sum().item()
    never = threading.Event()
    for _ in range(16):
        threading.Thread(target=never.wait, daemon=True).start()
    # The default 50 µs timer slack would make every tick ~150 µs.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    struct.pack_into("<Q", page, OFF_MAGIC, BEAT_MAGIC)
    print("ready", flush=True)
    get = struct.unpack_from
    put = struct.pack_into
    last = time.monotonic_ns()
    biggest = 0
    ack = get("<Q", page, OFF_ACK)[0]
    ticks = 0
    while True:
        time.sleep(0.0001)
        now = time.monotonic_ns()
        gap, last = now - last, now
        req = get("<Q", page, OFF_REQ)[0]
        if req != ack:
            # The gap that ends here started before the reset.
            biggest = 0
            put("<Q", page, OFF_MAX, 0)
            ack = req
            put("<Q", page, OFF_ACK, ack)
        elif gap > biggest:
            biggest = gap
            put("<Q", page, OFF_MAX, biggest)
        ticks += 1
        put("<Q", page, OFF_TICKS, ticks)


if __name__ == "__main__":
    sys.exit(main())
