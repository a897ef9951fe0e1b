// Tf2MapreduceRecordCuts: where an uncompressed TFRecord file is cut into byte ranges
// that Tf2MapreduceRecordDataset (record_dataset.cc) reads one a map step, each range's
// records checked to end exactly where the next range starts.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/hash/crc32c.h"
#include "record_framing.h"
#include "source.h"

namespace tf2_mapreduce {

using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::RandomAccessFile;
using tensorflow::Tensor;
using tensorflow::tstring;

namespace {

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
