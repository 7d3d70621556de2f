#!/usr/bin/python3
"""Browser test of attn-demo --html (the interactive attention view).

usage: check_view.py ATTN_DEMO CHROMIUM

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
   pattern=P for every head and pattern, dumps the DOM the script built and
   checks the drawn state (selected token, head, toggles), every beam (one per
   visible key, its data-weight exactly the embedded weight, its stroke-width
   and stroke-opacity proportional to it) and every matrix cell;
4. drives the page through Chromium's DevTools protocol (over a pipe) to
   click tokens, head buttons and toggles and hover tokens;
5. checks that the page fetched nothing: Chromium's net log holds no request
   the page started (a control page that does fetch proves the check sees
   such requests), and the final DOM has no src/href other than "#...";
6. checks the errors: too many tokens, invalid UTF-8, a global token past
   the end, no token.
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

BEAM_MAX = 14.0          # the page's stroke width of a weight of 1
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


def check_drawn(tag, dom, data, refs, token, head, name):
    """The DOM the script built shows (token, head, pattern) exactly."""
    n = len(data["tokens"])
    p = [q for q in data["patterns"] if q["name"] == name][0]
    w, ref = p["weights"][head], refs[name][head]
    view = dom.find(lambda e: e["attrs"].get("id") == "view")
    if not check(len(view) == 1, "%s: one #view" % tag):
        return
    a = view[0]["attrs"]
    check((a.get("data-token"), a.get("data-head"), a.get("data-pattern")) ==
          (str(token), str(head), name),
          "%s: state %r, expected %r" % (tag, (a.get("data-token"), a.get("data-head"),
                                               a.get("data-pattern")), (token, head, name)))
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
        check(math.isclose(float(at["stroke-width"]), BEAM_MAX * wt, rel_tol=1e-6, abs_tol=1e-9),
              "%s: beam %d stroke-width %s for weight %r" % (tag, j, at["stroke-width"], wt))
        check(math.isclose(float(at["stroke-opacity"]), min(1.0, wt), rel_tol=1e-6, abs_tol=1e-9),
              "%s: beam %d stroke-opacity %s for weight %r" % (tag, j, at["stroke-opacity"], wt))
    cells = dom.find(lambda e: e["tag"] == "rect" and has_class(e, "cell"))
    check(len(cells) == n * n, "%s: %d matrix cells" % (tag, len(cells)))
    for c in cells:
        at = c["attrs"]
        i, j = int(at["data-query"]), int(at["data-key"])
        check(f32(float(at["data-weight"])) == f32(w[i][j]),
              "%s: cell (%d,%d) weight %s, embedded %r" % (tag, i, j, at["data-weight"], w[i][j]))
    qtoks = dom.find(lambda e: e["tag"] == "g" and has_class(e, "qtok"))
    check(len(qtoks) == n, "%s: %d query tokens" % (tag, len(qtoks)))
    for g in qtoks:
        i = int(g["attrs"]["data-index"])
        t = data["tokens"][i]
        if len(t.encode("utf-16-le")) // 2 <= 16:
            check(g["text"].startswith(t), "%s: token %d drawn as %r" % (tag, i, g["text"]))
        check(has_class(g, "sel") == (i == token), "%s: token %d selection" % (tag, i))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    demo, exe = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="attn-view-")
    br = Browser(exe, tmp)
    try:
        run(demo, br, tmp)
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

        # Every pattern on both heads (heads alternate for the long case),
        # a different token each time; the first load also logs the network.
        for k, flags in enumerate(ALL_FLAGS):
            name = pattern_name(flags)
            for head in range(NHEAD) if tag == "default" else [k % NHEAD]:
                token = (3 * k + head) % n
                frag = "#token=%d&head=%d&pattern=%s" % (token, head, name)
                netlog = os.path.join(tmp, "net-%s-%d-%d.json" % (tag, k, head))
                dom = parse_dom(br.dump(url + frag, netlog))
                t = "%s %s" % (tag, frag)
                check_drawn(t, dom, data, refs, token, head, name)
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
        for frag, token, head, name in (("", 0, 0, "dense"),
                                        ("#pattern=sparse&token=1", 1, 0, "window+global"),
                                        ("#pattern=causal,window&head=1", 0, 1, "causal+window"),
                                        ("#token=999&head=7&pattern=bogus", 0, 0, "dense")):
            dom = parse_dom(br.dump(url + frag))
            check_drawn("%s %s" % (tag, frag or "(no fragment)"), dom, data, refs, token, head, name)

        if tag == "default":
            interact(br, url, data, refs)

    control(br, tmp)
    errors(demo, env)


def interact(br, url, data, refs):
    """Clicks, hovers and toggles through the DevTools protocol."""
    cdp = Cdp(br, url + "#token=0")
    n = len(data["tokens"])
    try:
        def state():
            return cdp.js('(function(){var v=document.getElementById("view");'
                          'return [v.dataset.token, v.dataset.head, v.dataset.pattern, location.hash,'
                          'Array.from(document.querySelectorAll("line.beam")).map(function(b){'
                          'return [+b.dataset.key, +b.dataset.weight, +b.getAttribute("stroke-width")];})];})()')

        def expect(tag, token, head, name, hash_too=True):
            tok, hd, pat, hsh, beams = state()
            check((tok, hd, pat) == (str(token), str(head), name),
                  "click %s: state %r, expected %r" % (tag, (tok, hd, pat), (token, head, name)))
            if hash_too:
                check(hsh == "#token=%d&head=%d&pattern=%s" % (token, head, name),
                      "click %s: fragment %r" % (tag, hsh))
            p = [q for q in data["patterns"] if q["name"] == name][0]
            want = [j for j in range(n) if p["visible"][token][j]]
            check([b[0] for b in beams] == want, "click %s: beams %r" % (tag, beams))
            for j, wt, sw in beams:
                check(f32(wt) == f32(p["weights"][head][token][j]) and
                      math.isclose(sw, BEAM_MAX * wt, rel_tol=1e-6, abs_tol=1e-9),
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
        cdp.js('location.hash = "#token=5&head=0&pattern=causal"')
        cdp.js('new Promise(function(r){setTimeout(r, 50);})')
        expect("hashchange", 5, 0, "causal")
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


if __name__ == "__main__":
    sys.exit(main())
