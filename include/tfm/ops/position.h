// Positional encodings: sinusoidal tables, rotary embeddings (RoPE), T5 relative buckets.
// (Learned absolute positions are an embedding lookup; ALiBi lives with attention.)
#pragma once

#include <cstdint>

#include "tfm/tensor.h"

namespace tfm {

// Which dimensions RoPE rotates together.
//   halves   (GPT-NeoX, Llama): dim i with dim i + D/2
//   adjacent (GPT-J; the seeds' "even/odd dimensions"): dim 2i with dim 2i+1
enum class RopePairing { halves, adjacent };

// (T, D) table: PE(p, 2i) = sin(p / base^(2i/D)), PE(p, 2i+1) = cos(p / base^(2i/D)) for
// p = start .. start+T-1 (Vaswani et al. 2017, section 3.5). A constant: no gradient.
// pairing says where frequency i's (sin, cos) sit: adjacent (2i, 2i+1) as above, or halves
// (i, D/2 + i) as Marian's and fairseq's tables.
Tensor sinusoidal_positions(std::int64_t T, std::int64_t D, std::int64_t start = 0, double base = 10000.0,
                            RopePairing pairing = RopePairing::adjacent);

// Rotate x (..., T, D) by position-dependent angles p * base^(-2i/D); positions (T) i64
// gives each row's position (e.g. start..start+T-1 with a KV cache). Differentiable in x.
Tensor rope(const Tensor& x, const Tensor& positions, double base = 10000.0,
            RopePairing pairing = RopePairing::halves);
// Positions start .. start+T-1 as an i64 tensor.
Tensor position_ids(std::int64_t T, std::int64_t start = 0);

// (Tq, Tk) i64 bucket ids for T5's relative attention bias: bucket of (k - q') where
// q' = q + query_offset (the number of cached positions before the first query).
Tensor t5_relative_buckets(std::int64_t Tq, std::int64_t Tk, bool bidirectional, std::int64_t num_buckets,
                           std::int64_t max_distance, std::int64_t query_offset = 0);

}  // namespace tfm
