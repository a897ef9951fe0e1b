// A TFRecord's framing: a uint64 little-endian length, the masked crc32c of those 8 bytes,
// the data, and the masked crc32c of the data (record_dataset.cc reads records,
// record_cuts.cc finds where they start).
#ifndef TF2_MAPREDUCE_NATIVE_RECORD_FRAMING_H_
#define TF2_MAPREDUCE_NATIVE_RECORD_FRAMING_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/core/lib/hash/crc32c.h"

namespace tf2_mapreduce {

// The length and its checksum before the data, the data's after.
inline constexpr size_t kHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
inline constexpr size_t kFooterBytes = sizeof(uint32_t);

inline uint64_t DecodeFixed64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

inline uint32_t DecodeFixed32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

inline bool ChecksumMatches(const char* data, size_t size, const char* masked) {
  return tensorflow::crc32c::Unmask(DecodeFixed32(masked)) == tensorflow::crc32c::Value(data, size);
}

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_RECORD_FRAMING_H_
