// Retrieved passages into a prompt: a Jinja template over `documents` and `prompt`, rendered
// by the chat-template engine, so a user's own template follows the same rules.
#include "tfm/chat_template.h"
#include "tfm/retrieval.h"

namespace tfm {

const std::string& default_retrieval_template() {
  static const std::string t =
      "{% for d in documents %}[{{ loop.index }}] {{ d.text }}\n{% endfor %}\n{{ prompt }}";
  return t;
}

nlohmann::ordered_json chat_documents(const std::vector<SearchHit>& hits) {
  nlohmann::ordered_json docs = nlohmann::ordered_json::array();
  for (const SearchHit& h : hits) docs.push_back({{"title", h.id}, {"text", h.text}});
  return docs;
}

const std::string& default_fusion_template() {
  static const std::string t = "question: {{ prompt }} context: {{ document.text }}";
  return t;
}

std::string fusion_part(const std::string& prompt, const SearchHit& hit, const std::string& jinja_template) {
  const nlohmann::ordered_json doc = {{"id", hit.id}, {"text", hit.text}, {"score", hit.score}};
  return render_chat_template(jinja_template, {{"prompt", prompt}, {"document", doc}});
}

std::string retrieval_prompt(const std::string& prompt, const std::vector<SearchHit>& hits,
                             const std::string& jinja_template) {
  nlohmann::ordered_json docs = nlohmann::ordered_json::array();
  for (const SearchHit& h : hits) docs.push_back({{"id", h.id}, {"text", h.text}, {"score", h.score}});
  return render_chat_template(jinja_template, {{"documents", docs}, {"prompt", prompt}});
}

bool template_reads_documents(std::string_view chat_template) {
  return chat_template.find("documents") != std::string_view::npos;
}

}  // namespace tfm
