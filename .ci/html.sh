#!/usr/bin/env bash
# The browser test of the interactive attention view (attn-demo --html,
# docs/VIEW.md): run from the repository root after `meson setup build`.
# Installs Chromium when missing (Debian 12's package), makes sure the build
# knows about it, builds attn-demo and runs the html-view test.  Exits
# nonzero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d build ] || { echo "html.sh: no build/ directory (meson setup build first)" >&2; exit 1; }
if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null || {
        apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
fi
# A build configured before Chromium was installed has no html-view test.
if ! meson test -C build --list 2>/dev/null | grep -q 'html-view'; then
    meson setup --reconfigure build >/dev/null
fi
meson compile -C build -j "${HTML_JOBS:-0}" examples/attn-demo   # HTML_JOBS: ninja jobs (0 = its default)
OPENBLAS_NUM_THREADS=1 meson test -C build --no-rebuild --print-errorlogs html-view
