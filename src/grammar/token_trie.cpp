#include <algorithm>
#include <numeric>

#include "tfm/grammar.h"

namespace tfm {

// Nodes in depth-first order with each node's children contiguous, built from the tokens
// sorted by their bytes: the children of a node are the runs of equal next byte.
TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_(static_cast<std::int64_t>(token_bytes.size())), bytes_(token_bytes) {
  std::vector<std::int32_t> order;
  for (std::size_t t = 0; t < bytes_.size(); ++t)
    if (!bytes_[t].empty()) order.push_back(static_cast<std::int32_t>(t));
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const auto& x = bytes_[static_cast<std::size_t>(a)];
    const auto& y = bytes_[static_cast<std::size_t>(b)];
    return x != y ? x < y : a < b;
  });
  nodes_.emplace_back();
  struct Job {
    std::int32_t node;
    std::size_t lo, hi, depth;  // tokens order[lo, hi) share the node's depth-byte prefix
  };
  std::vector<Job> todo{{0, 0, order.size(), 0}};
  while (!todo.empty()) {
    const Job j = todo.back();
    todo.pop_back();
    std::size_t i = j.lo;
    // tokens that end exactly here come first in the sorted run
    const auto first_token = static_cast<std::int32_t>(tokens_.size());
    while (i < j.hi && bytes_[static_cast<std::size_t>(order[i])].size() == j.depth) tokens_.push_back(order[i++]);
    nodes_[static_cast<std::size_t>(j.node)].first_token = first_token;
    nodes_[static_cast<std::size_t>(j.node)].num_tokens = static_cast<std::int32_t>(tokens_.size()) - first_token;
    const auto first_child = static_cast<std::int32_t>(nodes_.size());
    std::vector<Job> kids;
    while (i < j.hi) {
      const auto b = static_cast<std::uint8_t>(bytes_[static_cast<std::size_t>(order[i])][j.depth]);
      std::size_t e = i;
      while (e < j.hi && static_cast<std::uint8_t>(bytes_[static_cast<std::size_t>(order[e])][j.depth]) == b) ++e;
      TokenTrie::Node n;
      n.byte = b;
      kids.push_back({static_cast<std::int32_t>(nodes_.size()), i, e, j.depth + 1});
      nodes_.push_back(n);
      i = e;
    }
    nodes_[static_cast<std::size_t>(j.node)].first_child = first_child;
    nodes_[static_cast<std::size_t>(j.node)].num_children = static_cast<std::int32_t>(kids.size());
    todo.insert(todo.end(), kids.begin(), kids.end());
  }
}

}  // namespace tfm
