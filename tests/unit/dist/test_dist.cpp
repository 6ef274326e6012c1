// The data-parallel pieces that run in one process: the group of one (no MPI), the leaf
// gradient hook, the fixed-order tree sum against its definition, the config keys.
// Several ranks are tested under mpirun by tests/cli/mpi_data_parallel.sh.
#include <gtest/gtest.h>

#include <cstring>

#include "dist/comm.h"
#include "dist/grad_sync.h"
#include "tfm/autograd.h"
#include "tfm/ops.h"
#include "tfm/train.h"
#include "support/train_helpers.h"  // expect_error

using namespace tfm;
using tfm::train_test::expect_error;

TEST(Dist, PlainProcessIsAGroupOfOneWithoutMpi) {
  EXPECT_FALSE(dist::launched());
  EXPECT_EQ(dist::size(), 1);
  EXPECT_EQ(dist::rank(), 0);
  float v[2] = {1.5f, -2.0f};
  dist::allreduce_sum(v, 2);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(dist::allreduce_max(7), 7);
}

TEST(Dist, LeafGradHookSeesEveryAccumulationIntoAParameter) {
  Tensor w = Tensor::from_floats({1, 2, 3}, {3}).requires_grad_();
  std::vector<const AutogradMeta*> seen;
  autograd::set_leaf_grad_hook([&](AutogradMeta* m) { seen.push_back(m); });
  const Tensor loss = sum(add(mul(w, w), w));  // w reaches the loss twice
  backward(loss);
  autograd::set_leaf_grad_hook({});
  ASSERT_EQ(seen.size(), 3u);  // mul's two inputs and add's
  for (const AutogradMeta* m : seen) EXPECT_EQ(m, w.autograd_meta());
  EXPECT_EQ(w.grad().to_floats(), (std::vector<float>{3, 5, 7}));  // 2w + 1
}

TEST(Dist, TreeSumAddsMicroBatchesInAFixedBalancedTree) {
  // Values chosen so that the order of float additions shows: the tree gives (3 + 3) +
  // (1e8 - 1e8) = 6, left to right 6 + 1e8 rounds to 100000008 (float spacing 8), then 8.
  Tensor p = Tensor::zeros({1}).requires_grad_();
  Tensor unused = Tensor::zeros({2}).requires_grad_();
  std::vector<std::pair<std::string, Tensor>> params{{"p", p}, {"unused", unused}};
  dist::TreeSum tree(params);
  const float g[4] = {3.0f, 3.0f, 1e8f, -1e8f};
  for (float v : g) {
    autograd::accumulate(p, Tensor::from_floats({v}, {1}));
    tree.add_micro_batch();
    EXPECT_FALSE(p.grad().defined());  // taken into the tree
  }
  tree.finish();
  const float want = (g[0] + g[1]) + (g[2] + g[3]);
  const float left_to_right = ((g[0] + g[1]) + g[2]) + g[3];
  ASSERT_NE(want, left_to_right);  // the test can tell the orders apart
  EXPECT_EQ(p.grad().item(), want);
  EXPECT_FALSE(unused.grad().defined());  // no micro-batch reached it: still none
  EXPECT_NE(expect_error([] { dist::check_tree_sum(6, 2, "c.json: "); }).find("power of two"), std::string::npos);
  EXPECT_NE(expect_error([] { dist::check_tree_sum(8, 3, "c.json: "); }).find("ranks"), std::string::npos);
  EXPECT_NO_THROW(dist::check_tree_sum(8, 4, "c.json: "));
}

TEST(Dist, ConfigKeys) {
  const std::string ok = R"("model": {"architecture": "decoder_only"}, "data": {"train": "x.txt"})";
  const TrainConfig c = parse_train_config(
      "{" + ok + R"(, "distributed": {"bucket_mb": 0.5, "overlap": false, "zero_optimizer": true, "bit_exact": true}})",
      "c.json");
  EXPECT_EQ(c.bucket_mb, 0.5);
  EXPECT_FALSE(c.overlap_grad_sync);
  EXPECT_TRUE(c.zero_optimizer);
  EXPECT_TRUE(c.bit_exact);
  const std::string e = expect_error([&] { parse_train_config("{" + ok + R"(, "distributed": {"zero": true}})", "c.json"); });
  EXPECT_NE(e.find("c.json.distributed"), std::string::npos) << e;
  EXPECT_NE(e.find("zero_optimizer"), std::string::npos) << e;
}
