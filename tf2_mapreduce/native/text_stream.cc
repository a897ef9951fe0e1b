// Files read through TensorFlow's file systems (local disks, gs:// and the others), possibly
// compressed, as two tf.data datasets that share how a file's bytes are read (Source):
//
// Tf2MapreduceTextChunkDataset: a text file as a stream of chunks cut at record boundaries.
// A map step can count a file of any size in bounded memory (about chunk_bytes + the
// longest record + zlib's buffers) while every record stays whole within one chunk.
// tf.io.read_file + tf.io.decode_compressed hold the whole file twice over;
// TextLineDataset yields one element per line, each costing an op dispatch, and drops the
// newlines and every "\r" (docs/runtime.md, D3), so its lines do not give the file's bytes.
//
// Tf2MapreduceRecordDataset: the records of a TFRecord file, one element each, as
// tf.data.TFRecordDataset yields them from a good file, in memory of one record plus the
// buffers. Each record is a uint64 little-endian length, the masked crc32c of those 8
// bytes, the data, and the masked crc32c of the data; both checksums are checked.
// TFRecordDataset (TF 2.21) ends a file quietly where it ends inside a record's 12-byte
// header, and reads compressed files through ZlibInputStream, below: a .gz cut at a record
// boundary (or inside a header) reads as its records up to the cut, one without its gzip
// trailer as whole, one with an empty gzip member as the records before it, all without an
// error. Here each of these is DataLoss.
//
// Both inflate with zlib themselves rather than through tsl::io::ZlibInputStream (which
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

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "external/zlib/zlib.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/partial_tensor_shape.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/hash/crc32c.h"
#include "tensorflow/core/lib/io/zlib_compression_options.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"
#include "storage_status.h"
#include "tensorflow/core/platform/mutex.h"

namespace tf2_mapreduce {

using tensorflow::DataTypeVector;
using tensorflow::Env;
using tensorflow::Node;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::PartialTensorShape;
using tensorflow::RandomAccessFile;
using tensorflow::Tensor;
using tensorflow::data::DatasetBase;
using tensorflow::data::DatasetContext;
using tensorflow::data::DatasetIterator;
using tensorflow::data::DatasetOpKernel;
using tensorflow::data::IteratorBase;
using tensorflow::data::IteratorContext;
using tensorflow::data::IteratorStateReader;
using tensorflow::data::IteratorStateWriter;
using tensorflow::data::ParseScalarArgument;
using tensorflow::data::SerializationContext;
using tensorflow::tstring;
using ZlibOptions = tensorflow::io::ZlibCompressionOptions;

namespace {

// Bytes read past chunk_bytes at a time while looking for a separator: small, since what
// follows the separator is copied into the next chunk.
constexpr size_t kExtendBytes = 64 << 10;
// At most this much is read at once, and reserved ahead, however large chunk_bytes is, so
// a small file asked for in huge chunks does not allocate the chunk size.
constexpr size_t kMaxStepBytes = 16 << 20;

// Bytes of the file from its start, inflated if it is compressed, each Read giving the
// next ones: what both datasets read.
class Source {
 public:
  virtual ~Source() = default;
  // Reads up to `n` bytes into `dst`; *got == 0 only at the end of the text.
  virtual absl::Status Read(char* dst, size_t n, size_t* got) = 0;

  // The file at `path` as a Source: its own bytes from `start` on if `compression` is "",
  // else them inflated as "GZIP" or "ZLIB" (checked by CheckCompression; `start` 0).
  static absl::Status Open(Env* env, const std::string& path, const std::string& compression, uint64_t start,
                           std::unique_ptr<Source>* source);
};

absl::Status CheckCompression(const std::string& compression) {
  if (compression.empty() || compression == "GZIP" || compression == "ZLIB") return absl::OkStatus();
  return absl::InvalidArgumentError("compression_type must be \"\", \"GZIP\" or \"ZLIB\", not \"" + compression +
                                    "\"");
}

// One read of up to `n` bytes of `file` at `offset` into `dst`: *got bytes, and *end at
// the file's end. TF's file systems report a short read there as OutOfRange, and may
// hand back their own buffer rather than `dst`.
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

class TextChunkDataset : public DatasetBase {
 public:
  TextChunkDataset(OpKernelContext* ctx, std::string filename, std::string compression, int64_t chunk_bytes,
                   std::string separators)
      : DatasetBase(DatasetContext(ctx)),
        filename_(std::move(filename)),
        compression_(std::move(compression)),
        chunk_bytes_(chunk_bytes),
        separators_(std::move(separators)) {}

