// Post-processors: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (offset
// trimming) and Sequence; without one, the sequences are concatenated.
#include "tokenize/components.h"

namespace tfm::tok {

namespace {

Encoding specials(const std::vector<std::int32_t>& ids, const std::vector<std::string>& tokens, std::int32_t type_id) {
  Encoding e;
  e.ids = ids;
  e.tokens = tokens;
  e.type_ids.assign(ids.size(), type_id);
  e.offsets.assign(ids.size(), Range{0, 0});
  e.special_mask.assign(ids.size(), 1);
  e.attention.assign(ids.size(), 1);
  return e;
}

class Template final : public PostProcessor {
 public:
  Template(std::vector<TemplatePiece> single, std::vector<TemplatePiece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}
  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const auto& p : pair ? pair_ : single_)
      if (!p.is_sequence) n += p.ids.size();
    return n;
  }
  Encoding process(Encoding a, const Encoding* b, bool add_special) const override {
    Encoding out;
    Encoding bb = b ? *b : Encoding();
    for (const auto& piece : b ? pair_ : single_) {
      if (piece.is_sequence) {
        Encoding& seq = piece.sequence == 0 ? a : bb;
        seq.set_type_id(piece.type_id);
        out.append(seq);
      } else if (add_special) {
        out.append(specials(piece.ids, piece.tokens, piece.type_id));
      }
    }
    return out;
  }

 private:
  std::vector<TemplatePiece> single_, pair_;
};

class BertProcessing final : public PostProcessor {
 public:
  BertProcessing(std::pair<std::string, std::int32_t> sep, std::pair<std::string, std::int32_t> cls)
      : sep_(std::move(sep)), cls_(std::move(cls)) {}
  std::size_t added_tokens(bool pair) const override { return pair ? 3 : 2; }
  Encoding process(Encoding a, const Encoding* b, bool add_special) const override {
    if (!add_special) return default_process(std::move(a), b);
    Encoding out = specials({cls_.second}, {cls_.first}, 0);
    a.set_type_id(0);
    out.append(a);
    out.append(specials({sep_.second}, {sep_.first}, 0));
    if (b) {
      Encoding bb = *b;
      bb.set_type_id(1);
      out.append(bb);
      out.append(specials({sep_.second}, {sep_.first}, 1));
    }
    return out;
  }

 private:
  std::pair<std::string, std::int32_t> sep_, cls_;
};

class RobertaProcessing final : public PostProcessor {
 public:
  RobertaProcessing(std::pair<std::string, std::int32_t> sep, std::pair<std::string, std::int32_t> cls, bool trim,
                    bool prefix)
      : sep_(std::move(sep)), cls_(std::move(cls)), trim_(trim), prefix_(prefix) {}
  std::size_t added_tokens(bool pair) const override { return pair ? 4 : 2; }
  Encoding process(Encoding a, const Encoding* b, bool add_special) const override {
    Encoding bb = b ? *b : Encoding();
    if (trim_) {
      trim_byte_level_offsets(a, prefix_);
      if (b) trim_byte_level_offsets(bb, prefix_);
    }
    a.set_type_id(0);  // RoBERTa: every type id is 0
    bb.set_type_id(0);
    if (!add_special) {
      if (b) a.append(bb);
      return a;
    }
    Encoding out = specials({cls_.second}, {cls_.first}, 0);
    out.append(a);
    out.append(specials({sep_.second}, {sep_.first}, 0));
    if (b) {
      out.append(specials({sep_.second}, {sep_.first}, 0));
      out.append(bb);
      out.append(specials({sep_.second}, {sep_.first}, 0));
    }
    return out;
  }

 private:
  std::pair<std::string, std::int32_t> sep_, cls_;
  bool trim_, prefix_;
};

