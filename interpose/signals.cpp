#include "signals.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "record/recorder.h"

#define REPLAY_EXPORT __attribute__((visibility("default")))

namespace replay::interpose {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

SigactionFn RealSigaction() {
  static std::atomic<void*> p{nullptr};
  void* f = p.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = dlsym(RTLD_NEXT, "sigaction");
    p.store(f, std::memory_order_release);
  }
  return reinterpret_cast<SigactionFn>(f);
}

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};

bool Watched(int signo) {
  for (int s : kSignals) {
    if (s == signo) return true;
  }
  return false;
}

// What the program wants for each watched signal (its handler, or the
// disposition it had before ours went in).
struct sigaction g_program[NSIG];
std::atomic<bool> g_installed{false};
std::atomic<int> g_in_handler{0};

bool IsFaultSignal(int signo) {
  return signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL;
}

void OurHandler(int signo, siginfo_t* info, void* context) {
  int saved_errno = errno;
  const struct sigaction& program = g_program[signo];
  bool program_handles = (program.sa_flags & SA_SIGINFO) != 0
                             ? program.sa_sigaction != nullptr
                             : (program.sa_handler != SIG_DFL && program.sa_handler != SIG_IGN);
  bool ignored = (program.sa_flags & SA_SIGINFO) == 0 && program.sa_handler == SIG_IGN;
  // Faults and aborts end the process whatever handler runs (a handler that
  // prints a backtrace then re-raises is the norm); other signals end it only
  // by their default action.
  bool fatal = IsFaultSignal(signo) || signo == SIGABRT || (!program_handles && !ignored);
  if (g_in_handler.fetch_add(1) == 0) {
    uint64_t address = 0;
    if (info != nullptr && IsFaultSignal(signo)) address = reinterpret_cast<uint64_t>(info->si_addr);
    Recorder::RecordSignal(signo, info != nullptr ? info->si_code : 0, address, fatal);
  }
  g_in_handler.fetch_sub(1);
  errno = saved_errno;

  if (ignored) return;
  if (program_handles) {
    struct sigaction copy = program;
    if ((program.sa_flags & SA_RESETHAND) != 0) {
      g_program[signo].sa_handler = SIG_DFL;
      g_program[signo].sa_flags &= ~SA_SIGINFO;
    }
    if ((copy.sa_flags & SA_SIGINFO) != 0) {
      copy.sa_sigaction(signo, info, context);
    } else {
      copy.sa_handler(signo);
    }
    return;
  }
  // The default action: take our handler out and let the signal happen again.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  RealSigaction()(signo, &dfl, nullptr);
  if (IsFaultSignal(signo) && info != nullptr && info->si_code > 0) {
    return;  // a real fault: returning re-executes the instruction, which now kills
  }
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signo);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(signo);
}

struct sigaction OurAction() {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OurHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  return sa;
}

}  // namespace

void InstallSignalHandlers() {
  SigactionFn real = RealSigaction();
  if (real == nullptr || g_installed.exchange(true)) return;
  struct sigaction ours = OurAction();
  for (int s : kSignals) {
    struct sigaction old;
    if (real(s, nullptr, &old) != 0) continue;
    g_program[s] = old;
    real(s, &ours, nullptr);
  }
}

}  // namespace replay::interpose

using replay::interpose::g_installed;
using replay::interpose::g_program;
using replay::interpose::RealSigaction;
using replay::interpose::Watched;

extern "C" REPLAY_EXPORT int sigaction(int signo, const struct sigaction* act,
                                       struct sigaction* oldact) noexcept {
  auto real = RealSigaction();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (!g_installed.load(std::memory_order_acquire) || signo <= 0 || signo >= NSIG || !Watched(signo)) {
    return real(signo, act, oldact);
  }
  // Ours stays installed; the program's wish is remembered and honoured by chaining.
  if (act != nullptr) {
    struct sigaction probe;
    if (real(signo, nullptr, &probe) != 0) return -1;  // invalid signal: same error as without us
  }
  if (oldact != nullptr) *oldact = g_program[signo];
  if (act != nullptr) g_program[signo] = *act;
  return 0;
}

extern "C" REPLAY_EXPORT sighandler_t signal(int signo, sighandler_t handler) noexcept {
  struct sigaction act, old;
  memset(&act, 0, sizeof(act));
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  if (sigaction(signo, &act, &old) != 0) return SIG_ERR;
  if ((old.sa_flags & SA_SIGINFO) == 0) return old.sa_handler;
  sighandler_t h;  // the program installed a three-argument handler; hand back its address
  static_assert(sizeof(h) == sizeof(old.sa_sigaction));
  memcpy(&h, &old.sa_sigaction, sizeof(h));
  return h;
}
