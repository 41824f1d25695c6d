// mpi_buffers.h: what the recorder knows about MPI buffers, shared by
// recording (fingerprints, payloads) and re-running (filling receive buffers).
// Thread-safe: the datatype cache is; the rest is stateless.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "mpi_record.h"

namespace replay::interpose::mpi {

struct alignas(32) TypeInfo {  // within one cache line
  DataType dt = DataType::kUnknown;
  DataType base = DataType::kUnknown;  // NaN counting: the one basic type inside, if any
  uint32_t size = 0;                   // bytes of data per element
  MPI_Aint extent = 0;
  uint64_t sig = 0;                    // derived types: hash of how they were built
  bool contiguous = false;             // count elements are size*count bytes at buf
};

// What the recorder learned of a datatype handle (cached).
const TypeInfo& TypeOf(MPI_Datatype t);

// `base` advanced by `elements` extents of `t`.
const char* Offset(const void* base, int64_t elements, const TypeInfo& t);

struct Bytes {
  const unsigned char* data = nullptr;
  size_t size = 0;
  DataType dt = DataType::kUnknown;  // element type for NaN counting
};

// A region's bytes, contiguous: in place, or packed into a per-thread buffer
// (valid until the thread's next Gather).
Bytes Gather(const Region& r, MPI_Comm comm);

// Fills a region from contiguous bytes (the inverse of Gather). False when the
// bytes are fewer than the region holds (what there is is still written).
bool Scatter(const Region& r, std::string_view bytes, MPI_Comm comm);

// The two below at levels above meta, out of line: a call recorded at level
// meta pays no call for them.
namespace internal {
void FingerprintSent(const CallContext& ctx, const Region& r, MPI_Comm comm, OpEvent* op);
void FingerprintReceived(const CallContext& ctx, const Region& r, MPI_Comm comm, ReturnEvent* ret);
void FingerprintReceived(const CallContext& ctx, const Region& r, MPI_Comm comm, CompletionEvent* c);
}  // namespace internal

// Fingerprints what a call sends into its op (hash, NaN/Inf counts,
// kHasSendHash). Nothing at level meta or for an empty region.
inline void FingerprintSent(const CallContext& ctx, const Region& r, MPI_Comm comm, OpEvent* op) {
  if (ctx.level != Level::kMeta) internal::FingerprintSent(ctx, r, comm, op);
}

// Fingerprints what a call received into its return or completion (hash,
// NaN/Inf counts, kHasRecvHash, and kRecvSampled where the counts cover the
// sample only) and, at level data, stores the bytes and their payload key.
// Nothing at level meta or for an empty region.
template <typename Body>
void FingerprintReceived(const CallContext& ctx, const Region& r, MPI_Comm comm, Body* body) {
  if (ctx.level != Level::kMeta) internal::FingerprintReceived(ctx, r, comm, body);
}

// At level data, stores a region's bytes and their payload key without
// fingerprinting them as received data.
void StoreRegion(const CallContext& ctx, const Region& r, MPI_Comm comm, uint64_t* payload_hash,
                 uint64_t* payload_size);

// The request handles a completion call was given, as they were on entry.
extern thread_local std::vector<MPI_Request> t_saved;

uint64_t Handle(MPI_Comm c);
// World ranks of a communicator's local (or remote) group, in rank order.
std::vector<int32_t> CommMembers(MPI_Comm c, bool remote);

}  // namespace replay::interpose::mpi
