// An error of a file system that could not reach its storage, told apart from an error of
// the file: TensorFlow's gs:// client gives up with ABORTED ("All N retry attempts
// failed"), other file systems with UNAVAILABLE or DEADLINE_EXCEEDED. Those codes from a
// worker make ClusterCoordinator take the worker for failed and run the step again at once,
// again and again (docs/runtime.md, G7): so the ops return such an error as INTERNAL (which
// it hands to the caller), its text after kStorageOutage, which the coordinator waits out
// (tf2_mapreduce/storage.py). Short, the response's body left out ("... when reading
// <path>"): gRPC logs an error of over 3 KB as it relays it.
#ifndef TF2_MAPREDUCE_NATIVE_STORAGE_STATUS_H_
#define TF2_MAPREDUCE_NATIVE_STORAGE_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace tf2_mapreduce {

inline constexpr char kStorageOutage[] = "tf2_mapreduce: storage outage: ";

// Whether `status` says the storage could not be reached, not that the file is at fault.
inline bool IsOutage(const absl::Status& status) {
  // A response cut short without a transport error (a TLS connection closed mid-body)
  // reads short, which TensorFlow's gs:// client reports as INTERNAL "File contents are
  // inconsistent" and does not retry. An object that changed size fails the map step's own
  // size check when it is tried again.
  const bool cut_short = absl::IsInternal(status) && absl::StrContains(status.message(), "File contents are inconsistent");
  return cut_short || absl::IsAborted(status) || absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

// `status` as an outage if it is one (`IsOutage`), else as it is. `doing`: what was done
// to `path`, for the message.
inline absl::Status FromStorage(absl::Status status, const std::string& path, const char* doing = "reading") {
  if (!IsOutage(status)) return status;
  const std::string message(status.message());
  std::string cause = message.substr(0, message.find('\n'));
  const size_t body = cause.find(" with body ");
  if (body != std::string::npos) cause.resize(body);
  if (cause.size() > 400) cause.resize(400);
  return absl::InternalError(std::string(kStorageOutage) + cause + " when " + doing + " " + path);
}

// A read that ended at `offset`, before `size`, the length the file had just before it
// was read: a response cut short. TensorFlow's gs:// client says so itself ("File
// contents are inconsistent") only while the object's size is in its stat cache, for 5 s
// (docs/runtime.md, G7); past that, a cut read looks like the file's end. An outage, so:
// a file that really shrank fails the map step's size check when it is tried again.
inline absl::Status CutShort(const std::string& path, uint64_t offset, uint64_t size) {
  return FromStorage(absl::InternalError("File contents are inconsistent for file: " + path + " @ " +
                                         std::to_string(offset) + " of " + std::to_string(size) + " bytes"),
                     path);
}

// An output that cannot be written, worded as errors.py's CANNOT_WRITE (failures.py reads
// `target` back out of it): it fails the job, as no input's fault.
inline absl::Status CannotWrite(const std::string& target, const std::string& cause) {
  return absl::FailedPreconditionError("tf2_mapreduce: cannot write output " + target + ": " + cause);
}

// `status` of writing `path`, the output: an outage if it is one, else `CannotWrite`.
inline absl::Status WriteFailed(absl::Status status, const std::string& path) {
  if (status.ok() || IsOutage(status)) return FromStorage(status, path, "writing");
  return CannotWrite(path, std::string(status.message()));
}

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_STORAGE_STATUS_H_
