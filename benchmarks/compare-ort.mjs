// compare-ort.mjs: ONNX Runtime's CPU attention contrib ops (com.microsoft,
// opset 1) on attn-bench's shapes, as a peer for its tables:
// GroupQueryAttention on the decode cases, MultiHeadAttention on the dense
// ones.  The cases and their shapes are attn-bench's table, read from
// `attn-bench --list --json` (--bench PATH, default
// build/benchmarks/attn-bench; --attn-bench PATH, when given, is used for
// it too): the cases whose "ort" field is "gqa" (S5, D3: one query, and 4
// with bottom-right causality, GQA's "subsequent prompt", which ORT allows
// for batch 1; F32) or "mha" (S1-S4, S7-S9, H = Hq = Hkv, F32; causal S2,
// S3: query i sees keys j <= i; S9: per-batch key lengths, keys j >= len[b]
// hidden).  --dry-run prints them and their shapes without ORT.
//
// Run (onnxruntime-node installed with npm somewhere, no other package):
//
//   mkdir -p /work/ort && (cd /work/ort && npm install onnxruntime-node --ignore-scripts)
//   NODE_PATH=/work/ort/node_modules node benchmarks/compare-ort.mjs \
//       [--case S5 --case D3 | --case S1 ... | --case dense] [--threads 1 --threads 2]
//       [--runs 10] [--kv-mib M] [--kv-layout bsnh --kv-layout bnsh] [--json]
//       [--bench PATH] [--attn-bench PATH] [--dry-run]
//
// With no --case it runs S5 and D3; --case dense names S1-S4, S7-S9 (S3
// alone takes about 10 s at --runs 1: its inputs, the float64 check and
// ORT's 4096 x 4096 score matrices).  --threads sets ORT's intra-op
// threads (inter-op 1, sequential execution); --kv-mib applies to the
// decode cases only, --kv-layout to the dense ones.  --json prints one
// object a line, one per (case, threads, impl).
//
// The models are built in memory: a ModelProto with one node, encoded here
// by hand (no onnx package).
//
// Decode.  GroupQueryAttention takes the new tokens' K and V
// ([B][S][Hkv*d]) and the cache (past_key / past_value, [B][Hkv][S_past][d]);
// the attention is over the cache plus the new tokens, i.e. the same 4096
// keys attn-bench's S5 and D3 read.  Two ways:
//
//   ort-shared  past and present are the same [1][8][4096][128] buffer (the
//               output is pre-allocated on the input's memory, as ORT's
//               past_present_share_buffer mode wants): ORT writes the new
//               rows in place and reads the cache once
//   ort-copy    past is [1][8][4096 - n][128] and ORT allocates present,
//               copying the past into it on every call (what a plain run does)
//
// As in attn-bench, K/V come from memory: R copies of the cache (R x 32 MiB
// >= --kv-mib, default 4 x L3 from getconf, at least 256 MiB), a different
// copy each call, after a warm-up pass over all copies.  ms is the median
// of 10 x --runs calls of session.run, await included ("ms"), and of
// ORT's own time for the same calls ("run ms", the model_run events of
// ORT's profiler: the node binding's overhead left out, which on this VM
// was about 90 ms on many calls (not investigated: perhaps page faults of
// fresh buffers; onnxruntime-node runs session.run synchronously in a
// setImmediate).  "run ms" is the figure to compare with attn-bench.
// GB/s counts the same K/V bytes as attn-bench (4096 x 8 x 256 x 4
// bytes).  max_err: the output of the last call against a float64
// computation in JS on a few heads.
//
// Dense.  MultiHeadAttention with query [B][n][H*d] (BSNH), key and value
// [B][m][H*d] (--kv-layout bsnh, the default) or [B][H][m][d] (bnsh, the
// op's cross-attention form: attn-bench's own K/V layout), attributes
// num_heads, scale 1/sqrt(d), unidirectional 1 for S2 and S3 (with no past
// ORT's causal mask is top-left, ours), mask_filter_value; S9's lengths
// are the 1-D int32 key_padding_mask [B] (ORT: keys j >= len[b] masked).
// Which ORT code runs (as its CPU kernel's source, multihead_attention.cc,
// reads): bsnh without mask or causality goes to MLAS's flash attention
// (S1, S4, S7, S8; ORT_DISABLE_FLASH_ATTENTION=1 turns it off, which
// changes max_err a little); causal, padded and every bnsh case to the
// unfused path, which computes and masks the whole [n][m] score matrix:
// so S2, S3 and S9 pay for the hidden keys too.
// Each case's inputs are made once from a fixed seed and reused (as
// attn-bench does for its dense cases); 2 warm-up calls, then --runs
// timed calls; ms and "run ms" as for decode ("run ms" the figure to
// compare: the wall ms of the bsnh form was several ms above it even on
// S7's 2 ms calls, outside ORT's model_run).  GF/s counts 4*B*H*n*m*d and,
// "useful", only the keys each query sees (attn-bench's two counts; they
// differ on S2, S3, S9).  max_err: the last call's output against a
// float64 computation in JS on rows (b, h, i) of the first, middle and
// last batch, head and query, with our causal and length semantics.
//
// Paired with attn (--attn-bench PATH, the attn-bench program): right after
// each dense (case, threads), attn-bench runs the same case at the same
// thread count in its own process (--runs as given, its BLAS-engine row
// and its machine limits included), and the table gets an "attn" row and
// the ratio ORT run ms / attn ms.  ORT and attn then run seconds apart,
// not minutes: this VM's speed changes for seconds at a time, which a
// ratio of two separate whole runs would take in.
//
// ORT_DEBUG_TIMES=1 prints every call's time to stderr.

