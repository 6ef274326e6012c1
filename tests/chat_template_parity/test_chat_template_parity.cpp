// Chat templates against @huggingface/jinja (npm), byte for byte: every model template
// (Llama-2, Llama-3, Llama-3.1, Mistral, Mixtral, Qwen3, Gemma, Phi-3, ChatML) with every
// conversation, and one small template per language feature. The expected renderings are
// written at test time by tools/reference/jinja/gen_reference.js (ctest fixture
// chat_template_reference). Where the reference fails, we must fail too: a template's
// raise_exception message must come through exactly, any other error must carry the
// reference's message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfm/chat_template.h"
#include "tfm/error.h"

namespace {

using nlohmann::ordered_json;

std::vector<ordered_json> load_reference() {
  const char* path = std::getenv("TFM_CHAT_REFERENCE");
  if (!path) return {};
  std::ifstream in(path);
  std::vector<ordered_json> records;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) records.push_back(ordered_json::parse(line));
  return records;
}

const std::vector<ordered_json>& reference() {
  static const std::vector<ordered_json> records = load_reference();
  return records;
}

// Escapes control characters so a failing comparison shows where the bytes differ.
std::string visible(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

// Renders every record of one group and compares; returns how many were checked.
int check(bool features) {
  int checked = 0;
  for (const auto& r : reference()) {
    if ((r["template"] == "feature") != features) continue;
    const std::string name = r["template"].get<std::string>() + "/" + r["case"].get<std::string>();
    SCOPED_TRACE(name);
    ++checked;
    std::string out;
    std::string error;
    try {
      out = tfm::render_chat_template(r["source"].get<std::string>(), r["context"]);
    } catch (const tfm::Error& e) {
      error = e.what();
    }
    if (r.contains("output")) {
      EXPECT_EQ(error, "") << "the reference rendered it";
      EXPECT_EQ(visible(out), visible(r["output"].get<std::string>()));
    } else {
      const std::string expected = r["error"].get<std::string>();
      EXPECT_NE(error, "") << "the reference failed with: " << expected << "\nwe rendered: " << visible(out);
      EXPECT_NE(error.find(expected), std::string::npos) << "ours: " << error << "\nreference: " << expected;
      if (error.rfind("[chat template] raise_exception: ", 0) == 0) {
        EXPECT_EQ(error, "[chat template] raise_exception: " + expected);
      }
    }
  }
  return checked;
}

TEST(ChatTemplateParity, ReferenceWasWritten) {
  ASSERT_FALSE(reference().empty()) << "TFM_CHAT_REFERENCE unset or empty (run the chat_template_reference fixture)";
  std::set<std::string> templates;
  for (const auto& r : reference()) templates.insert(r["template"].get<std::string>());
  for (const char* t : {"npm-llama3", "npm-llama3_1", "npm-qwen3", "llama-2-chat", "mistral-7b-instruct-v0.1",
                        "mixtral-8x7b-instruct-v0.1", "mistral-7b-instruct-v0.3", "gemma-it", "phi-3-mini-instruct",
                        "phi-3.5-mini-instruct", "llama-3.1-8b-instruct", "chatml", "feature"})
    EXPECT_TRUE(templates.count(t)) << t;
}

TEST(ChatTemplateParity, ModelTemplatesRenderExactly) { EXPECT_GT(check(false), 100); }

TEST(ChatTemplateParity, LanguageFeaturesRenderExactly) { EXPECT_GT(check(true), 20); }

// The ChatML default the library ships is the file the reference rendered as "chatml".
TEST(ChatTemplateParity, ChatmlDefaultIsTheTestedTemplate) {
  bool found = false;
  for (const auto& r : reference())
    if (r["template"] == "chatml") {
      EXPECT_EQ(r["source"].get<std::string>(), tfm::chatml_template());
      found = true;
    }
  EXPECT_TRUE(found);
}

}  // namespace
