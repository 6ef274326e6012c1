// The order of an encoder-decoder's passes on pipeline stages (src/train/pipeline_schedule.h):
// every stage runs every pass once, each kind in micro-batch order (one process's gradient
// order), a forward before its own backward; the stages' orders never wait on each other in a
// circle; 1F1B's step is as short as GPipe's in the cost model with fewer graphs alive, and
// the replay finds a stage that waits on a later pass of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "train/pipeline_schedule.h"

using namespace tfm::train_detail;

namespace {

std::string where(int P, std::int64_t M, int s = -1) {
  return "P " + std::to_string(P) + ", M " + std::to_string(M) + (s >= 0 ? ", stage " + std::to_string(s) : "");
}

}  // namespace

TEST(PipelineSchedule, EveryStageRunsEveryPassOnceInMicroBatchOrder) {
  for (const bool one_f_one_b : {false, true})
    for (int P = 2; P <= 6; ++P)
      for (std::int64_t M = 1; M <= 3 * P + 1; ++M)
        for (int s = 0; s < P; ++s) {
          const std::vector<StagePass> order = encoder_decoder_schedule(s, P, M, one_f_one_b);
          ASSERT_EQ(order.size(), static_cast<std::size_t>(4 * M)) << where(P, M, s);
          for (const Pass kind : {Pass::encode, Pass::decode, Pass::decode_backward, Pass::encode_backward}) {
            std::vector<std::int64_t> seen;
            for (const StagePass& x : order)
              if (x.pass == kind) seen.push_back(x.micro);
            ASSERT_EQ(seen.size(), static_cast<std::size_t>(M)) << where(P, M, s);
            for (std::int64_t k = 0; k < M; ++k) EXPECT_EQ(seen[static_cast<std::size_t>(k)], k) << where(P, M, s);
          }
          for (std::int64_t k = 0; k < M; ++k) {  // a stack's forward before its backward
            const auto at = [&](Pass p) {
              return std::find(order.begin(), order.end(), StagePass{p, k}) - order.begin();
            };
            EXPECT_LT(at(Pass::encode), at(Pass::decode)) << where(P, M, s);
            EXPECT_LT(at(Pass::decode), at(Pass::decode_backward)) << where(P, M, s);
            EXPECT_LT(at(Pass::decode_backward), at(Pass::encode_backward)) << where(P, M, s);
          }
        }
}

TEST(PipelineSchedule, GPipeRunsEveryForwardPassFirst) {
  const std::vector<StagePass> order = encoder_decoder_schedule(1, 2, 2, false);
  const std::vector<StagePass> want = {{Pass::encode, 0},          {Pass::encode, 1},         {Pass::decode, 0},
                                       {Pass::decode, 1},          {Pass::decode_backward, 0}, {Pass::decode_backward, 1},
                                       {Pass::encode_backward, 0}, {Pass::encode_backward, 1}};
  EXPECT_EQ(order, want);
}

// Megatron-LM's interleaved schedule for 2 stages and 4 micro-batches (two groups of 2): stage 0
// warms up with 2 (P - s - 1) + P = 4 forward passes, the last stage with 2.
TEST(PipelineSchedule, OneFOneBInterleavesGroupsOfMicroBatches) {
  const auto E = Pass::encode, D = Pass::decode, DB = Pass::decode_backward, EB = Pass::encode_backward;
  const std::vector<StagePass> stage0 = {{E, 0},  {E, 1},  {D, 0},  {D, 1},  {E, 2},  {DB, 0}, {E, 3},  {DB, 1},
                                         {D, 2},  {EB, 0}, {D, 3},  {EB, 1}, {DB, 2}, {DB, 3}, {EB, 2}, {EB, 3}};
  const std::vector<StagePass> stage1 = {{E, 0},  {E, 1},  {D, 0},  {DB, 0}, {D, 1},  {DB, 1}, {E, 2},  {EB, 0},
                                         {E, 3},  {EB, 1}, {D, 2},  {DB, 2}, {D, 3},  {DB, 3}, {EB, 2}, {EB, 3}};
  EXPECT_EQ(encoder_decoder_schedule(0, 2, 4, true), stage0);
  EXPECT_EQ(encoder_decoder_schedule(1, 2, 4, true), stage1);
}

TEST(PipelineSchedule, OneFOneBIsAsFastAsGPipeWithBoundedMemory) {
  for (int P = 2; P <= 8; ++P)
    for (std::int64_t M = 1; M <= 4 * P + 3; ++M) {
      const ScheduleModel gpipe = model_encoder_decoder_schedule(P, M, false);
      const ScheduleModel interleaved = model_encoder_decoder_schedule(P, M, true);
      ASSERT_TRUE(gpipe.completes) << where(P, M);
      ASSERT_TRUE(interleaved.completes) << where(P, M);
      EXPECT_LE(interleaved.step, gpipe.step) << where(P, M);
      const std::int64_t group = M < P ? M : M / (M / P) + (M % (M / P) ? 1 : 0);  // the largest group
      for (int s = 0; s < P; ++s) {
        const auto u = static_cast<std::size_t>(s);
        EXPECT_EQ(gpipe.peak_graphs[u], 2 * M) << where(P, M, s);
        EXPECT_LE(interleaved.peak_graphs[u], std::min<std::int64_t>(2 * M, 2 * (P - s - 1) + group + 1)) << where(P, M, s);
      }
    }
  // 2 stages, 16 micro-batches: stage 0 keeps 5 graphs instead of 32, for the same step length.
  const ScheduleModel m = model_encoder_decoder_schedule(2, 16, true);
  EXPECT_EQ(m.peak_graphs, (std::vector<int>{5, 3}));
  EXPECT_DOUBLE_EQ(m.step, model_encoder_decoder_schedule(2, 16, false).step);
}

TEST(PipelineSchedule, TheReplayFindsAStageWaitingOnItself) {
  std::vector<std::vector<StagePass>> orders = {encoder_decoder_schedule(0, 2, 2, true),
                                                encoder_decoder_schedule(1, 2, 2, true)};
  ASSERT_TRUE(model_schedule(orders).completes);
  std::swap(orders[1][0], orders[1].back());  // stage 1 starts with an encoder backward pass
  EXPECT_FALSE(model_schedule(orders).completes);
  // Two stages each waiting for the other: stage 0 decodes micro-batch 0 (it needs stage 1's
  // encoder pass of it) before encoding micro-batch 1, and stage 1 encodes micro-batch 1 (it
  // needs stage 0's) first.
  orders = {encoder_decoder_schedule(0, 2, 2, false), encoder_decoder_schedule(1, 2, 2, false)};
  std::swap(orders[0][1], orders[0][2]);
  std::swap(orders[1][0], orders[1][1]);
  EXPECT_FALSE(model_schedule(orders).completes);
}
