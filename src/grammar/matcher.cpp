// The grammar matcher: a pushdown automaton over bytes, determinised lazily.
//
// A stack is a chain of nodes (pos, parent): pos is the next element to match, the parents
// are where to go on when a rule finishes. Stacks are interned, so a stack is an int and
// stacks share their tails. A state of the matcher is the SET of stacks the text so far can
// be in (the grammar may be ambiguous); sets are interned too, and their byte transitions are
// filled in as they are first needed. The mask of allowed tokens is a walk of the vocabulary
// trie through these transitions, cached per state: inside a JSON string the state after each
// character is the state before it, so most steps reuse one mask.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "grammar/rules.h"
#include "tfm/error.h"
#include "tfm/grammar.h"

namespace tfm {
namespace {

struct VecHash {
  std::size_t operator()(const std::vector<std::int32_t>& v) const {
    std::uint64_t h = 1469598103934665603ull;
    for (const std::int32_t x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

constexpr std::size_t kMaxCachedMasks = 512;
// A grammar ambiguous enough that the text could be read in more ways at once than this (each a
// stack), or that needs more stack nodes or parser states in all, is refused as the matcher
// meets it: the
// sets can grow exponentially with the text (`root ::= "(" root ")" root | . root | ...`), and
// every later step would take longer (found by fuzz_grammar: one such input ran for minutes).
// JSON Schemas' grammars hold a few dozen stacks at most.
constexpr std::size_t kMaxStacks = 1024, kMaxNodes = std::size_t{1} << 20;
constexpr std::size_t kMaxSets = std::size_t{1} << 16;  // (each with 256 transitions: 64 MiB)

[[noreturn]] void too_ambiguous(const char* what, std::size_t limit) {
  fail("grammar", "the grammar is too ambiguous to follow: more than ", limit, " ", what,
       " (make its alternatives start differently)");
}

}  // namespace

bool TokenMask::any() const {
  for (const std::uint64_t w : words)
    if (w) return true;
  return false;
}

std::int64_t TokenMask::count() const {
  std::int64_t n = 0;
  for (const std::uint64_t w : words) n += __builtin_popcountll(w);
  return n;
}

struct GrammarMatcher::State {
  std::shared_ptr<const GrammarRules> keep;
  const GrammarRules* g = nullptr;
  std::shared_ptr<const TokenTrie> vocab;

  struct Node {
    std::int32_t pos, parent;  // node 0: the accepting (empty) stack, pos -1
  };
  std::vector<Node> nodes{{-1, -1}};
  std::unordered_map<std::uint64_t, std::int32_t> node_ids;
  std::vector<std::int32_t> node_dist{0};

  std::vector<std::vector<std::int32_t>> sets;  // set 0: no stack (dead)
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, VecHash> set_ids;
  std::vector<std::int32_t> trans;             // sets x 256, -1: not yet known
  std::vector<std::int32_t> set_dist;

  struct Cached {
    TokenMask mask;
    std::int32_t max_after = 0;  // the largest distance to a finish after an allowed token
  };
  std::unordered_map<std::int32_t, Cached> masks;
  TokenMask scratch;
  std::int32_t cur = 0;

  // scratch of closure(): the (pos, parent) pairs expanded in one closure
  std::unordered_set<std::uint64_t> visited;

  std::int32_t node(std::int32_t pos, std::int32_t parent) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pos)) << 32) | static_cast<std::uint32_t>(parent);
    const auto it = node_ids.find(key);
    if (it != node_ids.end()) return it->second;
    if (nodes.size() >= kMaxNodes) too_ambiguous("parse stack nodes", kMaxNodes);
    const auto id = static_cast<std::int32_t>(nodes.size());
    nodes.push_back({pos, parent});
    node_dist.push_back(-1);
    node_ids.emplace(key, id);
    return id;
  }

  // Shortest text that empties stack n: the rest of each frame's alternative, summed.
  std::int32_t dist(std::int32_t n) {
    if (n < 0) return 0;
    std::int32_t& d = node_dist[static_cast<std::size_t>(n)];
    if (d >= 0) return d;
    const Node nd = nodes[static_cast<std::size_t>(n)];
    const std::int32_t v = std::min(kGrammarInf, g->min_rest[static_cast<std::size_t>(nd.pos)] + dist(nd.parent));
    node_dist[static_cast<std::size_t>(n)] = v;
    return v;
  }