  std::unique_ptr<IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, prefix + "::TextChunk"});
  }

  const DataTypeVector& output_dtypes() const override {
    static DataTypeVector* dtypes = new DataTypeVector({tensorflow::DT_STRING});
    return *dtypes;
  }

  const std::vector<PartialTensorShape>& output_shapes() const override {
    static std::vector<PartialTensorShape>* shapes = new std::vector<PartialTensorShape>({{}});
    return *shapes;
  }

  std::string DebugString() const override { return "Tf2MapreduceTextChunkDatasetOp::Dataset"; }

  absl::Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override { return absl::OkStatus(); }

  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

 protected:
  // tf.data rewrites a pipeline through its graph before running it: without this the
  // dataset would be left out of those rewrites.
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  Node** output) const override {
    Node* filename = nullptr;
    Node* compression = nullptr;
    Node* chunk_bytes = nullptr;
    Node* separators = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(filename_), &filename));
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(compression_), &compression));
    TF_RETURN_IF_ERROR(b->AddScalar(chunk_bytes_, &chunk_bytes));
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(separators_), &separators));
    return b->AddDataset(this, {filename, compression, chunk_bytes, separators}, output);
  }

 private:
  class Iterator : public DatasetIterator<TextChunkDataset> {
   public:
    explicit Iterator(const Params& params) : DatasetIterator<TextChunkDataset>(params) {
      for (unsigned char c : dataset()->separators_) separator_[c] = true;
    }

    absl::Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      tensorflow::mutex_lock lock(mu_);
      if (source_ == nullptr && !ended_) {
        TF_RETURN_IF_ERROR(Source::Open(ctx->env(), dataset()->filename_, dataset()->compression_, 0, &source_));
      }
      const size_t chunk = static_cast<size_t>(dataset()->chunk_bytes_);
      Tensor element(tstring{});
      tstring& text = element.scalar<tstring>()();
      // Chunks that lie within what was read past the last cut are taken from there
      // without reading, which keeps small chunks from copying that read once each.
      const size_t left = carry_.size() - carry_used_;
      const size_t cut_in_carry = FindSeparator(carry_.data() + carry_used_, left, chunk - 1);
      if (cut_in_carry != kNone || (ended_ && left > 0)) {
        const size_t size = cut_in_carry != kNone ? cut_in_carry + 1 : left;
        text.assign(carry_.data() + carry_used_, size);
        carry_used_ += size;
        out_tensors->push_back(std::move(element));
        *end_of_sequence = false;
        return absl::OkStatus();
      }
      if (ended_) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      text.reserve(std::max(left, std::min(chunk, kMaxStepBytes)) + kExtendBytes);
      text.append(carry_.data() + carry_used_, left);
      carry_.clear();
      carry_used_ = 0;
      // Where the search for a separator goes on from: the chunk may end at its
      // chunk_bytes-th byte, and bytes already searched are not searched again.
      size_t searched = std::max(chunk - 1, left);
      while (true) {
        const size_t cut = FindSeparator(text.data(), text.size(), searched);
        if (cut != kNone) {
          carry_.assign(text.data() + cut + 1, text.size() - cut - 1);
          text.resize(cut + 1);
          break;
        }
        searched = std::max(searched, text.size());
        if (ended_) break;
        const size_t want = text.size() < chunk ? std::min(chunk - text.size(), kMaxStepBytes) : kExtendBytes;
        const size_t before = text.size();
        text.resize_uninitialized(before + want);
        size_t got = 0;
        absl::Status status = source_->Read(&text[0] + before, want, &got);
        text.resize(before + got);
        if (!status.ok()) return status;
        if (got == 0) {
          ended_ = true;
          source_.reset();  // closes the file now rather than with the iterator
        }
      }
      if (text.empty()) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      out_tensors->push_back(std::move(element));
      *end_of_sequence = false;
      return absl::OkStatus();
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(
        IteratorContext* ctx, tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeSourceNode(std::move(args));
    }

    // A stream inside a compressed file cannot be resumed where it was without reading
    // it again from the start; map steps are rerun whole instead.
    absl::Status SaveInternal(SerializationContext* ctx, IteratorStateWriter* writer) override {
      return absl::UnimplementedError("Tf2MapreduceTextChunkDataset iterators cannot be saved");
    }

    absl::Status RestoreInternal(IteratorContext* ctx, IteratorStateReader* reader) override {
      return absl::UnimplementedError("Tf2MapreduceTextChunkDataset iterators cannot be restored");
    }

   private:
    static constexpr size_t kNone = ~size_t{0};

    // The index of the first separator among `bytes[from, size)`, or kNone.
    size_t FindSeparator(const char* bytes, size_t size, size_t from) const {
      if (from >= size) return kNone;
      const std::string& separators = dataset()->separators_;
      if (separators.size() == 1) {  // lines: memchr goes many bytes at a time
        const void* found = std::memchr(bytes + from, separators[0], size - from);
        return found == nullptr ? kNone : static_cast<const char*>(found) - bytes;
      }
      for (size_t i = from; i < size; ++i) {
        if (separator_[static_cast<unsigned char>(bytes[i])]) return i;
      }
      return kNone;
    }

    tensorflow::mutex mu_;
    bool separator_[256] = {};
    std::unique_ptr<Source> source_ TF_GUARDED_BY(mu_);
    std::string carry_ TF_GUARDED_BY(mu_);  // read past the last chunk's separator
    size_t carry_used_ TF_GUARDED_BY(mu_) = 0;  // of which this much is in chunks already
    bool ended_ TF_GUARDED_BY(mu_) = false;
  };

  const std::string filename_;
  const std::string compression_;
  const int64_t chunk_bytes_;
  const std::string separators_;
};

