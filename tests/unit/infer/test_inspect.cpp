// Heat-map SVG writer, token labels, id2label in config.json, and the inspect read-outs
// (classify / embed batched equal one by one; attention_figure defaults and errors).
#include <gtest/gtest.h>

#include <cmath>

#include "tfm/inspect.h"
#include "tfm/plot.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// The text between the first `open` and the next "</g>" after it.
std::string cells_of(const std::string& svg, std::size_t panel) {
  std::size_t p = 0;
  for (std::size_t i = 0; i <= panel; ++i) p = svg.find("<g class=\"cells\"", i == 0 ? 0 : p + 1);
  return svg.substr(p, svg.find("</g>", p) - p);
}

// Balanced tags: every <x ...> is closed by </x> or is self-closing, in order.
bool well_formed(const std::string& s) {
  std::vector<std::string> stack;
  for (std::size_t p = s.find('<'); p != std::string::npos; p = s.find('<', p + 1)) {
    const std::size_t e = s.find('>', p);
    if (e == std::string::npos) return false;
    const std::string tag = s.substr(p + 1, e - p - 1);
    if (tag.empty()) return false;
    const std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" />", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != name) return false;
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(name);
    }
    // No raw '<' or '&' that is not an entity inside text between tags.
    const std::size_t next = s.find('<', e);
    const std::string text = s.substr(e + 1, (next == std::string::npos ? s.size() : next) - e - 1);
    for (std::size_t a = text.find('&'); a != std::string::npos; a = text.find('&', a + 1))
      if (text.find(';', a) == std::string::npos) return false;
  }
  return stack.empty();
}

LoadedModel tiny_model(Architecture a, HeadKind head, std::uint64_t seed) {
  TokenizerTrainOptions to;
  to.kind = TokenizerKind::char_level;
  Tokenizer tok = Tokenizer::train({"the quick brown fox jumps over the lazy dog <&> \"'\n"}, to);
  ModelConfig c;
  c.architecture = a;
  c.head = head;
  c.vocab_size = tok.vocab_size();
  c.d_model = 16; c.n_heads = 2; c.n_layers = 2; c.d_ff = 32; c.max_positions = 40;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  c.num_labels = 3;
  if (head == HeadKind::classifier) c.id2label = {"neg", "neu", "pos"};
  Model m = Model::create(c, seed);
  return LoadedModel{c, std::move(m), std::move(tok)};
}

}  // namespace

TEST(HeatMapSvg, CellsLabelsAndEscaping) {
  HeatMap a;
  a.title = "head <0>";
  a.row_labels = {"<b>", "a&b", "\"q\""};
  a.col_labels = {"x", "y", "<", ">"};
  for (int i = 0; i < 12; ++i) a.values.push_back(static_cast<float>(i) / 11.0f);
  HeatMap b = a;
  b.title = "head 1";
  HeatMapStyle st;
  st.title = "decoder self-attention & more";
  const std::string svg = heat_maps_svg({a, b}, st);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<g class=\"panel\">"), 2u);
  b.values[5] = 0.0f;  // exact zeros (masked) are the background: no cell drawn
  const std::string svg2 = heat_maps_svg({a, b}, st);
  EXPECT_EQ(count(cells_of(svg, 0), "<rect "), 11u);  // values 1/11 .. 11/11
  EXPECT_EQ(count(cells_of(svg2, 1), "<rect "), 10u);
  EXPECT_NE(cells_of(svg, 0).find("x=\"3\" y=\"2\""), std::string::npos);  // the last cell (row 2, column 3)
  EXPECT_NE(svg.find("&lt;b&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a&amp;b"), std::string::npos);
  EXPECT_NE(svg.find("&quot;q&quot;"), std::string::npos);
  EXPECT_NE(svg.find("head &lt;0&gt;"), std::string::npos);
  EXPECT_NE(svg.find("self-attention &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  // The largest value is the darkest blue; the scale runs from white.
  EXPECT_NE(cells_of(svg, 0).find("fill=\"#08306b\""), std::string::npos);
  EXPECT_NE(svg.find("stop-color=\"#ffffff\""), std::string::npos);
}

TEST(HeatMapSvg, RejectsMismatchedValues) {
  HeatMap a;
  a.row_labels = {"a"};
  a.col_labels = {"b", "c"};
  a.values = {0.5f};
  EXPECT_THROW(heat_maps_svg({a}), Error);
  EXPECT_THROW(heat_maps_svg({}), Error);
}

TEST(HeatMapSvg, VisibleTokens) {
  EXPECT_EQ(visible_token(" "), "\u2423");
  EXPECT_EQ(visible_token("\n"), "\u23CE");
  EXPECT_EQ(visible_token("a\tb"), "a\u21E5b");
  EXPECT_EQ(visible_token("\x01"), "\\x01");
  EXPECT_EQ(visible_token("\xE4\xBD\xA0"), "\xE4\xBD\xA0");  // 你 stays
  EXPECT_EQ(visible_token("\xE4\xBD"), "\\xE4\\xBD");       // a cut code point does not
}

TEST(ModelConfigLabels, Id2LabelRoundTripsAndSetsNumLabels) {
  ModelConfig c;
  c.architecture = Architecture::encoder_only;
  c.head = HeadKind::classifier;
  c.num_labels = 2;
  c.id2label = {"ham", "spam"};
  const std::string j = model_config_to_json(c);
  EXPECT_NE(j.find("\"id2label\""), std::string::npos);
  EXPECT_EQ(parse_model_config(j, "t").id2label, c.id2label);
  c.id2label.clear();
  EXPECT_EQ(model_config_to_json(c).find("id2label"), std::string::npos);  // old directories: no key
  const ModelConfig b = parse_model_config(
      R"({"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
          "intermediate_size": 16, "id2label": {"0": "a", "1": "b", "2": "c"}})", "bert");
  EXPECT_EQ(b.num_labels, 3);
  EXPECT_EQ(b.id2label[2], "c");
  EXPECT_THROW(parse_model_config(R"({"id2label": {"0": "a", "2": "b"}})", "t"), Error);
  EXPECT_THROW(parse_model_config(R"({"id2label": {"0": "a"}, "num_labels": 2})", "t"), Error);
}

