"""Seeds for fuzz/tokenizer_json.cpp that exercise every tokenizer.json component type the
pipeline reads (normalizers, pre-tokenizers, models, post-processors, decoders): one small
file per component, on a tiny vocabulary. Usage: python3 fuzz/make_component_seeds.py"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "tokenizer_json"
CHARS = list("abcdefghijklmnopqrstuvwxyz ,.!?'0123456789")
VOCAB = {c: i for i, c in enumerate(["[UNK]", "[CLS]", "[SEP]", "<s>", "</s>", "▁"] + CHARS + ["ab", "▁a", "##b"])}
ADDED = [{"id": 1, "content": "[CLS]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
          "special": True},
         {"id": 2, "content": "[SEP]", "single_word": True, "lstrip": True, "rstrip": True, "normalized": True,
          "special": False}]
BPE = {"type": "BPE", "vocab": VOCAB, "merges": ["a b", "▁ a"], "unk_token": "[UNK]", "byte_fallback": False,
       "fuse_unk": True, "continuing_subword_prefix": None, "end_of_word_suffix": None, "ignore_merges": False,
       "dropout": None}
MODELS = {
    "bpe": BPE,
    "wordpiece": {"type": "WordPiece", "vocab": VOCAB, "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 20},
    "wordlevel": {"type": "WordLevel", "vocab": VOCAB, "unk_token": "[UNK]"},
    "unigram": {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                "vocab": [[t, -float(i) / 10 - 1] for t, i in VOCAB.items()]},
}
NORMALIZERS = [{"type": t} for t in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents")] + [
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "0"},
    {"type": "Prepend", "prepend": "▁"},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
     "lowercase": True},
    {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
]
PRE = [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "Whitespace"}, {"type": "WhitespaceSplit"}, {"type": "BertPreTokenizer"},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
    {"type": "Punctuation", "behavior": "Isolated"},
    {"type": "Digits", "individual_digits": True},
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|\\p{L}+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated",
     "invert": False},
    {"type": "Split", "pattern": {"String": ","}, "behavior": "MergedWithPrevious", "invert": True},
    {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": False}]},
]
POST = [
    {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                              {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}}},
    {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
    {"type": "RobertaProcessing", "sep": ["</s>", 4], "cls": ["<s>", 3], "trim_offsets": True,
     "add_prefix_space": True},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
]
DECODERS = [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    {"type": "WordPiece", "prefix": "##", "cleanup": True},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "BPEDecoder", "suffix": "</w>"},
    {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
]


def write(name, model, normalizer=None, pre=None, post=None, decoder=None):
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": ADDED, "normalizer": normalizer,
           "pre_tokenizer": pre, "post_processor": post, "decoder": decoder, "model": model}
    (OUT / f"component-{name}.json").write_text(json.dumps(doc, ensure_ascii=False))


for name, m in MODELS.items():
    write(f"model-{name}", m)
for i, n in enumerate(NORMALIZERS):
    write(f"normalizer-{i}-{n['type']}", BPE, normalizer=n)
for i, p in enumerate(PRE):
    write(f"pre-{i}-{p['type']}", MODELS["wordpiece"], pre=p)
for i, p in enumerate(POST):
    write(f"post-{i}-{p['type']}", MODELS["wordlevel"], pre={"type": "Whitespace"}, post=p)
for i, d in enumerate(DECODERS):
    write(f"decoder-{i}-{d['type']}", BPE, decoder=d)
doc = json.loads((OUT / "component-model-bpe.json").read_text())
doc["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
doc["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                  "pad_type_id": 0, "pad_token": "[UNK]"}
(OUT / "component-truncation-padding.json").write_text(json.dumps(doc, ensure_ascii=False))
