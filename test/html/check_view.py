#!/usr/bin/python3
"""Browser test of attn-demo --html (the interactive attention view).

usage: check_view.py ATTN_DEMO CHROMIUM [TINYGPT TEXT | --no-model]

For a few sentences (the default one, and one full of quotes, "</script>",
"&" and non-ASCII UTF-8), the test
1. writes the page and, with --json, its data block, and checks the block
   embedded in the page is that JSON, is safe inside <script>, and that the
   page names no network URL;
2. recomputes every weight independently in float64: tokens, features (the
   lexicon words' table, the hashed features of any other word, the position
   code) and the visibility of every pattern are derived here from the
   sentence and the options, only the projections W_q, W_k are read from the
   data; the embedded weights (attn's) must match within 1e-5;
3. loads the page in headless Chromium with fragments #token=N&head=H&
   pattern=P&scale=S for every head and pattern, dumps the DOM the script
   built and checks the drawn state (selected token, head, toggles, scale),
   every beam (one per visible key, its data-weight exactly the embedded
   weight, its stroke-width and stroke-opacity proportional to the weight's
   level on the colour scale) and every matrix cell (weight and colour);
4. drives the page through Chromium's DevTools protocol (over a pipe) to
   click tokens, head buttons and toggles and hover tokens;
5. checks that the page fetched nothing: Chromium's net log holds no request
   the page started (a control page that does fetch proves the check sees
   such requests), and the final DOM has no src/href other than "#...";
6. checks the page as Chromium renders it, on sentences of 1, 4, 6, 10 and
   40 tokens (computed()): the computed fill of every label (ink; the grey
   #aab for keys the query cannot see), of every cell (the colour scale's,
   recomputed here), of every number on a cell (white or black, contrast
   >= 4.5:1 against the cell), the legend's ramp and ticks, that no label's
   box leaves its SVG, the selected row's table, "1 token", and the
   untrained-model note;
7. checks the errors: too many tokens, invalid UTF-8, a global token past
   the end, no token;
8. with TINYGPT and TEXT, a trained model's page (model()): trains a tiny
   checkpoint (tinygpt --steps 20 on TEXT), writes the --model page of a
   sentence with 1- to 4-byte characters, a tab and HTML specials, checks
   the data (the checkpoint's sizes and parameter count, the model note,
   the byte labels, one causal pattern, rows summing to 1) and recomputes
   every layer's and head's weights with a float64 forward pass of the
   model written here from the checkpoint format (within 2e-5); then
   clicks through every layer and head in Chromium, checking the selectors,
   the head's name, the hidden pattern toggles, every matrix cell (the
   selected head's weight, hidden grey above the diagonal) and the beams,
   the labels and the fragment; and the --model errors (missing, foreign,
   corrupt and truncated checkpoints, too long, empty or invalid
   sentences, --window).  With --no-model (a build without cblas.h):
   that --model says it is not available.
Standard library only.  Exit status 0 = pass, 1 = failure.
"""
import html.parser
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

BEAM_MAX = 14.0          # the page's stroke width of a scaled weight of 1
SCALES = ("row", "log", "linear")
DEFAULT_SCALE = "row"
BEAM_RGB = (31, 95, 191)  # the colour of a scaled weight of 1 (white at 0)
HIDDEN_CELL = (230, 230, 230)   # docs/VIEW.md: #e6e6e6
HIDDEN_INK = (170, 170, 187)    # docs/VIEW.md: #aab, a hidden key's label
INK = (29, 36, 51)              # --ink, #1d2433
MAX_TOKENS = 64
DMODEL, NHEAD, DHEAD = 12, 2, 6
TOL = 1e-5               # attn (fp32) against the float64 recompute
FLAGS = ("causal", "window", "global")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


# ----------------------------------------------------------- the model

# The hand-made features of the demo's words (det noun verb prep -at anim
# place word), as in the terminal demo's table.
LEXICON = {
    "the": [1, 0, 0, 0, 0, 0, 0, 1],
    "cat": [0, 1, 0, 0, 1, 1, 0, 1],
    "sat": [0, 0, 1, 0, 1, 0, 0, 1],
    "on":  [0, 0, 0, 1, 0, 0, 0, 1],
    "mat": [0, 1, 0, 0, 1, 0, 1, 1],
}
M64 = (1 << 64) - 1


def tokenize(sentence):
    """Words: runs of ASCII letters/digits and non-ASCII characters; every
    other printable ASCII character alone; the rest separates."""
    return re.findall(r"[A-Za-z0-9\u0080-\U0010FFFF]+|[!-~]", sentence)


def hashed_features(word):
    h = 0xcbf29ce484222325
    for c in word.encode("utf-8"):
        if 65 <= c <= 90:
            c += 32
        h = ((h ^ c) * 0x100000001b3) & M64
    f = []
    for _ in range(7):
        h = (h + 0x9e3779b97f4a7c15) & M64
        z = h
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
        z ^= z >> 31
        f.append((z >> 40) / float(1 << 24))
    c0 = word[0]
    f.append(1.0 if (ord(c0) >= 0x80 or c0.isascii() and c0.isalnum()) else 0.0)
    return f


def embed(tokens):
    x = []
    for i, t in enumerate(tokens):
        low = t.lower() if t.isascii() else None
        feats = list(LEXICON[low]) if low in LEXICON else hashed_features(t)
        for w in (math.pi / 3, math.pi / 6):
            feats += [math.sin(i * w), math.cos(i * w)]
        x.append(feats)
    return x


def visible(flags, n, window, glob):
    vis = []
    for i in range(n):
        row = []
        for j in range(n):
            v = True
            if flags["window"]:
                v = i - window <= j <= i + window
            if flags["causal"]:
                v = v and j <= i
            if flags["global"] and (j in glob or i in glob):
                v = True
            row.append(v)
        vis.append(row)
    return vis


def recompute(x, wq, wk, flags, window, glob):
    """float64 softmax(Q K^T / sqrt(dh)) over the visible keys, [head][i][j]."""
    n = len(x)
    mm = lambda a, w: [[sum(a[i][k] * w[k][j] for k in range(DMODEL)) for j in range(DMODEL)]
                       for i in range(len(a))]
    q, k = mm(x, wq), mm(x, wk)
    vis = visible(flags, n, window, glob)
    scale = 1.0 / math.sqrt(DHEAD)
    out = []
    for h in range(NHEAD):
        c = slice(h * DHEAD, (h + 1) * DHEAD)
        rows = []
        for i in range(n):
            s = [scale * sum(a * b for a, b in zip(q[i][c], k[j][c])) if vis[i][j] else None
                 for j in range(n)]
            mx = max(v for v in s if v is not None)
            e = [math.exp(v - mx) if v is not None else 0.0 for v in s]
            tot = sum(e)
            rows.append([v / tot for v in e])
        out.append(rows)
    return out, vis


def level(scale, w, row_max):
    """The page's colour level of weight w in [0, 1] (docs/VIEW.md)."""
    clamp = lambda t: min(1.0, max(0.0, t))
    if scale == "row":
        return clamp(w / row_max) if row_max > 0 else 0.0
    if scale == "log":
        return clamp((math.log10(w) + 3.0) / 3.0) if w > 0 else 0.0
    return clamp(w)


def heat(t):
    """White to BEAM_RGB by t, per channel (the page rounds half up)."""
    return tuple(255 + (c - 255) * t for c in BEAM_RGB)


