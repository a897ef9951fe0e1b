// A per-key table's entries of one vocabulary sorted where the table is, on its ps task,
// so that the coordinator only merges the ps tasks' streams: sorting every distinct value
// in the coordinator's one Python process was half a large transform's time.
//
// Tf2MapreduceSortedEntries: the (term, count) entries whose key begins with `prefix`,
// sorted in an analyzer's order.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "key_counts.h"

namespace tf2_mapreduce {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::tstring;

REGISTER_OP("Tf2MapreduceSortedEntries")
    .Input("keys: string")
    .Input("counts: int64")
    .Input("prefix: string")
    .Input("order: int32")
    .Input("min_count: int64")
    .Output("terms: string")
    .Output("sorted_counts: int64")
    .Output("total: int64")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      TF_RETURN_IF_ERROR(VectorOutputs(c));
      c->set_output(2, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
The entries of `keys` (a vector; `counts` as long) that begin with `prefix` and count at
least `min_count`, the prefix cut off, sorted: `order` 0, tf.Transform's vocabulary
order (count descending, then the term's bytes descending: `reducers.keys.TftOrder`);
1, 2, 3, the quantiles' order of terms that are integers (int64), float32 bits or
float64 bits written in decimal (ascending by value, -0.0 before 0.0, then count, then
term; a NaN left out: `transform.sorted_results.ByValue`). `total`: the sum of the
counts given.
)doc");

namespace {

constexpr int kTft = 0;
constexpr int kLastOrder = 3;

struct TermCount {
  absl::string_view term;
  int64_t count;
  uint64_t ordered;  // the value's order, for the quantiles' orders: an unsigned number
};

// A decimal integer's value as an unsigned number of the same order; false for a NaN's bits.
bool Ordered(int order, int64_t bits, uint64_t* ordered) {
  if (order == 1) {
    *ordered = static_cast<uint64_t>(bits) ^ (uint64_t{1} << 63);
    return true;
  }
  const int width = order == 2 ? 32 : 64;
  const uint64_t infinity = width == 32 ? 0x7F800000u : 0x7FF0000000000000u;
  const uint64_t magnitude = static_cast<uint64_t>(bits) & ((uint64_t{1} << (width - 1)) - 1);
  if (magnitude > infinity) return false;
  // A negative float: the greater its bits' magnitude, the less it is.
  *ordered = bits < 0 ? static_cast<uint64_t>(-1 - bits) : static_cast<uint64_t>(bits) + (uint64_t{1} << (width - 1));
  return true;
}

}  // namespace

class SortedEntriesOp : public OpKernel {
 public:
  explicit SortedEntriesOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const auto keys = context->input(0).flat<tstring>();
    const auto counts = context->input(1).flat<int64_t>();
    OP_REQUIRES(context, keys.size() == counts.size(),
                tensorflow::errors::InvalidArgument(keys.size(), " keys but ", counts.size(), " counts"));
    const tstring& prefix_bytes = context->input(2).scalar<tstring>()();
    const absl::string_view prefix(prefix_bytes.data(), prefix_bytes.size());
    const int order = context->input(3).scalar<int32_t>()();
    const int64_t min_count = context->input(4).scalar<int64_t>()();
    OP_REQUIRES(context, order >= kTft && order <= kLastOrder,
                tensorflow::errors::InvalidArgument("tf2_mapreduce: no order ", order));

    std::vector<TermCount> entries;
    int64_t total = 0;
    for (int64_t i = 0; i < keys.size(); ++i) {
      const absl::string_view key(keys(i).data(), keys(i).size());
      if (counts(i) < min_count || !absl::StartsWith(key, prefix)) continue;
      TermCount entry{key.substr(prefix.size()), counts(i), 0};
      if (order != kTft) {
        int64_t bits;
        OP_REQUIRES(context, absl::SimpleAtoi(entry.term, &bits) && entry.count >= 0,
                    tensorflow::errors::InvalidArgument("tf2_mapreduce: a quantiles' key is no integer count: ",
                                                        entry.term, " ", entry.count));
        OP_REQUIRES(context, order != 2 || (bits >= INT32_MIN && bits <= INT32_MAX),
                    tensorflow::errors::InvalidArgument("tf2_mapreduce: no float32's bits: ", entry.term));
        if (!Ordered(order, bits, &entry.ordered)) continue;
      }
      OP_REQUIRES(context, !__builtin_add_overflow(total, entry.count, &total),
                  tensorflow::errors::OutOfRange("tf2_mapreduce: the counts add up past int64"));
      entries.push_back(entry);
    }
    if (order == kTft) {
      std::sort(entries.begin(), entries.end(), [](const TermCount& a, const TermCount& b) {
        return a.count != b.count ? a.count > b.count : a.term > b.term;
      });
    } else {
      std::sort(entries.begin(), entries.end(), [](const TermCount& a, const TermCount& b) {
        if (a.ordered != b.ordered) return a.ordered < b.ordered;
        return a.count != b.count ? a.count < b.count : a.term < b.term;
      });
    }

    OutputKeyCounts(context, static_cast<int64_t>(entries.size()), [&](auto emit) {
      for (const TermCount& entry : entries) emit(entry.term, entry.count);
    });
    tensorflow::Tensor* sum = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(2, tensorflow::TensorShape({}), &sum));
    sum->scalar<int64_t>()() = total;
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceSortedEntries").Device(tensorflow::DEVICE_CPU), SortedEntriesOp);

}  // namespace tf2_mapreduce
