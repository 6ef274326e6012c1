// The prompt cache: keys and values of prompt blocks that earlier requests computed, reused
// when a new prompt starts with the same tokens (docs/server.md, "Prompt caching").
//
// A block is one prefill chunk of a prompt (ContinuousBatch reads prompts in fixed chunks from
// position 0), keyed by a hash of its tokens and of the key of the block before it, so a key
// names the whole prefix up to the block's end. Reusing whole chunks means the positions after
// them are computed exactly as without the cache: outputs are bit-identical. Blocks are kept
// least-recently-used first out under a byte budget; a lookup compares the tokens too, so a
// hash collision cannot hand back another prompt's keys.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfm {

class PromptCache {
 public:
  explicit PromptCache(std::int64_t budget_bytes) : budget_(budget_bytes) {}
  static std::uint64_t chain(std::uint64_t prev, std::span<const std::int32_t> tokens);
  // The block's rows, or nullptr (then the walk along a prompt stops). A hit makes it the most
  // recently used.
  const std::vector<unsigned char>* find(std::uint64_t key, std::uint64_t prev, std::span<const std::int32_t> tokens);
  void put(std::uint64_t key, std::uint64_t prev, std::span<const std::int32_t> tokens, std::vector<unsigned char> rows);

  // Files (tfm serve's /slots): every block, least recently used first, behind a header naming
  // `layout` (the model and cache shape the rows belong to); loading refuses another layout and
  // malformed files with an error naming `where`, and adds the blocks (within the budget) to
  // what the cache holds. Returns the blocks written / added.
  std::string serialize(const std::string& layout) const;
  // Every block must hold block_tokens tokens and block_bytes bytes of keys and values.
  std::int64_t deserialize(std::string_view bytes, const std::string& layout, std::uint64_t block_tokens, std::uint64_t block_bytes,
                           const std::string& where);
  void clear();
  std::int64_t tokens() const;  // prompt tokens the blocks hold

  std::int64_t budget() const { return budget_; }
  std::int64_t bytes() const { return bytes_; }
  std::int64_t blocks() const { return static_cast<std::int64_t>(entries_.size()); }
  std::int64_t hits() const { return hits_; }
  std::int64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    std::uint64_t prev;
    std::vector<std::int32_t> tokens;
    std::vector<unsigned char> rows;
    std::list<std::uint64_t>::iterator lru;
  };
  std::int64_t budget_, bytes_ = 0, hits_ = 0, evictions_ = 0;
  std::list<std::uint64_t> lru_;  // most recent first
  std::unordered_map<std::uint64_t, Entry> entries_;
};

}  // namespace tfm
