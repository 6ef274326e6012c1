#!/usr/bin/env bash
# llama.cpp's view of GGUF files the engine writes: tfm convert re-exports each
# llama.cpp-convention fixture (tools/reference/ref_gguf.py) with the engine's own writer, and
# exports two models trained here (tfm train, 40 steps on 20 kB of Shakespeare, with a trained
# byte-level BPE tokenizer: model_type llama, and the engine's own scheme with GPT-2's
# components); then llama.cpp (node-llama-cpp, tools/reference/llama-cpp) tokenizes the
# prompt, scores the ids and decodes greedily.
# tests/gguf_llamacpp/test_llamacpp_parity.cpp compares.
#   make_reference.sh TFM SOURCE_DIR FIXTURE_DIR
set -euo pipefail
tfm=$1 src=$2 fix=$3
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
ids=5,72,101,108,108,111,258,262,263,32,120
llamacpp() {  # GGUF name: writes llamacpp_NAME.json
  node "$src/tools/reference/llama-cpp/run_gguf.mjs" "$fix/tfm_$1.gguf" "hello the world" "$ids" 8 "$fix/llamacpp_$1.json"
}
for arch in llama qwen2 gpt2; do
  "$tfm" convert -m "$fix/gguf_$arch.gguf" -o "$fix/tfm_$arch.gguf" --type f32 --name "tfm-$arch" >/dev/null
  llamacpp "$arch"
done
head -c 20000 "$src/data/tinyshakespeare.txt" > "$fix/trained_text.txt"
for fam in llama gpt2; do
  if [ "$fam" = llama ]; then
    model='"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64'
  else
    # the engine's own scheme with GPT-2's components: written as the gpt2 family
    model='"model_type": "transformer", "architecture": "decoder_only", "d_model": 32, "n_layers": 2, "n_heads": 4,
           "d_ff": 128, "max_positions": 64, "activation": "gelu_tanh", "position": "learned", "dropout": 0.0,
           "attention_dropout": 0.0, "embedding_dropout": 0.0'
  fi
  cat > "$fix/trained_$fam.json" <<EOF
{"task": "lm", "seed": 1, "model": {$model},
 "tokenizer": {"kind": "bpe", "vocab_size": 320},
 "data": {"train": "$fix/trained_text.txt", "val_fraction": 0.1, "block_size": 32},
 "optimizer": {"name": "adamw", "lr": 0.01}, "training": {"batch_size": 8, "max_steps": 40},
 "eval": {"every": 40, "batches": 2, "log_every": 10}, "checkpoint": {"every": 0}}
EOF
  rm -rf "$fix/trained_$fam"
  "$tfm" train "$fix/trained_$fam.json" --out "$fix/trained_$fam" -q >/dev/null
  "$tfm" convert -m "$fix/trained_$fam" -o "$fix/tfm_trained-$fam.gguf" >/dev/null
  llamacpp "trained-$fam"
done
# Quantized files: a Llama-shaped model wide enough for the k-quants' 256-blocks (hidden 256,
# FFN 512), trained 60 steps, quantized by the engine to q8_0, q4_0, q4_k and q6_k (every
# matrix, no fallback); llama.cpp scores a held-out passage with each file (perplexity) and
# continues its first 16 tokens greedily. test_llamacpp_quantized.cpp compares.
cat > "$fix/trained_llama256.json" <<EOF
{"task": "lm", "seed": 2, "model": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128},
 "tokenizer": {"kind": "bpe", "vocab_size": 320},
 "data": {"train": "$fix/trained_text.txt", "val_fraction": 0.1, "block_size": 64},
 "optimizer": {"name": "adamw", "lr": 0.003}, "training": {"batch_size": 8, "max_steps": 60},
 "eval": {"every": 60, "batches": 2, "log_every": 20}, "checkpoint": {"every": 0}}
EOF
rm -rf "$fix/trained_llama256"
"$tfm" train "$fix/trained_llama256.json" --out "$fix/trained_llama256" -q >/dev/null
head -c 21500 "$src/data/tinyshakespeare.txt" | tail -c 1200 > "$fix/heldout_text.txt"
"$tfm" tokenize --tokenizer "$fix/trained_llama256" --ids < "$fix/heldout_text.txt" | tr ' ' '\n' | grep . | head -96 |
  paste -sd, > "$fix/heldout_ids.txt"
for t in f32 q8_0 q4_0 q4_k q6_k; do
  if [ "$t" = f32 ]; then
    "$tfm" convert -m "$fix/trained_llama256" -o "$fix/tfm_q_f32.gguf" >/dev/null
  else
    "$tfm" quantize -m "$fix/trained_llama256" -o "$fix/tfm_q_$t.gguf" --type "$t" --no-fallback >/dev/null
  fi
  node "$src/tools/reference/llama-cpp/score_gguf.mjs" "$fix/tfm_q_$t.gguf" "$(cat "$fix/heldout_ids.txt")" 16 12 \
    "$fix/llamacpp_q_$t.json"
done
echo "llama.cpp reference for llama, qwen2, gpt2, trained-llama, trained-gpt2 and f32/q8_0/q4_0/q4_k/q6_k files in $fix"
