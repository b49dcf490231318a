#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (valid messages plus a few near misses).

Run once after a wire-format change: python3 fuzz/make_corpus.py. Formats: src/transport/wire.h,
src/protocol/shard_protocol.h, src/protocol/object_head.h (all little-endian packed structs).
"""
import hashlib
import hmac
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def header(kind, opcode, rid, op_header=b"", message=b"", status=0, payload=0, magic=0x4B545350,
           version=4, flags=0):
    h = struct.pack("<IBBHQIIiIQ", magic, version, kind, opcode, rid, len(op_header),
                    len(message), status, flags, payload)
    return h + op_header + message


def wire(kind, opcode, rid, op_header=b"", message=b"", status=0, payload=0, magic=0x4B545350,
         version=4, flags=0, data=None):
    h = header(kind, opcode, rid, op_header, message, status, payload, magic, version, flags)
    return struct.pack("<Q", payload if data is None else data) + h


def batch(entries, count=None, version=4, magic=0x4B545350, kind=3):
    """A batch AM's data (wire.h): BatchHeader, then (header_len, data_len, header, data) per message."""
    out = struct.pack("<IBBH", magic, version, kind, len(entries) if count is None else count)
    for h, d in entries:
        out += struct.pack("<II", len(h), len(d)) + h + d
    return out


def placement(pid, ticket_addr, ticket, iovs):
    out = struct.pack("<IIQQ", pid, len(iovs), ticket_addr, ticket)
    for addr, length in iovs:
        out += struct.pack("<QQ", addr, length)
    return out


key = struct.pack("<QQQQII", 7, 1, 2, 3, 4, 0)
shard_req = struct.pack("<BBHIQQ", 1, 0, 0, 0, 5, 9) + key
shard_req_deadline = struct.pack("<BBHIQQ", 1, 0, 0, 1795000000, 5, 9) + key  # deadline_s set
shard_reply = struct.pack("<B7xQQ", 1, 4096, 9)
list_req = struct.pack("<BBHIQQ", 1, 3, 0, 100, 5, 7) + key

write("wire_decode", "request_empty", wire(1, 1, 1))
write("wire_decode", "request_shard_write", wire(1, 1, 42, shard_req, payload=1 << 20))
write("wire_decode", "reply_ok", wire(2, 2, 42, shard_reply, payload=4096))
write("wire_decode", "reply_error", wire(2, 2, 43, b"", b"shard 17 not found", status=5))
write("wire_decode", "bad_magic", wire(1, 1, 1, magic=0xDEADBEEF))
write("wire_decode", "bad_version", wire(1, 1, 1, version=9))
write("wire_decode", "truncated", wire(1, 1, 42, shard_req)[:30])
write("wire_decode", "request_placement",
      wire(1, 6, 44, shard_req, placement(4242, 0x7f0000001000, 0x1234, [(0x7f0000100000, 1 << 20)])))
write("wire_decode", "request_placement_iovs",
      wire(1, 6, 45, shard_req, placement(4242, 0x7f0000001000, 0x99,
                                          [(0x7f0000100000 + i * 8192, 4096) for i in range(8)])))
write("wire_decode", "reply_placed", wire(2, 6, 44, shard_reply, payload=1 << 20, flags=1, data=0))
write("wire_decode", "request_payload_source",
      wire(1, 1, 47, shard_req, placement(4242, 0x7f0000001000, 0x77, [(0x7f0000200000, 1 << 20)]),
           payload=1 << 20, flags=2, data=0))
write("wire_decode", "reply_pull_refused", wire(2, 1, 47, b"", b"cannot read the payload", status=9, flags=4))
write("wire_decode", "request_placement_zero_ticket",
      wire(1, 6, 46, b"", placement(1, 4096, 0, [(8192, 4096)])))

write("batch_decode", "replies", batch([(header(2, 2, 42, shard_reply, payload=4096), b"\x5a" * 4096),
                                       (header(2, 2, 43, b"", b"shard 17 not found", status=5), b""),
                                       (header(2, 6, 44, shard_reply, payload=1 << 20, flags=1), b"")]))
write("batch_decode", "requests", batch([(header(1, 1, 50, shard_req, payload=16), b"\x01" * 16),
                                        (header(1, 3, 51, shard_req), b"")]))
