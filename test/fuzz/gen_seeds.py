#!/usr/bin/env python3
"""Write the structured part of the fuzz seed corpus (test/fuzz/corpus/).

An input is read byte by byte by the fuzz target (fuzz_common.c picks the
kind, fuzz_<api>.c decodes the rest; missing bytes read as 0):
  byte 0   bit 0: 0 = SDPA, 1 = MHA; bit 1: dropout fields (p, seed,
           offset) in the desc; bit 2 (MHA): the training calls
           (train_forward, backward) instead of execute
  byte 1   0 = a valid problem, else the first planted invalid field
           (1 + (b - 1) % 19, see the BAD_* enum); >= 128 plants a second
           (bit 3: the sparse fields of the SDPA or MHA desc; bit 4: a
           linear attention problem instead, bit 1 then its backward, byte
           1 as above over the LB_* enum, 20 kinds; bit 5: one call of a
           layout builder instead; bits 4 and 5 together: one call of
           attn_partials_merge; bit 6: K/V storage types and the paged
           cache in the SDPA problem, with bit 0 one attn_kv_append call;
           bit 7: the element types of Q and O in the SDPA problem, with
           bit 0 x_type and w_type of the MHA layer)
  then     sizes, options, layouts, values, workspace: random here.
For each API and each invalid-field kind (and none) a few inputs with
random tails, plus SDPA shapes past a key tile (split keys) and past a
query sub-block.  Deterministic; the rest of the corpus is what
`attn-fuzz -merge=1` kept from fuzzing runs (files named by their SHA-1)
and the sdpa-bwd-* seeds: the SDPA backward's bytes follow the forward's
(whose length depends on what they decode), so those were picked from a
fuzzing run's corpus by what FUZZ_VERBOSE=1 printed for them ("bwd: ...
bad=X,Y"): the smallest input per planted backward field (BB_* in
fuzz_sdpa_bwd.c, sdpa-bwd-badNN), one with two, and valid ones with and
without dBias.  Likewise the dropout and training seeds named
sdpa-dropout-*, mha-dropout-weights and mha-train-* (other than the
*-valid-* ones written here): p = 1, p = 0 with an offset, an invalid p,
dropout with dBias and with probabilities, MHA dropout with weights, small
and dropout training problems, accumulate = 1, a train_forward context
error, the smallest input per planted backward field (MB_* in
fuzz_mha_train.c, mha-train-bwd-badNN) and one with two.  The sparse, linear and layout seeds (sdpa-sparse-*,
mha-sparse-*, mha-train-sparse-*, linear-*, linear-bwd-*, layout-*) and the merge seeds
(merge-*: byte 0 with bits 4 and 5 set) are written here; some of them with the bytes that select the larger shapes
(several blocks of 16, past a chunk of 64) set.  So are the KV seeds:
sdpa-kv-* (byte 0 bit 6: F16/BF16/F32 K and V, contiguous and paged with
each block size, past a key tile and with many queries, and one per KB_*
invalid field) and kv-append-* (bits 6 and 0: attn_kv_append, valid
contiguous and paged, junk in the unread desc fields, a table entry out of
range, two invalid fields).  And the Q/O seeds sdpa-qo-* (byte 0 bit 7:
every pair of q_type and o_type, on the decode path, with many queries on
either engine and past a key tile; with bit 6 all BF16 or all F16
contiguous and paged, BF16 products on the tile engine; one per QB_*
invalid field).  And the MHA type seeds mha16-* (byte 0 bits 7 and 0,
with bit 2 training, bit 3 sparse): bytes 2 and 3 the types x (x_type + 3
w_type, 0 F32, 1 F16, 2 BF16; >= 192 one type, BF16 when even) and z (>=
160 plants XB_* kind z - 159, fuzz_mha.h): every pair of types, forward
and training, BF16 on the tile engine (BF16 products) and on the BLAS,
sparse (widened), and one per XB_* kind forward and in the backward (the
training seeds short, so that the backward's bytes read as zeros).  And
the quantized KV seeds sdpa-kvq-* (byte 0 bit 6, the KV byte z with bits
0, 1 and 3 set, then decode_kvq's byte: which of K and V are Q8_0 or
Q4_0 and whether valid, a dim not a multiple of 32 or a stride off 32,
with its byte): every pair of types, contiguous and paged with each block
size and garbage kind, past a key tile, many queries, with 16-bit Q and O,
odd dims of K, V and both, each stride off 32, and the KB_* kinds that
touch them) and kv-append-q-* (x >= 216: attn_kv_append with block-type
caches, valid contiguous and paged, odd, a stride off 32, a table entry
out of range, an unknown type, two invalid fields).

usage: gen_seeds.py OUTDIR
"""
import os
import random
import sys

