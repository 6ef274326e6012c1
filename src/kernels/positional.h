// Positional-encoding kernels: sinusoidal table, rotary embedding (RoPE), T5 relative buckets.
#pragma once

#include <cstdint>

namespace tfm::kernels {

// out (T, D): out[p, 2i] = sin(p / base^(2i/D)), out[p, 2i+1] = cos(p / base^(2i/D))
// (Vaswani et al. eqs. for PE; the seeds' eqs. 9-10; D even). Positions start at `start`.
// halves: frequency i's sin at column i and cos at column D/2 + i (Marian, fairseq);
// otherwise sin at 2i and cos at 2i + 1 (Vaswani).
void sinusoidal_table(float* out, std::int64_t T, std::int64_t D, std::int64_t start, double base, bool halves = false);

// Rotary embedding applied in place to rows of x: rows (N) of D values, row r at position
// pos[r % T]... callers pass per-row positions directly: pos (N). Pairs rotate by angle
// pos * base^(-2i/D):
//   halves   (GPT-NeoX, Llama): pair i = (x[i], x[i + D/2])
//   adjacent (GPT-J, the seeds' even/odd dims): pair i = (x[2i], x[2i+1])
// `inverse` rotates by -angle (the backward pass: the rotation is orthogonal).
void rope_rows(float* x, std::int64_t N, std::int64_t D, const std::int64_t* pos, double base, bool halves,
               bool inverse);

// T5's bucket of relative position (key - query): half the buckets for exact small
// distances, the rest logarithmic up to max_distance; bidirectional splits buckets by sign.
std::int64_t t5_relative_bucket(std::int64_t relative_position, bool bidirectional, std::int64_t num_buckets,
                                std::int64_t max_distance);

}  // namespace tfm::kernels
