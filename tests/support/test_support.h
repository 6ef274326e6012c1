// Shared test helpers: tolerant comparison with a useful failure report, PyTorch fixtures,
// and a finite-difference gradient check.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tfm/safetensors.h"
#include "tfm/tensor.h"

namespace tfm::test {

// Compare element-wise: passes when |got - want| <= atol + rtol * |want| everywhere (and the
// shapes match). On failure, reports max-abs and max-relative error and the first mismatches.
// Returns true when close.
// The message of the tfm::Error that fn throws, or "no error".
std::string error_message(const std::function<void()>& fn);

bool expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what);
// Bit-for-bit equality (same shape, same float values including -0/NaN payloads).
bool expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what);

// Fixtures written by tools/reference/make_fixtures.py into $TFM_FIXTURE_DIR/<name>.safetensors.
SafetensorsFile load_fixture(const std::string& name);
Tensor fixture_tensor(const SafetensorsFile& f, const std::string& key);

// Finite-difference check of every input's gradient: the scalar probed is sum(fn(x) * w) for
// a fixed random w; central differences with step eps in double, compared to backward().
// Inputs must be f32 leaves; each is marked requires_grad inside. Returns true when
// |analytic - numeric| <= atol + rtol * |numeric| for all elements.
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
               double eps = 1e-2, double rtol = 2e-2, double atol = 2e-3, const std::string& what = "");

// Deterministic random test data.
Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f);

}  // namespace tfm::test
