#include "rng_record.h"

#include <errno.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>

#include "guard.h"
#include "record/recorder.h"
#include "replay/event_format.h"
#include "replay/session.h"

namespace replay::interpose::rng {
namespace {

// Descriptors open on a random device, as two bitmaps (urandom, random).
// Constant-initialised: open() may run before any constructor of ours.
constexpr int kMaxFd = 4096;
std::atomic<uint64_t> g_urandom[kMaxFd / 64];
std::atomic<uint64_t> g_random[kMaxFd / 64];

// Bytes of entropy kept per event; longer reads keep their first bytes (the
// event's rc says how many the program got).
constexpr size_t kMaxEntropyBytes = 64 << 10;

enum class Device { kNone, kUrandom, kRandom };

Device DeviceOf(const char* path) {
  if (path == nullptr || std::strncmp(path, "/dev/", 5) != 0) return Device::kNone;
  if (std::strcmp(path + 5, "urandom") == 0) return Device::kUrandom;
  if (std::strcmp(path + 5, "random") == 0) return Device::kRandom;
  return Device::kNone;
}

void Mark(int fd, Device d) {
  if (fd < 0 || fd >= kMaxFd) return;
  uint64_t bit = 1ull << (fd % 64);
  g_urandom[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
  g_random[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
  if (d == Device::kUrandom) g_urandom[fd / 64].fetch_or(bit, std::memory_order_relaxed);
  if (d == Device::kRandom) g_random[fd / 64].fetch_or(bit, std::memory_order_relaxed);
}

Device Lookup(int fd) {
  if (fd < 0 || fd >= kMaxFd) return Device::kNone;
  uint64_t bit = 1ull << (fd % 64);
  if (g_urandom[fd / 64].load(std::memory_order_relaxed) & bit) return Device::kUrandom;
  if (g_random[fd / 64].load(std::memory_order_relaxed) & bit) return Device::kRandom;
  return Device::kNone;
}

// Records entropy the program received. Called only by outermost calls.
void RecordEntropy(EntropySource source, const void* buf, int64_t rc, uint64_t requested,
                   uint32_t flags, uint64_t site) {
  int saved = errno;
  EntropyEvent body{source, flags, requested, rc};
  size_t n = rc > 0 ? std::min<size_t>(static_cast<size_t>(rc), kMaxEntropyBytes) : 0;
  std::string_view bytes(static_cast<const char*>(buf), buf != nullptr ? n : 0);
  if (Recorder* r = Recorder::Peek()) {
    r->Append(EventKind::kEntropy, body, site, {}, bytes);
  } else {
    Event e = Event::Make(body);
    e.call_site = site;
    e.text.assign(bytes);
    Recorder::BufferEarly(e);
  }
  errno = saved;
}

void RecordSeed(SeedSource source, uint64_t value, uint64_t state, uint64_t site) {
  int saved = errno;
  SeedEvent body{source, value, state};
  if (Recorder* r = Recorder::Peek()) {
    r->Append(EventKind::kSeed, body, site);
  } else {
    Event e = Event::Make(body);
    e.call_site = site;
    Recorder::BufferEarly(e);
  }
  errno = saved;
}

EntropySource SourceOf(Device d) {
  return d == Device::kRandom ? EntropySource::kDevRandom : EntropySource::kDevUrandom;
}

// rand_r is a pure function of its state: what matters is the state a
// sequence starts from. A call starts a sequence when the state is not what
// this thread's previous call on the same state left.
thread_local unsigned int* t_rand_r_state __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local unsigned int t_rand_r_after __attribute__((tls_model("initial-exec"))) = 0;

// Re-running: the outermost draws of the program are answered from the recording.
bool Serving(const Guard& g) { return g.outermost() && rerun::Active() && rerun::Get() != nullptr; }

// Serves an entropy read of up to `len` bytes into `buf` from the recording;
// returns what the recorded call returned. Stops the program at a divergence.
int64_t ServeEntropy(std::string_view api, void* buf, size_t len, uint64_t call_site) {
  rerun::Session& session = *rerun::Get();
  const Event& e = *session.Serve(api, CallForm::kEntropy, OpKind::kOther, call_site).first;
  if (e.entropy.rc > 0 && static_cast<uint64_t>(e.entropy.rc) != len && e.entropy.requested != len) {
    rerun::Stop(rerun::Verdict::kDiverged, "the program asked " + std::string(api) + " for " + std::to_string(len) +
                                               " bytes where the recording has " + session.oracle().Describe(e) +
                                               " (" + rerun::Site(call_site) + ")");
  }
  size_t n = std::min(len, e.text.size());
  if (buf != nullptr && n > 0) std::memcpy(buf, e.text.data(), n);
  return e.entropy.rc;
}

// Serves a seed: the recorded value wins over the program's, which is what
// makes the re-run repeat.
uint64_t ServeSeed(std::string_view api, uint64_t call_site) {
  return rerun::Get()->Serve(api, CallForm::kSeed, OpKind::kOther, call_site).first->seed.value;
}

// Serves a clock reading (`n` bytes into `bytes`, the call's return value in
// `*rc`) where the recording has one next on this thread; false when it has
// not, or has another clock there, and the program reads the real clock.
bool ServeClock(rerun::Session& session, EntropySource source, uint32_t clock, void* bytes, size_t n,
                int64_t* rc) {
  const Event* served = session.oracle().ServeClock(session.ThreadNumber());
  if (served == nullptr) return false;
  const Event& e = *served;
  session.CheckStopAt(e, EntropySourceName(source));
  session.NoteServed(e);
  if (e.entropy.source != source || e.entropy.flags != clock || e.text.size() != n) return false;
  if (bytes != nullptr) std::memcpy(bytes, e.text.data(), n);
  *rc = e.entropy.rc;
  return true;
}

// A clock reading of the program: served where the recording has one,
// recorded once recording has started (none is kept from before: launchers and
// shells under the preload read clocks without end and never record).
// `bytes` holds what the call wrote; `rc` its return value.
template <typename Real>
int64_t Clock(EntropySource source, uint32_t clock, void* bytes, size_t n, uint64_t site, Real real) {
  Guard g;
  if (!g.outermost() || !ProgramThread()) return real();
  // A clock reading neither decides whether this process re-runs nor starts
  // the session, and serving one never allocates: allocators (the sanitizers',
  // jemalloc's) read the clock while holding their own locks. Recording and
  // serving start at the calls that start them; no reading is kept from before.
  if (rerun::KnownActive()) {
    int64_t rc = 0;
    rerun::Session* session = rerun::Started();
    if (session != nullptr && ServeClock(*session, source, clock, bytes, n, &rc)) return rc;
    return real();
  }
  int64_t rc = real();
  if (Recorder* r = Recorder::Peek()) {
    int saved = errno;
    std::string_view written(static_cast<const char*>(bytes), bytes != nullptr && rc >= 0 ? n : 0);
    r->Append(EventKind::kEntropy, EntropyEvent{source, clock, n, rc}, site, {}, written);
    errno = saved;
  }
  return rc;
}

}  // namespace

int Opened(int fd, const char* path) {
  if (fd >= 0) {
    int saved = errno;
    Mark(fd, DeviceOf(path));
    errno = saved;
  }
  return fd;
}

ssize_t On_getrandom(GetrandomFn real, void* buf, size_t len, unsigned int flags, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Guard g;
  if (Serving(g)) return ServeEntropy("getrandom", buf, len, site);
  ssize_t rc = real(buf, len, flags);
  if (g.outermost()) RecordEntropy(EntropySource::kGetrandom, buf, rc, len, flags, site);
  return rc;
}

int On_getentropy(GetentropyFn real, void* buf, size_t len, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Guard g;
  if (Serving(g)) {
    int64_t rc = ServeEntropy("getentropy", buf, len, site);
    return rc == static_cast<int64_t>(len) ? 0 : -1;
  }
  int rc = real(buf, len);
  if (g.outermost()) {
    RecordEntropy(EntropySource::kGetentropy, buf, rc == 0 ? static_cast<int64_t>(len) : rc, len, 0, site);
  }
  return rc;
}

ssize_t On_read(ReadFn real, int fd, void* buf, size_t count, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Device d = Lookup(fd);
  if (d == Device::kNone) return real(fd, buf, count);
  Guard g;
  if (Serving(g)) return ServeEntropy("read", buf, count, site);
  ssize_t rc = real(fd, buf, count);
  if (g.outermost()) RecordEntropy(SourceOf(d), buf, rc, count, 0, site);
  return rc;
}

ssize_t On___read_chk(ReadChkFn real, int fd, void* buf, size_t n, size_t buflen, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Device d = Lookup(fd);
  if (d == Device::kNone) return real(fd, buf, n, buflen);
  Guard g;
  if (Serving(g)) return ServeEntropy("read", buf, n, site);
  ssize_t rc = real(fd, buf, n, buflen);
  if (g.outermost()) RecordEntropy(SourceOf(d), buf, rc, n, 0, site);
  return rc;
}

size_t On_fread(FreadFn real, void* ptr, size_t size, size_t n, FILE* stream, uint64_t site) {
  if (real == nullptr) return 0;
  Device d = stream != nullptr ? Lookup(fileno(stream)) : Device::kNone;
  if (d == Device::kNone) return real(ptr, size, n, stream);
  Guard g;
  if (Serving(g) && size > 0) {
    int64_t rc = ServeEntropy("fread", ptr, size * n, site);
    return rc > 0 ? static_cast<size_t>(rc) / size : 0;
  }
  size_t got = real(ptr, size, n, stream);
  if (g.outermost()) RecordEntropy(SourceOf(d), ptr, static_cast<int64_t>(got * size), size * n, 0, site);
  return got;
}

FILE* On_fopen(FopenFn real, const char* path, const char* mode, uint64_t) {
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  FILE* f = real(path, mode);
  if (f != nullptr) Opened(fileno(f), path);
  return f;
}

FILE* On_fopen64(FopenFn real, const char* path, const char* mode, uint64_t site) {
  return On_fopen(real, path, mode, site);
}

int On_fclose(FcloseFn real, FILE* stream, uint64_t) {
  if (real == nullptr) {
    errno = ENOSYS;
    return EOF;
  }
  if (stream != nullptr) Mark(fileno(stream), Device::kNone);
  return real(stream);
}

int On_close(CloseFn real, int fd, uint64_t) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Mark(fd, Device::kNone);
  return real(fd);
}

int On___open_2(Open2Fn real, const char* path, int flags, uint64_t) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return Opened(real(path, flags), path);
}

int On___open64_2(Open2Fn real, const char* path, int flags, uint64_t site) {
  return On___open_2(real, path, flags, site);
}

void On_srand(SrandFn real, unsigned int seed, uint64_t site) {
  if (real == nullptr) return;
  Guard g;
  if (Serving(g)) seed = static_cast<unsigned int>(ServeSeed("srand", site));
  real(seed);
  if (g.outermost()) RecordSeed(SeedSource::kSrand, seed, 0, site);
}

void On_srandom(SrandFn real, unsigned int seed, uint64_t site) {
  if (real == nullptr) return;
  Guard g;
  if (Serving(g)) seed = static_cast<unsigned int>(ServeSeed("srandom", site));
  real(seed);
  if (g.outermost()) RecordSeed(SeedSource::kSrandom, seed, 0, site);
}

void On_srand48(Srand48Fn real, long seed, uint64_t site) {
  if (real == nullptr) return;
  Guard g;
  if (Serving(g)) seed = static_cast<long>(ServeSeed("srand48", site));
  real(seed);
  if (g.outermost()) RecordSeed(SeedSource::kOther, static_cast<uint64_t>(seed), 0, site);
}

char* On_initstate(InitstateFn real, unsigned int seed, char* state, size_t n, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  Guard g;
  if (Serving(g)) seed = static_cast<unsigned int>(ServeSeed("initstate", site));
  char* rc = real(seed, state, n);
  if (g.outermost()) RecordSeed(SeedSource::kInitstate, seed, reinterpret_cast<uint64_t>(state), site);
  return rc;
}

int On_rand_r(RandRFn real, unsigned int* seedp, uint64_t site) {
  if (real == nullptr || seedp == nullptr) return real != nullptr ? real(seedp) : 0;
  Guard g;
  bool starts = seedp != t_rand_r_state || *seedp != t_rand_r_after;
  if (starts && Serving(g)) *seedp = static_cast<unsigned int>(ServeSeed("rand_r", site));
  unsigned int before = *seedp;
  int rc = real(seedp);
  if (g.outermost() && starts && !rerun::Active()) {
    RecordSeed(SeedSource::kRandR, before, reinterpret_cast<uint64_t>(seedp), site);
  }
  t_rand_r_state = seedp;
  t_rand_r_after = *seedp;
  return rc;
}

unsigned int On__ZNSt13random_device9_M_getvalEv(RandomDeviceFn real, void* self, uint64_t site) {
  if (real == nullptr) return 0;
  Guard g;
  if (Serving(g)) {
    unsigned int v = 0;
    ServeEntropy("std::random_device", &v, sizeof(v), site);
    return v;
  }
  unsigned int v = real(self);
  if (g.outermost()) RecordEntropy(EntropySource::kRandomDevice, &v, sizeof(v), sizeof(v), 0, site);
  return v;
}

int On_clock_gettime(ClockGettimeFn real, clockid_t clock, struct timespec* tp, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return static_cast<int>(Clock(EntropySource::kClockGettime, static_cast<uint32_t>(clock), tp, sizeof(*tp), site,
                                [&] { return static_cast<int64_t>(real(clock, tp)); }));
}

int On_gettimeofday(GettimeofdayFn real, struct timeval* tv, void* tz, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return static_cast<int>(Clock(EntropySource::kGettimeofday, 0, tv, tv != nullptr ? sizeof(*tv) : 0, site,
                                [&] { return static_cast<int64_t>(real(tv, tz)); }));
}

time_t On_time(TimeFn real, time_t* out, uint64_t site) {
  if (real == nullptr) return static_cast<time_t>(-1);
  time_t value = 0;
  time_t rc = static_cast<time_t>(Clock(EntropySource::kTime, 0, &value, sizeof(value), site,
                                        [&] { return static_cast<int64_t>(value = real(nullptr)); }));
  if (out != nullptr && rc != static_cast<time_t>(-1)) *out = rc;
  return rc;
}

int On_getrusage(GetrusageFn real, int who, struct rusage* usage, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return static_cast<int>(Clock(EntropySource::kGetrusage, static_cast<uint32_t>(who), usage,
                                usage != nullptr ? sizeof(*usage) : 0, site,
                                [&] { return static_cast<int64_t>(real(who, usage)); }));
}

clock_t On_times(TimesFn real, struct tms* buf, uint64_t site) {
  if (real == nullptr) {
    errno = ENOSYS;
    return static_cast<clock_t>(-1);
  }
  return static_cast<clock_t>(Clock(EntropySource::kTimes, 0, buf, buf != nullptr ? sizeof(*buf) : 0, site,
                                    [&] { return static_cast<int64_t>(real(buf)); }));
}

clock_t On_clock(ClockFn real, uint64_t site) {
  if (real == nullptr) return static_cast<clock_t>(-1);
  // The reading is the return value: the event's rc, with no bytes.
  return static_cast<clock_t>(
      Clock(EntropySource::kClock, 0, nullptr, 0, site, [&] { return static_cast<int64_t>(real()); }));
}

}  // namespace replay::interpose::rng