write("batch_decode", "one", batch([(header(1, 1, 52), b"")]))
write("batch_decode", "count_too_high", batch([(header(1, 1, 53), b"")], count=2))
write("batch_decode", "trailing", batch([(header(1, 1, 54), b"")]) + b"\x00")
write("batch_decode", "bad_version", batch([(header(1, 1, 55), b"")], version=3))

write("shard_header_decode", "request", b"\x00" + shard_req)
write("shard_header_decode", "reply", b"\x01" + shard_reply)
write("shard_header_decode", "list", b"\x02" + list_req)
write("shard_header_decode", "bad_version", b"\x00\x02" + shard_req[1:])
write("shard_header_decode", "range", b"\x03" + shard_req + struct.pack("<QQ", 4096, 8192))
write("shard_header_decode", "lock", b"\x04" + shard_req + struct.pack("<QII", 0x1234, 15000, 0))
write("shard_header_decode", "write_range", b"\x05" + shard_req + struct.pack("<QQ", 4096, 7))
write("shard_header_decode", "request_deadline", b"\x00" + shard_req_deadline)
write("shard_header_decode", "list_reply", b"\x06" + struct.pack("<B3xI", 1, 2))
write("shard_header_decode", "lock_reply", b"\x07" + struct.pack("<BB6x", 1, 1))
write("shard_header_decode", "list_containers", b"\x02" + struct.pack("<BBHIQQ", 1, 8 | 4, 0, 100, 5, 0) + key)

entry = key + struct.pack("<QII", 9, 5, 5) + b"hello"
write("list_entries_decode", "empty", struct.pack("<I", 0))
write("list_entries_decode", "two", struct.pack("<I", 2) + entry + key + struct.pack("<QII", 1, 9, 0))
write("list_entries_decode", "truncated", struct.pack("<I", 2) + entry)

name = b"photos/cat.jpg"
head = (struct.pack("<IHHQQQQq", 0x484F5350, 1, len(name), 1 << 20, 65536, 1, 2,
                    1700000000000) + name)
write("object_head_decode", "valid", head)
write("object_head_decode", "bad_name_len", head[:6] + b"\xff\xff" + head[8:])
write("object_head_decode", "short", head[:10])

# capability_verify: the first byte picks the opcode (1 + byte % 9), then the op's request header
# with kRequestHasCapability (0x80) in its flags and the token trailer (u16 length, token).
# Tokens (src/protocol/capability.h): a CapabilityBody signed with HMAC-SHA256 under the fuzz
# target's fixed keys (id 1: 32 x 'a', id 2: 32 x 'b'; tenant 9 revoked).
def token(tenant, container, key_id, rights=1, expiry_ms=1 << 40, map_epoch=5):
    body = struct.pack("<BBHIQQqQ", 1, rights, 0, key_id, tenant, container, expiry_ms, map_epoch)
    secret = (b"a" if key_id == 1 else b"b") * 32
    return body + hmac.new(secret, body, hashlib.sha256).digest()


def with_token(selector, op_header, tok):
    return bytes([selector]) + op_header[:1] + bytes([op_header[1] | 0x80]) + op_header[2:] + \
        struct.pack("<H", len(tok)) + tok


cap_key = struct.pack("<QQQQII", 42, 1, 2, 3, 0, 0)
cap_req = struct.pack("<BBHIQQ", 1, 0, 0, 0, 0, 0) + cap_key
write("capability_verify", "read_valid", with_token(1, cap_req, token(3, 42, 1)))
write("capability_verify", "read_revoked", with_token(1, cap_req, token(9, 42, 2, rights=3)))
write("capability_verify", "list_valid",
      with_token(4, struct.pack("<BBHIQQ", 1, 1, 0, 10, 0, 42) + bytes(40), token(3, 42, 1)))
write("capability_verify", "lock_valid",
      with_token(6, cap_req + struct.pack("<QII", 0x1234, 15000, 0), token(3, 42, 1, rights=3)))
write("capability_verify", "write_range_valid",
      with_token(8, cap_req + struct.pack("<QQ", 4096, 7), token(3, 42, 2, rights=3)))
