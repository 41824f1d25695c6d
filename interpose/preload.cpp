// preload.cpp: what happens when the preload is loaded and when recording
// starts; replay_mark.
//
// Loading does almost nothing: it names the intercepted functions for the
// recorder and reads whether the process re-runs a recording
// (replay/session.h). Recording starts at the first recorded call (see
// Recorder::Get), which then installs signal handlers and fork hooks here.
// Told to stay out of the way (inert.h), loading does nothing at all.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "api.h"
#ifdef REPLAY_HAVE_DLSYM_HOOK
#include "cuda_imports.h"
#include "cuda_record.h"
#endif
#include "guard.h"
#include "inert.h"
#ifdef REPLAY_HAVE_NCCL
#include "nccl_record.h"
#endif
#include "record/recorder.h"
#include "replay/session.h"
#include "signals.h"

#define REPLAY_EXPORT __attribute__((visibility("default")))

namespace replay::interpose {

constinit thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
constinit thread_local signed char t_program_thread __attribute__((tls_model("initial-exec"))) = -1;

bool IsMainThread() { return syscall(SYS_gettid) == getpid(); }
constinit thread_local const void* t_nccl_launch __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

void InChild() { Recorder::AbandonInChild(); }

void OnActivation() {
  InstallSignalHandlers();
  pthread_atfork(nullptr, nullptr, InChild);
#ifdef REPLAY_HAVE_NCCL
  nccl::CheckForStaticNccl(/*at_exit=*/false);
#endif
}

#ifdef REPLAY_HAVE_NCCL
// A program whose NCCL is linked in statically never calls the wrappers, so
// recording may never start: look once more at exit.
__attribute__((destructor)) void CheckNcclAtExit() {
  if (!Inert()) nccl::CheckForStaticNccl(/*at_exit=*/true);
}
#endif

__attribute__((constructor)) void LoadPreload() {
  if (Inert()) return;
  rerun::Detect();
  Recorder::SetApiNames(AllApiNames());
  Recorder::SetActivationHook(OnActivation);
#ifdef REPLAY_HAVE_DLSYM_HOOK
  Recorder::SetCloseHook(cuda::FlushKernels);
  cuda::PatchLinkedObjects();
#endif
}

}  // namespace
}  // namespace replay::interpose

extern "C" REPLAY_EXPORT __attribute__((weak)) void replay_mark(const char* name, int64_t value) noexcept {
  using namespace replay;
  interpose::Guard guard;
  if (!guard.outermost()) return;
  try {
    std::string_view n = name != nullptr ? std::string_view(name, strnlen(name, 63)) : std::string_view();
    if (rerun::Active()) {
      // Re-running: the mark is checked against the recording (--stop-at does not stop at one).
      if (rerun::Session* s = rerun::Get()) {
        const Event& e = *s->Serve("replay_mark", CallForm::kMark, OpKind::kOther,
                                   reinterpret_cast<uint64_t>(__builtin_return_address(0)), /*check_stop=*/false)
                              .first;
        if (e.text != n || e.mark.value != value) {
          rerun::Stop(rerun::Verdict::kDiverged, "the program marked " + std::string(n) + "=" +
                                                     std::to_string(value) + " where the recording has " +
                                                     s->oracle().Describe(e));
        }
      }
      return;
    }
    Recorder* r = Recorder::Get();
    if (r == nullptr) return;
    r->Append(EventKind::kMark, MarkEvent{value}, reinterpret_cast<uint64_t>(__builtin_return_address(0)), {}, n);
    r->writer().NoteMark();
  } catch (...) {
  }
}

// _exit and _Exit end the process without exit handlers, often from a signal
// handler: close the trace first (bounded, async-signal-safe), then go.
namespace {
using ExitFn = void (*)(int);
// Resolved when the preload loads: dlsym is not safe in a signal handler.
ExitFn g_real_exit = nullptr;
ExitFn g_real_Exit = nullptr;

__attribute__((constructor)) void ResolveExits() {
  g_real_exit = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_exit"));
  g_real_Exit = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_Exit"));
}

[[noreturn]] void ExitThrough(ExitFn real, int status) {
  replay::Recorder::CloseBeforeExit();
  if (real != nullptr) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
}  // namespace

extern "C" REPLAY_EXPORT void _exit(int status) { ExitThrough(g_real_exit, status); }
extern "C" REPLAY_EXPORT void _Exit(int status) { ExitThrough(g_real_Exit, status); }