import { createRequire } from 'node:module';
import { execFileSync, execSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);

// ---- arguments ------------------------------------------------------------
const USAGE = 'usage: compare-ort.mjs [--case S5|D3|S1|...|S9|dense ...] [--threads N ...] ' +
              '[--runs R] [--kv-mib M] [--kv-layout bsnh|bnsh ...] [--json] ' +
              '[--bench PATH] [--attn-bench PATH] [--dry-run]';
const args = process.argv.slice(2);
const opt = { cases: [], threads: [], runs: 10, kvMib: 0, layouts: [], json: false, attnBench: null,
              bench: null, dryRun: false };
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--case') opt.cases.push(args[++i]);
    else if (a === '--threads') opt.threads.push(parseInt(args[++i], 10));
    else if (a === '--runs') opt.runs = parseInt(args[++i], 10);
    else if (a === '--kv-mib') opt.kvMib = parseInt(args[++i], 10);
    else if (a === '--kv-layout') opt.layouts.push(args[++i]);
    else if (a === '--json') opt.json = true;
    else if (a === '--attn-bench') opt.attnBench = args[++i];
    else if (a === '--bench') opt.bench = args[++i];
    else if (a === '--dry-run') opt.dryRun = true;
    else if (a === '--help' || a === '-h') {
        console.log(USAGE + '\n  --bench PATH: attn-bench, for its case table (--list --json; ' +
                    'default build/benchmarks/attn-bench, or --attn-bench\'s PATH)\n' +
                    '  --attn-bench PATH: also run attn-bench on each dense case, paired\n' +
                    '  --dry-run: print the cases and their shapes, run nothing (no ORT needed)');
        process.exit(0);
    } else {
        console.error(USAGE);
        process.exit(2);
    }
}
if (!opt.threads.length) opt.threads = [1, 2];
if (!opt.layouts.length) opt.layouts = ['bsnh'];

// attn-bench's table (benchmarks/cases.c): the cases ORT has an op for,
// GroupQueryAttention ("gqa") or MultiHeadAttention ("mha": Hq = Hkv)
function readTable(bench) {
    try {
        const text = execFileSync(bench, ['--list', '--json'], { encoding: 'utf8' });
        return JSON.parse(text);
    } catch (e) {
        console.error(`compare-ort: cannot read the case table from ${bench} --list --json ` +
                      `(${String(e.message || e).split('\n')[0]}): build it (meson compile -C ` +
                      'build) or name it with --bench');
        process.exit(1);
    }
}
const CASES = {};
for (const c of readTable(opt.bench ?? opt.attnBench ?? join('build', 'benchmarks', 'attn-bench')))
    if (c.ort === 'gqa' || c.ort === 'mha')
        CASES[c.id] = { B: c.B, Hq: c.Hq, Hkv: c.Hkv, n: c.n, m: c.m, d: c.d, dense: c.ort === 'mha',
                        causal: c.causal, padded: c.padded, kvLens: c.kv_lens };
const DENSE = Object.keys(CASES).filter((id) => CASES[id].dense);
opt.cases = opt.cases.flatMap((c) => (c === 'dense' ? DENSE : [c]));
if (!opt.cases.length) opt.cases = ['S5', 'D3'];
opt.cases = [...new Set(opt.cases)];
for (const c of opt.cases)
    if (!CASES[c]) {
        console.error(`compare-ort: unknown case ${c} (${Object.keys(CASES).join(', ')}, dense)`);
        process.exit(2);
    }
