"""Reads abidiff's report on stdin; exit 0 when every struct change in it
is the growth of 1.x into reserved room: the struct's size unchanged, no
member deleted, the only changed member a reserved array that shrank and
moved up with its end where it was, and every inserted member inside the
bytes the reserved array gave up (or the alignment padding just below it).  Anything else (or nothing recognised)
exits 1, and .ci/abi.sh fails.  Prints why, one line per struct."""
import re
import sys

text = sys.stdin.read()
blocks = re.split(r"\n(?=\s*underlying type 'struct )", text)
structs = [b for b in blocks if re.match(r"\s*underlying type 'struct ", b)]
ok = bool(structs)
for b in structs:
    name = re.match(r"\s*underlying type 'struct (\w+)'", b).group(1)
    bad = []
    if "type size hasn't changed" in b and "no data member change" in b:
        # a struct holding a changed one by value (reported on its own)
        print(f"abi_room: struct {name}: holds a struct that changed (see its own line)")
        continue
    if "type size hasn't changed" not in b:
        bad.append("size changed")
    if re.search(r"data member deletion", b):
        bad.append("a member deleted")
    ins = [int(x) for x in re.findall(r"', at offset (\d+) \(in bits\)", b)]
    changes = re.findall(
        r"type of '[^']*?(reserved\w*)\[(\d+)\]' changed:.*?array type size changed from (\d+) "
        r"to (\d+).*?offset changed from (\d+) to (\d+)", b, re.S)
    # abidiff words the same change of a reserved array differently when
    # the new array type was already described for another struct:
    # "'void* reserved[8]' offset changed from A to B (in bits) (by +N
    # bits), size changed from S to T (in bits) (by -N bits)"
    moved = re.findall(
        r"'[^']*?(reserved\w*)\[(\d+)\]' offset changed from (\d+) to (\d+) \(in bits\) "
        r"\(by \+\d+ bits\), size changed from (\d+) to (\d+) \(in bits\) \(by -\d+ bits\)", b)
    changes += [(n, k, s0, s1, o0, o1) for (n, k, o0, o1, s0, s1) in moved]
    nchanged = len(re.findall(r"type of '", b)) + len(moved)
    if nchanged != len(changes) or not changes:
        bad.append("a member other than reserved changed")
    for _, _, old_size, new_size, old_off, new_off in changes:
        old_size, new_size, old_off, new_off = map(int, (old_size, new_size, old_off, new_off))
        if new_off + new_size != old_off + old_size or new_size >= old_size:
            bad.append("reserved did not shrink in place")
        # (an insertion may also start in the alignment padding just below
        # the old reserved array, less than one 8-byte slot: no member is
        # there, since no other member moved; attn_blas_info's bf16 after
        # its int max_threads)
        if any(not (old_off - 64 < x < new_off) for x in ins):
            bad.append("an insertion outside the reserved room")
    rest = re.sub(r"and offset changed from \d+ to \d+ \(in bits\) \(by \+\d+ bits\)", "", b)
    rest = re.sub(r"'[^']*?reserved\w*\[\d+\]' offset changed from \d+ to \d+ \(in bits\) "
                  r"\(by \+\d+ bits\), size changed", "", rest)
    if "offset changed" in rest:
        bad.append("another member moved")
    print(f"abi_room: struct {name}: " + ("grew into its reserved room" if not bad else "; ".join(bad)))
    ok = ok and not bad
sys.exit(0 if ok else 1)
