#include "analysis/call_site.h"

#include <dlfcn.h>

#include <catch2/catch.hpp>

namespace replay::analysis {

// A function of this binary to find by address; not inlined, not static, so
// that it has a symbol of its own.
__attribute__((noinline)) int CallSiteTestTarget(int x) { return x * 3 + 1; }

namespace {

// The module holding `address` in this process, as the recorder lists it.
Module ModuleOf(const void* address) {
  Dl_info info{};
  REQUIRE(dladdr(address, &info) != 0);
  return Module{info.dli_fname, reinterpret_cast<uint64_t>(info.dli_fbase), 64u << 20};
}

TEST_CASE("call sites resolve to module, offset, function and source line from the module's debug information", "[analysis]") {
  auto target = reinterpret_cast<uint64_t>(&CallSiteTestTarget);
  Module m = ModuleOf(reinterpret_cast<const void*>(target));
  SymbolResolver resolver;
  // A return address points just past a call inside the function.
  CallSite s = resolver.Resolve(target + 5, {Module{"/nonexistent", 0x1000, 0x1000}, m});
  CHECK(s.module == m.path);
  CHECK(s.offset == target + 5 - m.base);
  CHECK(s.symbol == "replay::analysis::CallSiteTestTarget");
  CHECK(s.symbol_offset == 5);
  // Built with debug information: the line is in this file, in the function.
  CHECK(s.file.ends_with("tests/analysis/call_site_test.cpp"));
  CHECK(s.line == 11);
  CHECK(FormatCallSite(s).find("replay::analysis::CallSiteTestTarget+0x5 at call_site_test.cpp:11 (") == 0);
}

TEST_CASE("a call site with Python frames names the innermost three, then the native site", "[analysis]") {
  CallSite s;
  s.address = 0x1234;
  s.python = {{"step", "/job/train.py", 42}, {"epoch", "/job/train.py", 80}, {"main", "/job/run.py", 7},
              {"<module>", "/job/run.py", 9}};
  CHECK(FormatCallSite(s) == "step (train.py:42) < epoch (train.py:80) < main (run.py:7) via 0x1234");
  s.address = 0;
  CHECK(s.known());
  CHECK(FormatCallSite(s) == "step (train.py:42) < epoch (train.py:80) < main (run.py:7)");
}

TEST_CASE("call sites outside every module, or in unreadable ones, keep what is known", "[analysis]") {
  SymbolResolver resolver;
  CallSite none = resolver.Resolve(0x1234, {});
  CHECK(none.module.empty());
  CHECK(FormatCallSite(none) == "0x1234");
  CallSite unreadable = resolver.Resolve(0x2010, {Module{"/nonexistent/libfoo.so", 0x2000, 0x100}});
  CHECK(unreadable.module == "/nonexistent/libfoo.so");
  CHECK(unreadable.symbol.empty());
  CHECK(FormatCallSite(unreadable) == "libfoo.so+0x10");
  CHECK(FormatCallSite(CallSite{}) == "unknown");
}

TEST_CASE("symbol names are demangled without their parameter lists", "[analysis]") {
  CHECK(ReadableSymbol("_ZN9mpi_train12_GLOBAL__N_15TrainERKNS_7OptionsE") ==
        "mpi_train::(anonymous namespace)::Train");
  CHECK(ReadableSymbol("main") == "main");
  CHECK(ReadableSymbol("_ZNK3Foo3barEv") == "Foo::bar");
}

}  // namespace
}  // namespace replay::analysis
