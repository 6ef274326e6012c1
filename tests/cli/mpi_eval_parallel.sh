#!/usr/bin/env bash
# tfm eval under model parallelism (mpirun, 2 ranks, 1 thread each): a tiny GPT-2 and a tiny
# Llama-layout decoder (RoPE, GQA, SwiGLU) trained here for a few steps, scored on their
# held-out split and on a --data file by one process, by 2 tensor-parallel shards (loss within
# 1e-5) and by 2 pipeline stages (the same report to the last digit: the stages compute what
# one process does); rank 0 alone prints; --stride refuses model parallelism. A text classifier
# (encoder-only) and a translator (encoder-decoder; loss, BLEU and chrF) too: 2 shards within
# 1e-5, 2 stages the same report.
#   usage: mpi_eval_parallel.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"
train() {  # train NAME MODEL_JSON
  cat > "$DIR/$1.json" <<JSON
{ "task": "lm", "seed": 5, "model": $2,
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 8 },
  "eval": { "every": 8, "batches": 2, "log_every": 8 },
  "checkpoint": { "every": 0 }, "sample": { "tokens": 0 } }
JSON
  run "$DIR/$1.train.log" "$TFM" -t 1 train "$DIR/$1.json" --out "$DIR/$1"
}
train gpt2 '{ "model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64 }'
train llama '{ "model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64 }'
head -c 3000 "$SRC/data/tinyshakespeare.txt" > "$DIR/text.txt"
for m in gpt2 llama; do
  for data in "" "--data $DIR/text.txt"; do
    run "$DIR/one.json" "$TFM" -t 1 eval -m "$DIR/$m" $data --json
    run "$DIR/tp.json" $MPI "$TFM" -t 1 eval -m "$DIR/$m" $data --json --tensor-parallel 2
    run "$DIR/pp.json" $MPI "$TFM" -t 1 eval -m "$DIR/$m" $data --json --pipeline-parallel 2
    [ "$(wc -l < "$DIR/tp.json")" -eq 1 ] || { echo "FAIL: $m: more than rank 0 printed"; cat "$DIR/tp.json"; exit 1; }
    python3 - "$DIR/one.json" "$DIR/tp.json" "$DIR/pp.json" "$m ${data:+(--data)}" <<'PY'
import json, sys
one, tp, pp = (json.load(open(p)) for p in sys.argv[1:4])
assert one["examples"] == tp["examples"] == pp["examples"] > 0, (one, tp, pp)
assert abs(one["loss"] - tp["loss"]) <= 1e-5 * abs(one["loss"]), ("tensor parallel", one, tp)
assert one["loss"] == pp["loss"] and one["perplexity"] == pp["perplexity"], ("pipeline", one, pp)
print(f"{sys.argv[4]}: loss {one['loss']:.6f} over {one['examples']} tokens; 2 shards {tp['loss']:.6f}, 2 stages the same")
PY
  done
done
# A text classifier (an encoder's stages: every stage computes the head on the last one's output).
train_tiny_cls 3 20
run "$DIR/one.json" "$TFM" -t 1 eval -m "$DIR/cls" --json
run "$DIR/tp.json" $MPI "$TFM" -t 1 eval -m "$DIR/cls" --json --tensor-parallel 2
run "$DIR/pp.json" $MPI "$TFM" -t 1 eval -m "$DIR/cls" --json --pipeline-parallel 2
python3 - "$DIR/one.json" "$DIR/tp.json" "$DIR/pp.json" <<'PY'
import json, sys
one, tp, pp = (json.load(open(p)) for p in sys.argv[1:4])
assert one["examples"] == tp["examples"] == pp["examples"] > 0, (one, tp, pp)
assert abs(one["loss"] - tp["loss"]) <= 1e-5 * abs(one["loss"]), ("tensor parallel", one, tp)
assert one == pp, ("pipeline", one, pp)
print(f"classifier: loss {one['loss']:.6f}, accuracy {one['accuracy']:.4f} over {one['examples']} texts; 2 shards "
      f"{tp['loss']:.6f}, 3 layers on 2 stages the same report")
PY
# A translator (an encoder-decoder's stages: the encoder through the stages, the memory on every
# stage, then the decoder through them): loss, BLEU and chrF from 2 stages the same report.
train_tiny_s2s 150
run "$DIR/one.json" "$TFM" -t 1 eval -m "$DIR/s2s" --json
run "$DIR/tp.json" $MPI "$TFM" -t 1 eval -m "$DIR/s2s" --json --tensor-parallel 2
run "$DIR/pp.json" $MPI "$TFM" -t 1 eval -m "$DIR/s2s" --json --pipeline-parallel 2
python3 - "$DIR/one.json" "$DIR/tp.json" "$DIR/pp.json" <<'PY'
import json, sys
one, tp, pp = (json.load(open(p)) for p in sys.argv[1:4])
assert one["examples"] == tp["examples"] == pp["examples"] > 0 and one["chrf"] > 0, (one, tp, pp)
assert abs(one["loss"] - tp["loss"]) <= 1e-5 * abs(one["loss"]), ("tensor parallel", one, tp)
assert one == pp, ("pipeline", one, pp)
print(f"translator: loss {one['loss']:.6f}, BLEU {one['bleu']:.2f}, chrF {one['chrf']:.2f} over {one['examples']} pairs; "
      f"2 shards {tp['loss']:.6f}, 2 stages the same report")
PY
expect_error "--stride with --tensor-parallel" "runs in one process" \
  $MPI "$TFM" -t 1 eval -m "$DIR/gpt2" --data "$DIR/text.txt" --stride 16 --tensor-parallel 2
echo "PASS"
