// A per-key table's entries of its vocabularies sorted where the table is, on its ps task,
// so that the coordinator only merges the ps tasks' streams: sorting every distinct value
// in the coordinator's one Python process was half a large transform's time. The table is
// exported once for every vocabulary read: a function of a hundred scale_to_z_score calls
// beside a vocabulary of millions asks for a hundred.
//
// Tf2MapreduceSortedEntries: the (term, count) entries of each prefix, each part sorted in
// its own order, end to end.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/device_base.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/tensor_types.h"
#include "tensorflow/core/platform/threadpool.h"
#include "key_counts.h"

namespace tf2_mapreduce {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::tstring;

REGISTER_OP("Tf2MapreduceSortedEntries")
    .Input("keys: string")
    .Input("counts: int64")
    .Input("prefixes: string")
    .Input("orders: int32")
    .Input("min_count: int64")
    .Output("terms: string")
    .Output("sorted_counts: int64")
    .Output("totals: int64")
    .Output("splits: int64")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      TF_RETURN_IF_ERROR(VectorOutputs(c));
      c->set_output(2, c->Vector(c->UnknownDim()));
      c->set_output(3, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
For each of `prefixes` (a vector of strings of one length), a part: the entries of
`keys` (a vector; `counts` as long) that begin with it and count at least `min_count`, the
prefix cut off, sorted in its order of `orders` (as long as `prefixes`): 0, tf.Transform's
vocabulary order (count descending, then the term's bytes descending:
`reducers.keys.TftOrder`); 1, 2, 3, the quantiles' order of terms that are integers
(int64), float32 bits or float64 bits written in decimal (ascending by value, -0.0 before
0.0, then count, then term; a NaN left out: `transform.sorted_results.ByValue`). The parts
end to end (`terms`, `sorted_counts`); part i is [splits[i], splits[i + 1]); `totals`: the
sum of each part's counts.
)doc");

namespace {

constexpr int kTft = 0;
constexpr int kLastOrder = 3;

struct TermCount {
  absl::string_view term;
  int64_t count;
  // tf.Transform's order: the term's first 8 bytes, big-endian, zeros past its end (they
  // order as the term does, but where they are equal), compared without reading the term
  // (a third of the time at 10 million terms). The quantiles' orders: the value's order,
  // an unsigned number.
  uint64_t ordered;
};

uint64_t Head(absl::string_view term) {
  uint64_t head = 0;
  for (size_t i = 0; i < 8; ++i) head = head << 8 | (i < term.size() ? static_cast<unsigned char>(term[i]) : 0);
  return head;
}

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

// Whether `a` comes before `b` in tf.Transform's order.
bool TftBefore(const TermCount& a, const TermCount& b) {
  if (a.count != b.count) return a.count > b.count;
  return a.ordered != b.ordered ? a.ordered > b.ordered : a.term > b.term;
}

// Whether `a` comes before `b` in a quantiles' order.
bool ValueBefore(const TermCount& a, const TermCount& b) {
  if (a.ordered != b.ordered) return a.ordered < b.ordered;
  return a.count != b.count ? a.count < b.count : a.term < b.term;
}

// Sorts each part of `entries` in its order of `orders`, its halves on the kernel's worker
// threads, then merged: a ps has the cores of its machine, idle between the passes.
void SortParts(OpKernelContext* context, const tensorflow::TTypes<int32_t>::ConstFlat& orders,
               std::vector<std::vector<TermCount>>* entries) {
  const int64_t parts = entries->size();
  auto before = [&](int64_t p) { return orders(p) == kTft ? TftBefore : ValueBefore; };
  auto sort_half = [&](int64_t task) {
    std::vector<TermCount>& part = (*entries)[task / 2];
    const auto middle = part.begin() + part.size() / 2;
    if (task % 2 == 0) {
      std::sort(part.begin(), middle, before(task / 2));
    } else {
      std::sort(middle, part.end(), before(task / 2));
    }
  };
  auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
  workers->ParallelFor(2 * parts, 1 << 30, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) sort_half(task);
  });
  for (int64_t p = 0; p < parts; ++p) {
    std::vector<TermCount>& part = (*entries)[p];
    std::inplace_merge(part.begin(), part.begin() + part.size() / 2, part.end(), before(p));
  }
}