BAD_KINDS = 19
LINEAR_BAD_KINDS = 20


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261123)
    seeds = {}
    for api in (0, 1):
        name = "sdpa" if api == 0 else "mha"
        for bad in range(BAD_KINDS + 1):
            for k in range(3 if bad == 0 else 2):
                tail = bytes(rng.randrange(256) for _ in range(rng.randrange(20, 90)))
                seeds["%s-bad%02d-%d" % (name, bad, k)] = bytes([api, bad]) + tail
        # every option bit and all three mask modes, valid
        for k in range(6):
            tail = bytearray(rng.randrange(256) for _ in range(80))
            seeds["%s-valid-opts-%d" % (name, k)] = bytes([api, 0]) + bytes(tail)
    # SDPA shapes: byte 9 selects them (after kind, bad and 7 sizes)
    for shape, label in ((1, "long-keys"), (2, "many-queries")):
        for k in range(3):
            b = bytearray(rng.randrange(256) for _ in range(90))
            b[0], b[1], b[9] = 0, 0, shape
            seeds["sdpa-%s-%d" % (label, k)] = bytes(b)
    # the empty input: the smallest valid problem
    seeds["sdpa-empty"] = b""
    seeds["mha-zeros"] = bytes([1])
    # byte 0 bits 1 and 2: dropout, MHA training (own generator: the seeds
    # above stay as they were)
    rng2 = random.Random(20261124)
    for sel, name in ((2, "sdpa-dropout"), (3, "mha-dropout"), (5, "mha-train"),
                      (7, "mha-train-dropout")):
        for k in range(2):
            tail = bytes(rng2.randrange(256) for _ in range(rng2.randrange(30, 90)))
            seeds["%s-bad00-%d" % (name, k)] = bytes([sel, 0]) + tail
    # byte 0 bits 3 (sparse SDPA / MHA), 4 (linear attention; with bit 1
    # its backward) and 5 (the layout builders), own generator again
    rng3 = random.Random(20261125)
    kinds = (
        (8, "sdpa-sparse", (0, 0, 0, 0, 1, 2, 14, 15, 200)),
        (10, "sdpa-sparse-dropout", (0, 0)),
        (9, "mha-sparse", (0, 0, 0, 1, 2, 14)),
        (13, "mha-train-sparse", (0, 0)),
        (16, "linear", tuple(range(LINEAR_BAD_KINDS + 1)) + (0, 0, 200)),
        (18, "linear-bwd", tuple(range(LINEAR_BAD_KINDS + 1)) + (0, 0, 200)),
        (32, "layout", tuple(range(6))),
    )
    for sel, name, bads in kinds:
        for k, bad in enumerate(bads):
            tail = bytearray(rng3.randrange(256) for _ in range(rng3.randrange(30, 110)))
            if name.startswith("linear") and k % 4 == 1:
                tail[7] = 1  # the shape past a chunk of 64 rows
            if name.startswith("sdpa") and k % 3 == 1:
                tail[7] = 0   # SDPA shape 0 (byte 9) ...
                tail[10] |= 3  # ... and (byte 12) several blocks of 16
            seeds["%s-%02d" % (name, k)] = bytes([sel, bad]) + bytes(tail)
    # bits 4 and 5 together: attn_partials_merge (own generator again);
    # after the kind byte: the planted field (GB_* in fuzz_merge.c, 9
    # kinds; >= 128 plants a second), parts, rows, dim, the O and lse
    # layouts, the output, the values' magnitudes and special rates
    rng4 = random.Random(20261126)
    for k, bad in enumerate((0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 200)):
        tail = bytearray(rng4.randrange(256) for _ in range(rng4.randrange(16, 40)))
        if k < 6:
            tail[2] = 250 if k == 1 else tail[2]   # dim past 256 (dim byte 240 + 10)
            tail[3] = k        # every O layout kind among the valid seeds
            tail[4] = 5 - k    # and lse layout kind
        seeds["merge-%02d" % k] = bytes([48, bad]) + bytes(tail)
    # bit 6: SDPA with K/V storage types and a paged cache; with bit 0,
    # attn_kv_append (own generator again).  SDPA: opt (byte 10, after a
    # shape's own size bytes) without
    # bits 0 and 2 (no scale or window bytes), so that the KV bytes (x:
    # k_type + 3 v_type + 9 paging, 0 = contiguous; y: block size index,
    # extra table columns, extra pool blocks, garbage kind; z: >= 128 plants
    # KB_* kind z - 127) follow the mask, threads and the lengths (two bytes
    # a sequence, three past 255 keys) at a fixed place.
    rng5 = random.Random(20261127)
    kv_sdpa = (
        # (x, y, z, shape, B)
        (1 + 1 * 3 + 9, 3, 0, 0, 2),              # F16 K, F16 V, paged, bs 16
        (2 + 0 * 3 + 18, 0x90, 0, 0, 3),          # BF16 K, F32 V, bs 1, random garbage
        (0 + 2 * 3 + 27, 0xe6, 0, 0, 2),          # F32 K, BF16 V, bs 3, +Inf garbage
        (1 + 2 * 3, 0, 0, 0, 2),                  # F16 K, BF16 V, contiguous
        (1 + 1 * 3 + 9, 0x51, 0, 1, 1),           # F16, paged bs 2, past a key tile
        (2 + 2 * 3 + 9, 0x23, 0, 2, 1),           # BF16, paged bs 16, many queries
    ) + tuple((1 + 2 * 3 + 9 * (kind != 3), 0x15 + kind, 127 + kind, 0, 2)
              for kind in range(1, 10))           # every KB_* kind
    for k, (x, y, z, shape, nb) in enumerate(kv_sdpa):
        b = bytearray(rng5.randrange(256) for _ in range(rng5.randrange(70, 110)))
        b[0], b[1] = 64, 0
        b[2] = nb - 1          # B (shapes 1 and 2 make it 1)
        b[9] = shape
        opt = 10 + (0, 4, 2)[shape]  # the shapes' own size bytes first
        b[opt] &= ~5 & 0xff
        if shape:
            nb = 1
        at = opt + 3 + (3 if shape == 1 else 2) * nb
        b[at], b[at + 1], b[at + 2] = x, y, z
        seeds["sdpa-kv-%02d" % k] = bytes(b)
    # attn_kv_append: byte 1 the AB_* field (>= 128 two), then B, Hkv, dk,
    # dv, capacity, t, x (types and paging, as above), y (bits 0-5 as
    # above, bit 6 junk in the unread desc fields, bit 7 new_lens)
    kv_app = ((0, 1 + 2 * 3, 0x80), (0, 2 + 1 * 3 + 9, 0xc1), (0, 1 + 9, 0x54),
              (6, 2 + 2 * 3 + 18, 0x82), (200, 1 + 1 * 3 + 9, 0x43))
    for k, (bad, x, y) in enumerate(kv_app):
        b = bytearray(rng5.randrange(256) for _ in range(rng5.randrange(40, 80)))
        b[0], b[1], b[8], b[9] = 65, bad, x, y
        seeds["kv-append-%02d" % k] = bytes(b)
    # bit 7: the element types of Q and O in the SDPA problem (own
    # generator again).  The layout of the KV seeds above (opt without
    # bits 0 and 2, the lengths at a fixed place), then with bit 6 its
    # three KV bytes, then the two Q/O bytes: x (q_type + 3 o_type, 0 F32,
    # 1 F16, 2 BF16; >= 192 one type for Q and O, and for K and V with bit
    # 6: BF16 when even, F16 when odd) and z (>= 160 plants QB_* kind
    # z - 159).  The shape byte's high nibble picks the engine (2 tile).
    rng6 = random.Random(20261128)
    qo_sdpa = (
        # (sel, x, z, shape, engine, B, kv (x, y, z) or None)
    ) + tuple((128, qt + 3 * ot, 0, 0, 0, 2, None)
              for qt in range(3) for ot in range(3) if qt or ot) + (
        (128, 2 + 3 * 1, 0, 2, 2, 1, None),       # BF16 Q, F16 O, many queries, tile
        (128, 1 + 3 * 2, 0, 2, 1, 1, None),       # F16 Q, BF16 O, many queries, BLAS
        (128, 2 + 3 * 2, 0, 1, 0, 1, None),       # BF16, past a key tile (split keys)
        (128, 192, 0, 0, 2, 3, None),             # one type: BF16 Q and O
        (128, 193, 0, 0, 1, 2, None),             # one type: F16 Q and O
        (192, 192, 0, 2, 2, 1, (0, 0, 0)),        # all BF16, many queries, tile: BF16 products
        (192, 192, 0, 0, 2, 2, (0, 0, 0)),        # all BF16, decode path (and ATTN_DECODE=0)
        (192, 194, 0, 2, 2, 1, (9, 0x23, 0)),     # all BF16, paged bs 16, many queries
        (192, 192, 0, 0, 0, 2, (18, 0x91, 0)),    # all BF16, paged bs 2, decode path
        (192, 193, 0, 2, 2, 1, (27, 0x02, 0)),    # all F16, paged bs 3, many queries
        (192, 2 + 3 * 0, 0, 2, 2, 1, (2 + 2 * 3, 0, 0)),   # BF16 Q, K, V, F32 O
        (192, 0 + 3 * 2, 0, 0, 0, 2, (1 + 2 * 3 + 9, 0x13, 0)),  # F32 Q, BF16 O, paged
    ) + tuple((128, 2 + 3 * 1, 159 + kind, 0, 0, 2, None)
              for kind in range(1, 6)) + (        # every QB_* kind
        (192, 1 + 3 * 2, 160 + 2, 0, 0, 2, (1 + 9, 0x13, 0)),  # QB_PTR_NULL, paged
    )
    for k, (sel, x, z, shape, engine, nb, kv) in enumerate(qo_sdpa):
        b = bytearray(rng6.randrange(256) for _ in range(rng6.randrange(70, 110)))
        b[0], b[1] = sel, 0
        b[2] = nb - 1
        b[9] = shape | engine << 4
        opt = 10 + (0, 4, 2)[shape]
        b[opt] &= ~5 & 0xff
        if shape:
            nb = 1
        if shape == 1:
            b[opt + 4] &= 0xfe  # past 255 keys: no fourth length byte
        at = opt + 3 + (3 if shape == 1 else 2) * nb
        if kv:
            b[at], b[at + 1], b[at + 2] = kv
            at += 3
        b[at], b[at + 1] = x, z
        seeds["sdpa-qo-%02d" % k] = bytes(b)
    # byte 0 bits 7 and 0: the MHA layer's element types (own generator
    # again).  With an engine given: no kdim / vdim bytes (f bits 4 and 6
    # clear) and opt without bits 0 and 2 (no scale or window bytes), so
    # that wb (weights + 3 engine, engine 2 tile) is at a fixed place:
    # after sel, bad, x, z, H, dh, Hkv, f, B, L, (S if cross), sg, opt,
    # mask, key padding.
    rng7 = random.Random(20261129)
    mha16 = tuple((129, x, 0, None) for x in range(1, 9)) + (
        (129, 192, 0, 2), (129, 192, 0, 1), (129, 193, 0, 2), (129, 194, 0, 0),
        (129, 2 + 3 * 2, 0, 2),
    ) + tuple((133, x, 0, None) for x in (1, 2, 3, 5, 6, 7)) + (
        (133, 192, 0, 2), (133, 192, 0, 1), (133, 193, 0, 2), (135, 192, 0, 2),
        (137, 192, 0, 2), (141, 2 + 3 * 1, 0, 2),
    ) + tuple((129, (2 + 3 * 1, 192, 0)[k % 3], 159 + k, None) for k in range(1, 7)) + tuple(
        (133, (192, 193, 2 + 3 * 1)[k % 3], 159 + k, 2) for k in range(1, 7))
    for k, (sel, x, z, engine) in enumerate(mha16):
        # training: short, so that the backward's bytes (after the
        # forward's) read as zeros: valid, overwriting
        n = rng7.randrange(20, 24) if sel & 4 else rng7.randrange(60, 110)
        b = bytearray(rng7.randrange(256) for _ in range(n))
        b[0], b[1], b[2], b[3] = sel, 0, x, z
        if engine is not None and not sel & 8:
            b[7] &= ~(16 | 64) & 0xff
            at = 10 if b[7] & 2 else 11
            b[at + 1] &= ~5 & 0xff
            b[at + 4] = engine * 3 + b[at + 4] % 3
        seeds["mha16-%02d" % k] = bytes(b)
    # the block types Q8_0 / Q4_0 in K/V storage (own generator again).
    # SDPA: the KV seeds' layout; z with bits 0, 1 and 3 set (z = 11 plants
    # nothing; >= 128 the KB_* kind 1 + (z - 128) % 9), then q: q % 8 the
    # types (0 K Q8_0, 1 K Q4_0, 2 V Q8_0, 3 V Q4_0, 4 Q8_0/Q8_0, 5
    # Q8_0/Q4_0, 6 Q4_0/Q8_0, 7 Q4_0/Q4_0; the other tensor keeps x's
    # type), q / 8 % 4 the kind (0, 1 valid, 2 a dim not a multiple of 32,
    # 3 a stride off 32, then a byte: stride w % 3 of the view plus
    # 1 + w / 3 % 31), bit 5 V rather than K for them.
    rng8 = random.Random(20261130)

    def kb_z(kind):
        return next(z for z in range(128, 256)
                    if z & 0x0b == 0x0b and 1 + (z - 128) % 9 == kind)
    kvq_sdpa = (
        # (x, y, z, q, w, shape, B, qo)
        (0 + 0 * 3 + 9, 3, 11, 4, None, 0, 2, None),       # Q8_0 K and V, paged bs 16
        (0, 0, 11, 7, None, 0, 2, None),                   # Q4_0 K and V, contiguous
        (0 + 1 * 3, 0, 11, 0, None, 0, 3, None),           # Q8_0 K, F16 V, contiguous
        (1 + 0 * 3 + 9, 0x80, 11, 3, None, 0, 2, None),    # F16 K, Q4_0 V, bs 1, random garbage
        (0 + 2 * 3 + 27, 0xc2, 11, 1, None, 0, 2, None),   # Q4_0 K, BF16 V, bs 3, +Inf garbage
        (2 + 0 * 3 + 18, 0x51, 11, 2, None, 0, 3, None),   # BF16 K, Q8_0 V, bs 2, NaN garbage
        (9, 0x51, 11, 5, None, 1, 1, None),                # Q8_0/Q4_0 paged, past a key tile
        (0, 0, 11, 6, None, 1, 1, None),                   # Q4_0/Q8_0, past a key tile
        (9, 0x23, 11, 6, None, 2, 1, None),                # Q4_0/Q8_0 paged bs 16, many queries
        (0, 0, 11, 4, None, 2, 1, None),                   # Q8_0/Q8_0, many queries
        (1 + 1 * 3, 0, 11, 5, None, 2, 1, None),           # Q8_0/Q4_0, many queries
        (9, 0x13, 11, 8 + 4, None, 0, 2, None),            # kind 1 (valid), Q8_0/Q8_0
        (0, 0, 11, 0 + 16, None, 0, 2, None),              # K Q8_0, dk odd: BAD_SIZE
        (0, 0, 11, 3 + 16, None, 0, 2, None),              # V Q4_0, dv odd
        (9, 0x01, 11, 7 + 16 + 32, None, 0, 2, None),      # both, V odd, paged
        (0, 0, 11, 4 + 24, 0, 0, 2, None),                 # batch stride + 1: BAD_STRIDE
        (0, 0, 11, 5 + 24 + 32, 1 + 3 * 15, 0, 2, None),   # V head stride + 16
        (9, 0x03, 11, 6 + 24, 2 + 3 * 7, 0, 2, None),      # pool seq stride + 8, paged
        (0, 0, 11, 4, None, 0, 2, (192, 0)),               # Q8_0 K and V, BF16 Q and O
        (0, 0, 11, 1, None, 2, 1, (193, 0)),               # Q4_0 K, F16 Q, O and V, many queries
        (0, 0, 11, 7, None, 0, 2, (1 + 3 * 2, 0)),         # F16 Q, BF16 O
    ) + tuple((9 if kind not in (3,) else 0, 0x15 + kind, kb_z(kind), (4, 5, 6, 7)[kind % 4],
               None, 0, 2, None) for kind in range(1, 10))  # every KB_* kind
    def kvq_seed(rng, x, y, z, q, w, shape, nb, qo):
        b = bytearray(rng.randrange(256) for _ in range(rng.randrange(80, 120)))
        b[0], b[1] = 64 | (128 if qo else 0), 0
        b[2] = nb - 1
        b[9] = shape
        opt = 10 + (0, 4, 2)[shape]
        b[opt] &= ~5 & 0xff
        if shape:
            nb = 1
        if shape == 1:
            b[opt + 4] &= 0xfe  # past 255 keys: no fourth length byte
        at = opt + 3 + (3 if shape == 1 else 2) * nb
        b[at], b[at + 1], b[at + 2], b[at + 3] = x, y, z, q
        at += 4
        if w is not None:
            b[at] = w
            at += 1
        if qo:
            b[at], b[at + 1] = qo
        return bytes(b)
    for k, row in enumerate(kvq_sdpa):
        seeds["sdpa-kvq-%02d" % k] = kvq_seed(rng8, *row)
    # integer scores (desc.qk_int8): q's bit 6 with a Q8_0 or Q4_0 K, Q F32
    # (own generator, so the seeds above and below keep their bytes)
    rng9 = random.Random(20261127)
    kvq_int8 = (
        (0, 0, 11, 64 + 4, None, 0, 2, None),        # Q8_0/Q8_0 contiguous
        (9, 0x23, 11, 64 + 6, None, 2, 1, None),     # Q4_0/Q8_0 paged bs 16, many queries
        (0, 0, 11, 64 + 1, None, 1, 1, None),        # Q4_0 K, past a key tile
        (1 + 1 * 3, 0, 11, 64 + 8, None, 2, 1, None),  # Q8_0 K, F16 V, many queries
        (9, 0x51, 11, 64 + 5, None, 0, 2, None),     # Q8_0/Q4_0 paged, NaN garbage
        (0, 0, 11, 64 + 4, None, 0, 2, (1 + 3 * 0, 0)),  # O F16 (Q F32)
    )
    for k, row in enumerate(kvq_int8):
        seeds["sdpa-kvq-int8-%02d" % k] = kvq_seed(rng9, *row)
    # attn_kv_append: x = 216 + u (u % 4: contiguous when 0; u / 4 % 3 and
    # u / 12 % 3 the types of K and V where not quantized), then y, then
    # the q byte (and w) as above
    kvq_app = (
        # (bad, u, y, q, w)
        (0, 0, 0x80, 4, None),              # Q8_0 K and V, contiguous, new_lens
        (0, 1, 0x03, 7, None),              # Q4_0, paged bs 16
        (0, 1 + 12, 0x40, 0, None),         # Q8_0 K, F16 V, paged bs 1, junk desc fields
        (0, 2 + 4 * 2, 0x82, 3, None),      # BF16 K, Q4_0 V, paged bs 3
        (0, 4, 0x00, 6, None),              # Q4_0 K, Q8_0 V, contiguous
        (0, 3, 0x81, 5 + 8, None),          # Q8_0/Q4_0, paged bs 2
        (0, 0, 0x00, 4 + 16, None),         # K dim odd: BAD_SIZE
        (0, 1, 0x01, 5 + 16 + 32, None),    # V dim odd, paged
        (0, 0, 0x00, 5 + 24, 1 + 3 * 7),    # K head stride + 8: BAD_STRIDE
        (0, 2, 0x02, 6 + 24 + 32, 2),       # V pool seq stride + 1, paged
        (6, 1, 0x03, 4, None),              # a table entry out of range
        (7, 0, 0x00, 7, None),              # an unknown type
        (200, 5, 0x81, 5, None),            # two invalid fields
    )
    for k, (bad, u, y, q, w) in enumerate(kvq_app):
        b = bytearray(rng8.randrange(256) for _ in range(rng8.randrange(40, 80)))
        at = 8 + (bad >= 128)  # a second planted field: its byte first
        b[0], b[1], b[at], b[at + 1], b[at + 2] = 65, bad, 216 + u, y, q
        if w is not None:
            b[at + 3] = w
        seeds["kv-append-q-%02d" % k] = bytes(b)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds), out))


if __name__ == "__main__":
    main()
