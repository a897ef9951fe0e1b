// Writing a map step's output records as a piece of a GZIP'd TFRecord file, through
// TensorFlow's file systems (local disks, gs:// and the others).
//
// Tf2MapreduceWriteRecords: a batch of records, framed as TFRecord frames them, compressed
// as a raw deflate stream that ends on a byte boundary (a sync flush, no final block), and
// written as one new file; it returns the file's size, and the CRC-32 and length of what it
// compressed. A shard of the job's output is then its pieces' files one after the other
// between a GZIP header and trailer (outputs/sinks/shards.py), as pigz builds one stream from
// blocks compressed apart: one GZIP member, which every reader reads whole. TensorFlow's
// own GZIP reader stops early, without an error, in a file of several members where one
// ends without output (docs/runtime.md), so pieces written as whole GZIP files could not
// simply be joined.
//
// A file is written once, under a name of its own: it is read only once the step that
// wrote it has committed it, so a step run twice leaves two whole files, one committed.
// The compressor's settings are fixed, and the zlib is TensorFlow's own: the same records
// give the same bytes on every task.

#include <cstring>
#include <memory>
#include <string>

#include "external/zlib/zlib.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"
#include "xla/tsl/lib/hash/crc32c.h"
#include "storage_status.h"

namespace tf2_mapreduce {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::tstring;

REGISTER_OP("Tf2MapreduceWriteRecords")
    .Input("path: string")
    .Input("records: string")
    .Input("crc: int64")
    .Output("bytes: int64")
    .Output("crc_out: int64")
    .Output("length: int64")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < 3; ++i) c->set_output(i, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Writes `records` (1-D), framed as TFRecord frames them, as a new file at `path`: a raw
deflate stream ending in a sync flush. Returns the file's size in bytes, the CRC-32 of
the framed bytes continued from `crc`, and their length. An error of the storage is an
outage (see storage_status.h); any other error names the path.
)doc");

namespace {

// Compressed bytes are written to the file this many at a time: what the op holds beyond
// its input.
constexpr size_t kChunk = 256 << 10;
// Fixed, so that every task writes the same bytes: zlib's default level, a 32 KB window, no
// header (raw deflate: the shard's GZIP header and trailer are written once, around all).
constexpr int kLevel = 6;
constexpr int kWindowBits = -15;
constexpr int kMemLevel = 8;

class Deflater {
 public:
  explicit Deflater(tensorflow::WritableFile* file) : file_(file), out_(kChunk, '\0') {
    std::memset(&stream_, 0, sizeof(stream_));
    ok_ = deflateInit2(&stream_, kLevel, Z_DEFLATED, kWindowBits, kMemLevel, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~Deflater() {
    if (ok_) deflateEnd(&stream_);
  }

  absl::Status Add(const char* data, size_t size, int flush = Z_NO_FLUSH) {
    if (!ok_) return absl::InternalError("deflateInit2 failed");
    // Not for no data: zlib's crc32 of a null buffer is its initial value, not `crc_`.
    if (size > 0) crc_ = crc32(crc_, reinterpret_cast<const Bytef*>(data), size);
    length_ += size;
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    stream_.avail_in = size;
    do {
      stream_.next_out = reinterpret_cast<Bytef*>(out_.data());
      stream_.avail_out = out_.size();
      const int status = deflate(&stream_, flush);
      if (status != Z_OK && status != Z_BUF_ERROR) return absl::InternalError("deflate failed");
      const size_t produced = out_.size() - stream_.avail_out;
      if (produced) {
        TF_RETURN_IF_ERROR(file_->Append(absl::string_view(out_.data(), produced)));
        written_ += produced;
      }
    } while (stream_.avail_out == 0 || stream_.avail_in > 0);
    return absl::OkStatus();
  }

  absl::Status Finish() { return Add(nullptr, 0, Z_SYNC_FLUSH); }

  void Continue(uint32_t crc) { crc_ = crc; }
  uint32_t crc() const { return crc_; }
  int64_t length() const { return length_; }
  int64_t written() const { return written_; }

 private:
  tensorflow::WritableFile* file_;
  std::string out_;
  z_stream stream_;
  bool ok_ = false;
  uLong crc_ = 0;
  int64_t length_ = 0;
  int64_t written_ = 0;
};

void PutFixed(char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

class WriteRecordsOp : public OpKernel {
 public:
  explicit WriteRecordsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const auto records = context->input(1).flat<tstring>();
    const uint32_t crc_in = static_cast<uint32_t>(context->input(2).scalar<int64_t>()());
    std::unique_ptr<tensorflow::WritableFile> file;
    OP_REQUIRES_OK(context, WriteFailed(context->env()->NewWritableFile(path, &file), path));
    Deflater deflater(file.get());
    deflater.Continue(crc_in);
    for (int64_t i = 0; i < records.size(); ++i) {
      // TFRecord's frame: length, its masked CRC-32C, the record, its masked CRC-32C.
      const tstring& record = records(i);
      char header[12];
      PutFixed(header, record.size(), 8);
      PutFixed(header + 8, tsl::crc32c::Mask(tsl::crc32c::Value(header, 8)), 4);
      char footer[4];
      PutFixed(footer, tsl::crc32c::Mask(tsl::crc32c::Value(record.data(), record.size())), 4);
      OP_REQUIRES_OK(context, WriteFailed(deflater.Add(header, sizeof(header)), path));
      OP_REQUIRES_OK(context, WriteFailed(deflater.Add(record.data(), record.size()), path));
      OP_REQUIRES_OK(context, WriteFailed(deflater.Add(footer, sizeof(footer)), path));
    }
    OP_REQUIRES_OK(context, WriteFailed(deflater.Finish(), path));
    // gs:// uploads the object at its close: an outage there is waited out and the step
    // run again, writing a file of another name.
    OP_REQUIRES_OK(context, WriteFailed(file->Close(), path));
    const int64_t outputs[] = {deflater.written(), static_cast<int64_t>(deflater.crc()), deflater.length()};
    for (int i = 0; i < 3; ++i) {
      Tensor* output = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(i, TensorShape({}), &output));
      output->scalar<int64_t>()() = outputs[i];
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceWriteRecords").Device(tensorflow::DEVICE_CPU), WriteRecordsOp);

}  // namespace tf2_mapreduce
