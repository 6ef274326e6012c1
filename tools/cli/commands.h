// Each subcommand lives in its own cmd_*.cpp and registers itself on the app.
// A command's callback throws tfm::Error on bad input; main() prints it as one line.
#pragma once

#include <CLI/CLI.hpp>

namespace tfm::cli {

void add_info_command(CLI::App& app);
void add_tokenizer_commands(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_translate_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_attention_command(CLI::App& app);
void add_classify_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_merge_command(CLI::App& app);
void add_bleu_command(CLI::App& app);
void add_convert_command(CLI::App& app);  // cmd_convert.cpp: directory <-> GGUF
void add_quantize_command(CLI::App& app);  // cmd_quantize.cpp: compact weight types
void add_chat_template_command(CLI::App& app);
void add_serve_command(CLI::App& app);  // cmd_serve.cpp: tfm serve (tools/server)
void add_transcribe_command(CLI::App& app);  // cmd_transcribe.cpp: transcribe, mel, wer
void add_index_command(CLI::App& app);  // cmd_index.cpp: index build, index search

}  // namespace tfm::cli