class ByteLevelPost final : public PostProcessor {
 public:
  explicit ByteLevelPost(bool trim) : trim_(trim) {}
  std::size_t added_tokens(bool) const override { return 0; }
  Encoding process(Encoding a, const Encoding* b, bool) const override {
    if (!trim_) return default_process(std::move(a), b);
    trim_byte_level_offsets(a, false);
    if (!b) return a;
    Encoding bb = *b;
    trim_byte_level_offsets(bb, false);
    return default_process(std::move(a), &bb);
  }

 private:
  bool trim_;
};

class PostSequence final : public PostProcessor {
 public:
  explicit PostSequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const auto& p : parts_) n += p->added_tokens(pair);
    return n;
  }
  // Each processor sees the previous one's output as a single sequence.
  Encoding process(Encoding a, const Encoding* b, bool add_special) const override {
    if (parts_.empty()) return default_process(std::move(a), b);
    Encoding cur = parts_[0]->process(std::move(a), b, add_special);
    for (std::size_t i = 1; i < parts_.size(); ++i) cur = parts_[i]->process(std::move(cur), nullptr, add_special);
    return cur;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

Encoding default_process(Encoding a, const Encoding* b) {
  if (b) a.append(*b);
  return a;
}

void trim_byte_level_offsets(Encoding& e, bool add_prefix_space) {
  static const std::string kSpace = "\xC4\xA0";  // 'Ġ', the byte-level form of ' '
  for (std::size_t i = 0; i < e.size(); ++i) {
    const std::string& t = e.tokens[i];
    Range& o = e.offsets[i];
    auto space_at = [&](std::size_t pos, std::size_t& len) {
      std::uint32_t cp;
      len = static_cast<std::size_t>(next_cp(t, pos, cp));
      return cp == 0x120 || uprops::is_whitespace(cp);
    };
    std::size_t lead = 0, trail = 0, len = 0;
    for (std::size_t pos = 0; pos < t.size() && space_at(pos, len); pos += len) ++lead;
    for (std::size_t end = t.size(); end > 0;) {
      std::size_t s = end - 1;
      while (s > 0 && (static_cast<unsigned char>(t[s]) & 0xC0) == 0x80) --s;
      if (!space_at(s, len)) break;
      ++trail;
      end = s;
    }
    if (lead == 0 && trail == 0) continue;
    if (lead > 0) {
      const bool first = i == 0 || o.begin == 0;
      if (first && add_prefix_space && lead == 1) lead = 0;
      o.begin = std::min<std::uint32_t>(o.begin + static_cast<std::uint32_t>(lead), o.end);
    }
    if (trail > 0 && o.end >= trail) o.end = std::max<std::uint32_t>(o.end - static_cast<std::uint32_t>(trail), o.begin);
  }
  (void)kSpace;
}

std::unique_ptr<PostProcessor> make_template(std::vector<TemplatePiece> single, std::vector<TemplatePiece> pair) {
  return std::make_unique<Template>(std::move(single), std::move(pair));
}
std::unique_ptr<PostProcessor> make_bert_processing(std::pair<std::string, std::int32_t> sep,
                                                    std::pair<std::string, std::int32_t> cls) {
  return std::make_unique<BertProcessing>(std::move(sep), std::move(cls));
}
std::unique_ptr<PostProcessor> make_roberta_processing(std::pair<std::string, std::int32_t> sep,
                                                       std::pair<std::string, std::int32_t> cls, bool trim_offsets,
                                                       bool add_prefix_space) {
  return std::make_unique<RobertaProcessing>(std::move(sep), std::move(cls), trim_offsets, add_prefix_space);
}
std::unique_ptr<PostProcessor> make_byte_level_post(bool trim_offsets) { return std::make_unique<ByteLevelPost>(trim_offsets); }
std::unique_ptr<PostProcessor> make_post_sequence(std::vector<std::unique_ptr<PostProcessor>> parts) {
  return std::make_unique<PostSequence>(std::move(parts));
}

}  // namespace tfm::tok
