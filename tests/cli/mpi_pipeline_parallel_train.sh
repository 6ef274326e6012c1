#!/usr/bin/env bash
# Pipeline-parallel training under mpirun (1 thread per rank): a 4-layer pre-norm decoder with
# RoPE, GQA, SwiGLU and every dropout on (stochastic depth too), 4 micro-batches per step:
#  1. untied embeddings: 2 stages (1F1B and GPipe; also in bf16 with activation checkpointing)
#     and 4 stages print metrics.jsonl byte-identical to one process's, and each stage writes
#     its part of the weights and optimizer state (a sharded set with its index), together
#     byte-identical to one process's single files;
#  1c. encoders: a BERT-style classifier (micro-batches of different lengths) and a ViT, with
#     every dropout, byte-identical to one process on 2 stages;
#  2. 3 steps on 2 stages resumed on one process for 3 more, and the reverse: byte-identical
#     to an uninterrupted run (the checkpoint is the whole model and optimizer state; the
#     other layout's weight files do not stay beside the new ones); 4 ranks
#     as 2 data-parallel pipelines of 2 stages with the bit-exact reduction and ZeRO-1:
#     byte-identical to one process with the bit-exact reduction;
#  3. tied embeddings (used by the first and the last stage): losses within 1e-5; the shipped
#     configs/shakespeare-gpt.json trains on 2 stages and prints its sample; 1F1B's peak of the
#     steps (the allocator's count) is below GPipe's; a stage killed with SIGKILL stops the job
#     (no hang) and the last checkpoint resumes;
#  3b. tensor x pipeline parallelism: 4 ranks as 2 stages of 2 shards and 8 as 2 pipelines of
#     them, with gradient clipping: losses and gradient norms within 1e-5 of one process, the
#     shards' weights and optimizer state too; resumes across layouts both ways; the shipped
#     config's sample is one process's;
#  1d. encoder-decoders (a translator, T5, Whisper) on 2 stages (1F1B and GPipe), 3 stages, balanced by memory, 2 x 2 with data and tensor
#     parallelism, resumed on one process;
#  4. errors: stages (times shards) other than the ranks, the bit-exact sums with an
#     encoder-decoder's stages: one line, non-zero exit, no hang.
#   usage: mpi_pipeline_parallel_train.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"
MPI4="${MPI/-np 2/-np 4}"
MPI3="${MPI/-np 2/-np 3}"
peak() { sed -n 's/.*peak of the steps \([0-9.]*\) MiB.*/\1/p' "$1"; }  # stage 0's, measured by the allocator
peak_below() {  # peak_below LOG_A LOG_B WHAT NAME_A NAME_B: stage 0's measured peak in LOG_A below LOG_B's
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert a < b, (a, b); print(f'{sys.argv[3]}: peak of the steps on stage 0: {sys.argv[4]} {a} MiB < {sys.argv[5]} {b} MiB')" \
    "$(peak "$1")" "$(peak "$2")" "$3" "$4" "$5" || { echo "FAIL: $3: $4 did not lower stage 0's peak below $5"; exit 1; }
}
balanced_and_even() {  # balanced_and_even NAME P: NAME.json (with "distributed": {}) on one process (P1),
  # on 2 stages balanced by memory (P2) and on 2 even stages (Pe); logs P1.log, P2.log, Pe.log
  sed 's/"distributed": {}/"distributed": { "pipeline_balance": "even" }/' "$DIR/$1.json" > "$DIR/$1-even.json"
  run "$DIR/${2}1.log" "$TFM" -t 1 train "$DIR/$1.json" --out "$DIR/${2}1"
  run "$DIR/${2}2.log" $MPI "$TFM" -t 1 train "$DIR/$1.json" --out "$DIR/${2}2" --pipeline-parallel 2
  run "$DIR/${2}e.log" $MPI "$TFM" -t 1 train "$DIR/$1-even.json" --out "$DIR/${2}e" --pipeline-parallel 2
}
config() {  # config NAME TIE MAX_STEPS [DISTRIBUTED_JSON]
  local dist=${4:-'{}'}
  cat > "$DIR/$1.json" <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "n_layers": 4,
             "d_ff": 64, "max_positions": 32, "position": "rope", "activation": "swiglu", "norm": "rms_norm",
             "norm_placement": "pre", "tie_embeddings": $2, "dropout": 0.1, "attention_dropout": 0.1,
             "embedding_dropout": 0.1, "stochastic_depth": 0.1 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 2, "grad_accum": 4, "max_steps": $3 },
  "schedule": { "name": "constant" },
  "distributed": $dist,
  "eval": { "every": 3, "batches": 1, "log_every": 1 },
  "checkpoint": { "every": 3 },
  "sample": { "tokens": 0 } }
