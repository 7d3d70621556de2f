// compare-ort.mjs: ONNX Runtime's CPU GroupQueryAttention (com.microsoft,
// opset 1) on attn-bench's decode shapes, as a peer for the decode table.
//
//   S5  B 1, Hq 32, Hkv 8, 1 query, 4096 keys, d 128, F32
//   D3  the same with 4 queries (bottom-right causal: GQA's "subsequent
//       prompt", which ORT allows for batch 1)
//
// Run (onnxruntime-node installed with npm somewhere, no other package):
//
//   mkdir -p /work/ort && (cd /work/ort && npm install onnxruntime-node --ignore-scripts)
//   NODE_PATH=/work/ort/node_modules node benchmarks/compare-ort.mjs \
//       [--case S5 --case D3] [--threads 1 --threads 2] [--runs 10] [--kv-mib M] [--json]
//
// The model is built in memory: a ModelProto with one GroupQueryAttention
// node, encoded here by hand (no onnx package).  GQA takes the new tokens'
// K and V ([B][S][Hkv*d]) and the cache (past_key / past_value,
// [B][Hkv][S_past][d]); the attention is over the cache plus the new tokens,
// i.e. the same 4096 keys attn-bench's S5 and D3 read.  Two ways:
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
// ORT_DEBUG_TIMES=1 prints every call's time to stderr.

import { createRequire } from 'node:module';
import { execSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
let ort;
try {
    ort = require('onnxruntime-node');
} catch (e) {
    console.error('compare-ort: cannot load onnxruntime-node (set NODE_PATH to its node_modules): ' +
                  e.message);
    process.exit(1);
}

// ---- arguments ------------------------------------------------------------
const args = process.argv.slice(2);
const opt = { cases: [], threads: [], runs: 10, kvMib: 0, json: false };
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--case') opt.cases.push(args[++i]);
    else if (a === '--threads') opt.threads.push(parseInt(args[++i], 10));
    else if (a === '--runs') opt.runs = parseInt(args[++i], 10);
    else if (a === '--kv-mib') opt.kvMib = parseInt(args[++i], 10);
    else if (a === '--json') opt.json = true;
    else {
        console.error('usage: compare-ort.mjs [--case S5|D3 ...] [--threads N ...] [--runs R] ' +
                      '[--kv-mib M] [--json]');
        process.exit(2);
    }
}
if (!opt.cases.length) opt.cases = ['S5', 'D3'];
if (!opt.threads.length) opt.threads = [1, 2];

const CASES = {
    S5: { B: 1, Hq: 32, Hkv: 8, n: 1, m: 4096, d: 128 },
    D3: { B: 1, Hq: 32, Hkv: 8, n: 4, m: 4096, d: 128 },
};
for (const c of opt.cases)
    if (!CASES[c]) {
        console.error(`compare-ort: unknown case ${c} (S5, D3)`);
        process.exit(2);
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
    // GraphProto{node 1, name 2, input 11, output 12}
    const graph = [
        ...fBytes(1, node),
        ...fStr(2, 'decode'),
        ...inputs.flatMap((v) => fBytes(11, v)),
        ...outputs.flatMap((v) => fBytes(12, v)),
    ];
    // ModelProto{ir_version 1, producer_name 2, graph 7, opset_import 8};
    // OperatorSetIdProto{domain 1, version 2}
    const model = [
        ...fInt(1, 8),
        ...fStr(2, 'attn compare-ort'),
        ...fBytes(7, graph),
        ...fBytes(8, fInt(2, 17)),
        ...fBytes(8, [...fStr(1, 'com.microsoft'), ...fInt(2, 1)]),
    ];
    return Uint8Array.from(model);
}

// ---- data -----------------------------------------------------------------
let rng = 0x9E3779B9 | 0;
function frand() {   // xorshift32, uniform in [-1, 1)
    rng ^= rng << 13;
    rng ^= rng >>> 17;
    rng ^= rng << 5;
    return (rng >>> 8) / 8388608 - 1;
}
function randArray(count) {
    const a = new Float32Array(count);
    for (let i = 0; i < count; i++) a[i] = frand();
    return a;
}

