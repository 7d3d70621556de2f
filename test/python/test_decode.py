"""attn.KVCache, attn.decode and attn.merge_partials against references
written here:

- storage: the rows a cache holds (to_float) equal the appended rows
  rounded by numpy (float16; bfloat16 by attn.to_bf16) or quantized and
  de-quantized by the Q8_0 / Q4_0 rules of attn.h implemented here in
  numpy float32 (bitwise; attn.quantize's bytes equal this quantizer's);
- decode at every storage type, contiguous and paged, GQA, 1 and 3 query
  rows, causal (bottom-right) or not: against float64 softmax attention
  over the de-quantized cache (_ref.ref_sdpa), |error| <= 2e-5 (inputs
  standard normal, float32 arithmetic);
- paged == contiguous bitwise; append-then-decode == attention over all
  the appended rows (scaled_dot_product_attention, within 2e-6);
- merge_partials of two halves of the keys == one decode over all of
  them, |error| <= 2e-6 (output and logsumexp);
- errors: AttnError naming the status.
"""

import sys
import unittest

import numpy as np

import attn
from attn import AttnError
from _ref import Errors, ref_sdpa, torch, visible_window

ERR = Errors()
TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")


# --- numpy Q8_0 / Q4_0, from the rules in attn.h (ggml's reference quantizers) ---

def np_quantize(x, dtype):
    """bytes (uint8) of x (float32, size a multiple of 32)."""
    x = np.asarray(x, np.float32).reshape(-1, 32)
    f32 = np.float32
    out = []
    for blk in x:
        if dtype == "q8_0":
            amax = np.max(np.abs(blk))
            d = f32(amax / f32(127))
            idv = f32(f32(1) / d) if d != 0 else f32(0)
            prod = (blk * idv).astype(np.float32)
            q = (np.sign(prod) * np.floor(np.abs(prod) + f32(0.5))).astype(np.int8)
            out.append(np.concatenate([np.frombuffer(np.float16(d).tobytes(), np.uint8),
                                       q.view(np.uint8)]))
        else:
            m = blk[np.argmax(np.abs(blk))]
            d = f32(m / f32(-8))
            idv = f32(f32(1) / d) if d != 0 else f32(0)
            t = ((blk * idv).astype(np.float32) + f32(8.5)).astype(np.float32)
            q = np.minimum(15, np.trunc(t)).astype(np.uint8)
            packed = (q[:16] | (q[16:] << 4)).astype(np.uint8)
            out.append(np.concatenate([np.frombuffer(np.float16(d).tobytes(), np.uint8),
                                       packed]))
    return np.concatenate(out)


def np_round_q(q):
    """Q as the integer scores use it (attn.h, "Integer scores"): each
    32-value block rounded to int8 with the scale amax / 127, ties away
    from zero, back as q x s in float64."""
    f32 = np.float32
    x = np.asarray(q, np.float32).reshape(-1, 32)
    out = np.empty(x.shape, np.float64)
    for i, blk in enumerate(x):
        s = f32(np.max(np.abs(blk)) / f32(127))
        if s < np.finfo(np.float32).tiny:
            out[i] = 0
            continue
        v = (blk * f32(f32(1) / s)).astype(np.float32).astype(np.float64)
        out[i] = np.sign(v) * np.floor(np.abs(v) + 0.5) * float(s)
    return out.reshape(np.shape(q))