def rel_luminance(c):
    lin = [v / 255.0 for v in c]
    lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in lin]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a, b):
    la, lb = sorted((rel_luminance(a), rel_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def parse_rgb(s):
    """A colour "rgb(r, g, b)", "rgba(r, g, b, a)" (computed styles) or
    "#rrggbb" / "#rgb" (attributes) as (r, g, b, a)."""
    h = re.fullmatch(r"#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})", s.strip())
    if h:
        x = h.group(1)
        if len(x) == 3:
            x = "".join(c + c for c in x)
        return (int(x[0:2], 16), int(x[2:4], 16), int(x[4:6], 16), 1.0)
    m = re.fullmatch(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)", s.strip())
    if not m:
        return None
    return (float(m.group(1)), float(m.group(2)), float(m.group(3)),
            float(m.group(4)) if m.group(4) is not None else 1.0)


def pattern_name(flags):
    on = [f for f in FLAGS if flags[f]]
    return "+".join(on) if on else "dense"


ALL_FLAGS = [{"causal": bool(p & 1), "window": bool(p & 2), "global": bool(p & 4)}
             for p in range(8)]


# ---------------------------------------------------------- the page

class Dom(html.parser.HTMLParser):
    """The elements of a dumped DOM as (tag, attrs, text) plus titles."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elems = []
        self.stack = []

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elems.append(e)
        if tag not in ("meta", "link", "br", "img", "input", "line", "rect", "path", "circle"):
            self.stack.append(e)

    def handle_startendtag(self, tag, attrs):
        self.elems.append({"tag": tag, "attrs": dict(attrs), "text": ""})

    def handle_endtag(self, tag):
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k]["tag"] == tag:
                del self.stack[k:]
                break

    def handle_data(self, data):
        for e in self.stack:
            e["text"] += data

    def find(self, pred):
        return [e for e in self.elems if pred(e)]


def parse_dom(text):
    d = Dom()
    d.feed(text)
    d.close()
    return d


def has_class(e, c):
    return c in e["attrs"].get("class", "").split()


def extract_data_block(page):
    m = re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', page, re.S)
    return m.group(1) if m else None


# ------------------------------------------------------------ chromium

class Browser:
    def __init__(self, exe, tmp):
        self.exe, self.tmp, self.runs = exe, tmp, 0

    def flags(self):
        self.runs += 1
        prof = os.path.join(self.tmp, "profile%d" % self.runs)
        return [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--user-data-dir=" + prof, "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--disable-extensions"]

    def dump(self, url, netlog=None):
        cmd = self.flags()
        if netlog:
            cmd.append("--log-net-log=" + netlog)
        cmd += ["--dump-dom", url]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if r.returncode != 0 or b"<html" not in r.stdout:
            raise RuntimeError("chromium failed on %s (%d): %s" %
                               (url, r.returncode, r.stderr.decode(errors="replace")[-2000:]))
        return r.stdout.decode("utf-8")


def page_requests(netlog):
    """URLs of the requests the page started (Chromium's own background
    traffic has the initiator "not an origin" and no file:// isolation
    key; file:// loads are not in the net log, see no_resources())."""
    with open(netlog) as f:
        d = json.load(f)
    types = {v: k for k, v in d["constants"]["logEventTypes"].items()}
    urls = []
    for e in d["events"]:
        p = e.get("params") or {}
        if types.get(e["type"]) != "URL_REQUEST_START_JOB" or "url" not in p:
            continue
        if p.get("initiator") != "not an origin" or "file://" in p.get("network_isolation_key", ""):
            urls.append(p["url"])
    return urls


def no_resources(dom):
    """No element of the final DOM points anywhere but inside the page."""
    bad = []
    for e in dom.elems:
        for a in ("src", "href", "xlink:href", "srcset", "action", "data", "poster",
                  "background", "formaction"):
            v = e["attrs"].get(a)
            if v is not None and not v.startswith("#"):
                bad.append((e["tag"], a, v))
        if "url(" in e["attrs"].get("style", ""):
            bad.append((e["tag"], "style", e["attrs"]["style"]))
    return bad


# ------------------------------------------------------- DevTools pipe

class Cdp:
    """Chromium's DevTools protocol over --remote-debugging-pipe (fd 3
    to the browser, fd 4 from it, messages ending in NUL)."""

    def __init__(self, browser, url):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        # The child sees to_r as fd 3 and from_w as fd 4 (copies first, so
        # that neither dup2 overwrites the other's source; 3 and 4 are kept
        # open through the close_fds that follows preexec_fn).
        def setup():
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(browser.flags() + ["--remote-debugging-pipe", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     pass_fds=(3, 4), preexec_fn=setup)
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = os.fdopen(to_w, "wb", buffering=0), os.fdopen(from_r, "rb", buffering=0)
        self.buf, self.next_id = b"", 0
        targets = self.call("Target.getTargets")["targetInfos"]
        page = [t for t in targets if t["type"] == "page"][0]
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def _read(self):
        while b"\0" not in self.buf:
            chunk = self.r.read(65536)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]

    def wait_event(self, name):
        while True:
            if self._read().get("method") == name:
                return

    def js(self, expr):
        r = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------- checks

def check_data(tag, data, sentence, window, glob):
    """The embedded data against the float64 recompute; returns the
    reference weights {pattern name: [head][i][j]}."""
    tokens = tokenize(sentence)
    check(data["tokens"] == tokens, "%s: tokens %r, expected %r" % (tag, data["tokens"], tokens))
    check(data["sentence"] == sentence, "%s: sentence round trip" % tag)
    check("Untrained" in data.get("model_note", ""), "%s: model_note %r" % (tag, data.get("model_note")))
    check(data["heads"] == NHEAD and data["d_model"] == DMODEL, "%s: shapes" % tag)
    check(data["window"] == window and data["global"] == glob, "%s: options" % tag)
    x = embed(tokens)
    err = max(abs(a - b) for ra, rb in zip(x, data["x"]) for a, b in zip(ra, rb))
    check(len(data["x"]) == len(x) and err < 1e-6, "%s: features differ by %g" % (tag, err))
    refs = {}
    check(len(data["patterns"]) == 8, "%s: 8 patterns" % tag)
    for flags in ALL_FLAGS:
        name = pattern_name(flags)
        ps = [p for p in data["patterns"] if p["name"] == name]
        if not check(len(ps) == 1, "%s: pattern %s present once" % (tag, name)):
            continue
        p = ps[0]
        check(all(p[f] == flags[f] for f in FLAGS), "%s/%s: flags" % (tag, name))
        ref, vis = recompute(x, data["wq"], data["wk"], flags, window, glob)
        refs[name] = ref
        check([[bool(v) for v in r] for r in p["visible"]] == vis, "%s/%s: visible" % (tag, name))
        worst = 0.0
        for h in range(NHEAD):
            for i in range(len(tokens)):
                for j in range(len(tokens)):
                    got = p["weights"][h][i][j]
                    if not vis[i][j]:
                        check(got == 0.0, "%s/%s: hidden (%d,%d,%d) is %r" % (tag, name, h, i, j, got))
                    worst = max(worst, abs(got - ref[h][i][j]))
        check(worst < TOL, "%s/%s: attn's weights differ from float64 by %g" % (tag, name, worst))
    return refs


def check_drawn(tag, dom, data, refs, token, head, name, scale=DEFAULT_SCALE):
    """The DOM the script built shows (token, head, pattern, scale) exactly."""
    n = len(data["tokens"])
    p = [q for q in data["patterns"] if q["name"] == name][0]
    w, ref = p["weights"][head], refs[name][head]
    view = dom.find(lambda e: e["attrs"].get("id") == "view")
    if not check(len(view) == 1, "%s: one #view" % tag):
        return
    a = view[0]["attrs"]
    got = (a.get("data-token"), a.get("data-head"), a.get("data-pattern"), a.get("data-scale"))
    check(got == (str(token), str(head), name, scale),
          "%s: state %r, expected %r" % (tag, got, (token, head, name, scale)))
    row_max = max(w[token][j] for j in range(n) if p["visible"][token][j])
    for b in dom.find(lambda e: e["tag"] == "button" and "data-flag" in e["attrs"]):
        f = b["attrs"]["data-flag"]
        want = "true" if f in name.split("+") else "false"
        check(b["attrs"].get("aria-pressed") == want, "%s: toggle %s pressed=%s" %
              (tag, f, b["attrs"].get("aria-pressed")))
    for b in dom.find(lambda e: e["tag"] == "button" and "data-head" in e["attrs"]):
        want = "true" if b["attrs"]["data-head"] == str(head) else "false"
        check(b["attrs"].get("aria-pressed") == want, "%s: head button %s" % (tag, b["attrs"]["data-head"]))
    beams = dom.find(lambda e: e["tag"] == "line" and has_class(e, "beam"))
    keys = sorted(int(b["attrs"]["data-key"]) for b in beams)
    check(keys == [j for j in range(n) if p["visible"][token][j]],
          "%s: beams to keys %r" % (tag, keys))
    for b in beams:
        at = b["attrs"]
        j = int(at["data-key"])
        wt = float(at["data-weight"])
        check(int(at["data-query"]) == token, "%s: beam from %s" % (tag, at["data-query"]))
        check(f32(wt) == f32(w[token][j]), "%s: beam %d weight %r, embedded %r" %
              (tag, j, wt, w[token][j]))
        check(abs(wt - ref[token][j]) < TOL, "%s: beam %d weight %r, float64 %r" %
              (tag, j, wt, ref[token][j]))
        t = level(scale, w[token][j], row_max)
        check(math.isclose(float(at["stroke-width"]), BEAM_MAX * t, rel_tol=1e-6, abs_tol=1e-9),
              "%s: beam %d stroke-width %s for weight %r (%s scale)" % (tag, j, at["stroke-width"], wt, scale))
        check(math.isclose(float(at["stroke-opacity"]), t, rel_tol=1e-6, abs_tol=1e-9),
              "%s: beam %d stroke-opacity %s for weight %r (%s scale)" % (tag, j, at["stroke-opacity"], wt, scale))
    cells = dom.find(lambda e: e["tag"] == "rect" and has_class(e, "cell"))
    check(len(cells) == n * n, "%s: %d matrix cells" % (tag, len(cells)))
    for c in cells:
        at = c["attrs"]
        i, j = int(at["data-query"]), int(at["data-key"])
        check(f32(float(at["data-weight"])) == f32(w[i][j]),
              "%s: cell (%d,%d) weight %s, embedded %r" % (tag, i, j, at["data-weight"], w[i][j]))
        if p["visible"][i][j]:
            m = max(w[i][k] for k in range(n) if p["visible"][i][k])
            want = heat(level(scale, w[i][j], m))
        else:
            want = HIDDEN_CELL
        got = parse_rgb(at["fill"])
        check(got and all(abs(g - e) <= 0.5 + 1e-9 for g, e in zip(got, want)),
              "%s: cell (%d,%d) fill %s, expected %r (%s scale)" % (tag, i, j, at["fill"], want, scale))
    qtoks = dom.find(lambda e: e["tag"] == "g" and has_class(e, "qtok"))
    check(len(qtoks) == n, "%s: %d query tokens" % (tag, len(qtoks)))
    for g in qtoks:
        i = int(g["attrs"]["data-index"])
        t = data["tokens"][i]
        if len(t.encode("utf-16-le")) // 2 <= 16:
            check(g["text"].startswith(t), "%s: token %d drawn as %r" % (tag, i, g["text"]))
        check(has_class(g, "sel") == (i == token), "%s: token %d selection" % (tag, i))


def main():
    if len(sys.argv) not in (3, 4, 5) or len(sys.argv) == 4 and sys.argv[3] != "--no-model":
        sys.exit(__doc__)
    demo, exe = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="attn-view-")
    br = Browser(exe, tmp)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    try:
        run(demo, br, tmp)
        if len(sys.argv) == 5:
            model(br, demo, sys.argv[3], sys.argv[4], tmp, env)
        elif len(sys.argv) == 4:
            no_model(demo, env)
        else:
            print("no TINYGPT TEXT arguments: the trained model's page is not checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def run(demo, br, tmp):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    cases = [
        ("default", None, [], 1, [0]),
        ("tricky", 'He said "</script><!-- & \'x\'" \u2014 caf\u00e9,\tna\u00efve \u65e5\u672c '
                   '\U0001F600 <b>bold</b>!\\n', ["--window", "2", "--global", "0,3"], 2, [0, 3]),
    ]
    for tag, sentence, extra, window, glob in cases:
        html_path = os.path.join(tmp, tag + ".html")
        json_path = os.path.join(tmp, tag + ".json")
        cmd = [demo, "--html", html_path, "--json", json_path, "--threads", "1"] + extra
        if sentence is not None:
            cmd += ["--sentence", sentence]
        r = subprocess.run(cmd, env=env, stderr=subprocess.PIPE)
        if not check(r.returncode == 0, "%s: attn-demo failed: %s" % (tag, r.stderr.decode())):
            continue
        sentence = sentence or "The cat sat on the mat"
        page = open(html_path, encoding="utf-8").read()
        block = extract_data_block(page)
        if not check(block is not None, "%s: data block in the page" % tag):
            continue
        data = json.loads(block)
        check(data == json.load(open(json_path, encoding="utf-8")), "%s: --json equals the block" % tag)
        check("</" not in block and "<!--" not in block, "%s: block safe in <script>" % tag)
        check(not re.search(r"https?://", page), "%s: the page names a network URL" % tag)
        check("Content-Security-Policy" in page and "default-src 'none'" in page, "%s: CSP" % tag)
        refs = check_data(tag, data, sentence, window, glob)
        if len(refs) != 8:
            continue
        n = len(data["tokens"])
        url = "file://" + html_path

        # Every pattern, heads alternating (the computed-style checks below
        # take both heads of each scale), a different token each time; the
        # first load also logs the network.
        for k, flags in enumerate(ALL_FLAGS):
            name = pattern_name(flags)
            for head in [k % NHEAD]:
                token = (3 * k + head) % n
                scale = SCALES[(k + head) % len(SCALES)]
                frag = "#token=%d&head=%d&pattern=%s" % (token, head, name)
                if scale != DEFAULT_SCALE or k % 2:
                    frag += "&scale=" + scale
                netlog = os.path.join(tmp, "net-%s-%d-%d.json" % (tag, k, head))
                dom = parse_dom(br.dump(url + frag, netlog))
                t = "%s %s" % (tag, frag)
                check_drawn(t, dom, data, refs, token, head, name, scale)
                reqs = page_requests(netlog)
                check(not reqs, "%s: the page fetched %r" % (t, reqs))
                check(not no_resources(dom), "%s: resources %r" % (t, no_resources(dom)))
                csp = dom.find(lambda e: e["tag"] == "meta" and
                               e["attrs"].get("http-equiv") == "Content-Security-Policy")
                check(len(csp) == 1 and csp[0]["attrs"]["content"].startswith("default-src 'none'"),
                      "%s: CSP meta" % t)
                titles = dom.find(lambda e: e["tag"] == "title")
                check(titles and titles[0]["text"] == "attn attention view: " + sentence,
                      "%s: <title> %r" % (t, titles[0]["text"] if titles else None))
                qs = dom.find(lambda e: e["attrs"].get("id") == "sentence")
                check(qs and qs[0]["text"] == sentence, "%s: heading sentence" % t)

        # Aliases and defaults in the fragment.
        for frag, token, head, name, scale in (
                ("", 0, 0, "dense", DEFAULT_SCALE),
                ("#pattern=sparse&token=1&scale=LOG", 1, 0, "window+global", "log"),
                ("#pattern=causal,window&head=1", 0, 1, "causal+window", DEFAULT_SCALE),
                ("#token=999&head=7&pattern=bogus&scale=cubic", 0, 0, "dense", DEFAULT_SCALE)):
            dom = parse_dom(br.dump(url + frag))
            check_drawn("%s %s" % (tag, frag or "(no fragment)"), dom, data, refs, token, head, name,
                        scale)

        if tag == "default":
            interact(br, url, data, refs)

    computed(br, demo, tmp, env)
    control(br, tmp)
    errors(demo, env)


def interact(br, url, data, refs):
    """Clicks, hovers and toggles through the DevTools protocol."""
    cdp = Cdp(br, url + "#token=0")
    n = len(data["tokens"])
    try:
        def state():
            return cdp.js('(function(){var v=document.getElementById("view");'
                          'return [v.dataset.token, v.dataset.head, v.dataset.pattern, v.dataset.scale,'
                          'location.hash,'
                          'Array.from(document.querySelectorAll("line.beam")).map(function(b){'
                          'return [+b.dataset.key, +b.dataset.weight, +b.getAttribute("stroke-width")];})];})()')

        def expect(tag, token, head, name, hash_too=True, scale=DEFAULT_SCALE):
            tok, hd, pat, sc, hsh, beams = state()
            check((tok, hd, pat, sc) == (str(token), str(head), name, scale),
                  "click %s: state %r, expected %r" % (tag, (tok, hd, pat, sc), (token, head, name, scale)))
            if hash_too:
                check(hsh == "#token=%d&head=%d&pattern=%s&scale=%s" % (token, head, name, scale),
                      "click %s: fragment %r" % (tag, hsh))
            p = [q for q in data["patterns"] if q["name"] == name][0]
            want = [j for j in range(n) if p["visible"][token][j]]
            check([b[0] for b in beams] == want, "click %s: beams %r" % (tag, beams))
            row = p["weights"][head][token]
            m = max(row[j] for j in want)
            for j, wt, sw in beams:
                check(f32(wt) == f32(row[j]) and
                      math.isclose(sw, BEAM_MAX * level(scale, row[j], m), rel_tol=1e-6, abs_tol=1e-9),
                      "click %s: beam %d (%r, %r)" % (tag, j, wt, sw))

        def click(sel):
            cdp.js('document.querySelector(%s).dispatchEvent(new MouseEvent("click", {bubbles: true}))'
                   % json.dumps(sel))

        def mouse(sel, kind):
            cdp.js('document.querySelector(%s).dispatchEvent(new MouseEvent(%s))'
                   % (json.dumps(sel), json.dumps(kind)))

        expect("load", 0, 0, "dense", hash_too=False)
        click('g.qtok[data-index="4"]')
        expect("token 4", 4, 0, "dense")
        click('#heads button[data-head="1"]')
        expect("head 1", 4, 1, "dense")
        click("#t-causal")
        expect("causal", 4, 1, "causal")
        click("#t-window")
        expect("causal+window", 4, 1, "causal+window")
        click("#t-causal")
        click("#t-global")
        expect("window+global", 4, 1, "window+global")
        mouse('g.qtok[data-index="2"]', "mouseenter")
        expect("hover 2", 2, 1, "window+global", hash_too=False)
        mouse('g.qtok[data-index="2"]', "mouseleave")
        expect("leave 2", 4, 1, "window+global")
        click('rect.cell[data-query="1"][data-key="3"]')
        expect("matrix row 1", 1, 1, "window+global")
        click("#s-log")
        expect("log scale", 1, 1, "window+global", scale="log")
        click("#s-linear")
        expect("linear scale", 1, 1, "window+global", scale="linear")
        cdp.js('location.hash = "#token=5&head=0&pattern=causal"')
        cdp.js('new Promise(function(r){setTimeout(r, 50);})')
        expect("hashchange", 5, 0, "causal", hash_too=False, scale="linear")
        cdp.js('location.hash = "#token=5&head=0&pattern=causal&scale=row"')
        cdp.js('new Promise(function(r){setTimeout(r, 50);})')
        expect("hashchange", 5, 0, "causal", scale="row")
    finally:
        cdp.close()


SNAPSHOT_JS = r"""
window.__snap = function () {
  var cs = function (e) { return getComputedStyle(e); };
  var all = function (sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); };
  var box = function (e) { var r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  var v = document.getElementById("view"), out = {};
  out.state = [v.dataset.token, v.dataset.head, v.dataset.pattern, v.dataset.scale];
  out.keys = all("#beams g.ktok").map(function (g) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    return [+g.dataset.index, cs(t).fill, cs(r).fill, +cs(r).fillOpacity]; });
  out.qtoks = all("#beams g.qtok text").map(function (t) { return cs(t).fill; });
  out.axis = all("#matrix text.axis").map(function (t) { return cs(t).fill; });
  out.cells = all("#matrix rect.cell").map(function (c) { return [+c.dataset.query, +c.dataset.key, cs(c).fill]; });
  out.nums = all("#matrix text.num").map(function (t) {
    return [+t.dataset.query, +t.dataset.key, cs(t).fill, t.textContent]; });
  out.legend = all("#legend rect.legend-step").map(function (r) { return [+r.dataset.level, cs(r).fill]; });
  out.ticks = all("#legend text.tick").map(function (t) {
    return [t.hasAttribute("data-level") ? +t.dataset.level : null, t.textContent, cs(t).fill]; });
  out.caption = document.getElementById("legend-caption").textContent;
  out.outside = [];
  ["beams", "matrix", "legend"].forEach(function (id) {
    var s = document.getElementById(id), R = box(s);
    Array.prototype.forEach.call(s.querySelectorAll("text"), function (t) {
      var b = box(t);
      if (b[0] < R[0] - 0.5 || b[1] < R[1] - 0.5 || b[2] > R[2] + 0.5 || b[3] > R[3] + 0.5)
        out.outside.push([id, t.textContent, b, R]);
    });
  });
  out.rows = all("#row-table tr.row-key").map(function (tr) {
    return [+tr.dataset.key, +tr.dataset.weight, tr.cells[1].textContent]; });
  out.rest = document.getElementById("row-rest").textContent;
  out.meta = document.getElementById("meta").textContent;
  var note = document.getElementById("model-note"), nb = note.getBoundingClientRect();
  out.note = [note.textContent, cs(note).display, cs(note).visibility, nb.width, nb.height,
              cs(note).color, cs(note).backgroundColor];
  return out;
};
"""

WHITE, BLACK = (255, 255, 255), (0, 0, 0)
TICKS = {"row": ["0", "0.25", "0.5", "0.75", "1"], "log": ["0.001", "0.01", "0.1", "1"],
         "linear": ["0", "0.25", "0.5", "0.75", "1"]}


def fmt_weight(w):
    """The row table's number: 4 decimals, or 3 significant digits in
    exponent form below 0.001 (JavaScript's toFixed / toExponential)."""
    return "%.4f" % w if w >= 0.001 else re.sub(r"e([+-])0*(\d)", r"e\1\2", "%.2e" % w)


def near(got, want, tol=0.5 + 1e-9):
    return got is not None and all(abs(g - e) <= tol for g, e in zip(got, want))


def check_computed(tag, snap, data, token, head, name, scale):
    """One state of the page as the browser renders it: computed fills and
    colours, contrast, the legend, the label boxes, the row table."""
    n = len(data["tokens"])
    p = [q for q in data["patterns"] if q["name"] == name][0]
    w, vis = p["weights"][head], p["visible"]
    t = "%s token %d head %d %s %s" % (tag, token, head, name, scale)
    check(snap["state"] == [str(token), str(head), name, scale], "%s: state %r" % (t, snap["state"]))
    # Labels: ink, except the keys the query cannot see (grey); the ink on
    # a key's weight tint (its rect over the white section) stays readable.
    for i, tf, rf, ro in snap["keys"]:
        got, rect = parse_rgb(tf), parse_rgb(rf)
        want = INK if vis[token][i] else HIDDEN_INK
        check(near(got, want, 0), "%s: key %d label fill %s, expected %r" % (t, i, tf, want))
        bg = tuple(255 + (c - 255) * ro * rect[3] for c in rect[:3])
        if vis[token][i]:
            check(contrast(INK, bg) >= 4.5, "%s: key %d label on %r: contrast %.2f" %
                  (t, i, bg, contrast(INK, bg)))
    check(len(snap["keys"]) == n, "%s: %d key labels" % (t, len(snap["keys"])))
    check(all(near(parse_rgb(f), INK, 0) for f in snap["qtoks"] + snap["axis"]),
          "%s: query/axis label fills %r" % (t, sorted(set(snap["qtoks"] + snap["axis"]))))
    # Cells: the scale's colour (independently computed), grey when hidden.
    fills = {}
    for i, j, f in snap["cells"]:
        got = parse_rgb(f)
        fills[i, j] = got
        if vis[i][j]:
            m = max(w[i][k] for k in range(n) if vis[i][k])
            want = heat(level(scale, w[i][j], m))
        else:
            want = HIDDEN_CELL
        check(near(got, want), "%s: cell (%d,%d) computed fill %s, expected %r" % (t, i, j, f, want))
    check(len(fills) == n * n, "%s: %d cells" % (t, len(fills)))
    if scale == "row":
        for i in range(n):
            check(any(near(fills.get((i, j)), BEAM_RGB, 0) for j in range(n)),
                  "%s: row %d has no cell at full colour" % (t, i))
    # Numbers: on every visible cell when cells are >= 30 px (n <= 21),
    # white or black, whichever contrasts more, and at least 4.5:1.
    want_nums = sorted((i, j) for i in range(n) for j in range(n) if vis[i][j]) if n <= 21 else []
    check(sorted((i, j) for i, j, _, _ in snap["nums"]) == want_nums,
          "%s: numbers on %d cells, expected %d" % (t, len(snap["nums"]), len(want_nums)))
    for i, j, f, text in snap["nums"]:
        ink, cell = parse_rgb(f), fills.get((i, j))
        if not check(ink and cell, "%s: number (%d,%d) colours %r on %r" % (t, i, j, f, cell)):
            continue
        c = contrast(ink[:3], cell[:3])
        best = WHITE if contrast(WHITE, cell[:3]) >= contrast(BLACK, cell[:3]) else BLACK
        check(c >= 4.5 and near(ink, best, 0),
              "%s: number (%d,%d) %s on %s: contrast %.2f" % (t, i, j, f, cell, c))
        check(text == "<.001" if w[i][j] < 0.00095 else abs(float(text) - w[i][j]) <= 0.0051,
              "%s: number (%d,%d) %r for weight %r" % (t, i, j, text, w[i][j]))
    # The legend: 100 steps along the ramp, ticks in the scale's units.
    check(len(snap["legend"]) == 100, "%s: legend steps %d" % (t, len(snap["legend"])))
    for lv, f in snap["legend"]:
        check(near(parse_rgb(f), heat(lv)), "%s: legend step %g fill %s" % (t, lv, f))
    ticks = [(lv, text) for lv, text, _ in snap["ticks"] if lv is not None]
    check([text for _, text in ticks] == TICKS[scale], "%s: legend ticks %r" % (t, ticks))
    for lv, text in ticks:
        val = float(text)
        check(math.isclose(level("linear" if scale == "row" else scale, val, 1.0), lv, abs_tol=1e-9),
              "%s: tick %r at level %g" % (t, text, lv))
    check({"row": "row's largest weight", "log": "log scale", "linear": "weight"}[scale]
          in snap["caption"], "%s: legend caption %r" % (t, snap["caption"]))
    # Nothing drawn outside its SVG's viewport.
    check(not snap["outside"], "%s: labels outside their SVG: %r" % (t, snap["outside"][:3]))
    # The selected row in numbers: its largest weights, largest first.
    keys = sorted((j for j in range(n) if vis[token][j]), key=lambda j: (-w[token][j], j))
    check([k for k, _, _ in snap["rows"]] == keys[:10], "%s: row table keys %r, expected %r" %
          (t, [k for k, _, _ in snap["rows"]], keys[:10]))
    for k, wt, text in snap["rows"]:
        check(f32(wt) == f32(w[token][k]) and text == fmt_weight(w[token][k]),
              "%s: row table key %d: %r %r" % (t, k, wt, text))
    rest = keys[10:]
    if rest:
        s = sum(w[token][j] for j in rest)
        m = re.search(r"(\d+) more keys? share ([0-9.e+-]+)", snap["rest"])
        check(m and int(m.group(1)) == len(rest) and abs(float(m.group(2)) - s) <= 6e-5,
              "%s: row rest %r, expected %d keys sharing %.4f" % (t, snap["rest"], len(rest), s))
    hidden = n - len(keys)
    check(("%d key%s %s hidden" % (hidden, "" if hidden == 1 else "s", "is" if hidden == 1 else "are")
           in snap["rest"]) == bool(hidden), "%s: row rest %r (%d hidden)" % (t, snap["rest"], hidden))
    # The description line and the model note.
    check(snap["meta"].startswith("%d %s," % (n, "token" if n == 1 else "tokens")),
          "%s: meta %r" % (t, snap["meta"]))
    text, display, visibility, nw, nh, color, bgc = snap["note"]
    check(text == data["model_note"] and "Untrained" in text and "random" in text,
          "%s: model note %r" % (t, text))
    check(display != "none" and visibility == "visible" and nw > 0 and nh > 0,
          "%s: model note not shown (%s, %s, %gx%g)" % (t, display, visibility, nw, nh))
    fg, bg = parse_rgb(color), parse_rgb(bgc)
    check(fg and bg and contrast(fg[:3], bg[:3]) >= 4.5, "%s: model note colours %s on %s" % (t, color, bgc))


def computed(br, demo, tmp, env):
    """The pages as Chromium renders them (getComputedStyle and layout boxes
    over the DevTools protocol), for every scale, on both heads, two
    patterns and the first and last query, on sentences of 1 to 40 tokens."""
    forty = ("In the beginning the small grey cat sat quietly on the old red mat while the dog "
             "slept near the warm fire and the children played outside in the garden until dark "
             "came over the quiet little town by sea")
    cases = [
        ("default", None),
        ("one", "Hello"),
        ("long-last", "A dog chased the ball into the garden, antidisestablishmentarianism"),
        ("wide", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0 caf\u00e9 \U0001F600 "
                 "\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e"),
        ("forty", forty),
    ]
    for tag, sentence in cases:
        path = os.path.join(tmp, "computed-%s.html" % tag)
        cmd = [demo, "--html", path, "--threads", "1"] + (["--sentence", sentence] if sentence else [])
        r = subprocess.run(cmd, env=env, stderr=subprocess.PIPE)
        if not check(r.returncode == 0, "computed %s: attn-demo: %s" % (tag, r.stderr.decode())):
            continue
        data = json.loads(extract_data_block(open(path, encoding="utf-8").read()))
        n = len(data["tokens"])
        if tag == "forty":
            check(n == 40, "forty: %d tokens" % n)
        cdp = Cdp(br, "file://" + path)
        try:
            cdp.js(SNAPSHOT_JS)
            click = lambda sel: cdp.js('document.querySelector(%s).dispatchEvent('
                                       'new MouseEvent("click", {bubbles: true}))' % json.dumps(sel))
            snap = cdp.js("window.__snap()")
            check_computed(tag + " (load)", snap, data, 0, 0, "dense", DEFAULT_SCALE)
            flags = set()
            # Two states per scale (each switch redraws everything; clicks
            # cost ~0.2 s at 40 tokens): the last query of head 0 dense and
            # the first of head 1 causal+window.
            for scale in SCALES:
                click("#s-" + scale)
                for head, want, token in ((0, set(), n - 1), (1, {"causal", "window"}, 0)):
                    click('#heads button[data-head="%d"]' % head)
                    for f in flags ^ want:
                        click("#t-" + f)
                    flags = want
                    name = pattern_name({f: f in flags for f in FLAGS})
                    click('g.qtok[data-index="%d"]' % token)
                    check_computed(tag, cdp.js("window.__snap()"), data, token, head, name, scale)
            if tag == "forty":
                # What the scales make of 40 tokens (dense, head 0): the share
                # of cells below a tenth of the ramp.
                p = [q for q in data["patterns"] if q["name"] == "dense"][0]["weights"][0]
                for scale in SCALES:
                    lv = [level(scale, x, max(row)) for row in p for x in row]
                    frac = sum(v < 0.1 for v in lv) / len(lv)
                    mean = sum(lv) / len(lv)
                    sd = math.sqrt(sum((v - mean) ** 2 for v in lv) / len(lv))
                    print("forty tokens, dense, head 0, %s scale: %.0f%% of cells below level 0.1, "
                          "levels' standard deviation %.3f" % (scale, 100 * frac, sd))
                    if scale == DEFAULT_SCALE:
                        check(frac < 0.6 and sd > 0.15, "forty: the default scale shows no structure "
                              "(%.0f%% of cells below 0.1, sd %.3f)" % (100 * frac, sd))
        finally:
            cdp.close()


def control(br, tmp):
    """The net-log check sees a page's fetch (so its silence means something)."""
    path = os.path.join(tmp, "control.html")
    with open(path, "w") as f:
        f.write('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                '<script>fetch("http://127.0.0.1:9/y").catch(function(){});</script></body></html>')
    netlog = os.path.join(tmp, "net-control.json")
    dom = parse_dom(br.dump("file://" + path, netlog))
    reqs = page_requests(netlog)
    check(any("127.0.0.1:9/x.png" in u for u in reqs), "control: fetch not seen in %r" % reqs)
    check(no_resources(dom), "control: the DOM check misses <img src>")


def errors(demo, env):
    out = os.devnull
    cases = [
        ("too many tokens", " ".join("w%d" % i for i in range(MAX_TOKENS + 1)), [], b"at most 64"),
        ("invalid UTF-8", b"caf\xc3 bad", [], b"not valid UTF-8"),
        ("overlong UTF-8", b"\xc0\xaf", [], b"not valid UTF-8"),
        ("global past the end", "a b c", ["--global", "3"], b"global token 3"),
        ("no token", "   ", [], b"no tokens"),
    ]
    for tag, sentence, extra, msg in cases:
        r = subprocess.run([os.fsencode(demo), b"--html", os.fsencode(out), b"--sentence",
                            sentence if isinstance(sentence, bytes) else sentence.encode()] +
                           [a.encode() for a in extra], env=env, stderr=subprocess.PIPE)
        check(r.returncode == 2 and msg in r.stderr,
              "error %s: rc %d, %r" % (tag, r.returncode, r.stderr))
    # 64 tokens is fine.
    r = subprocess.run([demo, "--html", out, "--sentence",
                        " ".join("w%d" % i for i in range(MAX_TOKENS))], env=env)
    check(r.returncode == 0, "64 tokens: rc %d" % r.returncode)


# ------------------------------------------------------ a trained model

MODEL_TOL = 2e-5        # attn's fp32 forward against the float64 recompute
MODEL_SENTENCE = 'Caf\u00e9 "<b>&" \u65e5\U0001F600\tok!'


def byte_labels(bs):
    """The page's token labels of the sentence's bytes (docs/VIEW.md)."""
    out = []
    for i, c in enumerate(bs):
        if 0x20 < c < 0x7f:
            out.append(chr(c))
        elif c == 0x20:
            out.append("\u2423")
        elif c in (9, 10, 13):
            out.append({9: "\\t", 10: "\\n", 13: "\\r"}[c])
        elif c < 0x80:
            out.append("\\x%02X" % c)
        elif c & 0xC0 == 0x80:
            out.append("\u00b7%02X" % c)
        else:
            k = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            out.append(bs[i:i + k].decode("utf-8"))
    return out


def read_checkpoint(path):
    """A tinygpt checkpoint (examples/tinygpt/gpt.h): sizes and parameters."""
    b = open(path, "rb").read()
    if b[:8] != b"ATTNGPT\0":
        raise ValueError("magic")
    version, L, E, H, T, V = struct.unpack_from("<I5i", b, 8)
    (count,) = struct.unpack_from("<Q", b, 32)
    if version != 1 or V != 256 or len(b) != 40 + 4 * count + 8:
        raise ValueError("header")
    return (L, E, H, T), struct.unpack_from("<%df" % count, b, 40)


def gpt_attention(sizes, w, tokens):
    """float64 forward of the tinygpt model over tokens (its gpt.h): every
    layer's causal attention weights, [L * H][n][n].  The parameter layout
    is gpt_make_layout's, written out again here; linear layers are
    y = x W^T + b (W [out][in]), in_proj [3E][E] holds W_q, W_k, W_v."""
    L, E, H, T = sizes
    D = E // H
    n = len(tokens)
    o = 0

    def take(k):
        nonlocal o
        o += k
        return o - k

    wte, wpe, lnf_g, lnf_b = take(256 * E), take(T * E), take(E), take(E)
    base = o
    o = 0
    names = [("ln1_g", E), ("ln1_b", E), ("in_w", 3 * E * E), ("in_b", 3 * E), ("out_w", E * E),
             ("out_b", E), ("ln2_g", E), ("ln2_b", E), ("fc1_w", 4 * E * E), ("fc1_b", 4 * E),
             ("fc2_w", 4 * E * E), ("fc2_b", E)]
    off = {k: take(s) for k, s in names}
    per = o
    if base + L * per != len(w):
        raise ValueError("parameter count %d, layout %d" % (len(w), base + L * per))

    def vec(a, k):
        return w[a:a + k]

    def linear(x, a_w, a_b, nin, nout):
        W = [w[a_w + r * nin:a_w + (r + 1) * nin] for r in range(nout)]
        b = vec(a_b, nout)
        return [[sum(p * q for p, q in zip(row, Wr)) + b[r] for r, Wr in enumerate(W)] for row in x]

    def layernorm(x, g, b):
        out = []
        for row in x:
            mu = sum(row) / E
            var = sum((v - mu) ** 2 for v in row) / E
            rs = 1.0 / math.sqrt(var + 1e-5)
            out.append([(v - mu) * rs * g[i] + b[i] for i, v in enumerate(row)])
        return out

    def gelu(v):
        return 0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))

    x = [[w[wte + t * E + i] + w[wpe + p * E + i] for i in range(E)] for p, t in enumerate(tokens)]
    att_all = []
    scale = 1.0 / math.sqrt(D)
    for layer in range(L):
        a = base + layer * per
        h = layernorm(x, vec(a + off["ln1_g"], E), vec(a + off["ln1_b"], E))
        qkv = linear(h, a + off["in_w"], a + off["in_b"], E, 3 * E)
        heads_out = [[0.0] * E for _ in range(n)]
        for hd in range(H):
            qs, ks, vs = (slice(s * E + hd * D, s * E + (hd + 1) * D) for s in range(3))
            P = []
            for i in range(n):
                s = [scale * sum(p * q for p, q in zip(qkv[i][qs], qkv[j][ks])) for j in range(i + 1)]
                m = max(s)
                e = [math.exp(v - m) for v in s]
                tot = sum(e)
                P.append([v / tot for v in e] + [0.0] * (n - i - 1))
                for c in range(D):
                    heads_out[i][hd * D + c] = sum(P[i][j] * qkv[j][vs][c] for j in range(i + 1))
            att_all.append(P)
        y = linear(heads_out, a + off["out_w"], a + off["out_b"], E, E)
        x = [[p + q for p, q in zip(r1, r2)] for r1, r2 in zip(x, y)]
        h2 = layernorm(x, vec(a + off["ln2_g"], E), vec(a + off["ln2_b"], E))
        f = [[gelu(v) for v in row] for row in linear(h2, a + off["fc1_w"], a + off["fc1_b"], E, 4 * E)]
        y = linear(f, a + off["fc2_w"], a + off["fc2_b"], 4 * E, E)
        x = [[p + q for p, q in zip(r1, r2)] for r1, r2 in zip(x, y)]
    return att_all


MODEL_SNAP_JS = r"""
window.__msnap = function () {
  var all = function (sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); };
  var v = document.getElementById("view"), cs = function (e) { return getComputedStyle(e); };
  return {
    state: [v.dataset.token, v.dataset.layer, v.dataset.head, v.dataset.pattern, v.dataset.scale],
    hash: location.hash,
    layers: all("#layers button").map(function (b) { return [b.textContent, b.dataset.layer, b.getAttribute("aria-pressed")]; }),
    heads: all("#heads button").map(function (b) { return [b.textContent, b.dataset.head, b.getAttribute("aria-pressed")]; }),
    name: document.getElementById("head-name").textContent,
    name_shown: cs(document.getElementById("head-name")).display !== "none",
    layer_shown: cs(document.getElementById("layer-group")).display !== "none",
    pattern_shown: cs(document.getElementById("pattern-group")).display !== "none",
    toggles_shown: all("button.toggle").filter(function (b) { return b.getClientRects().length > 0; }).length,
    cells: all("#matrix rect.cell").map(function (c) {
      return [+c.dataset.query, +c.dataset.key, +c.dataset.weight, c.getAttribute("fill"), cs(c).fill]; }),
    beams: all("line.beam").map(function (b) { return [+b.dataset.query, +b.dataset.key, +b.dataset.weight]; }),
    cols: all("#matrix text.axis[data-col]").map(function (t) { return t.textContent; }),
    rows: all("#matrix text.axis[data-row]").map(function (t) { return t.textContent; }),
    qtoks: all("#beams g.qtok text").map(function (t) { return t.textContent; }),
    note: [document.getElementById("model-note").textContent, cs(document.getElementById("model-note")).display],
    meta: document.getElementById("meta").textContent,
    footer: document.getElementById("footer").textContent
  };
};
"""


def short_label(t):
    """The page's short(): 16 UTF-16 units at most."""
    return t if len(t.encode("utf-16-le")) // 2 <= 16 else t[:15] + "\u2026"


def check_model_drawn(tag, snap, data, token, layer, head, scale=DEFAULT_SCALE):
    """A model page's drawn state: selectors, and the matrix and beams are
    exactly the selected layer's head's weights, causal."""
    n, L, H = len(data["tokens"]), data["layers"], data["heads"]
    t = "%s (token %d, L%d H%d)" % (tag, token, layer + 1, head + 1)
    check(snap["state"] == [str(token), str(layer), str(head), "causal", scale],
          "%s: state %r" % (t, snap["state"]))
    check([b[:2] for b in snap["layers"]] == [["L%d" % (l + 1), str(l)] for l in range(L)],
          "%s: layer buttons %r" % (t, snap["layers"]))
    check([b[:2] for b in snap["heads"]] == [["H%d" % (h + 1), str(h)] for h in range(H)],
          "%s: head buttons %r" % (t, snap["heads"]))
    check([b[2] for b in snap["layers"]] == ["true" if l == layer else "false" for l in range(L)] and
          [b[2] for b in snap["heads"]] == ["true" if h == head else "false" for h in range(H)],
          "%s: pressed %r %r" % (t, snap["layers"], snap["heads"]))
    check(snap["name"] == "L%d H%d" % (layer + 1, head + 1) and snap["name_shown"],
          "%s: head name %r" % (t, snap["name"]))
    check(snap["layer_shown"] and not snap["pattern_shown"] and snap["toggles_shown"] == 0,
          "%s: layer selector shown %s, pattern toggles shown %s/%d" %
          (t, snap["layer_shown"], snap["pattern_shown"], snap["toggles_shown"]))
    w = data["patterns"][0]["weights"][layer * H + head]
    check(len(snap["cells"]) == n * n, "%s: %d cells" % (t, len(snap["cells"])))
    for i, j, wt, fill, cfill in snap["cells"]:
        check(f32(wt) == f32(w[i][j]), "%s: cell (%d,%d) weight %r, JSON %r" % (t, i, j, wt, w[i][j]))
        if j > i:
            check(wt == 0.0 and near(parse_rgb(fill), HIDDEN_CELL, 0) and near(parse_rgb(cfill), HIDDEN_CELL, 0),
                  "%s: cell (%d,%d) above the diagonal: %r %s" % (t, i, j, wt, fill))
        else:
            want = heat(level(scale, w[i][j], max(w[i][:i + 1])))
            check(near(parse_rgb(fill), want), "%s: cell (%d,%d) fill %s, expected %r" % (t, i, j, fill, want))
    check([(q, k) for q, k, _ in snap["beams"]] == [(token, j) for j in range(token + 1)] and
          all(f32(wt) == f32(w[token][k]) for _, k, wt in snap["beams"]),
          "%s: beams %r" % (t, snap["beams"]))
    labels = [short_label(x) for x in data["tokens"]]
    check(snap["cols"] == labels and snap["rows"] == labels and snap["qtoks"] == labels,
          "%s: labels %r, expected %r" % (t, snap["cols"], labels))
    check(snap["note"][0] == data["model_note"] and snap["note"][1] != "none", "%s: note %r" % (t, snap["note"]))
    check(snap["meta"].startswith("%d tokens (bytes), %d layers of %d heads" % (n, L, H)),
          "%s: meta %r" % (t, snap["meta"]))


def model(br, demo, tinygpt, text, tmp, env):
    """A trained model's page: train a tiny checkpoint, render the page,
    recompute its weights in float64 from the checkpoint, click through
    every layer and head in Chromium; and the --model errors."""
    ckpt = os.path.join(tmp, "tiny-test.ckpt")
    r = subprocess.run([tinygpt, "--data", text, "--steps", "20", "--threads", "1", "--save", ckpt],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if not check(r.returncode == 0 and os.path.exists(ckpt), "model: tinygpt: %s" % r.stderr.decode()):
        return
    sizes, params = read_checkpoint(ckpt)
    L, E, H, T = sizes
    sentence = MODEL_SENTENCE
    bs = sentence.encode("utf-8")
    html_path, json_path = os.path.join(tmp, "model.html"), os.path.join(tmp, "model.json")
    r = subprocess.run([demo, "--html", html_path, "--json", json_path, "--model", ckpt, "--sentence",
                        sentence, "--threads", "1"], env=env, stderr=subprocess.PIPE)
    if not check(r.returncode == 0, "model: attn-demo --model failed: %s" % r.stderr.decode()):
        return
    page = open(html_path, encoding="utf-8").read()
    block = extract_data_block(page)
    data = json.loads(block)
    check(data == json.load(open(json_path, encoding="utf-8")), "model: --json equals the block")
    check("</" not in block and "<!--" not in block, "model: block safe in <script>")
    check(not re.search(r"https?://", page), "model: the page names a network URL")
    # The model and its description.
    check(data["model"] == {"kind": "tinygpt", "checkpoint": "tiny-test.ckpt", "layers": L, "d_model": E,
                            "heads": H, "context": T, "params": len(params)},
          "model: model %r, checkpoint %r" % (data["model"], (sizes, len(params))))
    check(data["layers"] == L and data["heads"] == H and data["d_model"] == E and data["head_dim"] == E // H,
          "model: sizes")
    note = data["model_note"]
    for part in ("trained by tinygpt", "tiny-test.ckpt", "%d layers" % L, "d_model %d" % E,
                 "%d heads of %d" % (H, E // H), "context %d" % T, "{:,} parameters".format(len(params))):
        check(part in note, "model: model_note lacks %r: %r" % (part, note))
    check("Untrained" not in note and "untrained" not in note, "model: model_note %r" % note)
    # Tokens: the bytes, labelled.
    check(data["sentence"] == sentence and data["bytes"] == list(bs), "model: sentence and bytes")
    labels = byte_labels(bs)
    check(data["tokens"] == labels, "model: labels %r, expected %r" % (data["tokens"], labels))
    check(labels[:5] == ["C", "a", "f", "\u00e9", "\u00b7A9"] and "\u2423" in labels and "\\t" in labels
          and "\U0001F600" in labels and labels.count("\u00b7") == 0, "model: the labelling %r" % labels)
    # The weights: one causal pattern, L * H heads, rows summing to 1, equal
    # to the float64 forward from the checkpoint.
    n = len(bs)
    check(len(data["patterns"]) == 1 and data["patterns"][0]["name"] == "causal", "model: one pattern, causal")
    p = data["patterns"][0]
    check(p["visible"] == [[int(j <= i) for j in range(n)] for i in range(n)], "model: visible is causal")
    check(len(p["weights"]) == L * H and all(len(m) == n and all(len(r) == n for r in m) for m in p["weights"]),
          "model: weights shape")
    ref = gpt_attention(sizes, params, list(bs))
    worst = worst_sum = 0.0
    for k in range(L * H):
        for i in range(n):
            row = p["weights"][k][i]
            check(all(v == 0.0 for v in row[i + 1:]), "model: head %d row %d above the diagonal %r" % (k, i, row[i + 1:]))
            worst_sum = max(worst_sum, abs(sum(row) - 1.0))
            worst = max(worst, max(abs(a - b) for a, b in zip(row, ref[k][i])))
    print("model page: %d layers x %d heads over %d bytes; attn's weights against the float64 forward "
          "from the checkpoint: max |difference| %.2e (tolerance %.0e); rows sum to 1 within %.1e" %
          (L, H, n, worst, MODEL_TOL, worst_sum))
    check(worst < MODEL_TOL, "model: attn's weights differ from the float64 forward by %g" % worst)
    check(worst_sum < 1e-5, "model: a row sums to 1 +- %g" % worst_sum)
    # The heads differ (else the selector checks below could not fail).
    flat = [tuple(v for r in m for v in r) for m in p["weights"]]
    check(len(set(flat)) == L * H, "model: some heads have identical weights")
    # The page in Chromium: every layer and head through the selectors.
    url = "file://" + html_path
    cdp = Cdp(br, url)
    try:
        cdp.js(MODEL_SNAP_JS)
        click = lambda sel: cdp.js('document.querySelector(%s).dispatchEvent('
                                   'new MouseEvent("click", {bubbles: true}))' % json.dumps(sel))
        snap = cdp.js("window.__msnap()")
        check_model_drawn("model load", snap, data, 0, 0, 0)
        check("layer and head from 0" in snap["footer"], "model: footer %r" % snap["footer"])
        for layer in range(L):
            click('#layers button[data-layer="%d"]' % layer)
            for head in range(H):
                click('#heads button[data-head="%d"]' % head)
                token = (3 * layer + 5 * head + 2) % n
                click('g.qtok[data-index="%d"]' % token)
                snap = cdp.js("window.__msnap()")
                check_model_drawn("model click", snap, data, token, layer, head)
                check(snap["hash"] == "#token=%d&layer=%d&head=%d&pattern=causal&scale=row" % (token, layer, head),
                      "model click: fragment %r" % snap["hash"])
        click("#s-log")
        check_model_drawn("model log", cdp.js("window.__msnap()"), data, token, L - 1, H - 1, "log")
    finally:
        cdp.close()
    # Fragments on load (a pattern the model has not falls back to causal),
    # and nothing fetched.
    for frag, token, layer, head in (("#token=7&layer=%d&head=%d" % (L - 1, H - 1), 7, L - 1, H - 1),
                                     ("#token=3&layer=%d&head=1&pattern=dense" % L, 3, 0, 1)):
        netlog = os.path.join(tmp, "net-model-%d.json" % token)
        dom = parse_dom(br.dump(url + frag, netlog))
        view = dom.find(lambda e: e["attrs"].get("id") == "view")[0]["attrs"]
        got = (view.get("data-token"), view.get("data-layer"), view.get("data-head"), view.get("data-pattern"))
        check(got == (str(token), str(layer), str(head), "causal"), "model %s: state %r" % (frag, got))
        w = p["weights"][layer * H + head]
        cells = dom.find(lambda e: e["tag"] == "rect" and has_class(e, "cell"))
        check(len(cells) == n * n and all(f32(float(c["attrs"]["data-weight"])) ==
                                          f32(w[int(c["attrs"]["data-query"])][int(c["attrs"]["data-key"])])
                                          for c in cells), "model %s: cells" % frag)
        check(not page_requests(netlog) and not no_resources(dom), "model %s: the page fetched" % frag)
    model_errors(demo, ckpt, text, tmp, env, T)


def model_errors(demo, ckpt, text, tmp, env, T):
    raw = open(ckpt, "rb").read()
    flipped, truncated = os.path.join(tmp, "flipped.ckpt"), os.path.join(tmp, "truncated.ckpt")
    with open(flipped, "wb") as f:
        f.write(raw[:1000] + bytes([raw[1000] ^ 0x10]) + raw[1001:])
    with open(truncated, "wb") as f:
        f.write(raw[:-9])
    out = os.devnull
    cases = [
        ("missing checkpoint", [os.path.join(tmp, "none.ckpt")], "x", b"cannot open"),
        ("not a checkpoint", [text], "x", b"magic"),
        ("flipped byte", [flipped], "x", b"checksum"),
        ("truncated", [truncated], "x", b"truncated"),
        ("too long", [ckpt], "y" * (T + 1), b"at most %d" % min(T, 128)),
        ("too long in bytes", [ckpt], "\u00e9" * (T // 2) + "y", b"at most %d" % min(T, 128)),
        ("empty", [ckpt], "", b"empty"),
        ("invalid UTF-8", [ckpt], b"caf\xc3", b"not valid UTF-8"),
        ("window", [ckpt, "--window", "2"], "x", b"toy model"),
    ]
    for tag, extra, sentence, msg in cases:
        args = [os.fsencode(demo), b"--html", os.fsencode(out), b"--model"] + [os.fsencode(a) for a in extra]
        args += [b"--sentence", sentence if isinstance(sentence, bytes) else sentence.encode()]
        r = subprocess.run(args, env=env, stderr=subprocess.PIPE)
        check(r.returncode == 2 and msg in r.stderr, "model error %s: rc %d, %r" % (tag, r.returncode, r.stderr))
    r = subprocess.run([demo, "--html", out, "--model", ckpt, "--sentence", "z" * min(T, 128)], env=env)
    check(r.returncode == 0, "model: %d bytes: rc %d" % (min(T, 128), r.returncode))


def no_model(demo, env):
    """A build without cblas.h: --model says so."""
    r = subprocess.run([demo, "--html", os.devnull, "--model", "x.ckpt"], env=env, stderr=subprocess.PIPE)
    check(r.returncode == 2 and b"not available in this build" in r.stderr,
          "no model: rc %d, %r" % (r.returncode, r.stderr))


if __name__ == "__main__":
    sys.exit(main())
