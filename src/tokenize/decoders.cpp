// Decoders: ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse, Strip, Replace, BPEDecoder,
// CTC and Sequence, each a decode_chain over the token strings as HF's.
#include "tokenize/bpe_model.h"
#include "tokenize/components.h"
#include "tokenize/regex.h"

namespace tfm::tok {

namespace {

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  std::size_t prev = 0;
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  out.append(s, prev, std::string::npos);
  return out;
}

// Invalid UTF-8 sequences become U+FFFD (Rust's String::from_utf8_lossy).
std::string utf8_lossy(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    std::uint32_t cp;
    const int len = next_cp(bytes, i, cp);
    if (cp == 0xFFFD && !(len == 3 && bytes.compare(i, 3, "\xEF\xBF\xBD") == 0)) {
      // from_utf8_lossy replaces a maximal invalid prefix of a would-be sequence by one U+FFFD
      out += "\xEF\xBF\xBD";
      const auto b0 = static_cast<unsigned char>(bytes[i]);
      std::size_t need = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 && b0 <= 0xEF ? 3 : b0 >= 0xC2 && b0 <= 0xDF ? 2 : 1;
      std::size_t j = i + 1;
      if (need > 1) {
        const unsigned lo = b0 == 0xE0 ? 0xA0 : b0 == 0xF0 ? 0x90 : 0x80;
        const unsigned hi = b0 == 0xED ? 0x9F : b0 == 0xF4 ? 0x8F : 0xBF;
        if (j < bytes.size() && static_cast<unsigned char>(bytes[j]) >= lo && static_cast<unsigned char>(bytes[j]) <= hi) {
          ++j;
          while (j < i + need && j < bytes.size() && (static_cast<unsigned char>(bytes[j]) & 0xC0) == 0x80) ++j;
        }
      }
      i = j;
      continue;
    }
    out.append(bytes, i, static_cast<std::size_t>(len));
    i += static_cast<std::size_t>(len);
  }
  return out;
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes, b;
    for (const auto& t : tokens) {
      if (token_text_to_bytes(t, b))
        bytes += b;
      else
        bytes += t;  // a token outside the byte alphabet (an added token) stays as it is
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::uint32_t rep, PrependScheme scheme) : scheme_(scheme) { append_utf8_cp(rep_, rep); }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (t.find(rep_) == std::string::npos) continue;
      const bool drop = i == 0 && scheme_ != PrependScheme::never;
      t = replace_all(t, rep_, drop ? "" : " ");
    }
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0)
          t.erase(0, prefix_.size());
        else if (prefix_.empty())
          ;  // strip_prefix("") always succeeds: nothing to strip
        else
          t = " " + t;
      }
      if (cleanup_) t = cleanup(t);
    }
  }
  static std::string cleanup(const std::string& s) {
    static const std::pair<const char*, const char*> rules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    std::string out = s;
    for (const auto& [from, to] : rules) out = replace_all(out, from, to);
    return out;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      std::uint32_t cp;
      bool valid = true;
      for (std::size_t i = 0; i < pending.size();) {
        const int len = next_cp(pending, i, cp);
        if (cp == 0xFFFD && pending.compare(i, 3, "\xEF\xBF\xBD") != 0) valid = false;
        i += static_cast<std::size_t>(len);
      }
      if (valid)
        out.push_back(pending);
      else
        for (std::size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        char* end = nullptr;
        const std::string hex = t.substr(3, 2);
        const long v = std::strtol(hex.c_str(), &end, 16);
        if (end == hex.c_str() + 2 && std::isxdigit(static_cast<unsigned char>(hex[0]))) byte = static_cast<int>(v);
      }
      if (byte >= 0) {
        pending += static_cast<char>(byte);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::uint32_t c, std::size_t start, std::size_t stop) : content_(c), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<std::size_t, std::uint32_t>> chars;  // (byte offset, cp)
      for (std::size_t i = 0; i < t.size();) {
        std::uint32_t cp;
        const int len = next_cp(t, i, cp);
        chars.push_back({i, cp});
        i += static_cast<std::size_t>(len);
      }
      std::size_t start_cut = 0, stop_cut = chars.size();
      for (std::size_t i = 0; i < std::min(start_, chars.size()); ++i) {
        if (chars[i].second != content_) break;
        start_cut = i + 1;
      }
      for (std::size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        const std::size_t idx = chars.size() - i - 1;
        if (chars[idx].second != content_) break;
        stop_cut = idx;
      }
      if (stop_cut < start_cut) stop_cut = start_cut;
      const std::size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
      const std::size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::uint32_t content_;
  std::size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const std::string& literal, const std::string& regex, const std::string& content)
      : literal_(literal), content_(content) {
    if (!regex.empty()) re_ = std::make_unique<Regex>(regex, "tokenizer.json: Replace decoder");
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      if (!re_) {
        t = replace_all(t, literal_, content_);
        continue;
      }
      std::vector<Range> found;
      re_->find_all(t, found);
      std::string out;
      std::size_t prev = 0;
      for (const Range& r : found) {
        out.append(t, prev, r.begin - prev);
        out += content_;
        prev = r.end;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> re_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class CtcDecoder final : public Decoder {
 public:
  CtcDecoder(std::string pad, std::string delim, bool cleanup)
      : pad_(std::move(pad)), delim_(std::move(delim)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && tokens[i] == tokens[i - 1]) continue;  // dedup
      std::string t = replace_all(tokens[i], pad_, "");
      if (cleanup_) t = replace_all(WordPieceDecoder::cleanup(t), delim_, " ");
      if (!t.empty()) out.push_back(std::move(t));
    }
    tokens = std::move(out);
  }

 private:
  std::string pad_, delim_;
  bool cleanup_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : parts_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }
std::unique_ptr<Decoder> make_metaspace_decoder(std::uint32_t replacement, PrependScheme scheme) {
  return std::make_unique<MetaspaceDecoder>(replacement, scheme);
}
std::unique_ptr<Decoder> make_wordpiece_decoder(const std::string& prefix, bool cleanup) {
  return std::make_unique<WordPieceDecoder>(prefix, cleanup);
}
std::unique_ptr<Decoder> make_byte_fallback_decoder() { return std::make_unique<ByteFallbackDecoder>(); }
std::unique_ptr<Decoder> make_fuse_decoder() { return std::make_unique<FuseDecoder>(); }
std::unique_ptr<Decoder> make_strip_decoder(std::uint32_t content, std::size_t start, std::size_t stop) {
  return std::make_unique<StripDecoder>(content, start, stop);
}
std::unique_ptr<Decoder> make_replace_decoder(const std::string& literal, const std::string& regex,
                                              const std::string& content) {
  return std::make_unique<ReplaceDecoder>(literal, regex, content);
}
std::unique_ptr<Decoder> make_bpe_decoder(const std::string& suffix) { return std::make_unique<BpeDecoder>(suffix); }
std::unique_ptr<Decoder> make_ctc_decoder(const std::string& pad_token, const std::string& word_delimiter, bool cleanup) {
  return std::make_unique<CtcDecoder>(pad_token, word_delimiter, cleanup);
}
std::unique_ptr<Decoder> make_decoder_sequence(std::vector<std::unique_ptr<Decoder>> parts) {
  return std::make_unique<DecoderSequence>(std::move(parts));
}

}  // namespace tfm::tok