class TextChunkDatasetOp : public DatasetOpKernel {
 public:
  explicit TextChunkDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {}

  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    tstring filename, compression, separators;
    int64_t chunk_bytes = 0;
    OP_REQUIRES_OK(ctx, ParseScalarArgument<tstring>(ctx, "filename", &filename));
    OP_REQUIRES_OK(ctx, ParseScalarArgument<tstring>(ctx, "compression_type", &compression));
    OP_REQUIRES_OK(ctx, ParseScalarArgument<int64_t>(ctx, "chunk_bytes", &chunk_bytes));
    OP_REQUIRES_OK(ctx, ParseScalarArgument<tstring>(ctx, "separators", &separators));
    OP_REQUIRES_OK(ctx, CheckCompression(std::string(compression)));
    OP_REQUIRES(ctx, chunk_bytes > 0,
                absl::InvalidArgumentError("chunk_bytes must be positive, not " + std::to_string(chunk_bytes)));
    // With no separator a chunk would run to the end of the file: unbounded memory.
    OP_REQUIRES(ctx, !separators.empty(), absl::InvalidArgumentError("separators must not be empty"));
    *output = new TextChunkDataset(ctx, std::string(filename), std::string(compression), chunk_bytes,
                                   std::string(separators));
  }
};

// A TFRecord's framing: the length and its checksum before the data, the data's after.
constexpr size_t kHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
constexpr size_t kFooterBytes = sizeof(uint32_t);
// Records are read through a buffer of this size (TFRecordDataset's own default); a
// record's data beyond what the buffer holds is read straight into its element.
constexpr size_t kRecordBufferBytes = 256 << 10;
// A record's element grows as its bytes are read, by this much or by as much as it holds,
// whichever is more, not to its length at once: a length that the file does not hold (a
// forged one whose checksum matches) costs about the memory of what it holds, not that.
constexpr size_t kRecordStepBytes = 16 << 20;