  // The stacks that (pos, parent) stands for once every reference at the top is expanded:
  // each has a byte element on top, or is the accepting stack.
  void closure(std::int32_t pos, std::int32_t parent, std::vector<std::int32_t>& out) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pos)) << 32) | static_cast<std::uint32_t>(parent);
    if (!visited.insert(key).second) return;
    const GrammarElem& e = g->elems[static_cast<std::size_t>(pos)];
    if (e.kind == GrammarElem::bytes) {
      out.push_back(node(pos, parent));
      if (out.size() > 4 * kMaxStacks) too_ambiguous("ways to read the text at once", kMaxStacks);
    } else if (e.kind == GrammarElem::end) {
      if (parent < 0) {
        out.push_back(0);
      } else {
        const Node p = nodes[static_cast<std::size_t>(parent)];
        closure(p.pos, p.parent, out);
      }
    } else {
      // What follows the reference; nothing to remember when the alternative ends there.
      const std::int32_t next = pos + 1;
      const std::int32_t np = g->elems[static_cast<std::size_t>(next)].kind == GrammarElem::end ? parent : node(next, parent);
      for (const std::int32_t alt : g->alternatives[static_cast<std::size_t>(e.value)]) closure(alt, np, out);
    }
  }

  std::int32_t intern(std::vector<std::int32_t> s) {
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    if (s.size() > kMaxStacks) too_ambiguous("ways to read the text at once", kMaxStacks);
    const auto it = set_ids.find(s);
    if (it != set_ids.end()) return it->second;
    if (sets.size() >= kMaxSets) too_ambiguous("distinct parser states", kMaxSets);
    const auto id = static_cast<std::int32_t>(sets.size());
    std::int32_t d = kGrammarInf;  // an empty set (dead) never finishes
    for (const std::int32_t n : s) d = std::min(d, dist(n));
    set_dist.push_back(d);
    sets.push_back(s);
    set_ids.emplace(std::move(s), id);
    trans.resize(sets.size() * 256, -1);
    return id;
  }

  std::int32_t step(std::int32_t set, unsigned b) {
    const std::size_t at = static_cast<std::size_t>(set) * 256 + b;
    if (trans[at] >= 0) return trans[at];
    std::vector<std::int32_t> out;
    for (const std::int32_t n : sets[static_cast<std::size_t>(set)]) {
      if (n == 0) continue;
      const Node nd = nodes[static_cast<std::size_t>(n)];
      const ByteSet& bs = g->byte_sets[static_cast<std::size_t>(g->elems[static_cast<std::size_t>(nd.pos)].value)];
      if (!byteset_has(bs, b)) continue;
      visited.clear();
      closure(nd.pos + 1, nd.parent, out);
    }
    const std::int32_t id = out.empty() ? 0 : intern(std::move(out));
    trans[at] = id;
    return id;
  }

  // Walks the vocabulary trie from state `set`. limit >= 0: a token is allowed only when the
  // shortest finish after it is at most `limit` bytes.
  void compute_mask(std::int32_t set, std::int32_t limit, TokenMask& m, std::int32_t& max_after) {
    std::int32_t min_after = kGrammarInf;
    walk_trie(set, limit, m, max_after, min_after);
    // No token keeps a finish within the budget (counted as one byte a token, which longer
    // tokens beat): then the tokens that come nearest to a finish — unless the text is
    // complete already, when ending is the way (the caller adds the end tokens).
    if (limit >= 0 && !m.any() && min_after < kGrammarInf && set_dist[static_cast<std::size_t>(set)] > 0)
      walk_trie(set, min_after, m, max_after, min_after);
  }

  void walk_trie(std::int32_t set, std::int32_t limit, TokenMask& m, std::int32_t& max_after, std::int32_t& min_after) {
    const auto& tn = vocab->nodes();
    const auto& toks = vocab->tokens();
    m.words.assign(static_cast<std::size_t>((vocab->vocab_size() + 63) / 64), 0);
    max_after = 0;
    std::vector<std::pair<std::int32_t, std::int32_t>> todo{{0, set}};
    while (!todo.empty()) {
      const auto [t, s] = todo.back();
      todo.pop_back();
      const TokenTrie::Node& parent = tn[static_cast<std::size_t>(t)];
      for (std::int32_t c = parent.first_child; c < parent.first_child + parent.num_children; ++c) {
        const TokenTrie::Node& child = tn[static_cast<std::size_t>(c)];
        const std::int32_t s2 = step(s, child.byte);
        if (s2 == 0) continue;
        const std::int32_t d = set_dist[static_cast<std::size_t>(s2)];
        if (child.num_tokens > 0) min_after = std::min(min_after, d);
        if (child.num_tokens > 0 && (limit < 0 || d <= limit)) {
          for (std::int32_t k = child.first_token; k < child.first_token + child.num_tokens; ++k) {
            const std::int32_t id = toks[static_cast<std::size_t>(k)];
            m.words[static_cast<std::size_t>(id) >> 6] |= std::uint64_t{1} << (id & 63);
          }
          max_after = std::max(max_after, d);
        }
        if (child.num_children > 0) todo.emplace_back(c, s2);
      }
    }
  }
};

