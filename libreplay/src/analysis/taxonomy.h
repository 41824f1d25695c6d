// taxonomy.h: what each finding means in the terms of the fault study the
// project reports against (Liu et al., TOSEM 2023): the symptom categories it
// belongs to and the fix pattern that most often resolved such faults.
//
// The table lives in taxonomy.cpp and mirrors the project's taxonomy notes;
// the two change together. Stateless; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "replay/check.h"
#include "replay/event.h"

namespace replay::analysis {

struct Advice {
  std::vector<std::string> categories;
  std::string fix;
};

Advice AdviceFor(FindingKind kind);
// Fatal signals and error codes differ in what usually fixes them.
Advice AdviceForSignal(int signo);
Advice AdviceForError(ErrorSource source, bool abort);

}  // namespace replay::analysis
