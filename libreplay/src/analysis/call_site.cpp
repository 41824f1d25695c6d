#include "analysis/call_site.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace replay::analysis {

struct SymbolResolver::Table {
  struct Symbol {
    uint64_t value;
    uint64_t size;
    std::string name;
  };
  bool ok = false;
  uint64_t min_vaddr = 0;        // of the first loadable segment: the module's base maps here
  std::vector<Symbol> symbols;   // functions, by value
};

namespace {

// A read-only mapping of a whole file, unmapped on destruction.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    close(fd);
  }
  ~Mapping() {
    if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  // A pointer to `n` bytes at `offset`, or null when they are not all in the file.
  const uint8_t* At(uint64_t offset, uint64_t n) const {
    if (data_ == nullptr || offset > size_ || n > size_ - offset) return nullptr;
    return data_ + offset;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
bool ReadAt(const Mapping& m, uint64_t offset, T* out) {
  const uint8_t* p = m.At(offset, sizeof(T));
  if (p == nullptr) return false;
  std::memcpy(out, p, sizeof(T));
  return true;
}


void ReadSymbols(const Mapping& m, const Elf64_Ehdr& eh, uint32_t type,
                 std::vector<SymbolResolver::Table::Symbol>* out) {
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!ReadAt(m, eh.e_shoff + uint64_t{i} * eh.e_shentsize, &sh) || sh.sh_type != type) continue;
    Elf64_Shdr strings;
    if (sh.sh_link >= eh.e_shnum ||
        !ReadAt(m, eh.e_shoff + uint64_t{sh.sh_link} * eh.e_shentsize, &strings)) {
      continue;
    }
    const uint8_t* str = m.At(strings.sh_offset, strings.sh_size);
    if (str == nullptr || sh.sh_entsize < sizeof(Elf64_Sym)) continue;
    uint64_t n = sh.sh_size / sh.sh_entsize;
    for (uint64_t k = 0; k < n; ++k) {
      Elf64_Sym sym;
      if (!ReadAt(m, sh.sh_offset + k * sh.sh_entsize, &sym)) break;
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0 || sym.st_shndx == SHN_UNDEF) continue;
      if (sym.st_name >= strings.sh_size) continue;
      const char* name = reinterpret_cast<const char*>(str + sym.st_name);
      size_t len = strnlen(name, strings.sh_size - sym.st_name);
      out->push_back({sym.st_value, sym.st_size, std::string(name, len)});
    }
  }
}

}  // namespace

SymbolResolver::SymbolResolver() = default;
SymbolResolver::~SymbolResolver() = default;

const SymbolResolver::Table& SymbolResolver::Load(const std::string& path) {
  auto& slot = tables_[path];
  if (slot) return *slot;
  slot = std::make_unique<Table>();
  Table& t = *slot;
  Mapping m(path);
  Elf64_Ehdr eh;
  if (!ReadAt(m, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize < sizeof(Elf64_Phdr) ||
      eh.e_shentsize < sizeof(Elf64_Shdr)) {
    return t;
  }
  t.min_vaddr = UINT64_MAX;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (ReadAt(m, eh.e_phoff + uint64_t{i} * eh.e_phentsize, &ph) && ph.p_type == PT_LOAD) {
      t.min_vaddr = std::min<uint64_t>(t.min_vaddr, ph.p_vaddr & ~uint64_t{0xfff});
    }
  }
  if (t.min_vaddr == UINT64_MAX) t.min_vaddr = 0;
  ReadSymbols(m, eh, SHT_SYMTAB, &t.symbols);
  if (t.symbols.empty()) ReadSymbols(m, eh, SHT_DYNSYM, &t.symbols);
  std::sort(t.symbols.begin(), t.symbols.end(),
            [](const Table::Symbol& a, const Table::Symbol& b) { return a.value < b.value; });
  t.ok = true;
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
  std::lock_guard<std::mutex> lock(mu_);
  const Table& t = Load(mod->path);
  if (!t.ok || t.symbols.empty()) return site;
  // A return address points after the call; the call itself is one byte back.
  uint64_t vaddr = site.offset - 1 + t.min_vaddr;
  auto it = std::upper_bound(t.symbols.begin(), t.symbols.end(), vaddr,
                             [](uint64_t v, const Table::Symbol& s) { return v < s.value; });
  if (it == t.symbols.begin()) return site;
  --it;
  if (it->size != 0 && vaddr >= it->value + it->size) return site;
  site.symbol = ReadableSymbol(it->name);
  site.symbol_offset = vaddr + 1 - it->value;
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
