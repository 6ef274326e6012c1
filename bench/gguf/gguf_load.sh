#!/usr/bin/env bash
# GGUF load time, cold (page cache dropped: needs root) and warm, tfm vs llama.cpp, and peak RSS.
#   bench/gguf/gguf_load.sh TFM DIR     (DIR: where tools/reference/make_gguf_bench.py wrote the files)
# tfm: `generate -n 1 -v` prints "model loaded in S" (read + dequantize to f32); llama.cpp
# (node-llama-cpp): load, then load + one evaluated token (llama.cpp maps the file lazily, so
# its first token is where the weights are read). Peak RSS from /usr/bin/time (%M).
set -euo pipefail
tfm=$1 dir=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(cannot drop the page cache: cold = warm)" >&2; }
printf "%-28s %-5s %-10s %12s %16s %12s\n" file state engine "load s" "load+1 token s" "peak RSS MiB"
for f in "$dir"/bench-gpt2-124m-f32.gguf "$dir"/bench-llama-1.1b-f16.gguf; do
  for state in cold warm; do
    [ $state = cold ] && drop
    out=$( { /usr/bin/time -f "RSS %M" "$tfm" -t 2 generate -m "$f" -p "a" -n 1 --temp 0 -v >/dev/null; } 2>&1 )
    load=$(echo "$out" | sed -n 's/.*model loaded in \([0-9.]*\) s.*/\1/p')
    total=$(echo "$out" | sed -n 's/.*prefill [0-9]* tokens in \([0-9.]*\) s.*/\1/p')
    rss=$(echo "$out" | sed -n 's/^RSS \([0-9]*\)/\1/p')
    printf "%-28s %-5s %-10s %12s %16s %12d\n" "$(basename "$f")" $state tfm "$load" "$(echo "$load + $total" | bc)" $((rss / 1024))
    [ $state = cold ] && drop
    out=$( { NODE_LLAMA_CPP_SKIP_DOWNLOAD=true /usr/bin/time -f "RSS %M" node "$here/tools/reference/llama-cpp/bench_load.mjs" "$f"; } 2>&1 )
    read -r l t <<<"$(echo "$out" | grep -E '^[0-9.]+ [0-9.]+$')"
    rss=$(echo "$out" | sed -n 's/^RSS \([0-9]*\)/\1/p')
    printf "%-28s %-5s %-10s %12s %16s %12d\n" "$(basename "$f")" $state llama.cpp "$l" "$t" $((rss / 1024))
  done
done