// Where `entry` of a part in `order` goes: a quantiles' term is a value, its place
// `entry->ordered`; a NaN is not `kept`.
absl::Status PlaceValue(int order, TermCount* entry, bool* kept) {
  if (order == kTft) {
    entry->ordered = Head(entry->term);
    return absl::OkStatus();
  }
  int64_t bits;
  if (!absl::SimpleAtoi(entry->term, &bits) || entry->count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tf2_mapreduce: a quantiles' key is no integer count: ",
                                                   entry->term, " ", entry->count));
  }
  if (order == 2 && (bits < INT32_MIN || bits > INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("tf2_mapreduce: no float32's bits: ", entry->term));
  }
  *kept = Ordered(order, bits, &entry->ordered);
  return absl::OkStatus();
}

// Outputs 2 and 3: each part's sum, and where each part begins, then the end.
absl::Status OutputParts(OpKernelContext* context, const std::vector<std::vector<TermCount>>& entries,
                         const std::vector<int64_t>& totals) {
  const int64_t parts = entries.size();
  tensorflow::Tensor* sums = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(2, tensorflow::TensorShape({parts}), &sums));
  tensorflow::Tensor* splits = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(3, tensorflow::TensorShape({parts + 1}), &splits));
  auto split = splits->flat<int64_t>();
  split(0) = 0;
  for (int64_t p = 0; p < parts; ++p) {
    sums->flat<int64_t>()(p) = totals[p];
    split(p + 1) = split(p) + static_cast<int64_t>(entries[p].size());
  }
  return absl::OkStatus();
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
    OP_REQUIRES(context, tensorflow::TensorShapeUtils::IsScalar(context->input(4).shape()),
                tensorflow::errors::InvalidArgument("min_count must be a scalar"));
    const auto prefixes = context->input(2).flat<tstring>();
    const auto orders = context->input(3).flat<int32_t>();
    const int64_t min_count = context->input(4).scalar<int64_t>()();
    OP_REQUIRES(context, prefixes.size() == orders.size(),
                tensorflow::errors::InvalidArgument(prefixes.size(), " prefixes but ", orders.size(), " orders"));
    const int64_t parts = prefixes.size();
    const size_t width = parts ? prefixes(0).size() : 0;
    // A prefix's parts: a vocabulary and the quantiles of one integer share one count.
    absl::flat_hash_map<absl::string_view, std::vector<int64_t>> parts_of;
    for (int64_t p = 0; p < parts; ++p) {
      OP_REQUIRES(context, orders(p) >= kTft && orders(p) <= kLastOrder,
                  tensorflow::errors::InvalidArgument("tf2_mapreduce: no order ", orders(p)));
      OP_REQUIRES(context, prefixes(p).size() == width,
                  tensorflow::errors::InvalidArgument("tf2_mapreduce: prefixes of different lengths"));
      parts_of[absl::string_view(prefixes(p).data(), width)].push_back(p);
    }

    std::vector<std::vector<TermCount>> entries(parts);
    std::vector<int64_t> totals(parts, 0);
    for (int64_t i = 0; i < keys.size(); ++i) {
      const absl::string_view key(keys(i).data(), keys(i).size());
      if (counts(i) < min_count || key.size() < width) continue;
      const auto found = parts_of.find(key.substr(0, width));
      if (found == parts_of.end()) continue;
      for (const int64_t p : found->second) {
        TermCount entry{key.substr(width), counts(i), 0};
        bool kept = true;
        OP_REQUIRES_OK(context, PlaceValue(orders(p), &entry, &kept));
        if (!kept) continue;
        OP_REQUIRES(context, !__builtin_add_overflow(totals[p], entry.count, &totals[p]),
                    tensorflow::errors::OutOfRange("tf2_mapreduce: the counts add up past int64"));
        entries[p].push_back(entry);
      }
    }
    SortParts(context, orders, &entries);
    int64_t size = 0;
    for (const auto& part : entries) size += part.size();
    OutputKeyCounts(context, size, [&](auto emit) {
      for (const auto& part : entries) {
        for (const TermCount& entry : part) emit(entry.term, entry.count);
      }
    });
    if (!context->status().ok()) return;
    OP_REQUIRES_OK(context, OutputParts(context, entries, totals));
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceSortedEntries").Device(tensorflow::DEVICE_CPU), SortedEntriesOp);

}  // namespace tf2_mapreduce
