#!/usr/bin/env python3
"""Where a pack store's bytes go (core/pack/pack.h, pack versions 1 and 2).

    python3 tests/bench/pack-breakdown.py STORE [--pd PAGEDEDUP] [--dicts DIR]

Walks every record of STORE/packs/ and prints, by encoding (raw, zstd,
zstd with a dictionary, delta; one frame or chunked): records, raw bytes,
payload bytes, header and chunk-table bytes, alignment padding; the
dictionary records; the live whole records by the dictionary they
name; the dead records (in a pack, named by no fingerprint
record: `pagededup blobs STORE` lists the live ones); the whole records
written before the first dictionary existed. --dicts DIR writes each
dictionary's bytes to DIR/dict-ID (for bench_pack --dict-file).
Reads only; the store may be mounted.
"""
import argparse, collections, os, struct, subprocess, sys

HDR, REC_HDR, ALIGN, CHUNK_ENT = 64, 96, 8, 24
REC_MAGIC, REC_MAGIC2 = 0x31524450, 0x32524450  # header layouts 1 and 2
RF_VARIANT, RF_DICT, RF_CHUNKS, RF_BASE = 1, 2, 8, 4
ENC = {0: "raw", 1: "zstd", 2: "zstd+dict", 3: "delta", 4: "delta+dict"}


def varint(data, pos):
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def header(data, off):
    """The fields of the record header at off (either layout), or None."""
    magic, = struct.unpack_from("<I", data, off)
    if magic == REC_MAGIC:
        kind, enc = data[off + 4], data[off + 5]
        nchunks, = struct.unpack_from("<I", data, off + 28)
        size, payload, dict_id = struct.unpack_from("<QQI", data, off + 48)
        variant, = struct.unpack_from("<I", data, off + 24)
        return dict(kind=kind, enc=enc, nchunks=nchunks, size=size, payload=payload, dict=dict_id,
                    variant=variant, hdr=REC_HDR)
    if magic != REC_MAGIC2:
        return None
    kind, enc, flags = data[off + 4], data[off + 5], data[off + 6]
    pos = off + 39
    size, pos = varint(data, pos)
    payload, pos = varint(data, pos)
    variant = dict_id = 0
    nchunks = 1
    if flags & RF_VARIANT:
        variant, pos = varint(data, pos)
    if flags & RF_DICT:
        dict_id, pos = varint(data, pos)
    if flags & RF_CHUNKS:
        nchunks, pos = varint(data, pos + 1)
    if flags & RF_BASE:
        _, pos = varint(data, pos + 16)
    return dict(kind=kind, enc=enc, nchunks=nchunks, size=size, payload=payload, dict=dict_id,
                variant=variant, hdr=pos + 4 - off)


def records(path):
    """(offset, header fields, record length) of every intact record."""
    with open(path, "rb") as f:
        data = f.read()
    off = HDR
    while off + 45 <= len(data):
        h = header(data, off)
        if h is None:
            off += ALIGN  # a punched or damaged stretch
            continue
        reclen = h["hdr"] + h["payload"]
        h["body"] = data[off + h["hdr"]:off + reclen] if h["kind"] == 2 else None
        yield off, h, reclen
        off = (off + reclen + ALIGN - 1) // ALIGN * ALIGN


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--pd", default="pagededup")
    ap.add_argument("--dicts")
    a = ap.parse_args()
    live = set()
    out = subprocess.run([a.pd, "blobs", a.store], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        place = line.split("\t")[3]
        if place.startswith("pack-"):
            pack, rest = place.split(":", 1)
            live.add((int(pack[5:]), int(rest.split("+")[0])))
    rows = collections.defaultdict(lambda: [0] * 6)  # n raw payload hdr table pad
    dead = [0, 0]
    dicts = []
    before_dict = [0, 0, 0]
    by_dict = collections.defaultdict(lambda: [0, 0, 0])  # records raw stored
    seen_dict = False
    packs = sorted(f for f in os.listdir(os.path.join(a.store, "packs")) if f.startswith("pack-"))
    for name in packs:
        pid = int(name[5:])
        path = os.path.join(a.store, "packs", name)
        end = HDR
        for off, h, reclen in records(path):
            pad = (-(off + reclen)) % ALIGN
            if h["kind"] == 2:
                seen_dict = True
                dicts.append((h["variant"], reclen))
                if a.dicts:
                    os.makedirs(a.dicts, exist_ok=True)
                    with open(os.path.join(a.dicts, "dict-%d" % h["variant"]), "wb") as f:
                        f.write(h["body"])
                continue
            if (pid, off) not in live:
                dead[0] += 1
                dead[1] += reclen + pad
                continue
            key = ENC.get(h["enc"], "?") + (" chunked" if h["nchunks"] > 1 else "")
            table = h["nchunks"] * CHUNK_ENT if h["nchunks"] > 1 else 0
            r = rows[key]
            for i, v in enumerate((1, h["size"], h["payload"] - table, h["hdr"], table, pad)):
                r[i] += v
            if h["enc"] == 2:
                bd = by_dict[h["dict"]]
                bd[0] += 1
                bd[1] += h["size"]
                bd[2] += reclen + pad
            if not seen_dict and h["enc"] in (0, 1):
                before_dict[0] += 1
                before_dict[1] += h["size"]
                before_dict[2] += reclen
    print("%-20s %7s %12s %12s %9s %8s %7s %7s" % ("encoding", "records", "raw", "payload", "headers", "tables",
                                                  "padding", "ratio"))
    tot = [0] * 6
    for key in sorted(rows):
        r = rows[key]
        tot = [x + y for x, y in zip(tot, r)]
        print("%-20s %7d %12d %12d %9d %8d %7d %7.4f" % (key, *r, (r[2] + r[3] + r[4] + r[5]) / max(r[1], 1)))
    print("%-20s %7d %12d %12d %9d %8d %7d %7.4f" % ("live pages", *tot, sum(tot[2:]) / max(tot[1], 1)))
    d = rows.get("delta", [0] * 6)
    if d[0]:
        print("deltas: %d of %d pages (%.1f%%), mean record %.0f bytes (payload %.0f + header %.0f)" %
              (d[0], tot[0], 100.0 * d[0] / tot[0], (d[2] + d[3]) / d[0], d[2] / d[0], d[3] / d[0]))
    print("dictionaries: %d records, %d bytes" % (len(dicts), sum(n for _, n in dicts)))
    for i in sorted(by_dict):
        n, raw, stored = by_dict[i]
        print("  whole records on dictionary %d: %d, raw %d, stored %d bytes (%.4f)" % (i, n, raw, stored,
                                                                                   stored / max(raw, 1)))
    print("dead records: %d, %d bytes" % tuple(dead))
    print("whole records written before the first dictionary: %d pages, raw %d, stored %d bytes" % tuple(before_dict))
    files = sum(os.path.getsize(os.path.join(a.store, "packs", f)) for f in packs)
    print("pack files: %d, %d bytes long" % (len(packs), files))


if __name__ == "__main__":
    sys.exit(main())
