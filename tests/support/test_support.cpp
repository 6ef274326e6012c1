// Test helpers (see test_support.h).
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm::test {

std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  if (!got.defined() || !want.defined()) {
    ADD_FAILURE() << what << ": undefined tensor (got " << got.str() << ", want " << want.str() << ")";
    return false;
  }
  if (got.shape() != want.shape()) {
    ADD_FAILURE() << what << ": shape " << shape_str(got.shape()) << " != expected " << shape_str(want.shape());
    return false;
  }
  const std::vector<float> g = got.to_floats(), w = want.to_floats();
  double max_abs = 0, max_rel = 0;
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double d = std::fabs(static_cast<double>(g[i]) - w[i]);
    const bool nan_mismatch = std::isnan(g[i]) != std::isnan(w[i]);
    // An infinity on either side matches only the same infinity: the tolerance
    // atol + rtol * |inf| is itself infinite and would accept any value.
    const bool infinite = std::isinf(w[i]) || std::isinf(g[i]);
    const bool ok = !nan_mismatch && (std::isnan(g[i]) || (infinite ? g[i] == w[i] : d <= atol + rtol * std::fabs(w[i])));
    if (!std::isnan(d) && !std::isinf(d)) {
      max_abs = std::max(max_abs, d);
      if (w[i] != 0) max_rel = std::max(max_rel, d / std::fabs(w[i]));
    }
    if (!ok) {
      if (bad < 5) first << "\n  [" << i << "] got " << g[i] << " want " << w[i] << " (diff " << d << ")";
      ++bad;
    }
  }
  if (bad) {
    ADD_FAILURE() << what << ": " << bad << " of " << g.size() << " elements differ (rtol " << rtol << ", atol "
                  << atol << "); max abs err " << max_abs << ", max rel err " << max_rel << first.str();
    return false;
  }
  return true;
}

bool expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    ADD_FAILURE() << what << ": " << a.str() << " vs " << b.str();
    return false;
  }
  const Tensor ca = a.clone(), cb = b.clone();
  if (std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) != 0) {
    const std::vector<float> x = ca.to_floats(), y = cb.to_floats();
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&x[i], &y[i], 4) != 0) {
        ADD_FAILURE() << what << ": first bit difference at [" << i << "]: " << x[i] << " vs " << y[i];
        return false;
      }
    }
    ADD_FAILURE() << what << ": bytes differ";
    return false;
  }
  return true;
}

SafetensorsFile load_fixture(const std::string& name) {
  const char* dir = std::getenv("TFM_FIXTURE_DIR");
  if (dir == nullptr) throw Error("fixture", "TFM_FIXTURE_DIR is not set (run the parity tests through ctest)");
  return load_safetensors(std::string(dir) + "/" + name + ".safetensors");
}

Tensor fixture_tensor(const SafetensorsFile& f, const std::string& key) {
  auto it = f.tensors.find(key);
  if (it == f.tensors.end()) throw Error("fixture", "no tensor '" + key + "' in fixture");
  return it->second.clone();
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo, float hi) {
  return Tensor::uniform(shape, seed, lo, hi);
}

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
               double eps, double rtol, double atol, const std::string& what) {
  for (auto& x : inputs) {
    x = x.clone();
    x.requires_grad_();
  }
  Tensor out = fn(inputs);
  const Tensor w = random_tensor(out.shape(), 4242, -1.0f, 1.0f);
  backward(out, w);
  const std::vector<float> wv = w.to_floats();
  auto probe = [&](const std::vector<Tensor>& xs) {
    NoGradGuard ng;
    const std::vector<float> o = fn(xs).to_floats();
    double s = 0;
    for (std::size_t i = 0; i < o.size(); ++i) s += static_cast<double>(o[i]) * wv[i];
    return s;
  };
  bool all_ok = true;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    const Tensor analytic = inputs[k].grad();
    if (!analytic.defined()) {
      ADD_FAILURE() << what << ": input " << k << " got no gradient";
      all_ok = false;
      continue;
    }
    const std::vector<float> a = analytic.to_floats();
    float* p = inputs[k].data<float>();  // inputs are contiguous clones
    std::size_t bad = 0;
    std::ostringstream first;
    for (std::int64_t i = 0; i < inputs[k].numel(); ++i) {
      const float orig = p[i];
      p[i] = static_cast<float>(orig + eps);
      const double up = probe(inputs);
      p[i] = static_cast<float>(orig - eps);
      const double down = probe(inputs);
      p[i] = orig;
      const double numeric = (up - down) / (2 * eps);
      const double diff = std::fabs(numeric - a[static_cast<std::size_t>(i)]);
      if (!(diff <= atol + rtol * std::fabs(numeric))) {
        if (bad < 5) first << "\n  [" << i << "] analytic " << a[static_cast<std::size_t>(i)] << " numeric " << numeric;
        ++bad;
      }
    }
    if (bad) {
      ADD_FAILURE() << what << ": input " << k << ": " << bad << " of " << inputs[k].numel()
                    << " gradient elements off" << first.str();
      all_ok = false;
    }
  }
  return all_ok;
}

}  // namespace tfm::test