uint64_t DecodeFixed64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

uint32_t DecodeFixed32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

bool ChecksumMatches(const char* data, size_t size, const char* masked) {
  return tensorflow::crc32c::Unmask(DecodeFixed32(masked)) == tensorflow::crc32c::Value(data, size);
}

class RecordDataset : public DatasetBase {
 public:
  RecordDataset(OpKernelContext* ctx, std::string filename, std::string compression, int64_t start, int64_t end)
      : DatasetBase(DatasetContext(ctx)),
        filename_(std::move(filename)),
        compression_(std::move(compression)),
        start_(start),
        end_(end) {}

  std::unique_ptr<IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, prefix + "::Record"});
  }

  const DataTypeVector& output_dtypes() const override {
    static DataTypeVector* dtypes = new DataTypeVector({tensorflow::DT_STRING});
    return *dtypes;
  }

  const std::vector<PartialTensorShape>& output_shapes() const override {
    static std::vector<PartialTensorShape>* shapes = new std::vector<PartialTensorShape>({{}});
    return *shapes;
  }

  std::string DebugString() const override { return "Tf2MapreduceRecordDatasetOp::Dataset"; }

  absl::Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override { return absl::OkStatus(); }

  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  Node** output) const override {
    Node* filename = nullptr;
    Node* compression = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(filename_), &filename));
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(compression_), &compression));
    Node* start = nullptr;
    Node* end = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(start_, &start));
    TF_RETURN_IF_ERROR(b->AddScalar(end_, &end));
    return b->AddDataset(this, {filename, compression, start, end}, output);
  }

 private:
  class Iterator : public DatasetIterator<RecordDataset> {
   public:
    explicit Iterator(const Params& params) : DatasetIterator<RecordDataset>(params) {}

    absl::Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      tensorflow::mutex_lock lock(mu_);
      *end_of_sequence = false;
      if (source_ == nullptr && !ended_) {
        TF_RETURN_IF_ERROR(
            Source::Open(ctx->env(), dataset()->filename_, dataset()->compression_, dataset()->start_, &source_));
        buffer_.reset(new char[kRecordBufferBytes]);
        offset_ = dataset()->start_;
      }
      if (!ended_) {
        Tensor element(ctx->allocator({}), tensorflow::DT_STRING, tensorflow::TensorShape({}));
        absl::Status status = ReadRecord(&element.scalar<tstring>()());
        if (status.ok() && !ended_) {
          out_tensors->push_back(std::move(element));
          return absl::OkStatus();
        }
        // The end, or an error: either way nothing more is read (the rest of the stream
        // cannot be framed after an error), and the file is closed now.
        ended_ = true;
        source_.reset();
        buffer_.reset();
        if (!status.ok()) return status;
      }
      *end_of_sequence = true;
      return absl::OkStatus();
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(
        IteratorContext* ctx, tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeSourceNode(std::move(args));
    }

    // As for text chunks: a compressed stream cannot be resumed without reading it again.
    absl::Status SaveInternal(SerializationContext* ctx, IteratorStateWriter* writer) override {
      return absl::UnimplementedError("Tf2MapreduceRecordDataset iterators cannot be saved");
    }

    absl::Status RestoreInternal(IteratorContext* ctx, IteratorStateReader* reader) override {
      return absl::UnimplementedError("Tf2MapreduceRecordDataset iterators cannot be restored");
    }

   private:
    // The next record into `record`, or sets ended_ at the end of the stream. Offsets in
    // errors are TFRecordDataset's: a record's start, but its data's for the data's checksum.
    absl::Status ReadRecord(tstring* record) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const int64_t range_end = dataset()->end_;
      if (range_end >= 0 && offset_ == static_cast<uint64_t>(range_end)) {
        ended_ = true;
        return absl::OkStatus();
      }
      char header[kHeaderBytes];
      size_t got = 0;
      TF_RETURN_IF_ERROR(ReadFully(header, kHeaderBytes, &got));
      if (got == 0) {
        ended_ = true;
        return absl::OkStatus();
      }
      if (got < kHeaderBytes) return Truncated();
      if (!ChecksumMatches(header, sizeof(uint64_t), header + sizeof(uint64_t))) return Corrupted(offset_);
      const uint64_t length = DecodeFixed64(header);
      // A range's records end exactly at its end, where the next range's first record
      // starts; one that runs past it means that start is not a record's (a payload that
      // holds records) or the file is corrupt: either way, counting on would be wrong.
      const uint64_t room = range_end >= 0 ? static_cast<uint64_t>(range_end) - offset_ : 0;
      if (range_end >= 0 && (room < kHeaderBytes + kFooterBytes || length > room - kHeaderBytes - kFooterBytes)) {
        return absl::DataLossError(dataset()->filename_ + "; records do not line up at " + std::to_string(range_end) +
                                   ": the record at " + std::to_string(offset_) + " is " + std::to_string(length) +
                                   " bytes long, so the next one starts at " +
                                   std::to_string(offset_ + kHeaderBytes + length + kFooterBytes));
      }
      size_t have = 0;
      while (have < length) {
        const uint64_t step = std::max<uint64_t>(have, kRecordStepBytes);
        const size_t size = static_cast<size_t>(std::min<uint64_t>(length, have + step));
        record->resize_uninitialized(size);
        TF_RETURN_IF_ERROR(ReadFully(record->mdata() + have, size - have, &got));
        have += got;
        if (have < size) return Truncated();
      }
      char footer[kFooterBytes];
      TF_RETURN_IF_ERROR(ReadFully(footer, kFooterBytes, &got));
      if (got < kFooterBytes) return Truncated();
      if (!ChecksumMatches(record->data(), length, footer)) return Corrupted(offset_ + kHeaderBytes);
      offset_ += kHeaderBytes + length + kFooterBytes;
      return absl::OkStatus();
    }

    // Reads `n` bytes into `dst` from the buffer, refilling it, or straight from the
    // source when what is left to read would not fit it; *got < n only at the end.
    absl::Status ReadFully(char* dst, size_t n, size_t* got) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      size_t have = std::min(n, end_ - start_);
      std::memcpy(dst, buffer_.get() + start_, have);
      start_ += have;
      while (have < n) {
        size_t read = 0;
        if (n - have >= kRecordBufferBytes) {
          TF_RETURN_IF_ERROR(source_->Read(dst + have, n - have, &read));
          if (read == 0) break;
          have += read;
        } else {
          TF_RETURN_IF_ERROR(source_->Read(buffer_.get(), kRecordBufferBytes, &read));
          start_ = 0;
          end_ = read;
          if (read == 0) break;
          const size_t take = std::min(n - have, read);
          std::memcpy(dst + have, buffer_.get(), take);
          start_ = take;
          have += take;
        }
      }
      *got = have;
      return absl::OkStatus();
    }

    absl::Status Truncated() const TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return absl::DataLossError(dataset()->filename_ + "; truncated record at " + std::to_string(offset_));
    }

    absl::Status Corrupted(uint64_t offset) const {
      return absl::DataLossError(dataset()->filename_ + "; corrupted record at " + std::to_string(offset));
    }

    tensorflow::mutex mu_;
    std::unique_ptr<Source> source_ TF_GUARDED_BY(mu_);
    std::unique_ptr<char[]> buffer_ TF_GUARDED_BY(mu_);
    size_t start_ TF_GUARDED_BY(mu_) = 0;  // the buffer's bytes not yet read are [start_, end_)
    size_t end_ TF_GUARDED_BY(mu_) = 0;
    uint64_t offset_ TF_GUARDED_BY(mu_) = 0;  // of the next record in the (inflated) stream
    bool ended_ TF_GUARDED_BY(mu_) = false;
  };

  const std::string filename_;
  const std::string compression_;
  const int64_t start_;
  const int64_t end_;  // -1: the end of the stream
};

