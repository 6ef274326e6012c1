// The engine's allocator: 64-byte aligned blocks, counted for tfm::memory_stats().
#pragma once

#include <cstddef>

namespace tfm::base {

constexpr std::size_t kAlignment = 64;  // one cache line; also a full AVX-512 register
constexpr std::size_t kHugePage = std::size_t{2} << 20;  // blocks this large start on a 2 MiB page

// Uninitialised memory, rounded up to the alignment; throws tfm::Error when out of memory.
void* allocate(std::size_t bytes);
void release(void* ptr, std::size_t bytes);

}  // namespace tfm::base
