// The order of an encoder-decoder's passes on its pipeline stages (docs/distributed.md).
//
// Stage s holds a run of the encoder's layers and a run of the decoder's, so a micro-batch
// visits every stage twice: encoder stages 0 .. P-1, then (the memory handed from the last
// stage to stage 0) decoder stages 0 .. P-1, and back the same way. Seen as one pipeline of
// 2P virtual stages, stage s holding virtual stages s and P + s, this is Megatron-LM's
// interleaved layout with two chunks per stage, and its schedule fits:
//   gpipe: every encoder pass, every decoder pass, every decoder backward, every encoder
//          backward (all 2M graphs alive until the backward passes);
//   1f1b:  micro-batches in groups of G (P <= G < 2P; one group when M < P), each group's
//          encoder passes then its decoder passes; stage s runs 2 (P - s - 1) + G of those
//          forward passes, then alternates one forward and one backward (decoder backward of
//          a group, then its encoder backward), then drains. At most 2 (P - s - 1) + G + 1 graphs
//          are alive on stage s, whatever M, and the modelled step is never longer than
//          GPipe's (checked for 2-8 stages and 1 to 4P + 3 micro-batches in the unit test).
// Either way each pass kind runs in micro-batch order 0, 1, ... on every stage, so every
// parameter accumulates its gradients in one process's order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tfm::train_detail {

enum class Pass : std::uint8_t { encode, decode, decode_backward, encode_backward };

struct StagePass {
  Pass pass;
  std::int64_t micro;
  bool operator==(const StagePass&) const = default;
};

// Stage `stage`'s passes of one step over `micros` micro-batches, in the order it runs them.
std::vector<StagePass> encoder_decoder_schedule(int stage, int stages, std::int64_t micros, bool one_f_one_b);

// Every stage's order replayed against the passes' dependencies, a forward pass costing 1 and
// a backward pass 2 (each stage holding an equal share of both stacks), messages taking no
// time: whether it completes (a stage waiting for a pass that waits on it never would), the
// step's length, the bubble (the share of the stages' time spent waiting), the most graphs
// each stage keeps alive at once, and the (encoder, decoder) graph counts each stage holds
// after each of its forward passes (the moments its memory peaks; the planner weighs each
// stack's layers by them: plan_encoder_decoder_stages).
struct ScheduleModel {
  bool completes = false;
  double step = 0, bubble = 0;
  std::vector<int> peak_graphs;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> alive;
};
ScheduleModel model_schedule(const std::vector<std::vector<StagePass>>& stages);
ScheduleModel model_encoder_decoder_schedule(int stages, std::int64_t micros, bool one_f_one_b);

}  // namespace tfm::train_detail