class RecordDatasetOp : public DatasetOpKernel {
 public:
  explicit RecordDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {}

  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    tstring filename, compression;
    OP_REQUIRES_OK(ctx, ParseScalarArgument<tstring>(ctx, "filename", &filename));
    OP_REQUIRES_OK(ctx, ParseScalarArgument<tstring>(ctx, "compression_type", &compression));
    OP_REQUIRES_OK(ctx, CheckCompression(std::string(compression)));
    int64_t start = 0, end = 0;
    OP_REQUIRES_OK(ctx, ParseScalarArgument<int64_t>(ctx, "start", &start));
    OP_REQUIRES_OK(ctx, ParseScalarArgument<int64_t>(ctx, "end", &end));
    OP_REQUIRES(ctx, start >= 0 && (end == -1 || end >= start),
                absl::InvalidArgumentError("not a byte range: start " + std::to_string(start) + ", end " +
                                           std::to_string(end)));
    OP_REQUIRES(ctx, (start == 0 && end == -1) || compression.empty(),
                absl::InvalidArgumentError("a compressed file is read whole"));
    *output = new RecordDataset(ctx, std::string(filename), std::string(compression), start, end);
  }
};

// Where an uncompressed TFRecord file is cut into byte ranges of about `piece_bytes`, each
// cut at a record's start at or after its target. Found by following records' lengths from
// the previous cut where a few hops reach the target (large records: no byte of their data
// is scanned, and a payload holding records cannot mislead the cut). Else by scanning from
// the target for the first offset where a header checks (the masked crc32c of its length),
// the record fits the file, what follows it is the file's end or another header that
// checks, and its data's checksum checks: told, not known, since a payload may hold records.
// So the ranges' readers check the rest: each range's records must end exactly at the next
// cut (RecordDataset's `end`), or the job fails naming the offset.
class RecordCuts {
 public:
  RecordCuts(std::unique_ptr<RandomAccessFile> file, uint64_t size) : file_(std::move(file)), size_(size) {}

