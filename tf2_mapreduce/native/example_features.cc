// Every feature value of a stream of tf.train.Example records, as the counted keys of a
// statistics job, in one pass over the protobuf wire format: TensorFlow's generic
// decoder (DecodeProto) pads each repeated field to the batch's longest, so one long
// list in a batch would cost its length times every list of the batch.
//
// Tf2MapreduceExampleStatKeys: the keys of a whole piece (a dataset of batches of
// records), each distinct one with its count. Counted here to the piece's end, by typed
// value: keys made per batch and merged after cost 10x the vocab job when every value
// of a float feature fell in a bucket of its own (measured on an embedding).
// What a key means is decoded in one place, reducers/feature_stats.py (`StatKeys`).
//
// A float feature's values are counted by bucket (the value with all but the top
// kFloatBits bits of its mantissa cleared), so that a feature of distinct values (an
// embedding) costs a bounded number of keys; what must stay exact is summed apart: the
// values' sum and sum of squares as integers per exponent, the least and the greatest
// value.

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "example_wire.h"
#include "key_counts.h"

namespace tf2_mapreduce {

using tensorflow::CancellationManager;
using tensorflow::ResourceMgr;
using tensorflow::Tensor;
using tensorflow::data::DatasetBase;
using tensorflow::data::GetDatasetFromVariantTensor;
using tensorflow::data::IteratorBase;
using tensorflow::data::IteratorContext;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::tstring;

namespace {

// A feature's kind as its keys name it: no list set, bytes_list, float_list, int64_list.
constexpr char kKinds[] = {'x', 'b', 'f', 'i'};
constexpr uint32_t kCanonicalNan = 0x7fc00000u;
constexpr int kFloatBits = 10;  // bits after the leading one a bucket keeps: StatKeys.FLOAT_BITS
constexpr int kExponents = 255;  // biased exponents of finite floats: 0 (subnormal) to 254

inline bool IsNan(uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0; }
inline bool IsFinite(uint32_t bits) { return (bits & 0x7f800000u) != 0x7f800000u; }

// A float's bucket: its bits with all but the leading one of its mantissa (the hidden bit
// of a normal number) and the kFloatBits bits after it cleared, so that the bucket is
// within 2^-kFloatBits of the value, toward zero. NaN is one bucket; zeros and
// infinities are their own.
inline uint32_t Bucket(uint32_t bits) {
  if (IsNan(bits)) return kCanonicalNan;
  const uint32_t mantissa = bits & 0x007fffffu;
  const int lead = (bits & 0x7f800000u) ? 23 : (mantissa ? 31 - __builtin_clz(mantissa) : 0);
  const int drop = lead - kFloatBits;
  return drop > 0 ? bits & ~((uint32_t{1} << drop) - 1) : bits;
}

// Whether float `a` comes before `b`: by value, and -0.0 before 0.0.
inline bool Before(uint32_t a, uint32_t b) {
  float x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x < y || (x == y && (a >> 31) > (b >> 31));
}

// What a piece sums of a float feature's finite values. A value is m * 2^(max(e, 1) - 150)
// for its biased exponent e and m its mantissa (with the hidden bit when e > 0); m = a *
// 2^12 + b, so m^2 = a^2 * 2^24 + 2ab * 2^12 + b^2, each term under 2^25: an int64 holds
// the sums of 2^38 values of one exponent, in a piece as in the table.
struct FloatSums {
  bool any = false;
  uint32_t min = 0, max = 0;
  int64_t positive[kExponents] = {}, negative[kExponents] = {};
  int64_t squares[3][kExponents] = {};

  void Add(uint32_t bits) {
    if (!any || Before(bits, min)) min = bits;
    if (!any || Before(max, bits)) max = bits;
    any = true;
    const int e = static_cast<int>((bits >> 23) & 0xff);
    const int64_t m = (bits & 0x007fffffu) | (e ? (int64_t{1} << 23) : 0);
    ((bits >> 31) ? negative : positive)[e] += m;
    const int64_t a = m >> 12, b = m & 0xfff;
    squares[0][e] += a * a;
    squares[1][e] += 2 * a * b;
    squares[2][e] += b * b;
  }
};

void AppendBigEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// A float feature's values counted by bucket. A normal number's bucket (and a zero's, an
// infinity's, NaN's) clears the low kDropped bits: its count is found in a block of
// 2^kFloatBits counts per sign and exponent, made when first used. A count there is one
// byte, its wraps added apart: values spread over every exponent (an embedding of
// random bits) touch 512 KB of counts, where int64 counts missed the cache at every
// value (4 MB: the increment was 20% of the job's time, measured). A subnormal number's
// bucket keeps more bits: those, rare, are in a hash table.
class FloatCounts {
 public:
  void Add(uint32_t bits) {
    const uint32_t bucket = Bucket(bits);
    if ((bucket & 0x7f800000u) == 0 && (bucket & 0x007fffffu) != 0) {
      ++subnormal_[bucket];
      return;
    }
    auto& block = blocks_[bucket >> 23];
    if (!block) block = std::make_unique<uint8_t[]>(kBlock);  // zeroed
    if (++block[(bucket >> kDropped) & (kBlock - 1)] == 0) wraps_[bucket] += 256;
  }

