// Words as Python's bytes.split() cuts them (a maximal run of bytes other than the six
// ASCII whitespace bytes), counted in one pass over the bytes: the TensorFlow-op form of
// the same rule (jobs/wordcount.py, jobs/wordfreq.py) makes about eight passes and
// materializes a string per word.
//
// Tf2MapreduceCountWords: the number of words of each text.
// Tf2MapreduceWordCounts: every distinct word of a batch of texts, with its count.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf2_mapreduce {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::tstring;

namespace {

// 9..13 are \t \n \v \f \r: unsigned wrap-around makes "c - 9 < 5" one range test, and
// the branch-free form lets the compiler count many bytes at once.
inline bool IsSpace(unsigned char c) { return (c == 32) | (static_cast<unsigned char>(c - 9) < 5); }

int64_t CountWords(absl::string_view text) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  if (size == 0) return 0;
  // A word starts at a non-space byte that begins the text or follows a space.
  int64_t starts = IsSpace(bytes[0]) ? 0 : 1;
  for (size_t i = 1; i < size; ++i) {
    starts += IsSpace(bytes[i - 1]) & !IsSpace(bytes[i]);
  }
  return starts;
}

}  // namespace

REGISTER_OP("Tf2MapreduceCountWords")
    .Input("texts: string")
    .Output("words: int64")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("The number of words of each text of `texts` (any shape), as len(text.split()) in Python.");

class CountWordsOp : public OpKernel {
 public:
  explicit CountWordsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& texts = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, texts.shape(), &output));
    const auto text = texts.flat<tstring>();
    auto words = output->flat<int64_t>();
    for (int64_t i = 0; i < text.size(); ++i) {
      words(i) = CountWords(absl::string_view(text(i).data(), text(i).size()));
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceCountWords").Device(tensorflow::DEVICE_CPU), CountWordsOp);

REGISTER_OP("Tf2MapreduceWordCounts")
    .Input("texts: string")
    .Output("words: string")
    .Output("counts: int64")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Every distinct word of `texts` (a vector; no word spans two texts) and how often it
occurs, in no particular order: Counter(w for t in texts for w in t.split()) in Python.
)doc");

class WordCountsOp : public OpKernel {
 public:
  explicit WordCountsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const auto texts = context->input(0).flat<tstring>();
    // Keys point into the input texts, which outlive this call.
    absl::flat_hash_map<absl::string_view, int64_t> counts;
    for (int64_t t = 0; t < texts.size(); ++t) {
      const char* data = texts(t).data();
      const size_t size = texts(t).size();
      size_t i = 0;
      while (i < size) {
        while (i < size && IsSpace(data[i])) ++i;
        const size_t start = i;
        while (i < size && !IsSpace(data[i])) ++i;
        if (i > start) ++counts[absl::string_view(data + start, i - start)];
      }
    }
    const int64_t distinct = static_cast<int64_t>(counts.size());
    Tensor* words = nullptr;
    Tensor* numbers = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({distinct}), &words));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({distinct}), &numbers));
    auto word = words->flat<tstring>();
    auto number = numbers->flat<int64_t>();
    int64_t k = 0;
    for (const auto& entry : counts) {
      word(k).assign(entry.first.data(), entry.first.size());
      number(k) = entry.second;
      ++k;
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceWordCounts").Device(tensorflow::DEVICE_CPU), WordCountsOp);

}  // namespace tf2_mapreduce
