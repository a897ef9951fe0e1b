// Source's two kinds (source.h): a file's own bytes, and a file inflated with zlib.

#include "source.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "external/zlib/zlib.h"
#include "tensorflow/core/lib/io/zlib_compression_options.h"
#include "storage_status.h"

namespace tf2_mapreduce {

using tensorflow::Env;
using tensorflow::RandomAccessFile;
using ZlibOptions = tensorflow::io::ZlibCompressionOptions;

absl::Status CheckCompression(const std::string& compression) {
  if (compression.empty() || compression == "GZIP" || compression == "ZLIB") return absl::OkStatus();
  return absl::InvalidArgumentError("compression_type must be \"\", \"GZIP\" or \"ZLIB\", not \"" + compression +
                                    "\"");
}

absl::Status ReadOnce(RandomAccessFile* file, uint64_t offset, size_t n, char* dst, size_t* got, bool* end) {
  absl::string_view read;
  absl::Status status = file->Read(offset, n, &read, dst);
  if (!status.ok() && !absl::IsOutOfRange(status)) {
    absl::string_view name;
    return tf2_mapreduce::FromStorage(status, file->Name(&name).ok() ? std::string(name) : "its input");
  }
  if (read.data() != dst && !read.empty()) std::memmove(dst, read.data(), read.size());
  *got = read.size();
  *end = read.empty() || absl::IsOutOfRange(status);
  return absl::OkStatus();
}

namespace {

// The file's own bytes, read at their offset straight into the reader's memory (a chunk,
// a record, or the record reader's buffer).
class PlainSource : public Source {
 public:
  // `size`: the file's, taken just before it is read: its end before that is a response cut short.
  PlainSource(std::unique_ptr<RandomAccessFile> file, uint64_t start, const std::string& path, uint64_t size)
      : file_(std::move(file)), offset_(start), path_(path), size_(size) {}

  absl::Status Read(char* dst, size_t n, size_t* got) override {
    *got = 0;
    while (*got == 0 && !eof_) TF_RETURN_IF_ERROR(ReadSome(dst, n, got));
    return absl::OkStatus();
  }

 private:
  absl::Status ReadSome(char* dst, size_t n, size_t* got) {
    TF_RETURN_IF_ERROR(ReadOnce(file_.get(), offset_, n, dst, got, &eof_));
    offset_ += *got;
    if (eof_ && offset_ < size_) return tf2_mapreduce::CutShort(path_, offset_, size_);
    return absl::OkStatus();
  }

  std::unique_ptr<RandomAccessFile> file_;
  tensorflow::uint64 offset_;
  const std::string path_;
  const tensorflow::uint64 size_;
  bool eof_ = false;
};

// The file inflated, member after member (GZIP) or its one stream (ZLIB).
class InflatingSource : public Source {
 public:
  InflatingSource(const std::string& path, std::unique_ptr<RandomAccessFile> file, uint64_t size,
                  const std::string& kind, const ZlibOptions& options)
      : path_(path),
        kind_(kind),
        gzip_(kind == "GZIP"),
        window_bits_(options.window_bits),
        input_(options.input_buffer_size),
        plain_(std::move(file), 0, path, size) {
    std::memset(&stream_, 0, sizeof(stream_));
  }

  ~InflatingSource() override {
    if (initialized_) inflateEnd(&stream_);
  }

  absl::Status Read(char* dst, size_t n, size_t* got) override {
    *got = 0;
    stream_.next_out = reinterpret_cast<Bytef*>(dst);
    // zlib counts in uInt: a larger request is filled in parts by the caller.
    n = std::min<size_t>(n, 1u << 30);
    stream_.avail_out = static_cast<uInt>(n);
    while (stream_.avail_out > 0 && !done_) {
      if (stream_.avail_in == 0) {
        TF_RETURN_IF_ERROR(Refill());
        if (stream_.avail_in == 0) {  // the end of the file
          if (in_stream_) {
            return absl::DataLossError(path_ + "; truncated " + kind_ +
                                       " file: it ends inside a compressed stream, after " +
                                       std::to_string(total_out_ + (n - stream_.avail_out)) + " bytes inflated");
          }
          done_ = true;
          break;
        }
      }
      if (!in_stream_) {
        if (members_ > 0) {  // padding after a gzip member, as gzip.decompress skips it
          while (stream_.avail_in > 0 && *stream_.next_in == 0) ++stream_.next_in, --stream_.avail_in;
          if (stream_.avail_in == 0) continue;
        }
        TF_RETURN_IF_ERROR(StartStream());
      }
      const int code = inflate(&stream_, Z_NO_FLUSH);
      if (code == Z_STREAM_END) {
        in_stream_ = false;
        ++members_;
        if (!gzip_) done_ = true;  // what follows a zlib stream is not read, as zlib.decompress
      } else if (code != Z_OK && code != Z_BUF_ERROR) {  // Z_BUF_ERROR: it needs more input
        std::string cause = "inflate() failed with error " + std::to_string(code);
        if (stream_.msg != nullptr) cause += std::string(": ") + stream_.msg;
        return absl::DataLossError(path_ + "; corrupt " + kind_ + " file: " + cause);
      }
    }
    *got = n - stream_.avail_out;
    total_out_ += *got;
    return absl::OkStatus();
  }

 private:
  absl::Status StartStream() {
    const int code = initialized_ ? inflateReset(&stream_) : inflateInit2(&stream_, window_bits_);
    if (code != Z_OK) {
      return absl::InternalError(path_ + "; cannot start zlib's inflate: error " + std::to_string(code));
    }
    initialized_ = true;
    in_stream_ = true;
    return absl::OkStatus();
  }

  // Called when inflate has used all the input.
  absl::Status Refill() {
    size_t got = 0;
    TF_RETURN_IF_ERROR(plain_.Read(input_.data(), input_.size(), &got));
    stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
    stream_.avail_in = static_cast<uInt>(got);
    return absl::OkStatus();
  }

  const std::string path_;
  const std::string kind_;
  const bool gzip_;
  const int window_bits_;
  std::vector<char> input_;
  PlainSource plain_;
  z_stream stream_;
  bool initialized_ = false;
  bool in_stream_ = false;  // inside a member: the end of the file here is truncation
  bool done_ = false;
  int64_t members_ = 0;
  int64_t total_out_ = 0;
};

}  // namespace

absl::Status Source::Open(Env* env, const std::string& path, const std::string& compression, uint64_t start,
                          std::unique_ptr<Source>* source) {
  if (start != 0 && !compression.empty()) {
    return absl::InvalidArgumentError("a compressed file is read from its start, not from " + std::to_string(start));
  }
  std::unique_ptr<RandomAccessFile> file;
  TF_RETURN_IF_ERROR(tf2_mapreduce::FromStorage(env->NewRandomAccessFile(path, &file), path));
  tensorflow::uint64 size = 0;
  TF_RETURN_IF_ERROR(tf2_mapreduce::FromStorage(env->GetFileSize(path, &size), path));
  if (compression.empty()) {
    *source = std::make_unique<PlainSource>(std::move(file), start, path, size);
  } else {
    const ZlibOptions options = compression == "GZIP" ? ZlibOptions::GZIP() : ZlibOptions::DEFAULT();
    *source = std::make_unique<InflatingSource>(path, std::move(file), size, compression, options);
  }
  return absl::OkStatus();
}

}  // namespace tf2_mapreduce
