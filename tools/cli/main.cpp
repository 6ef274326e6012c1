// tfm — the transformer.cpp command-line tool. Subcommands register in commands.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "commands.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

int main(int argc, char** argv) {
  // OpenMP wait policy, SIGXFSZ, heap thresholds: the library's process set-up (runtime.h
  // says why each; the wait policy re-executes this program once).
  tfm::setup_process(argv);
  CLI::App app{"tfm — build, train, evaluate and run Transformers on the CPU"};
  app.set_version_flag("--version", std::string("tfm ") + tfm::version_string());
  app.require_subcommand(1);
  app.fallthrough();  // global options (-t) may also follow the subcommand
  // -t N: the engine's thread count for every subcommand (default: all cores).
  app.add_option_function<int>("-t,--threads", [](int n) { tfm::set_num_threads(n); },
                               "Threads for the engine (default: all cores)")
      ->check(CLI::Range(1, 1024));
  tfm::cli::add_info_command(app);
  tfm::cli::add_tokenizer_commands(app);
  tfm::cli::add_bench_command(app);
  tfm::cli::add_train_command(app);
  tfm::cli::add_generate_command(app);
  tfm::cli::add_translate_command(app);
  tfm::cli::add_eval_command(app);
  tfm::cli::add_attention_command(app);
  tfm::cli::add_classify_command(app);
  tfm::cli::add_embed_command(app);
  tfm::cli::add_merge_command(app);
  tfm::cli::add_bleu_command(app);
  tfm::cli::add_convert_command(app);
  tfm::cli::add_quantize_command(app);
  tfm::cli::add_chat_template_command(app);
  tfm::cli::add_transcribe_command(app);
  tfm::cli::add_index_command(app);
  tfm::cli::add_serve_command(app);
  // A first word that is not a command (nor an option or its value): say which command was
  // meant instead of CLI11's "A subcommand is required".
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) commands.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "-t" || word == "--threads") {
      ++i;
      continue;
    }
    if (!word.empty() && word[0] == '-') continue;
    if (std::find(commands.begin(), commands.end(), word) == commands.end()) {
      const std::string near = tfm::closest_name(word, commands, 3);
      std::string all;
      for (const auto& c : commands) all += (all.empty() ? "" : ", ") + c;
      std::fprintf(stderr, "tfm: error: unknown command '%s'%s; commands: %s\n", word.c_str(),
                   near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str(), all.c_str());
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The same one-line form as the library's errors.
    std::string sub;
    for (const CLI::App* s : app.get_subcommands()) sub = s->get_name();
    std::fprintf(stderr, "tfm: error: %s (tfm %s--help lists the options)\n", e.what(),
                 sub.empty() ? "" : (sub + " ").c_str());
    return e.get_exit_code();
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "tfm: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