def np_dequantize(b, dtype, n):
    per = 34 if dtype == "q8_0" else 18
    b = np.asarray(b, np.uint8)[:n // 32 * per].reshape(-1, per)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    if dtype == "q8_0":
        q = b[:, 2:].view(np.int8).astype(np.float32)
    else:
        lo = (b[:, 2:] & 15).astype(np.float32) - 8
        hi = (b[:, 2:] >> 4).astype(np.float32) - 8
        q = np.concatenate([lo, hi], axis=1)
    return (q * d).reshape(-1)


def stored(x, dtype):
    """The float32 values x reads back as after storing as dtype."""
    x = np.asarray(x, np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return attn.from_bf16(attn.to_bf16(x))
    return np_dequantize(np_quantize(x, dtype), dtype, x.size).reshape(x.shape)


def fill(cache, rng, steps):
    """Append steps = [(t, new_lens or None)]; return per-sequence rows appended
    (float32 lists of (Hkv, n, d) arrays) for K and V."""
    B, Hkv = cache.batch, cache.kv_heads
    ks = [np.zeros((Hkv, 0, cache.head_dim), np.float32) for _ in range(B)]
    vs = [np.zeros((Hkv, 0, cache.v_dim), np.float32) for _ in range(B)]
    for t, nl in steps:
        k = rng.standard_normal((B, Hkv, t, cache.head_dim)).astype(np.float32)
        v = rng.standard_normal((B, Hkv, t, cache.v_dim)).astype(np.float32)
        cache.append(k, v, nl)
        for b in range(B):
            n = t if nl is None else nl[b]
            ks[b] = np.concatenate([ks[b], k[b, :, :n]], axis=1)
            vs[b] = np.concatenate([vs[b], v[b, :, :n]], axis=1)
    return ks, vs


def padded(rows, T):
    out = np.zeros((len(rows),) + (rows[0].shape[0], T, rows[0].shape[2]), np.float32)
    for b, r in enumerate(rows):
        out[b, :, :r.shape[1]] = r
    return out


STEPS = [(5, None), (3, [1, 3]), (1, None), (6, [6, 0])]   # lengths 13 and 9


def make_cache(dtype, paged, dk=64, dv=32, rng=None):
    kw = {}
    if paged == "managed":
        kw = {"block_size": 4}
    elif paged == "table":
        # a caller's table: blocks in shuffled order from a pool of 12
        perm = rng.permutation(12).astype(np.int32)
        kw = {"block_size": 4, "num_blocks": 12,
              "block_table": np.ascontiguousarray(perm[:10].reshape(2, 5))}
    return attn.KVCache(2, 2, dk, 20 if paged != "table" else None, v_dim=dv, dtype=dtype,
                        **kw)


class TestStorage(unittest.TestCase):
    def test_quantize_bytes(self):
        rng = np.random.default_rng(1)
        x = (rng.standard_normal(32 * 40) * np.repeat(rng.random(40) * 10, 32)).astype(
            np.float32)
        x[:32] = 0                     # a block of zeros
        x[32:64] = rng.standard_normal(32).astype(np.float32) * 1e-3
        for dt in ("q8_0", "q4_0"):
            got = attn.quantize(x, dt)
            self.assertEqual(got.nbytes, attn.storage_bytes(dt, x.size))
            self.assertTrue(np.array_equal(got, np_quantize(x, dt)), dt)
            self.assertTrue(np.array_equal(attn.dequantize(got, dt),
                                           np_dequantize(got, dt, x.size)), dt)
        for dt in ("f32", "f16", "bf16"):
            self.assertTrue(np.array_equal(attn.dequantize(attn.quantize(x, dt), dt),
                                           stored(x, dt)), dt)

    def test_rows_held(self):
        for dt in TYPES:
            for paged in (None, "managed"):
                with self.subTest(dtype=dt, paged=paged):
                    rng = np.random.default_rng(2)
                    c = make_cache(dt, paged)
                    ks, vs = fill(c, rng, STEPS)
                    self.assertEqual(c.lengths.tolist(), [13, 9])
                    K, V = c.to_float()
                    self.assertTrue(np.array_equal(K, padded([stored(r, dt) for r in ks], 13)))
                    self.assertTrue(np.array_equal(V, padded([stored(r, dt) for r in vs], 13)))

    def test_managed_blocks(self):
        c = attn.KVCache(2, 1, 32, 12, block_size=4)
        self.assertEqual(c.free_blocks, 6)
        c.append(np.ones((2, 1, 5, 32)), np.ones((2, 1, 5, 32)), [5, 1])
        self.assertEqual(c.block_table.tolist(), [[0, 1, -1], [2, -1, -1]])
        c.reset(0)
        self.assertEqual(c.lengths.tolist(), [0, 1])
        self.assertEqual(c.block_table.tolist(), [[-1, -1, -1], [2, -1, -1]])
        self.assertEqual(c.free_blocks, 5)


class TestDecode(unittest.TestCase):
    def test_every_type(self):
        for dt in TYPES:
            for paged in (None, "managed", "table"):
                for L, causal in ((1, False), (3, True)):
                    with self.subTest(dtype=dt, paged=paged, L=L, causal=causal):
                        rng = np.random.default_rng(3)
                        c = make_cache(dt, paged, rng=rng)
                        fill(c, rng, STEPS)
                        q = rng.standard_normal((2, 4, L, 64)).astype(np.float32)
                        o, lse = attn.decode(q, c, is_causal=causal, return_lse=True)
                        K, V = c.to_float()
                        lens = c.lengths
                        vis = np.stack([visible_window(L, K.shape[2], None,
                                                       0 if causal else None, True,
                                                       int(lens[b]))
                                        for b in range(2)])[:, None]
                        wo, _, wl = ref_sdpa(q, K, V, vis=vis)
                        ERR.check(self, "decode %s" % dt, o, wo, 2e-5)
                        ERR.check(self, "decode lse", lse, wl, 2e-5, 1e-6)

    def test_int8_scores(self):
        """int8_scores: against float64 on Q rounded by attn.h's rule
        (np_round_q), paged == contiguous bitwise; other K types refused."""
        for dt in ("q8_0", "q4_0"):
            outs = []
            for paged in (None, "managed"):
                with self.subTest(dtype=dt, paged=paged):
                    rng = np.random.default_rng(5)
                    c = make_cache(dt, paged, rng=np.random.default_rng(98))
                    fill(c, rng, STEPS)
                    q = rng.standard_normal((2, 4, 3, 64)).astype(np.float32)
                    o = attn.decode(q, c, is_causal=True, int8_scores=True)
                    K, V = c.to_float()
                    vis = np.stack([visible_window(3, K.shape[2], None, 0, True,
                                                   int(c.lengths[b])) for b in range(2)])[:, None]
                    wo, _, _ = ref_sdpa(np_round_q(q), K, V, vis=vis)
                    ERR.check(self, "int8 scores %s" % dt, o, wo, 2e-5)
                    plain, _, _ = ref_sdpa(q, K, V, vis=vis)
                    # the rounding of Q moves the output by more than fp32 does
                    self.assertGreater(np.max(np.abs(o - plain)), 2e-5)
                    outs.append(o)
            self.assertTrue(np.array_equal(outs[0], outs[1]))
        c = make_cache("f16", None)
        with self.assertRaises(ValueError):
            attn.decode(np.zeros((2, 4, 1, 64), np.float32), c, int8_scores=True)

    def test_paged_equals_contiguous(self):
        for dt in TYPES:
            with self.subTest(dtype=dt):
                outs = []
                for paged in (None, "managed", "table"):
                    rng = np.random.default_rng(4)
                    c = make_cache(dt, paged, rng=np.random.default_rng(99))
                    fill(c, rng, STEPS)
                    q = rng.standard_normal((2, 6, 2, 64)).astype(np.float32)
                    outs.append(attn.decode(q, c,
                                            is_causal=True))
                self.assertTrue(np.array_equal(outs[0], outs[1]))
                self.assertTrue(np.array_equal(outs[0], outs[2]))

    def test_append_then_decode(self):
        # Equal to attention over all the appended rows (f32 storage).
        rng = np.random.default_rng(5)
        c = make_cache("f32", "managed")
        ks, vs = fill(c, rng, STEPS)
        q = rng.standard_normal((2, 4, 2, 64)).astype(np.float32)
        o = attn.decode(q, c, is_causal=True)
        full = attn.scaled_dot_product_attention(
            q, padded(ks, 13), padded(vs, 13), is_causal=True, enable_gqa=True,
            align="bottom_right", kv_lens=c.lengths)
        ERR.check(self, "append-decode vs sdpa", o, full, 2e-6)
        # step by step: each new token's decode equals the causal row of the whole
        c2 = attn.KVCache(1, 2, 32, 16)
        k = rng.standard_normal((1, 2, 9, 32)).astype(np.float32)
        v = rng.standard_normal((1, 2, 9, 32)).astype(np.float32)
        qs = rng.standard_normal((1, 4, 9, 32)).astype(np.float32)
        whole = attn.scaled_dot_product_attention(qs, k, v, is_causal=True, enable_gqa=True)
        for t in range(9):
            c2.append(k[:, :, t:t + 1], v[:, :, t:t + 1])
            ot = attn.decode(qs[:, :, t:t + 1], c2, is_causal=True)
            ERR.check(self, "append-decode step", ot[:, :, 0], whole[:, :, t], 2e-6)

    def test_merge_halves(self):
        rng = np.random.default_rng(6)
        for dt in ("f32", "q8_0"):
            k = rng.standard_normal((2, 2, 14, 32)).astype(np.float32)
            v = rng.standard_normal((2, 2, 14, 32)).astype(np.float32)
            whole, a, b = (attn.KVCache(2, 2, 32, 16, dtype=dt) for _ in range(3))
            whole.append(k, v)
            a.append(k[:, :, :6], v[:, :, :6])
            b.append(k[:, :, 6:], v[:, :, 6:])
            q = rng.standard_normal((2, 4, 1, 32)).astype(np.float32)
            ow, lw = attn.decode(q, whole, return_lse=True)
            oa, la = attn.decode(q, a, return_lse=True)
            ob, lb = attn.decode(q, b, return_lse=True)
            om, lm = attn.merge_partials([oa, ob], [la, lb])
            ERR.check(self, "merge: O", om, ow, 2e-6)
            ERR.check(self, "merge: lse", lm, lw, 2e-6, 1e-6)
            om2, lm2 = attn.merge_partials(np.stack([oa, ob]), np.stack([la, lb]))
            self.assertTrue(np.array_equal(om, om2) and np.array_equal(lm, lm2))
        # a part with no visible key (lse -inf) contributes nothing; one part is itself
        o1, l1 = attn.merge_partials([oa, np.full_like(oa, np.nan)],
                                     [la, np.full_like(la, -np.inf)])
        self.assertTrue(np.array_equal(o1, oa) and np.array_equal(l1, la))


class TestErrors(unittest.TestCase):
    def assertStatus(self, status, fn, *a, **kw):
        with self.assertRaises(AttnError) as cm:
            fn(*a, **kw)
        self.assertEqual(cm.exception.status_name, status)
        self.assertIn(status, str(cm.exception))

    def test_construction(self):
        with self.assertRaises(ValueError):
            attn.KVCache(1, 1, 32, 8, dtype="q5_0")
        for dt in ("q8_0", "q4_0"):
            self.assertStatus("ATTN_ERR_BAD_SIZE", attn.KVCache, 1, 1, 48, 8, dtype=dt)
            self.assertStatus("ATTN_ERR_BAD_SIZE", attn.KVCache, 1, 1, 32, 8, v_dim=40,
                              v_dtype=dt)
        with self.assertRaises(ValueError):
            attn.KVCache(1, 1, 32, 8, num_blocks=4)
        # max_len past what the table's blocks hold
        self.assertStatus("ATTN_ERR_BAD_SIZE", attn.KVCache, 1, 1, 32, 12, block_size=4,
                          num_blocks=2, block_table=np.zeros((1, 2), np.int32))
        with self.assertRaises(ValueError):
            attn.KVCache(1, 1, 32, 8, block_size=-4)

    def test_overflow(self):
        for paged in ({}, {"block_size": 4}):
            c = attn.KVCache(2, 1, 32, 8, **paged)
            x = np.ones((2, 1, 5, 32), np.float32)
            c.append(x, x)
            free = c.free_blocks
            self.assertStatus("ATTN_ERR_BAD_LENGTH", c.append, x, x)
            self.assertEqual(c.lengths.tolist(), [5, 5])
            self.assertEqual(c.free_blocks, free)
            self.assertStatus("ATTN_ERR_BAD_LENGTH", c.append, x, x, [6, 0])
        # a pool too small for the tokens: nothing taken
        c = attn.KVCache(2, 1, 32, 8, block_size=4, num_blocks=3)
        self.assertStatus("ATTN_ERR_BAD_BLOCK_TABLE", c.append, x, x)
        self.assertEqual((c.free_blocks, c.lengths.tolist()), (3, [0, 0]))

    def test_bad_block_table(self):
        table = np.array([[0, 5]], np.int32)        # 5 is outside a pool of 4
        c = attn.KVCache(1, 1, 32, block_size=4, num_blocks=4, block_table=table)
        x = np.ones((1, 1, 4, 32), np.float32)
        c.append(x, x)                              # block 0: fine
        self.assertStatus("ATTN_ERR_BAD_BLOCK_TABLE", c.append, x, x)
        self.assertEqual(c.lengths.tolist(), [4])
        table[0, 0] = -1                            # now the held tokens' block is bad
        self.assertStatus("ATTN_ERR_BAD_BLOCK_TABLE", attn.decode,
                          np.ones((1, 1, 1, 32), np.float32), c)

    def test_decode_errors(self):
        c = attn.KVCache(1, 2, 32, 8)
        c.append(np.ones((1, 2, 3, 32)), np.ones((1, 2, 3, 32)))
        self.assertStatus("ATTN_ERR_HEAD_RATIO", attn.decode,
                          np.ones((1, 3, 1, 32), np.float32), c)
        self.assertStatus("ATTN_ERR_BAD_LENGTH", attn.decode,
                          np.ones((1, 2, 1, 32), np.float32), c, kv_lens=[9])
        with self.assertRaises(ValueError):
            attn.decode(np.ones((1, 2, 1, 16), np.float32), c)
        with self.assertRaises(ValueError):
            attn.merge_partials([np.ones((2, 4))], [np.ones(3)])
        self.assertStatus("ATTN_ERR_BAD_SIZE", attn.dequantize, np.zeros(34, np.uint8),
                          "q8_0", (16,))


@unittest.skipIf(torch is None, "torch not importable: attn's torch layer not tested")
class TestTorch(unittest.TestCase):
    def test_torch(self):
        from attn import _torch_decode as td
        rng = np.random.default_rng(8)
        k = rng.standard_normal((2, 2, 7, 32)).astype(np.float32)
        v = rng.standard_normal((2, 2, 7, 32)).astype(np.float32)
        q = rng.standard_normal((2, 4, 1, 32)).astype(np.float32)
        ref = attn.KVCache(2, 2, 32, 8, dtype="q4_0", block_size=4)
        ref.append(k, v, [7, 5])
        tc = td.KVCache(2, 2, 32, 8, dtype="q4_0", block_size=4)
        tc.append(torch.from_numpy(k), torch.from_numpy(v), torch.tensor([7, 5]))
        self.assertTrue(torch.equal(tc.lengths, torch.tensor([7, 5], dtype=torch.int32)))
        o, lse = td.decode(torch.from_numpy(q), tc, return_lse=True)
        wo, wl = attn.decode(q, ref, return_lse=True)
        self.assertTrue(np.array_equal(o.numpy(), wo) and np.array_equal(lse.numpy(), wl))
        K, V = tc.to_float()
        self.assertTrue(np.array_equal(K.numpy(), ref.to_float()[0]))
        self.assertEqual(tc.k_storage.dtype, torch.uint8)
        om, lm = td.merge_partials([o, o], [lse, lse])
        ERR.check(self, "torch merge", om.numpy(), wo, 1e-6)
        ERR.check(self, "torch merge lse", lm.numpy(), wl + np.log(2.0), 1e-6, 1e-6)
        bc = td.KVCache(1, 1, 32, 4, dtype="bf16")
        self.assertEqual(bc.k_storage.dtype, torch.bfloat16)


if __name__ == "__main__":
    print("attn %s from %s" % (attn.library_version(), attn.library_path))
    if torch is None:
        print("torch not importable: the torch layer's tests are SKIPPED")
    prog = unittest.main(exit=False, verbosity=2)
    ERR.report("decode")
    sys.exit(0 if prog.result.wasSuccessful() else 1)
