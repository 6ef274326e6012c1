// The engine's allocator: alignment, the huge-page start of large blocks, and its accounting.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "base/memory.h"
#include "tfm/runtime.h"

using namespace tfm;

TEST(Memory, SmallBlocksAreLineAlignedLargeOnesStartOnAHugePage) {
  const MemoryStats before = memory_stats();
  void* small = base::allocate(100);
  void* large = base::allocate(base::kHugePage + 12345);  // not a whole number of huge pages
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % base::kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large) % base::kHugePage, 0u);
  // every byte of the block is usable, the tail past the last whole huge page included
  std::memset(large, 0x5A, base::kHugePage + 12345);
  EXPECT_EQ(static_cast<unsigned char*>(large)[base::kHugePage + 12344], 0x5A);
  const MemoryStats during = memory_stats();
  EXPECT_EQ(during.allocations, before.allocations + 2);
  EXPECT_EQ(during.current_bytes - before.current_bytes, 128u + (base::kHugePage + 12345 + 63) / 64 * 64);
  base::release(large, base::kHugePage + 12345);
  base::release(small, 100);
  EXPECT_EQ(memory_stats().current_bytes, before.current_bytes);
}
