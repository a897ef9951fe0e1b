// A file's bytes from its start (or an offset), inflated if it is compressed, read through
// TensorFlow's file systems (local disks, gs:// and the others): what the text chunk and
// TFRecord datasets read (text_chunks.cc, record_dataset.cc), and one read at an offset
// (record_cuts.cc).
//
// A compressed file is inflated with zlib here rather than through tsl::io::ZlibInputStream (which
// TextLineDataset, TFRecordDataset and decode_compressed use): at the end of the file that
// class reports OutOfRange whether or not the compressed stream was complete, so a
// truncated .gz reads as a short file without an error (measured with TF 2.21: half a .gz
// reads as the first half of the text). Here the end of the file inside a stream is
// DataLoss. The zlib is TensorFlow's own (its header under include/external/zlib, its
// symbols exported by libtensorflow_framework), and "GZIP" and "ZLIB" mean what they mean
// to TextLineDataset: the window bits of ZlibCompressionOptions::GZIP() and DEFAULT().
//
// GZIP reads every member of a file of several (`cat a.gz b.gz`), skipping zero bytes
// after a member, as Python's gzip.decompress does; anything else after a member is an
// error, as it is there. ZLIB reads one stream and ignores what follows it, as
// zlib.decompress and TensorFlow do. An empty file is an empty text, and has no records,
// whatever the compression, as it is to decode_compressed and TFRecordDataset.
//
// Errors name the file as TensorFlow's file-system errors do, "<path>; <cause>", which
// failures.file_failure reads.
#ifndef TF2_MAPREDUCE_NATIVE_SOURCE_H_
#define TF2_MAPREDUCE_NATIVE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"

namespace tf2_mapreduce {

// Bytes of the file from its start, inflated if it is compressed, each Read giving the
// next ones: what both datasets read.
class Source {
 public:
  virtual ~Source() = default;
  // Reads up to `n` bytes into `dst`; *got == 0 only at the end of the text.
  virtual absl::Status Read(char* dst, size_t n, size_t* got) = 0;

  // The file at `path` as a Source: its own bytes from `start` on if `compression` is "",
  // else them inflated as "GZIP" or "ZLIB" (checked by CheckCompression; `start` 0).
  static absl::Status Open(tensorflow::Env* env, const std::string& path, const std::string& compression, uint64_t start,
                           std::unique_ptr<Source>* source);
};

// OK for "", "GZIP" and "ZLIB"; InvalidArgument naming what is given otherwise.
absl::Status CheckCompression(const std::string& compression);

// One read of up to `n` bytes of `file` at `offset` into `dst`: *got bytes, and *end at
// the file's end. TF's file systems report a short read there as OutOfRange, and may
// hand back their own buffer rather than `dst`.
absl::Status ReadOnce(tensorflow::RandomAccessFile* file, uint64_t offset, size_t n, char* dst, size_t* got,
                      bool* end);

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_SOURCE_H_