  // The first offset >= `target` where a record starts, following records from `from` (a
  // cut) or as far as can be told, or the size.
  absl::Status Next(uint64_t from, uint64_t target, uint64_t* cut) {
    bool followed = false;
    TF_RETURN_IF_ERROR(Follow(from, target, cut, &followed));
    return followed ? absl::OkStatus() : Scan(target, cut);
  }

 private:
  static constexpr size_t kScanBytes = 64 << 10;
  static constexpr size_t kDataStepBytes = 1 << 20;  // a record's data is checked this much at a time
  static constexpr int kMaxHops = 64;  // records followed before scanning instead: small ones are many

  // Follows records' lengths from the record start `from` to the first start >= `target`,
  // in at most kMaxHops headers that check; *followed is false where it cannot.
  absl::Status Follow(uint64_t from, uint64_t target, uint64_t* cut, bool* followed) {
    *followed = false;
    std::string header;
    uint64_t position = from;
    for (int hop = 0; hop < kMaxHops && position < target; ++hop) {
      if (size_ - position < kHeaderBytes + kFooterBytes) return absl::OkStatus();
      TF_RETURN_IF_ERROR(ReadAt(position, kHeaderBytes, &header));
      if (header.size() < kHeaderBytes || !ChecksumMatches(header.data(), sizeof(uint64_t), header.data() + 8)) {
        return absl::OkStatus();
      }
      const uint64_t length = DecodeFixed64(header.data());
      if (length > size_ - position - kHeaderBytes - kFooterBytes) return absl::OkStatus();
      position += kHeaderBytes + length + kFooterBytes;
    }
    *followed = position >= target;
    *cut = position;
    return absl::OkStatus();
  }

