// Building a byte-level BPE tokenizer from a vocabulary + merge list, as read from GPT-2's
// encoder.json + vocab.bpe or from a tokenizer.json. Every malformation is an error that
// names the file and the offending entry.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tokenize/bpe_build.h"

namespace tfm::tok {

std::string read_file(const std::string& path, const char* where) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), where, "cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void fill_vocab(Tokenizer::Impl& impl, const std::vector<std::pair<std::string, std::int64_t>>& entries,
                const std::vector<AddedToken>& added, const char* where) {
  std::int64_t max_id = -1;
  for (const auto& [t, id] : entries) {
    TFM_CHECK(id >= 0 && id < (1ll << 31), where, "token '", t, "' has invalid id ", id);
    max_id = std::max(max_id, id);
  }
  for (const auto& a : added) {
    TFM_CHECK(a.id >= 0, where, "added token '", a.content, "' has invalid id ", a.id);
    max_id = std::max<std::int64_t>(max_id, a.id);
  }
  TFM_CHECK(max_id < static_cast<std::int64_t>(entries.size() + added.size()), where, "ids are not contiguous: max id ",
            max_id, " with ", entries.size(), " vocabulary entries");
  const auto n = static_cast<std::size_t>(max_id + 1);
  impl.tokens.assign(n, std::string());
  std::vector<bool> used(n, false);
  for (const auto& [t, id] : entries) {
    TFM_CHECK(!used[id], where, "duplicate id ", id, ": '", impl.tokens[id], "' and '", t, "'");
    used[id] = true;
    impl.tokens[id] = t;
  }
  for (const auto& a : added) {
    if (used[a.id]) {
      TFM_CHECK(impl.tokens[a.id] == a.content, where, "duplicate id ", a.id, ": '", impl.tokens[a.id],
                "' and added token '", a.content, "'");
    }
    used[a.id] = true;
    impl.tokens[a.id] = a.content;
  }
  for (std::size_t id = 0; id < n; ++id) TFM_CHECK(used[id], where, "ids are not contiguous: no token has id ", id);
  impl.added = added;
}

void build_bpe(Tokenizer::Impl& impl, const std::vector<std::pair<std::string, std::string>>& merges,
               const char* where) {
  impl.kind = TokenizerKind::bpe;
  const std::size_t n = impl.tokens.size();
  std::vector<bool> is_added(n, false);
  for (const auto& a : impl.added) is_added[a.id] = true;
  impl.token_bytes.assign(n, std::string());
  for (std::size_t id = 0; id < n; ++id) {
    if (is_added[id]) {
      impl.token_bytes[id] = impl.tokens[id];
      continue;
    }
    TFM_CHECK(token_text_to_bytes(impl.tokens[id], impl.token_bytes[id]), where, "token '", impl.tokens[id],
              "' (id ", id, ") is not in GPT-2's byte-level alphabet");
  }
  impl.finalize(where);  // builds token_ids
  impl.bpe.merges.reserve(merges.size());
  impl.bpe.merge_list.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const std::string& l = merges[r].first;  // not a structured binding: clang 14 (the fuzz
    const std::string& rt = merges[r].second;  // build) cannot capture one in the lambda below
    auto find = [&](const std::string& t) {
      auto it = impl.token_ids.find(t);
      TFM_CHECK(it != impl.token_ids.end(), where, "merge ", r, " ('", l, " ", rt, "') names unknown token '", t, "'");
      return it->second;
    };
    const std::int32_t a = find(l), b = find(rt), m = find(l + rt);
    TFM_CHECK(impl.bpe.merges.insert(a, b, {static_cast<std::int32_t>(r), m}), where, "merge ", r, " ('", l, " ", rt,
              "') appears twice");
    impl.bpe.merge_list.emplace_back(a, b);
  }
}

Tokenizer::Impl impl_from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  const char* where = "gpt2 tokenizer";
  Tokenizer::Impl impl;
  std::vector<std::pair<std::string, std::int64_t>> entries;
  try {
    const auto j = nlohmann::json::parse(read_file(encoder_json, where));
    TFM_CHECK(j.is_object(), where, encoder_json, ": expected a JSON object token -> id");
    for (const auto& [t, id] : j.items()) {
      TFM_CHECK(id.is_number_integer(), where, encoder_json, ": id of '", t, "' is not an integer");
      entries.emplace_back(t, id.get<std::int64_t>());
    }
  } catch (const nlohmann::json::exception& e) {
    fail(where, encoder_json, ": ", e.what());
  }
  std::vector<AddedToken> added;
  for (const auto& [t, id] : entries)
    if (t == "<|endoftext|>") added.push_back({t, static_cast<std::int32_t>(id), true});
  fill_vocab(impl, entries, added, where);

  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream in(read_file(vocab_bpe, where));
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const auto sp = line.find(' ');
    TFM_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
              where, vocab_bpe, ":", lineno, ": expected 'left right', got '", line, "'");
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  build_bpe(impl, merges, where);
  return impl;
}

}  // namespace tfm::tok