JSON
}
same_run() {  # same_run A B WHAT [STAGES]: byte-identical metrics and weights (B's written by STAGES stages)
  cmp "$DIR/$1/metrics.jsonl" "$DIR/$2/metrics.jsonl" || { echo "FAIL: $3: metrics differ"; diff "$DIR/$1/metrics.jsonl" "$DIR/$2/metrics.jsonl"; exit 1; }
  if [ -n "${4:-}" ]; then sharded_as "$DIR/$1" "$DIR/$2" "$4" 0 "$3"; return; fi
  cmp "$DIR/$1/model.safetensors" "$DIR/$2/model.safetensors" || { echo "FAIL: $3: weights differ"; exit 1; }
  echo "$3: metrics and weights byte-identical to one process"
}

# 1. untied: bit for bit
config untied false 6
run "$DIR/one.log" "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/one"
run "$DIR/p2.log" $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/p2" --pipeline-parallel 2
grep -q "^pipeline parallel: 2 stages, schedule 1F1B, 4 micro-batches per step per pipeline, 1 pipeline; stage 0 holds layers 0-1" "$DIR/p2.log" ||
  { echo "FAIL: no pipeline summary"; cat "$DIR/p2.log"; exit 1; }
grep -q "^pipeline: stage 0 spent" "$DIR/p2.log" || { echo "FAIL: no bubble measurement"; exit 1; }
same_run one p2 "2 stages, 1F1B" 2
run "$DIR/g2.log" $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/g2" --pipeline-parallel 2 --pipeline-schedule gpipe
same_run one g2 "2 stages, GPipe" 2
run "$DIR/b1.log" "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/b1" --precision bf16 --checkpoint-activations
run "$DIR/b2.log" $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/b2" --precision bf16 --checkpoint-activations --pipeline-parallel 2
same_run b1 b2 "2 stages, bf16 and activation checkpointing" 2
run "$DIR/p4.log" $MPI4 "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/p4" --pipeline-parallel 4
same_run one p4 "4 stages, 1F1B" 4

# 1b. stages balanced by the memory planner: 6 layers, micro-batches of 8 x 32 tokens, whose
# activations outweigh a layer's weights, and 1F1B keeps 2 of them alive on stage 0, 1 on stage
# 1: stage 0 takes 2 layers, stage 1 four; bit for bit one process still, and stage 0's
# measured peak below the even split's (3 and 3).
sed -e 's/"batch_size": 2/"batch_size": 8/' -e 's/"n_layers": 4/"n_layers": 6/' "$DIR/untied.json" > "$DIR/heavy.json"
balanced_and_even heavy h
grep -q "stage 0 holds layers 0-1; .*layers per stage by the memory planner (planned peak): 2 (.*) 4 (" "$DIR/h2.log" ||
  { echo "FAIL: the planner did not give stage 0 two layers"; grep "pipeline parallel" "$DIR/h2.log"; exit 1; }
grep -q "stage 0 holds layers 0-2; .*layers per stage, even" "$DIR/he.log" || { echo "FAIL: no even split"; grep "pipeline parallel" "$DIR/he.log"; exit 1; }
same_run h1 h2 "2 stages balanced by memory (2 and 4 layers)" 2
peak_below "$DIR/h2.log" "$DIR/he.log" "a decoder on 2 stages" balanced even