for (const l of opt.layouts)
    if (l !== 'bsnh' && l !== 'bnsh') {
        console.error(`compare-ort: unknown --kv-layout ${l} (bsnh, bnsh)`);
        process.exit(2);
    }
if (opt.dryRun) {
    for (const id of opt.cases) {
        const c = CASES[id];
        console.log(`${id.padEnd(4)} ${c.dense ? 'MultiHeadAttention ' : 'GroupQueryAttention'} B ${c.B}, ` +
                    `Hq ${c.Hq}, Hkv ${c.Hkv}, n ${c.n}, m ${c.m}, d ${c.d}` +
                    (c.causal ? ', causal' : '') + (c.padded ? `, kv lengths ${c.kvLens.join(' ')}` : ''));
    }
    process.exit(0);
}
let ort;
try {
    ort = require('onnxruntime-node');
} catch (e) {
    console.error('compare-ort: cannot load onnxruntime-node (set NODE_PATH to its node_modules): ' +
                  e.message);
    process.exit(1);
}

function l3Bytes() {
    try {
        const v = parseInt(execSync('getconf LEVEL3_CACHE_SIZE', { encoding: 'utf8' }), 10);
        return v > 0 ? v : 0;
    } catch {
        return 0;
    }
}
const MiB = 1 << 20;
const l3 = l3Bytes();
const kvTarget = opt.kvMib > 0 ? opt.kvMib * MiB : Math.max(4 * l3, 256 * MiB);

// ---- protobuf, by hand ----------------------------------------------------
function varint(x) {
    let v = BigInt(x);
    if (v < 0n) v += 1n << 64n;
    const out = [];
    while (v >= 0x80n) {
        out.push(Number(v & 0x7fn) | 0x80);
        v >>= 7n;
    }
    out.push(Number(v));
    return out;
}
const tag = (field, wire) => varint((field << 3) | wire);
const fInt = (field, x) => [...tag(field, 0), ...varint(x)];
const fBytes = (field, bytes) => [...tag(field, 2), ...varint(bytes.length), ...bytes];
const fStr = (field, s) => fBytes(field, [...Buffer.from(s, 'utf8')]);
function fFloat(field, x) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(x);
    return [...tag(field, 5), ...b];
}

const ELEM_FLOAT = 1, ELEM_INT32 = 6;
const ATTR_FLOAT = 1, ATTR_INT = 2;

// ValueInfoProto{name 1, type 2}; TypeProto{tensor_type 1};
// TypeProto.Tensor{elem_type 1, shape 2}; TensorShapeProto{dim 1};
// Dimension{dim_value 1, dim_param 2}: a number is a fixed size, a string a
// symbolic one.  dims [] is a scalar (a present, empty shape).
function valueInfo(name, elem, dims) {
    const shape = dims.flatMap((d) => fBytes(1, typeof d === 'string' ? fStr(2, d) : fInt(1, d)));
    const tensor = [...fInt(1, elem), ...fBytes(2, shape)];
    return [...fStr(1, name), ...fBytes(2, fBytes(1, tensor))];
}

// AttributeProto{name 1, f 2, i 3, type 20}
const attrInt = (name, i) => [...fStr(1, name), ...fInt(3, i), ...fInt(20, ATTR_INT)];
const attrFloat = (name, f) => [...fStr(1, name), ...fFloat(2, f), ...fInt(20, ATTR_FLOAT)];

function gqaModel(c, past) {
    const { B, Hq, Hkv, n, m, d } = c;
    const inputs = [
        valueInfo('query', ELEM_FLOAT, [B, n, Hq * d]),
        valueInfo('key', ELEM_FLOAT, [B, n, Hkv * d]),
        valueInfo('value', ELEM_FLOAT, [B, n, Hkv * d]),
        valueInfo('past_key', ELEM_FLOAT, [B, Hkv, past, d]),
        valueInfo('past_value', ELEM_FLOAT, [B, Hkv, past, d]),
        valueInfo('seqlens_k', ELEM_INT32, [B]),
        valueInfo('total_sequence_length', ELEM_INT32, []),
    ];
    const outputs = [
        valueInfo('output', ELEM_FLOAT, [B, n, Hq * d]),
        // symbolic: ORT's shape inference cannot see total_sequence_length
        valueInfo('present_key', ELEM_FLOAT, [B, Hkv, 'present_len', d]),
        valueInfo('present_value', ELEM_FLOAT, [B, Hkv, 'present_len', d]),
    ];
    // NodeProto{input 1, output 2, name 3, op_type 4, attribute 5, domain 7}
    const node = [
        ...['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k',
            'total_sequence_length'].flatMap((s) => fStr(1, s)),
        ...['output', 'present_key', 'present_value'].flatMap((s) => fStr(2, s)),
        ...fStr(3, 'gqa'),
        ...fStr(4, 'GroupQueryAttention'),
        ...fBytes(5, attrInt('num_heads', Hq)),
        ...fBytes(5, attrInt('kv_num_heads', Hkv)),
        ...fBytes(5, attrFloat('scale', 1 / Math.sqrt(d))),
        ...fStr(7, 'com.microsoft'),
    ];
    return modelProto(node, inputs, outputs, 'decode');
}

