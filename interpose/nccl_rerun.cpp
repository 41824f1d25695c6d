// Re-running a rank of an NCCL job alone: every NCCL call answered from the
// recording. The session, and how a re-run stops, are in replay/session.h.
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "cuda_events.h"
#include "nccl_record.h"
#include "record/fingerprint.h"
#include "replay/event_format.h"
#include "replay/session.h"

namespace replay::interpose::nccl {
namespace {

using rerun::Stop;
using rerun::Verdict;

// Synthetic communicators: a distinct handle per recorded communicator.
struct Synthetic {
  CommCreateEvent created;
};
std::mutex g_mu;
std::map<ncclComm_t, Synthetic>& Comms() {
  static auto* m = new std::map<ncclComm_t, Synthetic>();
  return *m;
}
std::map<uint64_t, uint64_t>& Counters() {  // comm id -> collective sequence
  static auto* m = new std::map<uint64_t, uint64_t>();
  return *m;
}

const Synthetic* Find(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Comms().find(c);
  return it == Comms().end() ? nullptr : &it->second;
}

std::string Describe(const char* what, uint64_t now, uint64_t then) {
  return std::string(what) + " " + std::to_string(now) + " (recorded " + std::to_string(then) + ")";
}

}  // namespace

ncclResult_t Call::Serve() noexcept {
  try {
    Oracle& o = session_->oracle();
    const std::string api = ApiName(api_);
    if (shape_ == Shape::kQuery) {
      const Synthetic* s = Find(comm);
      if (s == nullptr || int_out == nullptr) return ncclInvalidArgument;
      if (api_ == kApi_ncclCommCount) *int_out = s->created.size;
      if (api_ == kApi_ncclCommUserRank) *int_out = s->created.rank;
      if (api_ == kApi_ncclCommCuDevice) *int_out = s->created.device < 0 ? 0 : s->created.device;
      return ncclSuccess;
    }
    if (shape_ == Shape::kAsyncError) {
      if (async_error != nullptr) *async_error = ncclSuccess;
      return ncclSuccess;
    }
    if (shape_ == Shape::kGroup) return ncclSuccess;  // calls inside are served as they come
    const ServedCall served = session_->Serve(api, CallForm::kOp, kind_, /*call_site=*/0);
    const Event& rec = *served.first;
    if (served.ret == nullptr) {
      Stop(Verdict::kRecordingEnded, "the program reached " + o.Describe(rec) + ", which rank " +
                                         std::to_string(o.world_rank()) + " entered and never returned from");
    }
    const ncclResult_t rc = static_cast<ncclResult_t>(served.ret->ret.rc);
    const Synthetic* cs = comm != nullptr ? Find(comm) : nullptr;
    // Collectives, splits and frees take the communicator's next sequence
    // number, as when recording.
    if ((shape_ == Shape::kColl || shape_ == Shape::kSplit || shape_ == Shape::kFree) && cs != nullptr &&
        !session_->from_mark()) {
      uint64_t seq = 0;
      {
        std::lock_guard<std::mutex> lock(g_mu);
        seq = ++Counters()[cs->created.comm];
      }
      if (seq != rec.op.seq) {
        Stop(Verdict::kDiverged, "the program diverges from the recording at event #" + std::to_string(rec.index) +
                                     ": " + api + ": " + Describe("sequence number", seq, rec.op.seq) +
                                     ". Recorded: " + o.Describe(rec));
      }
    }
    switch (shape_) {
      case Shape::kUniqueId: {
        if (unique_id == nullptr) return rc;
        std::memset(unique_id, 0, sizeof(*unique_id));
        for (const Event& e : o.events()) {
          if (e.kind != EventKind::kInfo || e.info_key() != "nccl.unique_id" || e.index < rec.index) continue;
          std::string_view hex = e.info_value();
          auto* b = reinterpret_cast<unsigned char*>(unique_id->internal);
          for (size_t i = 0; i + 1 < hex.size() && i / 2 < sizeof(unique_id->internal); i += 2) {
            auto nib = [](char ch) { return ch <= '9' ? ch - '0' : ch - 'a' + 10; };
            b[i / 2] = static_cast<unsigned char>(nib(hex[i]) << 4 | nib(hex[i + 1]));
          }
          break;
        }
        return rc;
      }
      case Shape::kInitRank:
      case Shape::kInitScalable:
      case Shape::kInitAll:
      case Shape::kSplit: {
        if (newcomm == nullptr) return rc;
        if (served.created.empty()) {
          *newcomm = nullptr;
          return rc;
        }
        std::lock_guard<std::mutex> lock(g_mu);
        for (size_t i = 0; i < served.created.size(); ++i) {
          auto handle = reinterpret_cast<ncclComm_t>(new char[1]);
          Comms()[handle] = Synthetic{served.created[i]->comm_create};
          newcomm[i] = handle;
        }
        return rc;
      }
      case Shape::kFree: {
        if (api_ == kApi_ncclCommDestroy || api_ == kApi_ncclCommAbort) {
          std::lock_guard<std::mutex> lock(g_mu);
          Comms().erase(comm);
        }
        return rc;
      }
      case Shape::kColl:
      case Shape::kP2p: {
        const OpEvent& r = rec.op;
        std::string diff;
        if (cs != nullptr && r.comm != cs->created.comm) diff += "; another communicator";
        if (static_cast<int64_t>(count) != r.count) diff += "; " + Describe("count", count, static_cast<uint64_t>(r.count));
        if (TypeOf(datatype) != r.dtype) diff += std::string("; datatype ") + std::string(DataTypeName(TypeOf(datatype)));
        if (shape_ == Shape::kColl && root != r.root && r.root >= 0) diff += "; another root";
        if (shape_ == Shape::kP2p && peer != r.peer) diff += "; another peer";
        // The data sent, against its recorded fingerprint: taken at the call
        // for host memory, on the stream for device memory (then it is in the
        // completion), by the fingerprint kernel or from a copy.
        size_t esize = SizeOf(datatype);
        const Event* done = o.FindCompletion(r.request);
        const FingerprintPolicy& policy = session_->policy();
        const bool device_send = sendbuff != nullptr && cuda::IsDevicePointer(sendbuff);
        uint64_t want_hash = r.send_hash;
        uint32_t want_nan = r.send_nan;
        bool have_want = (r.flags & op_flags::kHasSendHash) != 0;
        if (!have_want && done != nullptr && (done->completion.flags & op_flags::kHasSendHash) != 0) {
          want_hash = done->completion.send_hash;
          want_nan = done->completion.send_nan;
          have_want = true;
        }
        if (have_want && sendbuff != nullptr && r.bytes > 0) {
          std::optional<Fingerprint> f;
          if (!device_send) {
            f = FingerprintBuffer(sendbuff, r.bytes, TypeOf(datatype), policy);
          } else if (cuda::DeviceFingerprint* k = cuda::FingerprintOnDevice(sendbuff, r.bytes, TypeOf(datatype), policy,
                                                                            stream)) {
            if (cuda::SyncStream(stream)) {
              f = cuda::TakeFingerprint(k);
            } else {
              cuda::AbandonFingerprint(k);
            }
          } else if (void* stage = cuda::StageFromDevice(sendbuff, r.bytes, stream)) {
            // A re-run may wait for its own stream.
            if (cuda::SyncStream(stream)) {
              f = FingerprintBuffer(stage, r.bytes, TypeOf(datatype), policy);
              cuda::FreeStaging(stage);
            }
          }
          if (f && (f->hash != want_hash || f->nan != want_nan)) {
            diff += "; the data sent differs: fingerprint " + Hex(f->hash) + " (recorded " + Hex(want_hash) + ")";
          }
        }
        if (!diff.empty()) {
          Stop(Verdict::kDiverged, "the program diverges from the recording at event #" + std::to_string(rec.index) +
                                       ": " + api + ": " + diff.substr(2) + ". Recorded: " + o.Describe(rec));
        }
        if (done != nullptr && done->completion.payload_size > 0 && recvbuff != nullptr) {
          auto bytes = o.Payload(done->completion.payload_hash);
          if (!bytes.ok()) Stop(Verdict::kFailed, bytes.status().message());
          if (cuda::IsDevicePointer(recvbuff)) {
            if (!cuda::CopyToDeviceAndWait(recvbuff, bytes->data(), bytes->size(), stream)) {
              Stop(Verdict::kFailed, "cannot copy the recorded bytes of event #" + std::to_string(rec.index) +
                                         " to the device");
            }
          } else {
            std::memcpy(recvbuff, bytes->data(), bytes->size());
          }
        } else if (done == nullptr && esize > 0 && kind_ != OpKind::kSend) {
          Stop(Verdict::kRecordingEnded, "the program reached " + o.Describe(rec) +
                                             ", which never completed in the recording");
        }
        return rc;
      }
      case Shape::kCall:
      default:
        return rc;
    }
  } catch (const std::exception& e) {
    Stop(Verdict::kFailed, std::string("internal error while serving an NCCL call: ") + e.what());
  }
}

}  // namespace replay::interpose::nccl
