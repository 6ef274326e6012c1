#!/usr/bin/env bash
# Model-parallel inference under mpirun (2 ranks on localhost, 1 thread each): tiny Llama
# (RoPE, GQA, SwiGLU) and GPT-2 (fused c_attn, Conv1D layout, biases) models trained here for a
# few steps, then
#  1. `mpirun -np 2 tfm generate ... --tensor-parallel 2`, `--pipeline-parallel 2`, and
#     `mpirun -np 4 ... --tensor-parallel 2 --pipeline-parallel 2` (2 stages of 2 shards) print
#     exactly what one process prints: greedy, sampled with a seed, beam search, a --file batch, and q8_0 weights
#     (converted per shard) against one process's q8_0; so does `tfm translate` (greedy in
#     batches and beam 4 over stdin, which mpirun gives to rank 0 only) with an En->Zh
#     encoder-decoder trained on data/cmn-eng.tsv, on 2 shards (cross-attention split too),
#     2 stages (the encoder's and the decoder's layers split) and 2 stages of 2 shards;
#  2. only rank 0 prints;
#  3. --max-memory applies to the shard: a budget under the whole model's plan but over the
#     shard's loads with --tensor-parallel 2 (and --pipeline-parallel 2) and is refused without
#     it; tfm info --tensor-parallel/--pipeline-parallel 2 print plans under it;
#  4. errors: --tensor-parallel 2 without mpirun, or on 1 rank of 2 ... 3, a model whose heads
#     do not divide, both flags on 2 ranks, more stages than an encoder-decoder has layers: one line,
#     non-zero exit, no hang.
#   usage: mpi_model_parallel.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"

train_tiny llama '{ "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 96 }'
train_tiny gpt2 '{ "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 96 }'

MPI4="${MPI/-np 2/-np 4}"
same() {  # same NAME ARGS...: one process, 2 tensor-parallel ranks, 2 pipeline stages and 2 stages of 2 shards print the same
  local name=$1 kind
  shift
  "$TFM" -t 1 generate "$@" > "$DIR/$name.one" 2> "$DIR/$name.one.err" || { echo "FAIL: $name, one process"; cat "$DIR/$name.one.err"; exit 1; }
  [ -s "$DIR/$name.one" ] || { echo "FAIL: $name printed nothing"; exit 1; }
  for kind in tensor pipeline both; do
    local mpi=$MPI flags="--$kind-parallel 2"
    [ $kind != both ] || { mpi=$MPI4; flags="--tensor-parallel 2 --pipeline-parallel 2"; }
    $mpi "$TFM" -t 1 generate "$@" $flags > "$DIR/$name.$kind" 2> "$DIR/$name.$kind.err" ||
      { echo "FAIL: $name, $flags"; cat "$DIR/$name.$kind.err"; exit 1; }
    cmp -s "$DIR/$name.one" "$DIR/$name.$kind" || { echo "FAIL: $name differs with $flags"; diff "$DIR/$name.one" "$DIR/$name.$kind"; exit 1; }
  done
}
printf 'ROMEO:\nFirst Citizen:\nTo be\n' > "$DIR/prompts.txt"
for m in llama gpt2; do
  same "$m.greedy" -m "$DIR/$m" -p "ROMEO:" -n 40 --temp 0
  same "$m.sampled" -m "$DIR/$m" -p "KING:" -n 40 --temp 0.9 -s 11
  same "$m.beam" -m "$DIR/$m" -p "Thou" -n 16 --beam 3
  same "$m.file" -m "$DIR/$m" --file "$DIR/prompts.txt" -n 20 --temp 0
  same "$m.q8_0" -m "$DIR/$m" -p "ROMEO:" -n 40 --temp 0 --dtype q8_0
done
for r in 0 1; do  # each rank holds its shard or stage (the start-up line of each, on stderr)
  grep -q "parameters in rank $r's shard of 2" "$DIR/llama.greedy.tensor.err" || { echo "FAIL: rank $r holds no shard"; cat "$DIR/llama.greedy.tensor.err"; exit 1; }
  grep -q "parameters in stage $r of 2" "$DIR/llama.greedy.pipeline.err" || { echo "FAIL: rank $r holds no stage"; cat "$DIR/llama.greedy.pipeline.err"; exit 1; }
  for s in 0 1; do
    grep -q "parameters in rank $r's shard of 2 of stage $s of 2" "$DIR/llama.greedy.both.err" ||
      { echo "FAIL: no rank holds shard $r of stage $s"; cat "$DIR/llama.greedy.both.err"; exit 1; }
  done
