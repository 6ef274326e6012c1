// print_load, run_torch_script and format_bytes for the `tfm bench` sections.
#include "bench_util.h"

#include <array>
#include <cstdio>
#include <cstdlib>

#include <sys/wait.h>

#include "tfm/runtime.h"

#ifndef TFM_SOURCE_DIR
#define TFM_SOURCE_DIR "."
#endif

namespace tfm::cli {

void print_load() {
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    double l1 = 0, l5 = 0;
    if (std::fscanf(f, "%lf %lf", &l1, &l5) == 2)
      std::printf("load average: %.2f (1 min), %.2f (5 min) on %d cores%s\n", l1, l5, cpu_info().logical_cores,
                  l1 > 0.5 ? "  -- machine busy: figures may be low" : "");
    std::fclose(f);
  }
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  if (std::getenv("TFM_OMP_DEFAULTED") != nullptr)
    std::printf("OpenMP waiting: tfm's threads %s; libgomp's default for PyTorch\n", omp_waiting_description());
  else if (policy != nullptr || spin != nullptr)
    std::printf("OpenMP waiting: OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s for both engines (set by the user)\n",
                policy ? policy : "-", spin ? spin : "-");
}

nlohmann::json run_torch_script(const std::string& script, const std::string& args, std::string& why) {
  const char* env_dir = std::getenv("TFM_SOURCE_DIR");
  const std::string path = std::string(env_dir ? env_dir : TFM_SOURCE_DIR) + "/bench/peers/torch/" + script;
  // PyTorch runs with its own default OpenMP waiting (libgomp's: spin a while, then sleep)
  // unless the user chose a policy; the setting tfm gave itself is not passed on.
  const bool defaulted = std::getenv("TFM_OMP_DEFAULTED") != nullptr;
  const std::string cmd = std::string(defaulted ? "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " : "") + "/usr/bin/python3 '" + path +
                          "' " + args + " 2>/dev/null";
  std::fflush(stdout);  // the child's output must not interleave with ours
  std::string text;
  int status = -1;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
    status = pclose(p);
  }
  if (status != 0) {
    const int code = status > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : status;
    why = "/usr/bin/python3 " + path + " failed (exit status " + std::to_string(code) + "; torch missing?)";
    return nlohmann::json();
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    why = path + " printed no JSON (" + e.what() + ")";
    return nlohmann::json();
  }
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace tfm::cli