  // Calls `f(bucket, count)` for each bucket counted.
  template <typename F>
  void ForEach(F f) const {
    for (uint32_t top = 0; top < blocks_.size(); ++top) {
      if (!blocks_[top]) continue;
      for (uint32_t i = 0; i < kBlock; ++i) {
        const uint32_t bucket = top << 23 | i << kDropped;
        int64_t count = blocks_[top][i];
        if (!wraps_.empty()) {
          const auto wrapped = wraps_.find(bucket);
          if (wrapped != wraps_.end()) count += wrapped->second;
        }
        if (count) f(bucket, count);
      }
    }
    for (const auto& [bucket, count] : subnormal_) f(bucket, count);
  }

 private:
  static constexpr int kDropped = 23 - kFloatBits;
  static constexpr uint32_t kBlock = uint32_t{1} << kFloatBits;
  std::array<std::unique_ptr<uint8_t[]>, 512> blocks_;  // by sign and exponent
  absl::flat_hash_map<uint32_t, int64_t> wraps_;  // 256 for each time a block's count wrapped
  absl::flat_hash_map<uint32_t, int64_t> subnormal_;
};

// One feature's values (of one kind) as counted so far, by typed value: the keys are
// made once, at the end, so that a value costs a hash of itself and not of a key.
struct Counted {
  absl::flat_hash_map<int64_t, int64_t> lengths;
  absl::flat_hash_map<std::string, int64_t> bytes;
  FloatCounts floats;
  absl::flat_hash_map<uint64_t, int64_t> ints;  // with the sign bit flipped
  FloatSums sums;
};

// The statistics keys of every Example added, each distinct one with its count.
class StatCounts {
 public:
  explicit StatCounts(absl::flat_hash_set<std::string> only) : only_(std::move(only)) {}

  // Counts `record`; false if it is not a tf.train.Example.
  bool Add(absl::string_view record) {
    entries_.Clear();
    seen_.clear();
    if (!ParseExample(record, &entries_)) return false;
    ++examples_;
    for (size_t i = entries_.size(); i-- > 0;) {
      const Entry* entry = &entries_[i];
      if (!seen_.insert(entry->name).second) continue;  // an earlier entry of a name given again
      if (!only_.empty() && !only_.contains(entry->name)) continue;
      const Feature& feature = entry->feature;
      prefix_.clear();
      absl::StrAppend(&prefix_, entry->name.size(), ":", entry->name);
      prefix_.push_back(kKinds[feature.kind]);
      auto found = features_.find(prefix_);
      if (found == features_.end()) found = features_.emplace(prefix_, std::make_unique<Counted>()).first;
      Counted& counted = *found->second;
      ++counted.lengths[static_cast<int64_t>(feature.size())];
      for (absl::string_view value : feature.bytes) {
        auto slot = counted.bytes.find(value);
        if (slot == counted.bytes.end()) {
          counted.bytes.emplace(std::string(value), 1);
        } else {
          ++slot->second;
        }
      }
      for (uint32_t bits : feature.floats) {
        if (IsFinite(bits)) counted.sums.Add(bits);
        counted.floats.Add(bits);
      }
      // The sign bit flipped: byte order is then the numbers' order.
      for (int64_t value : feature.ints) ++counted.ints[static_cast<uint64_t>(value) ^ (uint64_t{1} << 63)];
    }
    return true;
  }