  // The first offset >= `target` where a record starts as far as can be told, or the size.
  absl::Status Scan(uint64_t target, uint64_t* cut) {
    uint64_t position = target;
    std::string window;
    while (position <= size_ && size_ - position >= kHeaderBytes + kFooterBytes) {
      TF_RETURN_IF_ERROR(ReadAt(position, kScanBytes + kHeaderBytes - 1, &window));
      if (window.size() < kHeaderBytes) break;  // the file is shorter than it was listed
      const size_t candidates = window.size() - kHeaderBytes + 1;
      for (size_t i = 0; i < candidates; ++i) {
        const char* header = window.data() + i;
        if (!ChecksumMatches(header, sizeof(uint64_t), header + sizeof(uint64_t))) continue;
        bool starts = false;
        TF_RETURN_IF_ERROR(RecordStartsAt(position + i, DecodeFixed64(header), &starts));
        if (starts) {
          *cut = position + i;
          return absl::OkStatus();
        }
      }
      position += candidates;
    }
    *cut = size_;
    return absl::OkStatus();
  }

  // Reads up to `n` bytes at `offset` into `into`, none past the size it was listed with
  // (a file still being written is read as listed): fewer only at its end.
  absl::Status ReadAt(uint64_t offset, size_t n, std::string* into) {
    n = offset >= size_ ? 0 : static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    into->resize(n);
    size_t have = 0;
    bool end = false;
    while (have < n && !end) {
      size_t got = 0;
      TF_RETURN_IF_ERROR(ReadOnce(file_.get(), offset + have, n - have, &(*into)[have], &got, &end));
      have += got;
    }
    into->resize(have);
    return absl::OkStatus();
  }

  // Whether a record of `length` bytes whose header checks at `offset` fits the file, is
  // followed by the file's end or a header that checks, and has data whose checksum checks.
  absl::Status RecordStartsAt(uint64_t offset, uint64_t length, bool* starts) {
    *starts = false;
    const uint64_t room = size_ - offset;
    if (room < kHeaderBytes + kFooterBytes || length > room - kHeaderBytes - kFooterBytes) return absl::OkStatus();
    const uint64_t next = offset + kHeaderBytes + length + kFooterBytes;
    std::string bytes;
    if (next != size_) {
      if (size_ - next < kHeaderBytes + kFooterBytes) return absl::OkStatus();
      TF_RETURN_IF_ERROR(ReadAt(next, kHeaderBytes, &bytes));
      if (bytes.size() < kHeaderBytes || !ChecksumMatches(bytes.data(), sizeof(uint64_t), bytes.data() + 8)) {
        return absl::OkStatus();
      }
      if (DecodeFixed64(bytes.data()) > size_ - next - kHeaderBytes - kFooterBytes) return absl::OkStatus();
    }
    uint32_t crc = 0;
    for (uint64_t done = 0; done < length;) {
      const size_t step = static_cast<size_t>(std::min<uint64_t>(length - done, kDataStepBytes));
      TF_RETURN_IF_ERROR(ReadAt(offset + kHeaderBytes + done, step, &bytes));
      if (bytes.size() < step) return absl::OkStatus();
      crc = tensorflow::crc32c::Extend(crc, bytes.data(), bytes.size());
      done += step;
    }
    TF_RETURN_IF_ERROR(ReadAt(offset + kHeaderBytes + length, kFooterBytes, &bytes));
    *starts = bytes.size() == kFooterBytes && tensorflow::crc32c::Unmask(DecodeFixed32(bytes.data())) == crc;
    return absl::OkStatus();
  }

  std::unique_ptr<RandomAccessFile> file_;
  const uint64_t size_;
};