// GraphProto{node 1, name 2, input 11, output 12}; ModelProto{ir_version 1,
// producer_name 2, graph 7, opset_import 8}; OperatorSetIdProto{domain 1,
// version 2}.  One node, the default opset 17 and com.microsoft 1.
function modelProto(node, inputs, outputs, name) {
    const graph = [
        ...fBytes(1, node),
        ...fStr(2, name),
        ...inputs.flatMap((v) => fBytes(11, v)),
        ...outputs.flatMap((v) => fBytes(12, v)),
    ];
    const model = [
        ...fInt(1, 8),
        ...fStr(2, 'attn compare-ort'),
        ...fBytes(7, graph),
        ...fBytes(8, fInt(2, 17)),
        ...fBytes(8, [...fStr(1, 'com.microsoft'), ...fInt(2, 1)]),
    ];
    return Uint8Array.from(model);
}

// MultiHeadAttention (com.microsoft 1) for a dense case: query [B][n][H*d]
// (BSNH); key and value [B][m][H*d] (layout 'bsnh') or [B][H][m][d]
// ('bnsh', the op's cross-attention form); S9's lengths as the 1-D int32
// key_padding_mask [B] (keys j >= len[b] get mask_filter_value added).  The
// empty name skips the optional input before it (bias).
function mhaModel(c, layout) {
    const { B, Hq: H, n, m, d } = c;
    const kvDims = layout === 'bnsh' ? [B, H, m, d] : [B, m, H * d];
    const inputs = [
        valueInfo('query', ELEM_FLOAT, [B, n, H * d]),
        valueInfo('key', ELEM_FLOAT, kvDims),
        valueInfo('value', ELEM_FLOAT, kvDims),
    ];
    const names = ['query', 'key', 'value'];
    if (c.padded) {
        inputs.push(valueInfo('key_padding_mask', ELEM_INT32, [B]));
        names.push('', 'key_padding_mask');
    }
    const outputs = [valueInfo('output', ELEM_FLOAT, [B, n, H * d])];
    const node = [
        ...names.flatMap((s) => fStr(1, s)),
        ...fStr(2, 'output'),
        ...fStr(3, 'mha'),
        ...fStr(4, 'MultiHeadAttention'),
        ...fBytes(5, attrInt('num_heads', H)),
        ...fBytes(5, attrFloat('scale', 1 / Math.sqrt(d))),
        // top-left causal: with no past, ORT's unidirectional mask hides
        // keys j > i of query i (the lowest float, not mask_filter_value)
        ...(c.causal ? fBytes(5, attrInt('unidirectional', 1)) : []),
        // added to the scores of padded keys; the lowest float makes their
        // weight exactly 0 whatever the scores (the default is -10000)
        ...fBytes(5, attrFloat('mask_filter_value', -3.4028234663852886e38)),
        ...fStr(7, 'com.microsoft'),
    ];
    return modelProto(node, inputs, outputs, 'dense');
}

// ---- data -----------------------------------------------------------------
function xorshift(seed) {   // xorshift32, uniform in [-1, 1)
    let rng = seed | 0;
    return () => {
        rng ^= rng << 13;
        rng ^= rng >>> 17;
        rng ^= rng << 5;
        return (rng >>> 8) / 8388608 - 1;
    };
}
const frand = xorshift(0x9E3779B9);   // the decode cases' stream
function randArray(count, gen = frand) {
    const a = new Float32Array(count);
    for (let i = 0; i < count; i++) a[i] = gen();
    return a;
}

