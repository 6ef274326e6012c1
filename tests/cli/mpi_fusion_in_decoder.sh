#!/usr/bin/env bash
# Fusion-in-Decoder under mpirun (2 ranks, 1 thread each): rank 0 builds the passage index into
# the model directory while the other waits, every rank retrieves alike, and the losses and
# gradient norms equal one process's within 1e-5 (each rank takes half of every batch's examples
# with all their parts); the index is the one a single process builds.
#   usage: mpi_fusion_in_decoder.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"
head -2000 "$SRC/data/cmn-eng.tsv" > "$DIR/pairs.tsv"
config() {  # config NAME FUSION_JSON
  cat > "$DIR/$1.json" <<JSON
{ "task": "seq2seq", "seed": 3,
  "model": { "architecture": "encoder_decoder", "d_model": 32, "n_heads": 2, "n_layers": 1, "n_decoder_layers": 1,
             "d_ff": 64, "max_positions": 64, "position": "sinusoidal", "dropout": 0.0, "attention_dropout": 0.0,
             "embedding_dropout": 0.0 },
  "tokenizer": { "kind": "bpe", "vocab_size": 300, "isolate_cjk": true },
  "data": { "train": "$DIR/pairs.tsv", "test_size": 40, "max_length": 48 $2 },
  "optimizer": { "name": "adamw", "lr": 0.003 },
  "training": { "batch_size": 16, "max_steps": 6 },
  "eval": { "every": 6, "log_every": 1, "bleu_examples": 0 } }
JSON
}
config enc ""
config fid ", \"fusion\": { \"encoder\": \"$DIR/enc\", \"k\": 2 }"
run "$DIR/enc.log" "$TFM" -t 1 train "$DIR/enc.json" --out "$DIR/enc" -q
run "$DIR/one.log" "$TFM" -t 1 train "$DIR/fid.json" --out "$DIR/one" -q
run "$DIR/two.log" $MPI "$TFM" -t 1 train "$DIR/fid.json" --out "$DIR/two" -q
cmp -s "$DIR/one/fusion_index/passages.jsonl" "$DIR/two/fusion_index/passages.jsonl" || { echo "FAIL: the ranks' index holds other passages"; exit 1; }
cmp -s "$DIR/one/fusion_index/vectors.f32" "$DIR/two/fusion_index/vectors.f32" || { echo "FAIL: the ranks' index holds other vectors"; exit 1; }
metrics_within "$DIR/one/metrics.jsonl" "$DIR/two/metrics.jsonl" 7 "Fusion-in-Decoder on 2 ranks"
echo "mpi fusion in decoder: ok"