// float64 attention of query heads `heads`, all query rows, against the
// logical K, V [Hkv][m][d]; q is [n][Hq][d] (BSNH), o likewise.
function maxErr(c, q, K, V, o, heads) {
    const { Hq, Hkv, n, m, d } = c, g = Hq / Hkv;
    let err = 0;
    const s = new Float64Array(m), acc = new Float64Array(d);
    for (const h of heads) {
        const hk = Math.floor(h / g);
        for (let i = 0; i < n; i++) {
            const lim = m - n + i + 1;   // bottom-right causal (all m for n = 1)
            const qo = (i * Hq + h) * d;
            let mx = -Infinity;
            for (let j = 0; j < lim; j++) {
                let dot = 0;
                const ko = (hk * m + j) * d;
                for (let t = 0; t < d; t++) dot += q[qo + t] * K[ko + t];
                s[j] = dot / Math.sqrt(d);
                if (s[j] > mx) mx = s[j];
            }
            acc.fill(0);
            let den = 0;
            for (let j = 0; j < lim; j++) {
                const w = Math.exp(s[j] - mx);
                den += w;
                const vo = (hk * m + j) * d;
                for (let t = 0; t < d; t++) acc[t] += w * V[vo + t];
            }
            for (let t = 0; t < d; t++) err = Math.max(err, Math.abs(o[qo + t] - acc[t] / den));
        }
    }
    return err;
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
    const session = await ort.InferenceSession.create(gqaModel(c, past), {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
        logSeverityLevel: 3,   // errors only (its shape inference warns about present's length)
        enableProfiling: true,
        profileFilePrefix: join(profDir, 'prof'),
    });

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
    // the model_run events of the timed calls (the last `calls` ones)
    let runs = [];
    try {
        for (const f of readdirSync(profDir)) {
            const ev = JSON.parse(readFileSync(join(profDir, f), 'utf8'));
            runs = runs.concat(ev.filter((e) => e.cat === 'Session' && e.name === 'model_run')
                                 .map((e) => e.dur / 1000));
        }
    } catch { runs = []; }
    rmSync(profDir, { recursive: true, force: true });
    runs = runs.slice(-calls);
    const ms = median(times), inner = runs.length === calls ? median(runs) : null;
    return { case: id, threads, impl: mode, ms_median: ms, ms_min: Math.min(...times),
             ms_max: Math.max(...times), ort_run_ms_median: inner,
             ort_run_ms_min: inner === null ? null : Math.min(...runs),
             kv_bytes: kvBytes, gbs: kvBytes / (ms * 1e6),
             gbs_ort_run: inner === null ? null : kvBytes / (inner * 1e6),
             copies: R, max_err: err, ort_version: ort.env.versions?.common ?? '' };
}

if (!opt.json)
    console.log(`onnxruntime-node ${ort.env.versions?.common ?? '?'} (CPU), GroupQueryAttention ` +
                `com.microsoft opset 1; L3 ${(l3 / MiB).toFixed(1)} MiB; K/V copies >= ` +
                `${(kvTarget / MiB).toFixed(0)} MiB per case; ${10 * opt.runs} timed calls`);
if (!opt.json)
    console.log('case thr impl          ms(med)   ms(min)   ms(max)    GB/s  run ms(med)  run GB/s ' +
                'copies   max_err');
for (const t of opt.threads)
    for (const id of opt.cases)
        for (const mode of ['ort-shared', 'ort-copy']) {
            let r;
            try {
                r = await runCase(id, t, mode);
            } catch (e) {
                const msg = String(e.message || e).split('\n')[0];
                if (opt.json)
                    console.log(JSON.stringify({ case: id, threads: t, impl: mode, ok: false,
                                                 error: msg }));
                else
                    console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${mode.padEnd(11)} ` +
                                `FAILED: ${msg}`);
                continue;
            }
            if (opt.json) console.log(JSON.stringify({ ...r, ok: true }));
            else
                console.log(`${id.padEnd(4)} ${String(t).padStart(3)} ${mode.padEnd(11)} ` +
                            `${r.ms_median.toFixed(3).padStart(9)} ${r.ms_min.toFixed(3).padStart(9)} ` +
                            `${r.ms_max.toFixed(3).padStart(9)} ${r.gbs.toFixed(1).padStart(7)} ` +
                            `${(r.ort_run_ms_median === null ? '-' : r.ort_run_ms_median.toFixed(3)).padStart(12)} ` +
                            `${(r.gbs_ort_run === null ? '-' : r.gbs_ort_run.toFixed(1)).padStart(9)} ` +
                            `${String(r.copies).padStart(6)} ${r.max_err.toExponential(2).padStart(9)}`);
        }
