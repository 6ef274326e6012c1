// The EXIF orientation tag of a JPEG's APP1 segment: which way the camera was held.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfm {

// The value (1..8) of tag 0x0112 in IFD0 of an APP1 payload ("Exif\0\0" + a TIFF header),
// or 1 (as stored) when the segment is not EXIF, has no such tag, or is malformed: a bad
// segment never fails the image, as PIL ignores it.
int exif_orientation(const std::uint8_t* data, std::size_t size);

}  // namespace tfm
