#!/usr/bin/python3
"""Outside reference for `make bench-compression`: Python's pickle through
python3-blosc (Debian), on the two seed workloads of bench/compression-data.lisp,
made again here of the same shape (not the same values: another random
generator) from fixed seeds, and, given binstore's plain output of a data set
as a file, blosc on those bytes with and without its shuffle.

    /usr/bin/python3 bench/blosc-reference.py [BINSTORE-OUTPUT-FILE ...]

Prints a markdown table: bytes, store+compress ms (pickle.dumps then
blosc.compress), decompress+restore ms (blosc.decompress then pickle.loads),
each the least of 5 runs after a gc.collect()."""

import gc
import json
import pickle
import random
import sys
import time

import blosc

RUNS = 5

FIRST = ["James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David",
         "Elizabeth", "William", "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas",
         "Sarah", "Charles", "Karen", "Ana", "Luis", "Mei", "Hiroshi", "Olga", "Pierre", "Fatima",
         "Ahmed", "Ingrid", "Giulia"]
LAST = ["Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
        "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor",
        "Moore", "Jackson", "Martin", "Nakamura", "Rossi", "Dubois", "Ivanova", "Khan", "Larsen",
        "Novak", "Silva", "Kowalski", "Meyer"]
STREETS = ["Oak", "Maple", "Cedar", "Pine", "Elm", "Washington", "Lake", "Hill", "Park", "Main",
           "Church", "Mill", "River", "Sunset", "Highland", "Forest", "Meadow", "Spring", "Valley",
           "Ridge"]
KINDS = ["Street", "Avenue", "Road", "Lane", "Drive", "Court", "Place", "Way"]
CITIES = ["Springfield", "Riverside", "Franklin", "Greenville", "Bristol", "Clinton", "Fairview",
          "Salem", "Madison", "Georgetown", "Arlington", "Ashland", "Burlington", "Manchester",
          "Oxford", "Dayton"]
COUNTRIES = ["US", "CA", "GB", "DE", "FR", "IT", "ES", "JP", "BR", "IN"]
DOMAINS = ["example.com", "mail.com", "post.org", "inbox.net", "company.io", "uni.edu"]
TAGS = ["family", "friend", "work", "client", "supplier", "vip", "school", "sports", "neighbor",
        "doctor", "emergency", "book-club", "travel", "music", "volunteer", "alumni", "gym",
        "church", "band", "chess"]
WORDS = ["call", "back", "about", "the", "meeting", "next", "week", "prefers", "email", "after",
         "six", "pm", "birthday", "in", "march", "met", "at", "conference", "owes", "book", "likes",
         "coffee", "ask", "project", "status", "moved", "to", "new", "office", "kids", "school",
         "holiday", "plans", "send", "invoice", "contract", "renewal", "due", "remind", "of",
         "dinner", "on", "friday", "allergic", "nuts"]


def uuid4(rng):
    b = bytearray(rng.getrandbits(8) for _ in range(16))
    b[6] = 0x40 | (b[6] & 0x0F)
    b[8] = 0x80 | (b[8] & 0x3F)
    h = b.hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def uuid_table(n):
    rng = random.Random(11)
    table = {}
    while len(table) < n:
        table[uuid4(rng)] = rng.randrange(100)
    return table


def phone_record(i, rng):
    pick = rng.choice
    digits = lambda n: f"{rng.randrange(10 ** n):0{n}d}"
    first, last = pick(FIRST), pick(LAST)
    return {
        "id": i,
        "first_name": first,
        "last_name": last,
        "addresses": [{"street": f"{1 + rng.randrange(9999)} {pick(STREETS)} {pick(KINDS)}",
                       "city": pick(CITIES), "zip": digits(5), "country": pick(COUNTRIES)}
                      for _ in range(1 + rng.randrange(3))],
        "phones": [{"kind": pick(["home", "work", "mobile", "fax"]),
                    "number": f"+{1 + rng.randrange(99)}-{digits(3)}-{digits(3)}-{digits(4)}"}
                   for _ in range(1 + rng.randrange(4))],
        "emails": [f"{first.lower()}.{last.lower()}{rng.randrange(100)}@{pick(DOMAINS)}"
                   for _ in range(1 + rng.randrange(3))],
        "tags": [pick(TAGS) for _ in range(2 + rng.randrange(8))],
        "notes": " ".join(pick(WORDS) for _ in range(165 + rng.randrange(220))),
        "history": [{"date": f"20{rng.randrange(25):02d}-{1 + rng.randrange(12):02d}-"
                             f"{1 + rng.randrange(28):02d}",
                     "event": pick(["called", "emailed", "met", "wrote", "visited"])}
                    for _ in range(3 + rng.randrange(12))],
    }