class RecordCutsOp : public tensorflow::OpKernel {
 public:
  explicit RecordCutsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < 3; ++i) {
      OP_REQUIRES(ctx, tensorflow::TensorShapeUtils::IsScalar(ctx->input(i).shape()),
                  absl::InvalidArgumentError("filename, size and piece_bytes must be scalars"));
    }
    const std::string filename(ctx->input(0).scalar<tstring>()());
    const int64_t size = ctx->input(1).scalar<int64_t>()();
    const int64_t piece_bytes = ctx->input(2).scalar<int64_t>()();
    OP_REQUIRES(ctx, size >= 0 && piece_bytes > 0,
                absl::InvalidArgumentError("size must be >= 0 and piece_bytes > 0"));
    std::unique_ptr<RandomAccessFile> file;
    OP_REQUIRES_OK(ctx, ctx->env()->NewRandomAccessFile(filename, &file));
    RecordCuts finder(std::move(file), static_cast<uint64_t>(size));
    std::vector<int64_t> cuts = {0};
    while (cuts.back() < size) {
      const int64_t target = cuts.back() + piece_bytes;
      uint64_t cut = static_cast<uint64_t>(size);
      if (target < size) {
        OP_REQUIRES_OK(ctx, finder.Next(static_cast<uint64_t>(cuts.back()), static_cast<uint64_t>(target), &cut));
      }
      cuts.push_back(static_cast<int64_t>(cut));
    }
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({static_cast<int64_t>(cuts.size())}), &output));
    std::copy(cuts.begin(), cuts.end(), output->vec<int64_t>().data());
  }
};

}  // namespace

REGISTER_OP("Tf2MapreduceTextChunkDataset")
    .Input("filename: string")
    .Input("compression_type: string")
    .Input("chunk_bytes: int64")
    .Input("separators: string")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetDoNotOptimize()  // as TensorFlow's source datasets: constant folding would read the file
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
The text of `filename`, inflated if `compression_type` is "GZIP" or "ZLIB", as scalar
strings whose concatenation is that text byte for byte. Each is the shortest run of the
text left that has at least `chunk_bytes` bytes and ends with one of the bytes of
`separators`, or else the rest of the text. A truncated or corrupt compressed file is a
DataLoss error that names it.
)doc");

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceTextChunkDataset").Device(tensorflow::DEVICE_CPU), TextChunkDatasetOp);

REGISTER_OP("Tf2MapreduceRecordDataset")
    .Input("filename: string")
    .Input("compression_type: string")
    .Input("start: int64")
    .Input("end: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetDoNotOptimize()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
The records of the TFRecord file `filename`, inflated if `compression_type` is "GZIP" or
"ZLIB", as scalar strings, in order: those tf.data.TFRecordDataset yields from a good file.
Both checksums of every record are checked. A record cut short ("truncated record at
<offset>"), a checksum that does not match ("corrupted record at <offset>"), and a
truncated or corrupt compressed file are DataLoss errors that name the file.

An uncompressed file may be read from `start`, a record's start, up to `end` (-1: its
end): then a record that runs past `end` is a DataLoss error, "records do not line up at
<end>: ...", since `end` is not a record's start.
)doc");

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceRecordDataset").Device(tensorflow::DEVICE_CPU), RecordDatasetOp);


REGISTER_OP("Tf2MapreduceRecordCuts")
    .Input("filename: string")
    .Input("size: int64")
    .Input("piece_bytes: int64")
    .Output("cuts: int64")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle scalar;
      for (int i = 0; i < 3; ++i) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &scalar));
      c->set_output(0, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The offsets at which the uncompressed TFRecord file `filename` of `size` bytes is cut into
byte ranges of about `piece_bytes`, from 0 to `size`: each cut the first offset at or after
the previous cut + `piece_bytes` where a record starts, found by following records'
lengths from the previous cut, or where that takes too many records, as far as a record's
checksums, its length and the header after it tell.
)doc");

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceRecordCuts").Device(tensorflow::DEVICE_CPU), RecordCutsOp);

}  // namespace tf2_mapreduce
