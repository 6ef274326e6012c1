#!/usr/bin/env bash
# tfm bleu on the sacreBLEU fixtures (data/bleu-fixtures): the printed lines and JSON figures
# equal what sacreBLEU 2.6.0 printed, HYP from a file or stdin, several references, and the
# error lines for bad input.
# Usage: bleu_command.sh /path/to/tfm /path/to/source
set -euo pipefail
tfm="$1"
fx="$2/data/bleu-fixtures"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_error() {  # expect_error "substring" cmd... : exit 1 and one stderr line holding substring
  local want="$1"; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "expected an error from: $*"; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "error for '$*' is not one line: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "error for '$*' lacks '$want': $(cat "$tmp/err")"
}

# sacreBLEU's text lines (width 1 is its default), HYP as a file.
"$tfm" bleu "$fx/en/ref1.txt" "$fx/en/hyp.txt" >"$tmp/out"
cat >"$tmp/want" <<'TXT'
BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 59.6 95.7/75.0/63.5/54.8 (BP = 0.842 ratio = 0.854 hyp_len = 1849 ref_len = 2166)
chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 73.5
TXT
diff "$tmp/want" "$tmp/out" || fail "en: printed lines differ from sacreBLEU's"

# HYP from stdin, two references, Chinese references pick the zh tokenizer; full precision in JSON.
"$tfm" bleu "$fx/zh/ref1.txt" --ref "$fx/zh/ref2.txt" --json <"$fx/zh/hyp.txt" >"$tmp/json"
python3 - "$tmp/json" "$fx/expected.json" <<'PY' || fail "zh JSON figures differ from expected.json"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
exp = json.load(open(sys.argv[2]))
want_bleu = next(e for e in exp if e["set"] == "zh" and e.get("tokenize") == "zh" and e["smooth_method"] == "exp"
                 and len(e["references"]) == 2)
want_chrf = next(e for e in exp if e["set"] == "zh" and e.get("metric") == "chrF2" and len(e["references"]) == 2)
b, c = got
assert b["signature"] == want_bleu["signature"], b["signature"]
assert abs(b["score"] - want_bleu["score"]) < 1e-9, (b["score"], want_bleu["score"])
assert b["counts"] == want_bleu["counts"] and b["totals"] == want_bleu["totals"]
assert c["signature"] == want_chrf["signature"] and abs(c["score"] - want_chrf["score"]) < 1e-9
PY

# Options: tokenizer, smoothing, score only.
[ "$("$tfm" bleu "$fx/eu/ref1.txt" "$fx/eu/hyp.txt" --tok intl -s add-k -m bleu -b -w 4)" = "59.0300" ] \
  || fail "eu intl add-k score"

expect_error "has 3 lines but the hypotheses" bash -c "head -3 '$fx/en/ref1.txt' >'$tmp/r3'; '$tfm' bleu '$tmp/r3' '$fx/en/hyp.txt'"
expect_error "cannot open" "$tfm" bleu "$tmp/missing.txt" "$fx/en/hyp.txt"
# Bytes that are not UTF-8 (a byte-level BPE model can emit them) count as U+FFFD, one per
# maximal invalid subpart as Python's errors='replace', with a warning: the lone continuation
# byte below is one replacement character, the truncated sequence \xe7\x8c another.
printf 'a \xb4b\n\xe7\x8c c\n' >"$tmp/bad"
printf 'a \xef\xbf\xbdb\n\xef\xbf\xbd c\n' >"$tmp/replaced"
"$tfm" bleu "$tmp/replaced" "$tmp/bad" --json -e >"$tmp/bad.json" 2>"$tmp/err"
grep -qF "2 line(s) are not valid UTF-8 (the first: line 1)" "$tmp/err" || fail "no warning: $(cat "$tmp/err")"
python3 -c 'import json,sys; s=[json.loads(l)["score"] for l in open(sys.argv[1])]; assert s[0] > 99.999 and s[1] > 99.999, s' \
  "$tmp/bad.json" || fail "invalid UTF-8 not scored as U+FFFD: $(cat "$tmp/bad.json")"
if "$tfm" bleu "$fx/en/ref1.txt" "$fx/en/hyp.txt" --tok 13b >/dev/null 2>"$tmp/err"; then fail "--tok 13b accepted"; fi
grep -qF "13b not in" "$tmp/err" || fail "--tok 13b: $(cat "$tmp/err")"
echo "bleu_command: ok"