TEST(Inspect, ClassifyBatchEqualsOneByOne) {
  LoadedModel m = tiny_model(Architecture::encoder_only, HeadKind::classifier, 3);
  const std::vector<std::string> texts = {"the quick brown fox", "", "dog", "lazy dog jumps over the fox again"};
  const auto all = classify(m, texts);
  ASSERT_EQ(all.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto one = classify(m, {texts[i]});
    EXPECT_EQ(one[0].label, all[i].label) << i;
    EXPECT_EQ(one[0].name, all[i].name);
    EXPECT_EQ(all[i].name, m.config.id2label[static_cast<std::size_t>(all[i].label)]);
    double sum = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(one[0].probabilities[k], all[i].probabilities[k], 1e-5) << i;
      sum += all[i].probabilities[k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  m.config.id2label.clear();  // a directory without names: the index
  EXPECT_EQ(classify(m, {"dog"})[0].name, std::to_string(all[2].label));
  LoadedModel lm = tiny_model(Architecture::decoder_only, HeadKind::lm, 3);
  EXPECT_THROW(classify(lm, {"dog"}), Error);
}

TEST(Inspect, EmbedBatchEqualsOneByOneForEveryArchitecture) {
  for (Architecture a : {Architecture::encoder_only, Architecture::decoder_only, Architecture::encoder_decoder}) {
    LoadedModel m = tiny_model(a, a == Architecture::encoder_only ? HeadKind::none : HeadKind::lm, 4);
    const std::vector<std::string> texts = {"the fox", "a lazy dog over the fox", "dog"};
    for (EmbedPooling p : {EmbedPooling::automatic, EmbedPooling::mean, EmbedPooling::first, EmbedPooling::last}) {
      const auto all = embed(m, texts, p, true);
      for (std::size_t i = 0; i < texts.size(); ++i) {
        const auto one = embed(m, {texts[i]}, p, true);
        ASSERT_EQ(one[0].size(), 16u);
        double norm = 0;
        for (std::size_t k = 0; k < 16; ++k) {
          EXPECT_NEAR(one[0][k], all[i][k], 1e-5) << to_string(a) << " text " << i;
          norm += static_cast<double>(all[i][k]) * all[i][k];
        }
        EXPECT_NEAR(norm, 1.0, 1e-5);
      }
    }
    // mean differs from first (a real pooling choice), unnormalised vectors are not unit.
    EXPECT_NE(embed(m, {texts[1]}, EmbedPooling::mean)[0], embed(m, {texts[1]}, EmbedPooling::first)[0]);
  }
}

TEST(Inspect, AttentionFigureDefaultsAndErrors) {
  LoadedModel dec = tiny_model(Architecture::decoder_only, HeadKind::lm, 5);
  AttentionQuery q;
  q.prompt = "the fox\n";
  AttentionFigure f = attention_figure(dec, q);
  EXPECT_EQ(f.stack, "decoder");
  EXPECT_EQ(f.kind, "self");
  EXPECT_EQ(f.layer, 1);
  ASSERT_EQ(f.maps.size(), 2u);  // every head
  EXPECT_EQ(f.maps[0].row_labels.size(), 8u);
  EXPECT_EQ(f.maps[0].row_labels[3], "\u2423");
  EXPECT_EQ(f.maps[0].row_labels[7], "\u23CE");
  EXPECT_EQ(f.maps[0].values[1], 0.0f);  // causal
  q.head = 1;
  q.layer = 0;
  f = attention_figure(dec, q);
  ASSERT_EQ(f.maps.size(), 1u);
  EXPECT_NE(f.style.title.find("layer 0, head 1"), std::string::npos);
  q.layer = 2;
  try {
    attention_figure(dec, q);
    FAIL() << "layer 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(0..1)"), std::string::npos) << e.what();
  }
  q.layer = -1;
  q.head = 5;
  EXPECT_THROW(attention_figure(dec, q), Error);
  q.head = -1;
  q.kind = "cross";
  EXPECT_THROW(attention_figure(dec, q), Error);
  q.kind = "";
  q.prompt = "";
  EXPECT_THROW(attention_figure(dec, q), Error);

  LoadedModel s2s = tiny_model(Architecture::encoder_decoder, HeadKind::lm, 6);
  AttentionQuery c;
  c.prompt = "the fox";
  try {
    attention_figure(s2s, c);
    FAIL() << "cross attention without a target accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--target"), std::string::npos) << e.what();
  }
  c.target = "dog";
  f = attention_figure(s2s, c);
  EXPECT_EQ(f.kind, "cross");
  ASSERT_EQ(f.maps.size(), 2u);
  EXPECT_EQ(f.maps[0].row_labels.size(), 4u);  // <bos> d o g
  EXPECT_EQ(f.maps[0].row_labels[0], "<bos>");
  EXPECT_EQ(f.maps[0].col_labels.size(), 8u);  // t h e ␣ f o x <eos>
  EXPECT_EQ(f.maps[0].col_labels.back(), "<eos>");
  c.target = "";
  c.stack = "encoder";
  f = attention_figure(s2s, c);
  EXPECT_EQ(f.kind, "self");
  EXPECT_EQ(f.maps[0].row_labels.size(), 8u);
}
