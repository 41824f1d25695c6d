// signals.h: fatal signals leave a complete trace, and the program's own
// handlers still run.
//
// Once recording starts, the preload installs a handler for the signals that
// end jobs (SIGTERM, SIGINT, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL).
// It records the signal, closes the trace when the signal is going to end the
// process, then passes the signal on to whatever handler the program set (its
// own, or the default action). sigaction() and signal() are intercepted so a
// handler the program installs later is remembered and chained, not lost, and
// the program still sees its own handler when it asks.
#pragma once

namespace replay::interpose {

// Installs the handlers; called once when recording starts.
void InstallSignalHandlers();

}  // namespace replay::interpose
