// call_site.h: return addresses recorded in one process, resolved offline.
//
// A recorded call site is an address in the recorded process. The rank header
// lists the modules that process had loaded (path, load address, size), so the
// address becomes module + offset on any machine; and where that module's file
// is readable here, elfutils (libdwfl) names the function from its symbol
// table and the source file and line from its debug information (in the file,
// or in a separate debug file found by build id). dladdr would answer for this
// process, not the recorded one, so the files are read directly. Nothing here
// fails: what cannot be resolved is left out of the CallSite.
//
// Thread safety: Resolve may be called from several threads; modules are
// opened once per path and cached for the resolver's lifetime.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "replay/check.h"
#include "replay/trace_header.h"
#include "trace/python_sites.h"

namespace replay::analysis {

class SymbolResolver {
 public:
  SymbolResolver();
  ~SymbolResolver();

  CallSite Resolve(uint64_t address, const std::vector<Module>& modules);
  // A recorded call site: a return address, or a site of `python_sites`
  // (trace/python_sites.h) with its Python frames and native address.
  CallSite Resolve(uint64_t call_site, const std::vector<Module>& modules,
                   const std::unordered_map<uint64_t, PythonSite>& python_sites);

  struct Table;  // one module's function symbols (call_site.cpp)

 private:
  const Table& Load(const std::string& path);

  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Table>> tables_;
};

// The demangled form of an ELF symbol name without its parameter list:
// "ns::Train(Options const&)" -> "ns::Train".
std::string ReadableSymbol(const std::string& mangled);

}  // namespace replay::analysis