// The largest |o - softmax(q K^T / sqrt(d)) V| over one row, in float64:
// q at q[qo], o at o[qo], keys j < lim at K[kv + j d] and V[kv + j d]; s
// (m) and acc (d) are scratch.
function rowErr(q, o, qo, K, V, kv, lim, d, s, acc) {
    let mx = -Infinity;
    for (let j = 0; j < lim; j++) {
        let dot = 0;
        for (let t = 0; t < d; t++) dot += q[qo + t] * K[kv + j * d + t];
        s[j] = dot / Math.sqrt(d);
        if (s[j] > mx) mx = s[j];
    }
    acc.fill(0);
    let den = 0;
    for (let j = 0; j < lim; j++) {
        const w = Math.exp(s[j] - mx);
        den += w;
        for (let t = 0; t < d; t++) acc[t] += w * V[kv + j * d + t];
    }
    let err = 0;
    for (let t = 0; t < d; t++) err = Math.max(err, Math.abs(o[qo + t] - acc[t] / den));
    return err;
}

// float64 attention of query heads `heads`, all query rows, against the
// logical K, V [Hkv][m][d]; q is [n][Hq][d] (BSNH), o likewise.
function maxErr(c, q, K, V, o, heads) {
    const { Hq, Hkv, n, m, d } = c, g = Hq / Hkv;
    let err = 0;
    const s = new Float64Array(m), acc = new Float64Array(d);
    for (const h of heads) {
        const kv = Math.floor(h / g) * m * d;
        for (let i = 0; i < n; i++) {
            const lim = m - n + i + 1;   // bottom-right causal (all m for n = 1)
            err = Math.max(err, rowErr(q, o, (i * Hq + h) * d, K, V, kv, lim, d, s, acc));
        }
    }
    return err;
}

// The model_run events (ms) of the last `calls` calls in ORT's profile,
// written to profDir by endProfiling; profDir is removed.
function modelRunMs(profDir, calls) {
    let runs = [];
    try {
        for (const f of readdirSync(profDir)) {
            const ev = JSON.parse(readFileSync(join(profDir, f), 'utf8'));
            runs = runs.concat(ev.filter((e) => e.cat === 'Session' && e.name === 'model_run')
                                 .map((e) => e.dur / 1000));
        }
    } catch { runs = []; }
    rmSync(profDir, { recursive: true, force: true });
    return runs.slice(-calls);
}

// A session as the decode and the dense runs both want it: `threads`
// intra-op threads, one inter-op, sequential, ORT's profiler on.
function createSession(model, threads, profDir) {
    return ort.InferenceSession.create(model, {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
        logSeverityLevel: 3,   // errors only (its shape inference warns about present's length)
        enableProfiling: true,
        profileFilePrefix: join(profDir, 'prof'),
    });
}

