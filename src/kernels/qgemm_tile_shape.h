// The register-tile shape shared by the compact-weight GEMM kernels (qgemm_blocks_avx512.cpp,
// qgemm_bf16_avx512.cpp): up to kTileRows activation rows x kTileCols weight rows, and the
// switch from a tile's run-time size to the kernel instantiated for it.
#pragma once

namespace tfm::kernels::qgemm_detail {

inline constexpr int kTileRows = 4;  // activation rows per register tile
inline constexpr int kTileCols = 2;  // weight rows per register tile

// Calls f.template operator()<MR, NR>() with the tile's compile-time shape.
template <class F>
void with_tile(int mr, int nr, F&& f) {
  auto rows = [&]<int NR>() {
    switch (mr) {
      case 4: return f.template operator()<4, NR>();
      case 3: return f.template operator()<3, NR>();
      case 2: return f.template operator()<2, NR>();
      default: return f.template operator()<1, NR>();
    }
  };
  static_assert(kTileRows == 4 && kTileCols == 2, "with_tile lists the tile shapes");
  if (nr == 2) rows.template operator()<2>();
  else rows.template operator()<1>();
}

}  // namespace tfm::kernels::qgemm_detail
