#!/bin/sh
# docs/attn-view-model.png, the trained model's attention view in
# docs/VIEW.md: trains tinygpt on the Debian licence texts (unless CKPT
# exists already), writes attn-demo's --model page of one sentence and
# takes the screenshot with headless Chromium.
#
# usage: docs/view-model-screenshot.sh [BUILD_DIR [CKPT [STEPS]]]
#        (defaults: build, gpt.ckpt, 2000 steps: about a minute on one core)
# FRAG overrides the page state shown (default: layer 1, head 4, query 25).
set -eu
build=${1:-build}
ckpt=${2:-gpt.ckpt}
steps=${3:-2000}
frag=${FRAG:-#token=25&layer=0&head=3}
sentence="This program is free software."
out="$(cd "$(dirname "$0")" && pwd)/attn-view-model.png"
if [ ! -f "$ckpt" ]; then
    "$build/examples/tinygpt" --data /usr/share/common-licenses/* --steps "$steps" --save "$ckpt"
fi
"$build/examples/tinygpt" --load "$ckpt" --data /usr/share/common-licenses/* --steps 0 --heads-report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/examples/attn-demo" --html "$tmp/view.html" --model "$ckpt" --sentence "$sentence"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size=1560,1060 --screenshot="$out" "file://$tmp/view.html$frag"
echo "wrote $out"
