#include "tokenize/uprops.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/unistr.h>

#include "tfm/error.h"

namespace tfm::tok::uprops {

bool is_whitespace(std::uint32_t cp) {
  if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13);
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

bool is_numeric(std::uint32_t cp) {
  if (cp < 128) return cp >= '0' && cp <= '9';
  const auto mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  return (mask & (U_GC_ND_MASK | U_GC_NL_MASK | U_GC_NO_MASK)) != 0;
}

bool is_alphanumeric(std::uint32_t cp) {
  if (cp < 128) return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z');
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_ALPHABETIC) || is_numeric(cp);
}

bool is_punctuation(std::uint32_t cp) {
  if (cp < 128) return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_P_MASK) != 0;
}

bool is_other(std::uint32_t cp) { return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_C_MASK) != 0; }
bool is_mark(std::uint32_t cp) { return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_M_MASK) != 0; }
bool is_mark_nonspacing(std::uint32_t cp) { return u_charType(static_cast<UChar32>(cp)) == U_NON_SPACING_MARK; }

bool is_word_char(std::uint32_t cp) {
  if (cp < 128) return cp == '_' || is_alphanumeric(cp);
  const auto c = static_cast<UChar32>(cp);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

bool is_cjk(std::uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void lower_into(std::uint32_t cp, std::uint32_t* out, int& n) {
  if (cp < 128) {
    out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    n = 1;
    return;
  }
  UChar src[2], dst[8];
  int32_t len = 0;
  U16_APPEND_UNSAFE(src, len, static_cast<UChar32>(cp));
  UErrorCode err = U_ZERO_ERROR;
  const int32_t m = u_strToLower(dst, 8, src, len, "", &err);
  n = 0;
  if (U_FAILURE(err)) {
    out[n++] = cp;
    return;
  }
  for (int32_t i = 0; i < m && n < 3;) {
    UChar32 c;
    U16_NEXT(dst, i, m, c);
    out[n++] = static_cast<std::uint32_t>(c);
  }
}

void append_lower(std::string& out, std::uint32_t cp) {
  std::uint32_t buf[3];
  int n = 0;
  lower_into(cp, buf, n);
  for (int i = 0; i < n; ++i) {
    icu::UnicodeString s(static_cast<UChar32>(buf[i]));
    s.toUTF8String(out);
  }
}

static const icu::Normalizer2* instance(Form form) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case Form::nfc: n = icu::Normalizer2::getNFCInstance(err); break;
    case Form::nfd: n = icu::Normalizer2::getNFDInstance(err); break;
    case Form::nfkc: n = icu::Normalizer2::getNFKCInstance(err); break;
    case Form::nfkd: n = icu::Normalizer2::getNFKDInstance(err); break;
  }
  TFM_CHECK(U_SUCCESS(err) && n, "tokenizer", "ICU normalizer unavailable: ", u_errorName(err));
  return n;
}

bool is_normalized(Form form, const std::string& in) {
  UErrorCode err = U_ZERO_ERROR;
  const bool yes = instance(form)->isNormalized(icu::UnicodeString::fromUTF8(in), err);
  return U_SUCCESS(err) && yes;
}

bool normalize(Form form, const std::string& in, std::string& out) {
  const icu::Normalizer2* n = instance(form);
  UErrorCode err = U_ZERO_ERROR;
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(in);
  if (n->isNormalized(src, err) && U_SUCCESS(err)) return false;
  err = U_ZERO_ERROR;
  const icu::UnicodeString dst = n->normalize(src, err);
  TFM_CHECK(U_SUCCESS(err), "tokenizer", "ICU normalization failed: ", u_errorName(err));
  out.clear();
  dst.toUTF8String(out);
  return true;
}

std::uint8_t combining_class(std::uint32_t cp) { return u_getCombiningClass(static_cast<UChar32>(cp)); }

std::int32_t compose_pair(std::uint32_t a, std::uint32_t b) {
  return instance(Form::nfc)->composePair(static_cast<UChar32>(a), static_cast<UChar32>(b));
}

bool has_boundary_before(Form form, std::uint32_t cp) { return instance(form)->hasBoundaryBefore(static_cast<UChar32>(cp)); }

}  // namespace tfm::tok::uprops
