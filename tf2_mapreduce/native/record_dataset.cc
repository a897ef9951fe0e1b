// Tf2MapreduceRecordDataset: the records of a TFRecord file, possibly compressed, read
// through TensorFlow's file systems (a Source: source.h), one element each, as
// tf.data.TFRecordDataset yields them from a good file, in memory of one record plus the
// buffers. Each record is a uint64 little-endian length, the masked crc32c of those 8
// bytes, the data, and the masked crc32c of the data; both checksums are checked.
// TFRecordDataset (TF 2.21) ends a file quietly where it ends inside a record's 12-byte
// header, and reads compressed files through ZlibInputStream (source.h): a .gz cut at a record
// boundary (or inside a header) reads as its records up to the cut, one without its gzip
// trailer as whole, one with an empty gzip member as the records before it, all without an
// error. Here each of these is DataLoss.

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/partial_tensor_shape.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/mutex.h"
#include "record_framing.h"
#include "source.h"

namespace tf2_mapreduce {

using tensorflow::DataTypeVector;
using tensorflow::Node;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::PartialTensorShape;
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

namespace {

// Records are read through a buffer of this size (TFRecordDataset's own default); a
// record's data beyond what the buffer holds is read straight into its element.
constexpr size_t kRecordBufferBytes = 256 << 10;
// A record's element grows as its bytes are read, by this much or by as much as it holds,
// whichever is more, not to its length at once: a length that the file does not hold (a
// forged one whose checksum matches) costs about the memory of what it holds, not that.
constexpr size_t kRecordStepBytes = 16 << 20;

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

}  // namespace

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

}  // namespace tf2_mapreduce