# 1c. encoders: a 4-layer BERT-style spam classifier (its micro-batches padded to their own
# longest text) and a 4-layer ViT on generated pictures, every dropout and stochastic depth on,
# on 2 stages (1F1B; the ViT also GPipe): metrics and weights byte-identical to one process's
head -400 "$SRC/data/sms-spam.tsv" > "$DIR/sms.tsv"
cat > "$DIR/bert.json" <<JSON
{ "task": "classifier", "seed": 5,
  "model": { "model_type": "transformer", "architecture": "encoder_only", "head": "classifier", "pooling": "first",
             "d_model": 32, "n_heads": 2, "n_layers": 4, "d_ff": 64, "max_positions": 64, "position": "learned",
             "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1, "stochastic_depth": 0.1 },
  "tokenizer": { "kind": "bpe", "vocab_size": 300 },
  "data": { "train": "$DIR/sms.tsv", "header": true, "test_fraction": 0.1, "max_length": 64, "positive_label": "spam" },
  "training": { "batch_size": 4, "grad_accum": 4, "max_steps": 6 },
  "eval": { "every": 3, "log_every": 1 }, "checkpoint": { "every": 3 } }
JSON
run "$DIR/bert1.log" "$TFM" -t 1 train "$DIR/bert.json" --out "$DIR/bert1"
run "$DIR/bert2.log" $MPI "$TFM" -t 1 train "$DIR/bert.json" --out "$DIR/bert2" --pipeline-parallel 2
grep -q '"accuracy"' "$DIR/bert2/metrics.jsonl" || { echo "FAIL: the classifier's stages did not evaluate"; exit 1; }
same_run bert1 bert2 "a BERT-style classifier on 2 stages, 1F1B" 2
/usr/bin/python3 "$SRC/tests/support/make_pictures.py" "$DIR/pictures" 12
cat > "$DIR/vit.json" <<JSON
{ "task": "image_classifier", "seed": 3,
  "model": { "model_type": "vit", "image_size": 12, "patch_size": 4, "hidden_size": 16, "num_hidden_layers": 4,
             "num_attention_heads": 2, "intermediate_size": 32, "hidden_dropout_prob": 0.1,
             "attention_probs_dropout_prob": 0.1, "stochastic_depth": 0.1 },
  "data": { "train": "$DIR/pictures", "test_fraction": 0.25,
            "preprocessor": { "do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25] } },
  "training": { "batch_size": 4, "grad_accum": 4, "max_steps": 6 },
  "eval": { "every": 3, "log_every": 1 }, "checkpoint": { "every": 3 } }
JSON
run "$DIR/vit1.log" "$TFM" -t 1 train "$DIR/vit.json" --out "$DIR/vit1"
run "$DIR/vit2.log" $MPI "$TFM" -t 1 train "$DIR/vit.json" --out "$DIR/vit2" --pipeline-parallel 2
same_run vit1 vit2 "a ViT on 2 stages, 1F1B" 2
run "$DIR/vitg.log" $MPI "$TFM" -t 1 train "$DIR/vit.json" --out "$DIR/vitg" --pipeline-parallel 2 --pipeline-schedule gpipe
same_run vit1 vitg "a ViT on 2 stages, GPipe" 2

# 1d. encoder-decoders (through the encoder's stages, then the decoder's): a pre-norm
# translator (3 encoder and 2 decoder layers, untied head, every dropout, stochastic depth,
# clipping) on 2 stages prints one process's metrics.jsonl byte for byte under 1F1B and GPipe,
# on 3 stages (3 decoder layers) too (only the token
# embedding, which the encoder and the decoder share, sums its parts in another order: within
# 1e-5), and in bf16 with activation checkpointing too, resumes on one process
# byte-identical; 2 pipelines of 2 stages (ZeRO-1) and 2 stages of 2 shards within 1e-5; T5 (its relative-position tables on every stage) and Whisper (speech,
# SpecAugment) on 2 stages byte-identical metrics
head -300 "$SRC/data/cmn-eng.tsv" | sed '1s/^\xEF\xBB\xBF//' | cut -f1,2 > "$DIR/pairs.tsv"
cat > "$DIR/s2s.json" <<JSON
{ "task": "seq2seq", "seed": 4,
  "model": { "model_type": "transformer", "architecture": "encoder_decoder", "d_model": 32, "n_heads": 2, "n_layers": 3,
             "n_decoder_layers": 2, "d_ff": 64, "max_positions": 48, "norm_placement": "pre", "position": "sinusoidal",
             "tie_embeddings": false, "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1, "stochastic_depth": 0.1 },
  "tokenizer": { "kind": "bpe", "vocab_size": 400, "isolate_cjk": true },
  "data": { "train": "$DIR/pairs.tsv", "test_size": 20, "max_length": 48 },
  "training": { "batch_size": 4, "grad_accum": 4, "max_steps": 6, "clip_grad_norm": 1.0 },
  "schedule": { "name": "constant" },
  "eval": { "every": 3, "log_every": 1, "bleu_examples": 10 }, "checkpoint": { "every": 3 } }
JSON
run "$DIR/s1.log" "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/s1"
run "$DIR/s2.log" $MPI "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/s2" --pipeline-parallel 2
grep -q "^pipeline parallel: 2 stages, schedule 1F1B (interleaved over an encoder-decoder's two stacks), 4 micro-batches .*; stage 0 holds layers 0-1 (encoder) and 0-0 (decoder); ideal bubble 11.1% .*, at most 5 graphs alive on this stage" "$DIR/s2.log" ||
  { echo "FAIL: no encoder-decoder pipeline summary"; grep pipeline "$DIR/s2.log"; exit 1; }
grep -q '"bleu"' "$DIR/s2/metrics.jsonl" || { echo "FAIL: the translator's stages did not evaluate"; exit 1; }
cmp "$DIR/s1/metrics.jsonl" "$DIR/s2/metrics.jsonl" || { echo "FAIL: translator on 2 stages: metrics differ"; diff "$DIR/s1/metrics.jsonl" "$DIR/s2/metrics.jsonl"; exit 1; }
sharded_as "$DIR/s1" "$DIR/s2" 2 1e-5 "a translator on 2 stages under 1F1B (metrics byte-identical)"
run "$DIR/sg.log" $MPI "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/sg" --pipeline-parallel 2 --pipeline-schedule gpipe
grep -q "schedule GPipe (an encoder-decoder's), .*ideal bubble 11.1% .*, at most 8 graphs alive" "$DIR/sg.log" ||
  { echo "FAIL: no GPipe summary"; grep pipeline "$DIR/sg.log"; exit 1; }
cmp -s "$DIR/s1/metrics.jsonl" "$DIR/sg/metrics.jsonl" || { echo "FAIL: translator on 2 stages under GPipe"; exit 1; }
sharded_as "$DIR/s1" "$DIR/sg" 2 1e-5 "a translator on 2 stages under GPipe (metrics byte-identical)"
peak_below "$DIR/s2.log" "$DIR/sg.log" "a translator on 2 stages" 1F1B GPipe
# 3 stages and 4 micro-batches: one group of 4, stage 0 warming up with 2 (P - 1) + 4 passes
sed 's/"n_decoder_layers": 2/"n_decoder_layers": 3/' "$DIR/s2s.json" > "$DIR/s2s3.json"
run "$DIR/s31.log" "$TFM" -t 1 train "$DIR/s2s3.json" --out "$DIR/s31"
run "$DIR/s33.log" $MPI3 "$TFM" -t 1 train "$DIR/s2s3.json" --out "$DIR/s33" --pipeline-parallel 3
cmp -s "$DIR/s31/metrics.jsonl" "$DIR/s33/metrics.jsonl" || { echo "FAIL: translator on 3 stages"; diff "$DIR/s31/metrics.jsonl" "$DIR/s33/metrics.jsonl"; exit 1; }
sharded_as "$DIR/s31" "$DIR/s33" 3 1e-5 "a translator on 3 stages under 1F1B (metrics byte-identical)"
# Balanced by memory: 8 + 8 layers and micro-batches of 16 pairs, whose activations outweigh a
# layer's weights; stage 0 keeps more graphs alive under 1F1B (5 against 3), so it takes 3
# encoder layers and stage 1 five: one process's metrics still, and stage 0's measured peak
# below the even split's (4 + 4 each)
sed -e 's/"n_layers": 3,/"n_layers": 8,/' -e 's/"n_decoder_layers": 2,/"n_decoder_layers": 8,/' \
    -e 's/"batch_size": 4, "grad_accum": 4, "max_steps": 6,/"batch_size": 16, "grad_accum": 4, "max_steps": 4,/' \
    -e 's/"schedule": { "name": "constant" },/"schedule": { "name": "constant" }, "distributed": {},/' \
    -e 's/"every": 3, "log_every": 1, "bleu_examples": 10/"every": 4, "log_every": 1, "bleu_examples": 0/' "$DIR/s2s.json" > "$DIR/deep.json"
balanced_and_even deep db
grep -q "stage 0 holds layers 0-2 (encoder) and 0-3 (decoder); .*encoder + decoder layers per stage by the memory planner (planned peak): 3 + 4 (.*) 5 + 4 (" "$DIR/db2.log" ||
  { echo "FAIL: the planner did not give stage 0 three encoder layers"; grep "pipeline parallel" "$DIR/db2.log"; exit 1; }
grep -q "encoder + decoder layers per stage, even (planned peak): 4 + 4 (.*) 4 + 4 (" "$DIR/dbe.log" || { echo "FAIL: no even split"; exit 1; }
cmp -s "$DIR/db1/metrics.jsonl" "$DIR/db2/metrics.jsonl" || { echo "FAIL: a balanced translator's metrics"; exit 1; }
sharded_as "$DIR/db1" "$DIR/db2" 2 1e-5 "a translator on 2 stages balanced by memory (3 + 4 and 5 + 4 layers; metrics byte-identical)"
peak_below "$DIR/db2.log" "$DIR/dbe.log" "a translator on 2 stages" balanced even
run "$DIR/sr1.log" $MPI "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/sr" --pipeline-parallel 2 --max-steps 3
run "$DIR/sr2.log" "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/sr" --resume "$DIR/sr"
cmp -s "$DIR/s1/metrics.jsonl" "$DIR/sr/metrics.jsonl" || { echo "FAIL: translator, 2 stages then one process"; exit 1; }
echo "a translator on 2 stages for 3 steps, then one process: metrics byte-identical"
run "$DIR/sb1.log" "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/sb1" --precision bf16 --checkpoint-activations
run "$DIR/sb2.log" $MPI "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/sb2" --precision bf16 --checkpoint-activations --pipeline-parallel 2
cmp -s "$DIR/sb1/metrics.jsonl" "$DIR/sb2/metrics.jsonl" || { echo "FAIL: translator on 2 stages, bf16 and checkpointing"; exit 1; }
echo "a translator on 2 stages in bf16 with activation checkpointing: metrics byte-identical"
sed 's/"schedule": { "name": "constant" },/"schedule": { "name": "constant" }, "distributed": { "zero_optimizer": true },/' "$DIR/s2s.json" > "$DIR/s2s-zero.json"
run "$DIR/sd.log" $MPI4 "$TFM" -t 1 train "$DIR/s2s-zero.json" --out "$DIR/sd" --pipeline-parallel 2
metrics_within "$DIR/s1/metrics.jsonl" "$DIR/sd/metrics.jsonl" 8 "a translator as 2 pipelines x 2 stages with ZeRO-1"
run "$DIR/st.log" $MPI4 "$TFM" -t 1 train "$DIR/s2s.json" --out "$DIR/st" --pipeline-parallel 2 --tensor-parallel 2
metrics_within "$DIR/s1/metrics.jsonl" "$DIR/st/metrics.jsonl" 8 "a translator as 2 stages x 2 shards"
sharded_as "$DIR/s1" "$DIR/st" 4 1e-5 "a translator as 2 stages x 2 shards"
cat > "$DIR/t5.json" <<JSON
{ "task": "seq2seq", "seed": 4,
  "model": { "model_type": "t5", "d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
             "num_heads": 2, "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16, "dropout_rate": 0.1 },
  "tokenizer": { "kind": "bpe", "vocab_size": 400, "isolate_cjk": true },
  "data": { "train": "$DIR/pairs.tsv", "test_size": 20, "max_length": 48 },
  "training": { "batch_size": 4, "grad_accum": 4, "max_steps": 4 }, "schedule": { "name": "constant" },
  "eval": { "every": 4, "log_every": 1, "bleu_examples": 0 }, "checkpoint": { "every": 0 } }
JSON
run "$DIR/q1.log" "$TFM" -t 1 train "$DIR/t5.json" --out "$DIR/q1"
run "$DIR/q2.log" $MPI "$TFM" -t 1 train "$DIR/t5.json" --out "$DIR/q2" --pipeline-parallel 2
cmp -s "$DIR/q1/metrics.jsonl" "$DIR/q2/metrics.jsonl" || { echo "FAIL: T5 on 2 stages"; diff "$DIR/q1/metrics.jsonl" "$DIR/q2/metrics.jsonl"; exit 1; }
echo "T5 on 2 stages: metrics byte-identical"
/usr/bin/python3 "$SRC/tools/speech/make_speech_corpus.py" "$DIR/corpus" --train 16 --test 4 --jobs 1 2> /dev/null
cat > "$DIR/speech.json" <<JSON
{ "task": "speech", "seed": 3,
  "model": { "model_type": "whisper", "num_mel_bins": 80, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
             "max_target_positions": 64, "dropout": 0.1, "attention_dropout": 0.1 },
  "tokenizer": { "kind": "bpe", "vocab_size": 300 },
  "data": { "train": "$DIR/corpus/train.tsv", "test": "$DIR/corpus/test.tsv", "chunk_length": 6,
            "spec_augment": { "time_masks": 1, "time_width": 10, "freq_masks": 1, "freq_width": 5 } },
  "training": { "batch_size": 2, "grad_accum": 2, "max_steps": 4 },
  "eval": { "every": 4, "log_every": 1, "wer_examples": 2 } }
JSON
run "$DIR/w1.log" "$TFM" -t 1 train "$DIR/speech.json" --out "$DIR/w1"
run "$DIR/w2.log" $MPI "$TFM" -t 1 train "$DIR/speech.json" --out "$DIR/w2" --pipeline-parallel 2
grep -q '"wer"' "$DIR/w2/metrics.jsonl" && cmp -s "$DIR/w1/metrics.jsonl" "$DIR/w2/metrics.jsonl" ||
  { echo "FAIL: Whisper on 2 stages"; diff "$DIR/w1/metrics.jsonl" "$DIR/w2/metrics.jsonl"; exit 1; }
echo "Whisper (speech) on 2 stages: metrics byte-identical, WER too"

# 2. resumes across layouts
run "$DIR/r1.log" $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/r21" --pipeline-parallel 2 --max-steps 3
run "$DIR/r2.log" "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/r21" --resume "$DIR/r21"
same_run one r21 "2 stages for 3 steps, then one process"
! ls "$DIR/r21" | grep -q '^model-' || { echo "FAIL: the shards of the 2-stage checkpoint stayed beside model.safetensors"; exit 1; }
run "$DIR/r3.log" "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/r12" --max-steps 3
run "$DIR/r4.log" $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/r12" --resume "$DIR/r12" --pipeline-parallel 2
same_run one r12 "one process for 3 steps, then 2 stages" 2
config exact false 6 '{ "bit_exact": true, "zero_optimizer": true }'
run "$DIR/e1.log" "$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e1"
run "$DIR/e4.log" $MPI4 "$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e4" --pipeline-parallel 2
grep -q "^data-parallel replicas: 2 " "$DIR/e4.log" && grep -q "2 pipelines; stage 0 holds" "$DIR/e4.log" ||
  { echo "FAIL: no 2 x 2 layout in the summary"; cat "$DIR/e4.log"; exit 1; }
same_run e1 e4 "2 pipelines x 2 stages, bit-exact reduction and ZeRO-1" 2

# 3. tied embeddings; the shipped config; memory of the schedules
config tied true 6
run "$DIR/t1.log" "$TFM" -t 1 train "$DIR/tied.json" --out "$DIR/t1"
run "$DIR/t2.log" $MPI "$TFM" -t 1 train "$DIR/tied.json" --out "$DIR/t2" --pipeline-parallel 2
metrics_within "$DIR/t1/metrics.jsonl" "$DIR/t2/metrics.jsonl" 8 "tied embeddings on 2 stages"
(cd "$SRC" && $MPI "$TFM" -t 1 train configs/shakespeare-gpt.json --out "$DIR/gpt" --max-steps 2 --pipeline-parallel 2) \
  > "$DIR/gpt.out" 2> "$DIR/gpt.log" || { echo "FAIL: shakespeare-gpt on 2 stages"; cat "$DIR/gpt.log"; exit 1; }
[ -s "$DIR/gpt.out" ] || { echo "FAIL: no sample from 2 stages"; exit 1; }
peak_below "$DIR/p2.log" "$DIR/g2.log" "a decoder on 2 stages" 1F1B GPipe

# 3b. tensor x pipeline: 4 ranks as 2 stages of 2 shards, 8 as 2 pipelines of them; losses
# and gradient norms (clipped) within 1e-5 of one process, the 4 ranks' shards of the weights
# and optimizer state within 1e-5 of its files; resumes across layouts; the shipped config's
# end-of-training sample is one process's
MPI8="${MPI/-np 2/-np 8}"
config clip false 6
sed -i 's/"max_steps": 6 }/"max_steps": 6, "clip_grad_norm": 1.0 }/' "$DIR/clip.json"
run "$DIR/c1.log" "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/c1"
run "$DIR/tpp.log" $MPI4 "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/tpp" --pipeline-parallel 2 --tensor-parallel 2
grep -q "^tensor parallel: 2 shards per replica, 1 replica; shard 0 holds .* in the stage)" "$DIR/tpp.log" &&
  grep -q "^pipeline parallel: 2 stages, schedule 1F1B, 4 micro-batches per step per pipeline, 1 pipeline;" "$DIR/tpp.log" ||
  { echo "FAIL: no 2 x 2 tensor x pipeline summary"; cat "$DIR/tpp.log"; exit 1; }
metrics_within "$DIR/c1/metrics.jsonl" "$DIR/tpp/metrics.jsonl" 8 "2 stages x 2 shards"
sharded_as "$DIR/c1" "$DIR/tpp" 4 1e-5 "2 stages x 2 shards"
run "$DIR/t8.log" $MPI8 "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/t8" --pipeline-parallel 2 --tensor-parallel 2
grep -q "^pipeline parallel: 2 stages, schedule 1F1B, 2 micro-batches per step per pipeline, 2 pipelines;" "$DIR/t8.log" ||
  { echo "FAIL: no 2 x 2 x 2 summary"; cat "$DIR/t8.log"; exit 1; }
metrics_within "$DIR/c1/metrics.jsonl" "$DIR/t8/metrics.jsonl" 8 "2 pipelines x 2 stages x 2 shards"
run "$DIR/tr1.log" $MPI4 "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/tr41" --pipeline-parallel 2 --tensor-parallel 2 --max-steps 3
run "$DIR/tr2.log" "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/tr41" --resume "$DIR/tr41"
metrics_within "$DIR/c1/metrics.jsonl" "$DIR/tr41/metrics.jsonl" 8 "2 x 2 for 3 steps, then one process"
run "$DIR/tr3.log" "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/tr14" --max-steps 3
run "$DIR/tr4.log" $MPI4 "$TFM" -t 1 train "$DIR/clip.json" --out "$DIR/tr14" --resume "$DIR/tr14" --pipeline-parallel 2 --tensor-parallel 2
metrics_within "$DIR/c1/metrics.jsonl" "$DIR/tr14/metrics.jsonl" 8 "one process for 3 steps, then 2 x 2"
(cd "$SRC" && "$TFM" -t 1 train configs/shakespeare-gpt.json --out "$DIR/gpt1" --max-steps 2) > "$DIR/gpt1.out" \
  2> "$DIR/gpt1.log" || { echo "FAIL: shakespeare-gpt, one process"; cat "$DIR/gpt1.log"; exit 1; }
(cd "$SRC" && $MPI4 "$TFM" -t 1 train configs/shakespeare-gpt.json --out "$DIR/gpt4" --max-steps 2 --pipeline-parallel 2 \
  --tensor-parallel 2) > "$DIR/gpt4.out" 2> "$DIR/gpt4.log" || { echo "FAIL: shakespeare-gpt on 2 x 2"; cat "$DIR/gpt4.log"; exit 1; }
[ -s "$DIR/gpt1.out" ] && cmp -s "$DIR/gpt1.out" "$DIR/gpt4.out" ||
  { echo "FAIL: the sample of 2 stages x 2 shards differs"; diff "$DIR/gpt1.out" "$DIR/gpt4.out"; exit 1; }
echo "configs/shakespeare-gpt.json: the same sample from 2 stages x 2 shards as from one process"

# A stage killed: the job stops, the last checkpoint resumes
config long false 100000
kill_rank_and_resume "$DIR/long.json" "$DIR/k" --pipeline-parallel 2

# 4. errors
expect_error "3 stages on 2 ranks" "pipeline_parallel 3 does not divide the 2 ranks" \
  $MPI "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/bad" --pipeline-parallel 3
expect_error "4 stages of 2 shards on 4 ranks" "pipeline_parallel 4 x tensor_parallel 2 does not divide the 4 ranks" \
  $MPI4 "$TFM" -t 1 train "$DIR/untied.json" --out "$DIR/bad" --pipeline-parallel 4 --tensor-parallel 2
sed 's/"schedule": { "name": "constant" },/"schedule": { "name": "constant" }, "distributed": { "bit_exact": true },/' "$DIR/s2s.json" > "$DIR/s2s-exact.json"
expect_error "bit-exact sums with an encoder-decoder's stages" "bit_exact cannot be used with an encoder-decoder's pipeline stages" \
  $MPI4 "$TFM" -t 1 train "$DIR/s2s-exact.json" --out "$DIR/bad" --pipeline-parallel 2
echo "errors: one line each, no hang"
echo "PASS"