done
# An encoder-decoder through tfm translate, sources on stdin.
sed -n 301,320p "$SRC/data/cmn-eng.tsv" | cut -f1 > "$DIR/sources.txt"
train_tiny_s2s 150
for beam in 1 4; do
  "$TFM" -t 1 translate -m "$DIR/s2s" --beam $beam < "$DIR/sources.txt" > "$DIR/t$beam.one" 2> /dev/null
  [ "$(grep -c . "$DIR/t$beam.one")" -ge 10 ] || { echo "FAIL: the model translates too little to compare"; cat "$DIR/t$beam.one"; exit 1; }
  # 2 shards, 2 stages (the encoder's and the decoder's layers split), 2 stages of 2 shards.
  for flags in "--tensor-parallel 2" "--pipeline-parallel 2" "--tensor-parallel 2 --pipeline-parallel 2"; do
    mpi=$MPI
    [ "$flags" != "--tensor-parallel 2 --pipeline-parallel 2" ] || mpi=$MPI4
    case "$flags" in --tensor-parallel\ 2) kind=t ;; --pipeline-parallel\ 2) kind=p ;; *) kind=tp ;; esac
    err="$DIR/t$beam.$kind.err"
    $mpi "$TFM" -t 1 translate -m "$DIR/s2s" --beam $beam $flags < "$DIR/sources.txt" > "$DIR/t$beam.two" 2> "$err" ||
      { echo "FAIL: translate with $flags"; cat "$err"; exit 1; }
    cmp -s "$DIR/t$beam.one" "$DIR/t$beam.two" || { echo "FAIL: translate beam $beam differs with $flags"; diff "$DIR/t$beam.one" "$DIR/t$beam.two"; exit 1; }
  done
done
grep -q "parameters in stage 1 of 2" "$DIR/t4.p.err" || { echo "FAIL: no rank holds stage 1 of the encoder-decoder"; cat "$DIR/t4.p.err"; exit 1; }
echo "translate (encoder-decoder, greedy and beam 4, stdin): 2 shards, 2 stages and 2 x 2 print what one process prints"

# One copy of the text: rank 1's stdout goes nowhere.
[ "$(wc -l < "$DIR/llama.file.tensor")" -eq 3 ] || { echo "FAIL: expected 3 JSON lines"; cat "$DIR/llama.file.tensor"; exit 1; }
echo "2 ranks (tensor or pipeline parallel) and 4 (2 stages x 2 shards) print what one process prints: llama and gpt2, greedy, sampled, beam, --file, q8_0"

# 3. --max-memory on the shard: between the shard's plan and the whole model's.
whole=$("$TFM" info -m "$DIR/llama" --ctx-size 96 | sed -n 's/^  total *\([0-9]*\) bytes.*/\1/p')
[ -n "$whole" ] || { echo "FAIL: no plan total in tfm info"; "$TFM" info -m "$DIR/llama" --ctx-size 96; exit 1; }
budget=$((whole * 85 / 100))
# tfm info prints the plan that --max-memory checks: one shard's, one stage's.
for kind in tensor pipeline; do
  part=$("$TFM" info -m "$DIR/llama" --ctx-size 96 --$kind-parallel 2 | sed -n 's/^  total *\([0-9]*\) bytes.*/\1/p')
  [ -n "$part" ] && [ "$part" -lt "$budget" ] || { echo "FAIL: tfm info --$kind-parallel 2 plans '$part' bytes, not under $budget"; exit 1; }
done
if "$TFM" -t 1 generate -m "$DIR/llama" -p "A" -n 2 -c 96 --max-memory "$budget" > /dev/null 2> "$DIR/mm.err"; then
  echo "FAIL: one process loaded over its budget"; exit 1
fi
$MPI "$TFM" -t 1 generate -m "$DIR/llama" -p "A" -n 2 -c 96 --max-memory "$budget" --tensor-parallel 2 > /dev/null 2> "$DIR/mm2.err" ||
  { echo "FAIL: the shards did not fit $budget bytes"; cat "$DIR/mm2.err"; exit 1; }
$MPI "$TFM" -t 1 generate -m "$DIR/llama" -p "A" -n 2 -c 96 --max-memory "$budget" --pipeline-parallel 2 > /dev/null 2> "$DIR/mm3.err" ||
  { echo "FAIL: the stages did not fit $budget bytes"; cat "$DIR/mm3.err"; exit 1; }
echo "--max-memory $budget: refused for the whole model (plan $whole bytes), the shards and the stages fit"

# 4. errors
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1 rc=0
  shift
  timeout 60 "$@" > "$DIR/err.out" 2> "$DIR/err.log" || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: exit $rc (124: it hung) for $*"; cat "$DIR/err.log"; exit 1; }
  grep -q "$pattern" "$DIR/err.log" || { echo "FAIL: no '$pattern' in:"; cat "$DIR/err.log"; exit 1; }
}
expect_error "started without mpirun" "$TFM" generate -m "$DIR/llama" -p "A" --tensor-parallel 2
expect_error "needs 3 processes" $MPI "$TFM" generate -m "$DIR/llama" -p "A" --tensor-parallel 3
train_tiny odd '{ "model_type": "llama", "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 1,
             "num_attention_heads": 3, "max_position_embeddings": 64 }'
expect_error "3 attention heads and 3 key/value heads must divide by the 2 ranks" \
  $MPI "$TFM" generate -m "$DIR/odd" -p "A" --tensor-parallel 2
expect_error "needs 4 processes" $MPI "$TFM" generate -m "$DIR/llama" -p "A" --tensor-parallel 2 --pipeline-parallel 2
expect_error "2 encoder and 2 decoder layers cannot make 4 stages" $MPI4 "$TFM" translate -m "$DIR/s2s" "Hello" --pipeline-parallel 4
echo "errors: without mpirun, a rank count that differs (also for both kinds), heads that do not divide, more stages than an encoder-decoder's layers"
