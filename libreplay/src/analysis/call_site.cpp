#include "analysis/call_site.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>

#include <cstdlib>
#include <cstring>

namespace replay::analysis {

// One module file opened with elfutils: its symbol table and, where the file
// or a separate debug file (by build id, /usr/lib/debug) has them, its DWARF
// line tables. Reported at its link-time addresses, so a module-relative
// offset is looked up at `start + offset`.
struct SymbolResolver::Table {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;
  Dwarf_Addr start = 0;  // where the module's first loadable segment is linked

  ~Table() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

namespace {

char* g_debuginfo_path = nullptr;

const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    &g_debuginfo_path,
};

}  // namespace

SymbolResolver::SymbolResolver() = default;
SymbolResolver::~SymbolResolver() = default;

const SymbolResolver::Table& SymbolResolver::Load(const std::string& path) {
  auto& slot = tables_[path];
  if (slot) return *slot;
  slot = std::make_unique<Table>();
  Table& t = *slot;
  t.dwfl = dwfl_begin(&kCallbacks);
  if (t.dwfl == nullptr) return t;
  dwfl_report_begin(t.dwfl);
  t.module = dwfl_report_elf(t.dwfl, path.c_str(), path.c_str(), -1, 0, false);
  dwfl_report_end(t.dwfl, nullptr, nullptr);
  if (t.module != nullptr) {
    Dwarf_Addr end = 0;
    dwfl_module_info(t.module, nullptr, &t.start, &end, nullptr, nullptr, nullptr, nullptr);
  }
  return t;
}

CallSite SymbolResolver::Resolve(uint64_t address, const std::vector<Module>& modules) {
  CallSite site;
  site.address = address;
  if (address == 0) return site;
  const Module* mod = nullptr;
  for (const Module& m : modules) {
    if (address >= m.base && address - m.base < m.size) {
      mod = &m;
      break;
    }
  }
  if (mod == nullptr) return site;
  site.module = mod->path;
  site.offset = address - mod->base;
  if (site.offset == 0) return site;
  std::lock_guard<std::mutex> lock(mu_);
  const Table& t = Load(mod->path);
  if (t.module == nullptr) return site;
  // A return address points after the call; the call itself is one byte back.
  const Dwarf_Addr call = t.start + site.offset - 1;
  GElf_Off symbol_offset = 0;
  GElf_Sym sym;
  const char* name =
      dwfl_module_addrinfo(t.module, call, &symbol_offset, &sym, nullptr, nullptr, nullptr);
  if (name != nullptr && GELF_ST_TYPE(sym.st_info) == STT_FUNC) {
    site.symbol = ReadableSymbol(name);
    site.symbol_offset = symbol_offset + 1;
  }
  if (Dwfl_Line* line = dwfl_module_getsrc(t.module, call)) {
    int lineno = 0;
    if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      // Line tables name files relative to the compilation's directory.
      const char* dir = file[0] == '/' ? nullptr : dwfl_line_comp_dir(line);
      site.file = dir != nullptr && dir[0] != '\0' ? std::string(dir) + "/" + file : std::string(file);
      site.line = lineno;
    }
  }
  return site;
}

CallSite SymbolResolver::Resolve(uint64_t call_site, const std::vector<Module>& modules,
                                 const std::unordered_map<uint64_t, PythonSite>& python_sites) {
  if (!IsPythonSite(call_site)) return Resolve(call_site, modules);
  auto it = python_sites.find(call_site & ~kPythonSiteTag);
  if (it == python_sites.end()) return CallSite{};
  CallSite site = Resolve(it->second.native, modules);
  site.python = it->second.frames;
  return site;
}

std::string ReadableSymbol(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) {
    std::free(d);
    return mangled;
  }
  std::string s(d);
  std::free(d);
  // Drop the parameter list (and any qualifiers after it): the last balanced
  // "(...)" that is not part of a name like "(anonymous namespace)".
  size_t end = s.size();
  while (end > 0 && s[end - 1] != ')') --end;
  if (end == 0) return s;
  int depth = 0;
  for (size_t i = end; i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      if (s.compare(i, 21, "(anonymous namespace)") == 0) return s;
      return s.substr(0, i);
    }
  }
  return s;
}

}  // namespace replay::analysis