def phone_book(n):
    rng = random.Random(13)
    return [phone_record(i, rng) for i in range(n)]


def cold_ms(fn):
    best = None
    for _ in range(RUNS):
        gc.collect()
        start = time.perf_counter()
        fn()
        t = (time.perf_counter() - start) * 1000
        best = t if best is None else min(best, t)
    return best


def row(name, way, size, store_ms, restore_ms, plain=None):
    ratio = f"{plain / size:.2f}" if plain else "1.00"
    print(f"| {name} | {way} | {size:,} | {ratio} | {store_ms:.2f} | {restore_ms:.2f} |")


def pickles(name, data):
    plain = pickle.dumps(data, protocol=5)
    assert pickle.loads(plain) == data
    row(name, "pickle", len(plain), cold_ms(lambda: pickle.dumps(data, protocol=5)),
        cold_ms(lambda: pickle.loads(plain)))
    for cname, clevel in (("zstd", 1), ("zstd", 3), ("zstd", 9), ("lz4", 5)):
        for typesize, shuffle in ((1, blosc.NOSHUFFLE), (8, blosc.SHUFFLE)):
            store = lambda: blosc.compress(pickle.dumps(data, protocol=5), typesize=typesize,
                                           clevel=clevel, shuffle=shuffle, cname=cname)
            packed = store()
            assert pickle.loads(blosc.decompress(packed)) == data
            row(name, f"pickle + blosc {cname} {clevel}, "
                      f"{'shuffle 8' if shuffle == blosc.SHUFFLE else 'no shuffle'}",
                len(packed), cold_ms(store), cold_ms(lambda: pickle.loads(blosc.decompress(packed))),
                len(plain))


def zstd_level(clevel):
    """The zstd level blosc compresses at for its CLEVEL (c-blosc's
    zstd_wrap_compress: 2 * clevel - 1 below 9), so that its rows can be
    set beside zstd's at the same level."""
    return clevel * 2 - 1 if clevel < 9 else 22


def blosc_on_file(path):
    octets = open(path, "rb").read()
    for typesize, shuffle in ((1, blosc.NOSHUFFLE), (8, blosc.SHUFFLE)):
        for cname, clevel in (("zstd", 1), ("zstd", 2), ("zstd", 3), ("zstd", 5), ("lz4", 5)):
            packed = blosc.compress(octets, typesize=typesize, clevel=clevel, shuffle=shuffle,
                                    cname=cname)
            assert blosc.decompress(packed) == octets
            level = f" (zstd level {zstd_level(clevel)})" if cname == "zstd" else ""
            row(path.rsplit("/", 1)[-1], f"blosc {cname} {clevel}{level}, "
                f"{'shuffle 8' if shuffle == blosc.SHUFFLE else 'no shuffle'}", len(packed),
                cold_ms(lambda: blosc.compress(octets, typesize=typesize, clevel=clevel,
                                               shuffle=shuffle, cname=cname)),
                cold_ms(lambda: blosc.decompress(packed)), len(octets))


def main():
    print(f"python {sys.version.split()[0]}, blosc {blosc.__version__} "
          f"(zstd {blosc.get_clib(blosc.compress(b'x' * 64, cname='zstd'))}), "
          f"{blosc.nthreads} blosc threads; pickle protocol 5\n")
    print("| data set | way | bytes | ratio | store + compress ms | decompress + restore ms |")
    print("|---|---|---:|---:|---:|---:|")
    book = phone_book(10000)
    print(f"<!-- phone-book: {len(json.dumps(book)):,} bytes as JSON -->")
    pickles("phone-book", book)
    del book
    pickles("uuid-table", uuid_table(262144))
    for path in sys.argv[1:]:
        blosc_on_file(path)


if __name__ == "__main__":
    main()