function median(t) {
    const s = [...t].sort((a, b) => a - b), k = s.length;
    return k % 2 ? s[(k - 1) / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}

async function runCase(id, threads, mode) {
    const c = CASES[id], { B, Hq, Hkv, n, m, d } = c;
    const past = mode === 'ort-shared' ? m : m - n;
    const kvBytes = B * m * Hkv * 2 * d * 4;
    const R = Math.max(2, Math.ceil(kvTarget / kvBytes));
    // ORT's own profile gives each run's time inside ORT (model_run): the
    // await around session.run measured here adds the node binding's
    // overhead, which on this machine was about 90 ms on some calls
    const profDir = mkdtempSync(join(tmpdir(), 'compare-ort-'));
    const session = await createSession(gqaModel(c, past), threads, profDir);

    // the logical cache [Hkv][m][d]; the new tokens are its last n rows
    const K = randArray(Hkv * m * d), V = randArray(Hkv * m * d);
    const q = randArray(n * Hq * d);
    const knew = new Float32Array(n * Hkv * d), vnew = new Float32Array(n * Hkv * d);
    for (let t = 0; t < n; t++)
        for (let h = 0; h < Hkv; h++)
            for (let x = 0; x < d; x++) {
                knew[(t * Hkv + h) * d + x] = K[(h * m + m - n + t) * d + x];
                vnew[(t * Hkv + h) * d + x] = V[(h * m + m - n + t) * d + x];
            }
    const pastOf = (src) => {
        if (past === m) return Float32Array.from(src);
        const a = new Float32Array(Hkv * past * d);
        for (let h = 0; h < Hkv; h++)
            a.set(src.subarray(h * m * d, (h * m + past) * d), h * past * d);
        return a;
    };
    const copies = [];
    const pk0 = pastOf(K), pv0 = pastOf(V);
    for (let r = 0; r < R; r++) {
        const pk = r ? Float32Array.from(pk0) : pk0, pv = r ? Float32Array.from(pv0) : pv0;
        copies.push({
            pk: new ort.Tensor('float32', pk, [B, Hkv, past, d]),
            pv: new ort.Tensor('float32', pv, [B, Hkv, past, d]),
        });
    }
    const feedsBase = {
        query: new ort.Tensor('float32', q, [B, n, Hq * d]),
        key: new ort.Tensor('float32', knew, [B, n, Hkv * d]),
        value: new ort.Tensor('float32', vnew, [B, n, Hkv * d]),
        seqlens_k: new ort.Tensor('int32', Int32Array.from([m - 1]), [B]),
        total_sequence_length: new ort.Tensor('int32', Int32Array.from([m]), []),
    };
    const out = new ort.Tensor('float32', new Float32Array(B * n * Hq * d), [B, n, Hq * d]);

    const calls = 10 * opt.runs, times = [];
    let last = null;
    // warm-up: one pass over every copy (as attn-bench: the first read of a
    // copy after it was written is slower), then the timed calls
    for (let call = -Math.max(2, R), r = 0; call < calls; call++, r = (r + 1) % R) {
        const feeds = { ...feedsBase, past_key: copies[r].pk, past_value: copies[r].pv };
        const fetches = mode === 'ort-shared'
            ? { output: out, present_key: copies[r].pk, present_value: copies[r].pv }
            : ['output', 'present_key', 'present_value'];
        const t0 = process.hrtime.bigint();
        last = await session.run(feeds, fetches);
        const t1 = process.hrtime.bigint();
        if (call >= 0) times.push(Number(t1 - t0) / 1e6);
        if (process.env.ORT_DEBUG_TIMES) console.error(mode, call, Number(t1 - t0) / 1e6);
    }
    const o = last.output.data;
    const err = maxErr(c, q, K, V, o, [0, 11, 21, 31]);
    session.endProfiling?.();
    await session.release?.();
    const runs = modelRunMs(profDir, calls);
    const ms = median(times), inner = runs.length === calls ? median(runs) : null;
    return { case: id, threads, impl: mode, ms_median: ms, ms_min: Math.min(...times),
             ms_max: Math.max(...times), ort_run_ms_median: inner,
             ort_run_ms_min: inner === null ? null : Math.min(...runs),
             kv_bytes: kvBytes, gbs: kvBytes / (ms * 1e6),
             gbs_ort_run: inner === null ? null : kvBytes / (inner * 1e6),
             copies: R, max_err: err, ort_version: ort.env.versions?.common ?? '' };
}

// ---- dense cases (MultiHeadAttention) ---------------------------------------
// attn-bench's key lengths (the table's kv_lens): S9's 512, 448, ..., 64;
// every other case all m keys
const kvLen = (c, b) => (c.padded ? c.kvLens[b] : c.m);
// keys query i of batch b sees: j < len[b], and j <= i when causal (top-left)
const visible = (c, b, i) => Math.min(kvLen(c, b), c.causal ? i + 1 : c.m);

// FLOPs as attn-bench counts them: 4*B*H*n*m*d, and the useful count that
// leaves out the keys causality or padding hides
function denseFlops(c) {
    const { B, Hq, n, m, d } = c;
    let vis = 0;
    for (let b = 0; b < B; b++)
        for (let i = 0; i < n; i++) vis += visible(c, b, i);
    return { full: 4 * B * Hq * n * m * d, useful: 4 * Hq * d * vis };
}

// Each dense case's inputs, made once (from a seed of its own, so they do
// not depend on which cases run) and reused across thread counts and
// calls, as attn-bench does: q [B][n][H][d] (BSNH, the op's query); K, V
// in the logical [B][H][m][d] (attn-bench's BHSD), packed to BSNH for the
// 'bsnh' layout.
const denseData = new Map();
function denseInputs(id) {
    if (denseData.has(id)) return denseData.get(id);
    const c = CASES[id], { B, Hq: H, n, m, d } = c;
    const gen = xorshift(0x2545F491 ^ (id.charCodeAt(1) * 0x01000193));
    const q = randArray(B * n * H * d, gen);
    const K = randArray(B * H * m * d, gen), V = randArray(B * H * m * d, gen);
    const toBSNH = (src) => {
        const a = new Float32Array(src.length);
        for (let b = 0; b < B; b++)
            for (let h = 0; h < H; h++)
                for (let j = 0; j < m; j++)
                    a.set(src.subarray(((b * H + h) * m + j) * d, ((b * H + h) * m + j + 1) * d),
                          ((b * m + j) * H + h) * d);
        return a;
    };
    const lens = Int32Array.from({ length: B }, (_, b) => kvLen(c, b));
    const x = { q, K, V, Kbsnh: toBSNH(K), Vbsnh: toBSNH(V), lens };
    denseData.set(id, x);
    return x;
}

// float64 attention of rows (b, h, i) against the logical K, V; q and o are
// BSNH.  The rows: first, middle and last batch, head and query, which
// covers causal's short and long rows and S9's longest and shortest keys.
function maxErrDense(c, x, o) {
    const { B, Hq: H, n, m, d } = c;
    const pick = (k) => [...new Set([0, Math.floor(k / 2), k - 1])];
    const s = new Float64Array(m), acc = new Float64Array(d);
    let err = 0;
    for (const b of pick(B))
        for (const h of pick(H))
            for (const i of pick(n)) {
                const qo = ((b * n + i) * H + h) * d, kv = (b * H + h) * m * d;
                err = Math.max(err, rowErr(x.q, o, qo, x.K, x.V, kv, visible(c, b, i), d, s,
                                           acc));
            }
    return err;
}

// One dense case: 2 warm-up calls, then --runs timed calls (as attn-bench's
// dense cases), the output written into a tensor allocated once.
async function runDense(id, threads, layout) {
    const c = CASES[id], { B, Hq: H, n, m, d } = c;
    const x = denseInputs(id);
    const profDir = mkdtempSync(join(tmpdir(), 'compare-ort-'));
    const session = await createSession(mhaModel(c, layout), threads, profDir);
    const kvDims = layout === 'bnsh' ? [B, H, m, d] : [B, m, H * d];
    const feeds = {
        query: new ort.Tensor('float32', x.q, [B, n, H * d]),
        key: new ort.Tensor('float32', layout === 'bnsh' ? x.K : x.Kbsnh, kvDims),
        value: new ort.Tensor('float32', layout === 'bnsh' ? x.V : x.Vbsnh, kvDims),
    };
    if (c.padded) feeds.key_padding_mask = new ort.Tensor('int32', x.lens, [B]);
    const out = new ort.Tensor('float32', new Float32Array(B * n * H * d), [B, n, H * d]);

    const calls = opt.runs, times = [];
    for (let call = -2; call < calls; call++) {
        out.data.fill(NaN);   // a row ORT left unwritten shows as an error
        const t0 = process.hrtime.bigint();
        await session.run(feeds, { output: out });
        const t1 = process.hrtime.bigint();
        if (call >= 0) times.push(Number(t1 - t0) / 1e6);
        if (process.env.ORT_DEBUG_TIMES) console.error(id, layout, call, Number(t1 - t0) / 1e6);
    }
    const err = maxErrDense(c, x, out.data);
    session.endProfiling?.();
    await session.release?.();
    const runs = modelRunMs(profDir, calls);
    const ms = median(times), inner = runs.length === calls ? median(runs) : null;
    const f = denseFlops(c);
    const gf = (fl, t) => (t === null ? null : fl / (t * 1e6));
    return { case: id, threads, impl: `ort-mha-${layout}`, kv_layout: layout,
             causal: !!c.causal, padded: !!c.padded,
             ms_median: ms, ms_min: Math.min(...times), ms_max: Math.max(...times),
             ort_run_ms_median: inner, ort_run_ms_min: inner === null ? null : Math.min(...runs),
             flops: f.full, flops_useful: f.useful,
             gflops: gf(f.full, ms), gflops_useful: gf(f.useful, ms),
             gflops_ort_run: gf(f.full, inner), gflops_useful_ort_run: gf(f.useful, inner),
             calls, max_err: err, ort_version: ort.env.versions?.common ?? '' };
}

// attn-bench on one dense case and thread count: its default engine's row
// (impl "attn") as JSON, with the run's FMA peak.
function runAttn(id, threads) {
    const outText = execFileSync(opt.attnBench,
                                 ['--case', id, '--threads', String(threads), '--runs',
                                  String(opt.runs), '--no-naive', '--bw-mib', '64', '--json'],
                                 { encoding: 'utf8', maxBuffer: 1 << 24 });
    const rows = outText.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const r = rows.find((x) => x.case === id && x.impl === 'attn' && x.threads === threads);
    if (!r) throw new Error(`attn-bench printed no attn row for ${id} at ${threads} threads`);
    return r;
}

const fix = (v, k, w) => (v === null ? '-' : v.toFixed(k)).padStart(w);

// One case's failure: ORT's first error line, in the table or as JSON
function reportFailure(id, t, impl, e) {
    const msg = String(e.message || e).split('\n')[0];
    if (opt.json)
        console.log(JSON.stringify({ case: id, threads: t, impl, ok: false, error: msg }));
    else
        console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${impl.padEnd(12)} FAILED: ${msg}`);
}

const decodeIds = opt.cases.filter((id) => !CASES[id].dense);
const denseIds = opt.cases.filter((id) => CASES[id].dense);
const version = ort.env.versions?.common ?? '?';

if (decodeIds.length && !opt.json) {
    console.log(`onnxruntime-node ${version} (CPU), GroupQueryAttention ` +
                `com.microsoft opset 1; L3 ${(l3 / MiB).toFixed(1)} MiB; K/V copies >= ` +
                `${(kvTarget / MiB).toFixed(0)} MiB per case; ${10 * opt.runs} timed calls`);
    console.log('case thr impl           ms(med)   ms(min)   ms(max)    GB/s  run ms(med)  run GB/s ' +
                'copies   max_err');
}
for (const t of opt.threads)
    for (const id of decodeIds)
        for (const mode of ['ort-shared', 'ort-copy']) {
            let r;
            try {
                r = await runCase(id, t, mode);
            } catch (e) {
                reportFailure(id, t, mode, e);
                continue;
            }
            if (opt.json) console.log(JSON.stringify({ ...r, ok: true }));
            else
                console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${mode.padEnd(12)} ` +
                            `${fix(r.ms_median, 3, 9)} ${fix(r.ms_min, 3, 9)} ${fix(r.ms_max, 3, 9)} ` +
                            `${fix(r.gbs, 1, 7)} ${fix(r.ort_run_ms_median, 3, 12)} ` +
                            `${fix(r.gbs_ort_run, 1, 9)} ${String(r.copies).padStart(6)} ` +
                            `${r.max_err.toExponential(2).padStart(9)}`);
        }