  // Calls `emit(key, count)` for every key, as StatKeys reads them; `key` is valid for
  // the call only. Called twice (count, then fill), so that no copy of the keys is held.
  template <typename Emit>
  void ForEachKey(Emit emit) const {
    std::string key;
    if (examples_ > 0) emit(absl::string_view("e"), examples_);
    for (const auto& [prefix, counted] : features_) {
      const auto start = [&](absl::string_view record) -> std::string& {
        key.assign(record.data(), record.size());
        key.append(prefix);
        return key;
      };
      for (const auto& [length, count] : counted->lengths) {
        absl::StrAppend(&start("n"), length);
        emit(key, count);
      }
      for (const auto& [value, count] : counted->bytes) {
        start("v").append(value);
        emit(key, count);
      }
      counted->floats.ForEach([&](uint32_t bucket, int64_t count) {
        AppendBigEndian(bucket, 4, &start("v"));
        emit(key, count);
      });
      for (const auto& [value, count] : counted->ints) {
        AppendBigEndian(value, 8, &start("v"));
        emit(key, count);
      }
      const FloatSums& sums = counted->sums;
      if (!sums.any) continue;
      // Counts are positive in a table: the sum of each sign is a key of its own.
      for (int e = 0; e < kExponents; ++e) {
        const int64_t terms[] = {sums.positive[e], sums.negative[e], sums.squares[0][e], sums.squares[1][e],
                                 sums.squares[2][e]};
        const char* names[] = {"s+", "s-", "q0", "q1", "q2"};
        for (int t = 0; t < 5; ++t) {
          if (terms[t] == 0) continue;
          start(absl::string_view(names[t], 1)).push_back(names[t][1]);
          key.push_back(static_cast<char>(e));
          emit(key, terms[t]);
        }
      }
      AppendBigEndian(sums.min, 4, &start("<"));
      emit(key, 1);
      AppendBigEndian(sums.max, 4, &start(">"));
      emit(key, 1);
    }
  }

 private:
  const absl::flat_hash_set<std::string> only_;
  int64_t examples_ = 0;
  // By the keys' common part: the name as a netstring, then the kind letter.
  absl::flat_hash_map<std::string, std::unique_ptr<Counted>> features_;
  Entries entries_;
  absl::flat_hash_set<absl::string_view> seen_;
  std::string prefix_;
};

// Every batch of `dataset` (1-D tf.string elements) added to `counts`, one at a time.
absl::Status AddBatches(OpKernelContext* context, const DatasetBase* dataset, StatCounts* counts) {
  IteratorContext::Params params(context);
  ResourceMgr resources;
  params.resource_mgr = &resources;
  CancellationManager cancellation(context->cancellation_manager());
  params.cancellation_manager = &cancellation;
  IteratorContext iterator_context(std::move(params));
  std::unique_ptr<IteratorBase> iterator;
  TF_RETURN_IF_ERROR(dataset->MakeIterator(&iterator_context, nullptr, "Tf2MapreduceExampleStatKeys", &iterator));
  int64_t seen = 0;
  while (true) {
    if (context->cancellation_manager()->IsCancelled()) return tensorflow::errors::Cancelled("cancelled");
    std::vector<Tensor> element;
    bool end = false;
    TF_RETURN_IF_ERROR(iterator->GetNext(&iterator_context, &element, &end));
    if (end) return absl::OkStatus();
    if (element.size() != 1 || element[0].dtype() != tensorflow::DT_STRING || element[0].dims() != 1) {
      return tensorflow::errors::InvalidArgument("the dataset's elements must be 1-D tf.string batches of records");
    }
    const auto records = element[0].flat<tstring>();
    for (int64_t r = 0; r < records.size(); ++r, ++seen) {
      if (!counts->Add(absl::string_view(records(r).data(), records(r).size()))) {
        return tensorflow::errors::InvalidArgument("record ", seen, " is not a tf.train.Example");
      }
    }
  }
}

}  // namespace

REGISTER_OP("Tf2MapreduceExampleStatKeys")
    .Input("batches: variant")
    .Input("features: string")
    .Output("keys: string")
    .Output("counts: int64")
    .SetShapeFn(VectorOutputs)
    .Doc(R"doc(
The statistics keys of every record of `batches` (a dataset of 1-D tf.string batches of
serialized tf.train.Example), each distinct one with its count, in no order
(reducers/feature_stats.py says what each means); only of the features named in
`features`, or of all of them if it is empty. A map key given twice keeps its last
entry, as protobuf's parser does. Fails with InvalidArgument for a record that is not
an Example, with the dataset's own error for a file it cannot read.
)doc");

class ExampleStatKeysOp : public OpKernel {
 public:
  explicit ExampleStatKeysOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    DatasetBase* dataset = nullptr;
    OP_REQUIRES_OK(context, GetDatasetFromVariantTensor(context->input(0), &dataset));
    const auto wanted = context->input(1).flat<tstring>();
    absl::flat_hash_set<std::string> only;
    for (int64_t i = 0; i < wanted.size(); ++i) only.emplace(wanted(i).data(), wanted(i).size());
    StatCounts counts(std::move(only));
    OP_REQUIRES_OK(context, AddBatches(context, dataset, &counts));
    int64_t size = 0;
    counts.ForEachKey([&](absl::string_view, int64_t) { ++size; });
    OutputKeyCounts(context, size, [&](auto emit) { counts.ForEachKey(emit); });
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceExampleStatKeys").Device(tensorflow::DEVICE_CPU), ExampleStatKeysOp);

}  // namespace tf2_mapreduce
