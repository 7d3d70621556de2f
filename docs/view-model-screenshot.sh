#!/bin/sh
# docs/attn-view-model.png, the trained model's attention view in
# docs/VIEW.md: trains tinygpt (unless CKPT exists already), writes
# attn-demo's --model page of one sentence and takes the screenshot with
# headless Chromium.
#
# usage: docs/view-model-screenshot.sh [BUILD_DIR [CKPT [STEPS]]]
#        (defaults: build, gpt.ckpt, 2000 steps: about a minute on one core)
# DATA: the training text (default: the fortunes package's files if
# installed, else the Debian licence texts); SENTENCE; FRAG: the page state
# shown (default: layer 1, head 3, query 10).  docs/attn-view-model.png
# comes from the full run of docs/TINYGPT.md (30000 steps on fortunes).
set -eu
build=${1:-build}
ckpt=${2:-gpt.ckpt}
steps=${3:-2000}
frag=${FRAG:-#token=10&layer=0&head=2}
sentence=${SENTENCE:-"The cat sat on the mat."}
if [ -z "${DATA:-}" ]; then
    if [ -d /usr/share/games/fortunes ]; then
        DATA=$(ls /usr/share/games/fortunes/* | grep -v '[.]')
    else
        DATA=$(ls /usr/share/common-licenses/*)
    fi
fi
out="$(cd "$(dirname "$0")" && pwd)/attn-view-model.png"
if [ ! -f "$ckpt" ]; then
    # shellcheck disable=SC2086
    "$build/examples/tinygpt" --steps "$steps" --threads 2 --save "$ckpt" --data $DATA
fi
# shellcheck disable=SC2086
"$build/examples/tinygpt" --load "$ckpt" --steps 0 --heads-report --data $DATA
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/examples/attn-demo" --html "$tmp/view.html" --model "$ckpt" --sentence "$sentence"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size=1560,1060 --screenshot="$out" "file://$tmp/view.html$frag"
echo "wrote $out"
