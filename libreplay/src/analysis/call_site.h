// call_site.h: return addresses recorded in one process, resolved offline.
//
// A recorded call site is an address in the recorded process. The rank header
// lists the modules that process had loaded (path, load address, size), so the
// address becomes module + offset on any machine; and where that module's file
// is readable here, its ELF symbol table (.symtab, else .dynsym) names the
// function. dladdr would answer for this process, not the recorded one, so the
// symbol tables are read directly. Nothing here fails: what cannot be resolved
// is left out of the CallSite.
//
// Thread safety: Resolve may be called from several threads; symbol tables are
// read once per path and cached for the resolver's lifetime.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "replay/check.h"
#include "replay/trace_header.h"

namespace replay::analysis {

class SymbolResolver {
 public:
  SymbolResolver();
  ~SymbolResolver();

  CallSite Resolve(uint64_t address, const std::vector<Module>& modules);

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
