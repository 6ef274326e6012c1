#include "train/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tfm::train_detail {
namespace {

bool is_forward(Pass p) { return p == Pass::encode || p == Pass::decode; }

// The group sizes of the interleaved schedule: one group when M < P, else M / P groups of
// P or P + 1 ... (at most 2P - 1), the larger first. A group smaller than P would leave stages
// idle between groups.
std::vector<std::int64_t> group_sizes(std::int64_t stages, std::int64_t micros) {
  if (micros < stages) return {micros};
  const std::int64_t groups = micros / stages;
  std::vector<std::int64_t> sizes;
  for (std::int64_t i = 0; i < groups; ++i) sizes.push_back(micros / groups + (i < micros % groups ? 1 : 0));
  return sizes;
}

}  // namespace

std::vector<StagePass> encoder_decoder_schedule(int stage, int stages, std::int64_t micros, bool one_f_one_b) {
  std::vector<StagePass> forward, backward;
  if (!one_f_one_b) {
    for (const Pass p : {Pass::encode, Pass::decode, Pass::decode_backward, Pass::encode_backward})
      for (std::int64_t k = 0; k < micros; ++k) (is_forward(p) ? forward : backward).push_back({p, k});
    forward.insert(forward.end(), backward.begin(), backward.end());
    return forward;
  }
  const std::vector<std::int64_t> sizes = group_sizes(stages, micros);
  std::int64_t first = 0;
  for (const std::int64_t size : sizes) {
    for (const Pass p : {Pass::encode, Pass::decode})
      for (std::int64_t k = first; k < first + size; ++k) forward.push_back({p, k});
    for (const Pass p : {Pass::decode_backward, Pass::encode_backward})
      for (std::int64_t k = first; k < first + size; ++k) backward.push_back({p, k});
    first += size;
  }
  const std::size_t warm = std::min(forward.size(), static_cast<std::size_t>(2 * (stages - stage - 1) +
                                                                              *std::max_element(sizes.begin(), sizes.end())));
  std::vector<StagePass> order(forward.begin(), forward.begin() + static_cast<std::ptrdiff_t>(warm));
  std::size_t b = 0;
  for (std::size_t f = warm; f < forward.size(); ++f) {
    order.push_back(forward[f]);
    order.push_back(backward[b++]);
  }
  order.insert(order.end(), backward.begin() + static_cast<std::ptrdiff_t>(b), backward.end());
  return order;
}

ScheduleModel model_schedule(const std::vector<std::vector<StagePass>>& stages) {
  const int P = static_cast<int>(stages.size());
  using Key = std::tuple<Pass, std::int64_t, int>;  // a pass of a micro-batch on a stage
  std::map<Key, double> end;
  const auto needs = [P](const StagePass& x, int s) {  // what must have run before (any stage)
    std::vector<Key> d;
    switch (x.pass) {
      case Pass::encode:
        if (s > 0) d.emplace_back(Pass::encode, x.micro, s - 1);
        break;
      case Pass::decode:
        d.emplace_back(s > 0 ? Key{Pass::decode, x.micro, s - 1} : Key{Pass::encode, x.micro, P - 1});
        break;
      case Pass::decode_backward:
        d.emplace_back(Pass::decode, x.micro, s);
        if (s + 1 < P) d.emplace_back(Pass::decode_backward, x.micro, s + 1);
        break;
      case Pass::encode_backward:
        d.emplace_back(Pass::encode, x.micro, s);
        d.emplace_back(s + 1 < P ? Key{Pass::encode_backward, x.micro, s + 1} : Key{Pass::decode_backward, x.micro, 0});
        break;
    }
    return d;
  };
  ScheduleModel out;
  out.peak_graphs.assign(stages.size(), 0);
  out.alive.resize(stages.size());
  std::vector<std::size_t> next(stages.size(), 0);
  std::vector<double> clock(stages.size(), 0), busy(stages.size(), 0);
  std::vector<std::int64_t> encoder_graphs(stages.size(), 0), decoder_graphs(stages.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < P; ++s) {
      const auto u = static_cast<std::size_t>(s);
      for (; next[u] < stages[u].size(); ++next[u]) {
        const StagePass& x = stages[u][next[u]];
        double start = clock[u];
        bool ready = true;
        for (const Key& d : needs(x, s)) {
          const auto it = end.find(d);
          if (it == end.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        const double cost = is_forward(x.pass) ? 1.0 : 2.0;
        clock[u] = end[Key{x.pass, x.micro, s}] = start + cost;
        busy[u] += cost;
        const bool encoder = x.pass == Pass::encode || x.pass == Pass::encode_backward;
        (encoder ? encoder_graphs : decoder_graphs)[u] += is_forward(x.pass) ? 1 : -1;
        if (is_forward(x.pass)) {
          const std::pair<std::int64_t, std::int64_t> now{encoder_graphs[u], decoder_graphs[u]};
          if (std::find(out.alive[u].begin(), out.alive[u].end(), now) == out.alive[u].end()) out.alive[u].push_back(now);
          out.peak_graphs[u] = std::max(out.peak_graphs[u], static_cast<int>(now.first + now.second));
        }
        moved = true;
      }
    }
  }
  out.completes = true;
  for (int s = 0; s < P; ++s) out.completes = out.completes && next[static_cast<std::size_t>(s)] == stages[static_cast<std::size_t>(s)].size();
  double work = 0;
  for (int s = 0; s < P; ++s) {
    out.step = std::max(out.step, clock[static_cast<std::size_t>(s)]);
    work += busy[static_cast<std::size_t>(s)];
  }
  out.bubble = out.step > 0 ? 1.0 - work / (out.step * P) : 0.0;
  return out;
}

ScheduleModel model_encoder_decoder_schedule(int stages, std::int64_t micros, bool one_f_one_b) {
  std::vector<std::vector<StagePass>> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(encoder_decoder_schedule(s, stages, micros, one_f_one_b));
  return model_schedule(orders);
}

}  // namespace tfm::train_detail