if (denseIds.length && !opt.json) {
    if (decodeIds.length) console.log('');
    console.log(`onnxruntime-node ${version} (CPU), MultiHeadAttention com.microsoft opset 1; ` +
                `${opt.runs} timed calls after 2 warm-up; GF/s on 4*B*H*n*m*d, ` +
                `useful: without the keys causality or padding hides` +
                (opt.attnBench ? `; attn rows: ${opt.attnBench} on the same case right after, ` +
                                 `ORT/attn = ORT's run ms / attn's ms` : ''));
    console.log('case thr impl           ms(med)   ms(min)   ms(max)    GF/s  run ms(med)  run GF/s ' +
                'run GF/s useful   max_err');
}
for (const t of opt.threads)
    for (const id of denseIds)
        for (const layout of opt.layouts) {
            let r;
            try {
                r = await runDense(id, t, layout);
            } catch (e) {
                reportFailure(id, t, `ort-mha-${layout}`, e);
                continue;
            }
            if (opt.json) console.log(JSON.stringify({ ...r, ok: true }));
            else
                console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${r.impl.padEnd(12)} ` +
                            `${fix(r.ms_median, 3, 9)} ${fix(r.ms_min, 3, 9)} ${fix(r.ms_max, 3, 9)} ` +
                            `${fix(r.gflops, 1, 7)} ${fix(r.ort_run_ms_median, 3, 12)} ` +
                            `${fix(r.gflops_ort_run, 1, 9)} ${fix(r.gflops_useful_ort_run, 1, 15)} ` +
                            `${r.max_err.toExponential(2).padStart(9)}`);
            if (!opt.attnBench || layout !== opt.layouts[0]) continue;
            let at;
            try {
                at = runAttn(id, t);
            } catch (e) {
                reportFailure(id, t, 'attn', e);
                continue;
            }
            const ratio = r.ort_run_ms_median === null ? null : r.ort_run_ms_median / at.ms_median;
            if (opt.json)
                console.log(JSON.stringify({ ...at, paired_with: r.impl, ort_run_ms_median:
                                             r.ort_run_ms_median, ort_over_attn: ratio, ok: true }));
            else
                console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${'attn'.padEnd(12)} ` +
                            `${fix(at.ms_median, 3, 9)} ${fix(at.ms_min, 3, 9)} ` +
                            `${fix(at.ms_max, 3, 9)} ${fix(at.gflops, 1, 7)} ${''.padStart(12)} ` +
                            `${''.padStart(9)} ${fix(at.gflops_useful, 1, 15)} ` +
                            `${(at.max_err ?? NaN).toExponential(2).padStart(9)}   ` +
                            `ORT/attn ${fix(ratio, 2, 5)}x, attn at ` +
                            `${(100 * at.frac_peak_local).toFixed(0)}% of the FMA peak sampled ` +
                            `during its runs`);
        }
