// Tf2MapreduceTextChunkDataset: a text file, possibly compressed, read through TensorFlow's
// file systems (a Source: source.h), as a stream of chunks cut at record boundaries. A map
// step can count a file of any size in bounded memory (about chunk_bytes + the longest
// record + zlib's buffers) while every record stays whole within one chunk.
// tf.io.read_file + tf.io.decode_compressed hold the whole file twice over;
// TextLineDataset yields one element per line, each costing an op dispatch, and drops the
// newlines and every "\r" (docs/runtime.md, D3), so its lines do not give the file's bytes.

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

// Bytes read past chunk_bytes at a time while looking for a separator: small, since what
// follows the separator is copied into the next chunk.
constexpr size_t kExtendBytes = 64 << 10;
// At most this much is read at once, and reserved ahead, however large chunk_bytes is, so
// a small file asked for in huge chunks does not allocate the chunk size.
constexpr size_t kMaxStepBytes = 16 << 20;

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
      TF_RETURN_IF_ERROR(ReadToCut(chunk, std::max(chunk - 1, left), &text));
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

    // Reads on into `text` until it holds a separator at or after `searched`, or the
    // file ends; what follows that separator is kept in carry_ for the next chunk.
    absl::Status ReadToCut(size_t chunk, size_t searched, tstring* text) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      while (true) {
        const size_t cut = FindSeparator(text->data(), text->size(), searched);
        if (cut != kNone) {
          carry_.assign(text->data() + cut + 1, text->size() - cut - 1);
          text->resize(cut + 1);
          return absl::OkStatus();
        }
        searched = std::max(searched, text->size());
        if (ended_) return absl::OkStatus();
        const size_t want = text->size() < chunk ? std::min(chunk - text->size(), kMaxStepBytes) : kExtendBytes;
        const size_t before = text->size();
        text->resize_uninitialized(before + want);
        size_t got = 0;
        absl::Status status = source_->Read(&(*text)[0] + before, want, &got);
        text->resize(before + got);
        if (!status.ok()) return status;
        if (got == 0) {
          ended_ = true;
          source_.reset();  // closes the file now rather than with the iterator
        }
      }
    }

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

}  // namespace tf2_mapreduce