GrammarMatcher::GrammarMatcher(const Grammar& grammar, std::shared_ptr<const TokenTrie> vocab) : s_(std::make_unique<State>()) {
  TFM_CHECK(vocab != nullptr, "grammar", "no vocabulary");
  s_->keep = grammar.shared_rules();
  s_->g = s_->keep.get();
  s_->vocab = std::move(vocab);
  s_->sets.emplace_back();
  s_->set_ids.emplace(std::vector<std::int32_t>{}, 0);
  s_->set_dist.push_back(kGrammarInf);
  s_->trans.assign(256, 0);  // the dead state stays dead
  std::vector<std::int32_t> start;
  for (const std::int32_t alt : s_->g->alternatives[static_cast<std::size_t>(s_->g->root)]) {
    s_->visited.clear();
    s_->closure(alt, -1, start);
  }
  s_->cur = s_->intern(std::move(start));
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

const TokenMask& GrammarMatcher::allowed(std::int64_t tokens_left) {
  State& s = *s_;
  auto it = s.masks.find(s.cur);
  if (it == s.masks.end()) {
    if (s.masks.size() >= kMaxCachedMasks) s.masks.clear();
    State::Cached c;
    s.compute_mask(s.cur, -1, c.mask, c.max_after);
    it = s.masks.emplace(s.cur, std::move(c)).first;
  }
  // After this token, tokens_left - 1 remain, each worth at least one byte.
  if (tokens_left > 0 && it->second.max_after > tokens_left - 1) {
    std::int32_t unused = 0;
    s.compute_mask(s.cur, static_cast<std::int32_t>(std::min<std::int64_t>(tokens_left - 1, kGrammarInf)), s.scratch, unused);
    return s.scratch;
  }
  return it->second.mask;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  std::int32_t st = s_->cur;
  for (const char c : bytes) {
    st = s_->step(st, static_cast<unsigned char>(c));
    if (st == 0) return false;
  }
  s_->cur = st;
  return true;
}

void GrammarMatcher::accept(std::int32_t token) {
  TFM_CHECK(token >= 0 && token < s_->vocab->vocab_size(), "grammar", "token ", token, " out of range");
  const std::string& b = s_->vocab->bytes(token);
  TFM_CHECK(!b.empty() && accept_bytes(b), "grammar", "token ", token, " is not allowed here");
}

bool GrammarMatcher::accepting() const {
  const auto& set = s_->sets[static_cast<std::size_t>(s_->cur)];
  return !set.empty() && set.front() == 0;
}

bool GrammarMatcher::can_continue() const {
  const auto& set = s_->sets[static_cast<std::size_t>(s_->cur)];
  return !set.empty() && set.back() != 0;
}

std::int64_t GrammarMatcher::bytes_to_finish() const { return s_->set_dist[static_cast<std::size_t>(s_->cur)]; }

}  // namespace tfm
