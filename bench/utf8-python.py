"""CPython's side of make bench-utf8 (bench/utf8.lisp runs it).

Usage: python3 utf8-python.py DIRECTORY RUNS

DIRECTORY holds the buffers bench/utf8.lisp wrote: log.txt (the ASCII log),
mixed.txt (the mixed-script text) and short.bin (each short string as one
length byte followed by its UTF-8).  Each figure is cold as the Lisp side's
are: one call after gc.collect(), timed with time.perf_counter(), the
minimum of RUNS runs.  Prints one line per figure: NAME SECONDS.
"""

import gc
import os
import sys
import time


def cold(function, runs):
    best = None
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        function()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return best


def main():
    directory, runs = sys.argv[1], int(sys.argv[2])
    with open(os.path.join(directory, "log.txt"), "rb") as f:
        log = f.read()
    with open(os.path.join(directory, "mixed.txt"), "rb") as f:
        mixed = f.read()
    with open(os.path.join(directory, "short.bin"), "rb") as f:
        packed = f.read()
    shorts, i = [], 0
    while i < len(packed):
        n = packed[i]
        shorts.append(packed[i + 1:i + 1 + n])
        i += 1 + n
    log_text, mixed_text = log.decode("utf-8"), mixed.decode("utf-8")
    short_texts = [b.decode("utf-8") for b in shorts]
    log_path = os.path.join(directory, "log.txt")

    def lines_loop():
        with open(log_path, encoding="utf-8") as f:
            for line in f:
                pass

    def lines_list():
        with open(log_path, encoding="utf-8") as f:
            return f.readlines()

    figures = [
        ("decode-ascii", lambda: log.decode("utf-8")),
        ("decode-mixed", lambda: mixed.decode("utf-8")),
        ("encode-ascii", lambda: log_text.encode("utf-8")),
        ("encode-mixed", lambda: mixed_text.encode("utf-8")),
        ("decode-short", lambda: [b.decode("utf-8") for b in shorts]),
        ("encode-short", lambda: [s.encode("utf-8") for s in short_texts]),
        ("lines-loop", lines_loop),
        ("lines-list", lines_list),
    ]
    for name, function in figures:
        print(name, repr(cold(function, runs)), flush=True)


if __name__ == "__main__":
    main()
