#include "cuda_imports.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_hook.h"
#include "dlsym_hook.h"
#include "inert.h"
#include "log.h"
#include "replay/settings.h"

namespace replay::interpose::cuda {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "cuda_imports.cpp knows the relocations of x86-64 and AArch64 only"
#endif

// Objects patched since objects were last unloaded. Fixed, so that a lookup
// never allocates; past the end new objects are left alone.
constexpr size_t kMaxObjects = 4096;

struct Done {
  std::mutex mu;  // never held across a call into the dynamic linker
  const link_map* objects[kMaxObjects] = {};
  size_t count = 0;
  unsigned long long unloads = 0;  // dlpi_subs when `objects` was last valid
};
// Constant-initialised: the preload's constructor may run before this file's.
constinit Done g_done;
constinit std::atomic<const link_map*> g_self{nullptr};  // the preload; set once patching may start

// A store into one object's table.
struct Write {
  void** slot;
  void* wrapper;
  const char* name;
};

const link_map* Owner(const void* p) {
  Dl_info info{};
  link_map* lm = nullptr;
  if (p == nullptr || dladdr1(p, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) == 0) return nullptr;
  return lm;
}

// Pointers in the dynamic section are addresses once the dynamic linker has
// relocated them in place, offsets from the load address where it does not.
template <typename T>
const T* At(const link_map* lm, ElfW(Addr) p) {
  return reinterpret_cast<const T*>(p < lm->l_addr ? lm->l_addr + p : p);
}

unsigned long long Unloads() {
  unsigned long long subs = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          *static_cast<unsigned long long*>(out) = info->dlpi_subs;
        }
        return 1;
      },
      &subs);
  return subs;
}

// True when `lm` is ours to patch now: not patched since objects were last
// unloaded (an address may then hold another object), not the preload.
bool Claim(const link_map* lm, unsigned long long unloads) {
  if (lm == nullptr || lm == g_self.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(g_done.mu);
  if (unloads != g_done.unloads) {
    g_done.count = 0;
    g_done.unloads = unloads;
  }
  for (size_t i = 0; i < g_done.count; ++i) {
    if (g_done.objects[i] == lm) return false;
  }
  if (g_done.count == kMaxObjects) return false;
  g_done.objects[g_done.count++] = lm;
  return true;
}

// The function the dynamic linker binds `name` to for an object whose entry
// it has not filled yet (lazy binding): the global scope first, then the
// object's own dependencies.
void* Lookup(const char* name, void* scope) {
  void* p = RealDlsym(RTLD_DEFAULT, name);
  if (p == nullptr && scope != nullptr) p = RealDlsym(scope, name);
  if (p == nullptr) dlerror();  // leave no error of ours for the application to read
  return p;
}

// What the object's dynamic section says.
struct Dynamic {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  const char* jmprel = nullptr;
  size_t pltrelsz = 0;
  bool plt_rela = false;
  const char* rela = nullptr;
  size_t relasz = 0;
  size_t relaent = sizeof(ElfW(Rela));
  size_t relacount = 0;  // leading relative relocations, which name no symbol
  std::vector<const char*> needed;
};

Dynamic ReadDynamic(const link_map* lm) {
  Dynamic d;
  std::vector<ElfW(Xword)> needed;
  for (const ElfW(Dyn)* e = lm->l_ld; e != nullptr && e->d_tag != DT_NULL; ++e) {
    switch (e->d_tag) {
      case DT_SYMTAB: d.symtab = At<ElfW(Sym)>(lm, e->d_un.d_ptr); break;
      case DT_STRTAB: d.strtab = At<char>(lm, e->d_un.d_ptr); break;
      case DT_STRSZ: d.strsz = e->d_un.d_val; break;
      case DT_JMPREL: d.jmprel = At<char>(lm, e->d_un.d_ptr); break;
      case DT_PLTRELSZ: d.pltrelsz = e->d_un.d_val; break;
      case DT_PLTREL: d.plt_rela = e->d_un.d_val == DT_RELA; break;
      case DT_RELA: d.rela = At<char>(lm, e->d_un.d_ptr); break;
      case DT_RELASZ: d.relasz = e->d_un.d_val; break;
      case DT_RELAENT: d.relaent = e->d_un.d_val; break;
      case DT_RELACOUNT: d.relacount = e->d_un.d_val; break;
      case DT_NEEDED: needed.push_back(e->d_un.d_val); break;
      default: break;
    }
  }
  if (d.symtab == nullptr || d.strtab == nullptr) return Dynamic{};
  for (ElfW(Xword) off : needed) {
    if (off < d.strsz) d.needed.push_back(d.strtab + off);
  }
  if (d.relaent < sizeof(ElfW(Rela))) d.relaent = sizeof(ElfW(Rela));
  return d;
}

// The stores that point `lm`'s entries for wrapped driver functions at their
// wrappers.
void Plan(const link_map* lm, const Dynamic& d, void* scope, std::vector<Write>* out) {
  const link_map* self = g_self.load(std::memory_order_acquire);
  auto scan = [&](const char* table, size_t size, size_t entry, size_t skip) {
    if (table == nullptr || skip > size / entry) return;
    for (size_t off = skip * entry; off + sizeof(ElfW(Rela)) <= size; off += entry) {
      const auto* r = reinterpret_cast<const ElfW(Rela)*>(table + off);
      uint32_t type = ELF64_R_TYPE(r->r_info);
      size_t sym = ELF64_R_SYM(r->r_info);
      if ((type != kJumpSlot && type != kGlobDat) || sym == 0) continue;
      const ElfW(Sym)& s = d.symtab[sym];
      if (s.st_shndx != SHN_UNDEF || s.st_name >= d.strsz) continue;
      const char* name = d.strtab + s.st_name;
      if (!Wraps(name)) continue;
      auto** slot = reinterpret_cast<void**>(lm->l_addr + r->r_offset);
      void* now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
      const link_map* owner = Owner(now);
      if (owner == self) continue;  // a wrapper already
      // Bound: keep what the dynamic linker chose. Not yet (the entry leads
      // back into the object's own PLT): look the name up as it would.
      void* real = owner != nullptr && owner != lm ? now : Lookup(name, scope);
      if (real == nullptr || Owner(real) == self) continue;
      if (void* w = WrapperForImport(name, real)) out->push_back({slot, w, name});
    }
  };
  if (d.plt_rela) scan(d.jmprel, d.pltrelsz, sizeof(ElfW(Rela)), 0);
  scan(d.rela, d.relasz, d.relaent, d.relacount);
}

// The protection of the mapping holding each page, from /proc/self/maps: -1
// where none does.
std::vector<int> Protections(const std::vector<uintptr_t>& pages) {
  std::vector<int> prot(pages.size(), -1);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0;
    unsigned long long hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &lo, &hi, perms) != 3) continue;
    int p = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
    for (size_t i = 0; i < pages.size(); ++i) {
      if (pages[i] >= lo && pages[i] < hi) prot[i] = p;
    }
  }
  return prot;
}

// Makes the stores: directly where the page is writable, else with the page
// made writable for the store and given back its protection.
void Apply(const std::vector<Write>& writes) {
  const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<uintptr_t> pages;
  for (const Write& w : writes) pages.push_back(reinterpret_cast<uintptr_t>(w.slot) & ~(page_size - 1));
  std::vector<int> prot = Protections(pages);
  for (size_t i = 0; i < writes.size(); ++i) {
    if (prot[i] < 0 || (prot[i] & PROT_READ) == 0) continue;
    void* page = reinterpret_cast<void*>(pages[i]);
    bool locked = (prot[i] & PROT_WRITE) == 0;
    if (locked && mprotect(page, page_size, prot[i] | PROT_WRITE) != 0) {
      WarnOnce("cuda-imports-mprotect", std::string("cannot make the import of ") + writes[i].name +
                                            " writable; calls through it are not recorded");
      continue;
    }
    __atomic_store_n(writes[i].slot, writes[i].wrapper, __ATOMIC_RELEASE);
    if (locked) mprotect(page, page_size, prot[i]);
  }
}

// Patches `lm` unless done before; what it says it needs, for the caller to
// follow.
std::vector<const char*> PatchOne(const link_map* lm, void* scope, unsigned long long unloads) {
  if (!Claim(lm, unloads)) return {};
  Dynamic d = ReadDynamic(lm);
  std::vector<Write> writes;
  Plan(lm, d, scope, &writes);
  if (!writes.empty()) Apply(writes);
  return d.needed;
}

// Patches `first` and the objects it was loaded with, each once.
void PatchFrom(const link_map* first, void* scope, unsigned long long unloads) {
  std::vector<const link_map*> todo{first};
  while (!todo.empty()) {
    const link_map* lm = todo.back();
    todo.pop_back();
    // Its dependencies are loaded and relocated, since it is. RTLD_NOLOAD
    // finds them by name among the loaded objects and loads nothing.
    for (const char* name : PatchOne(lm, scope, unloads)) {
      void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
      if (h == nullptr) {
        dlerror();
        continue;
      }
      link_map* dep = nullptr;
      if (dlinfo(h, RTLD_DI_LINKMAP, &dep) == 0 && dep != nullptr) todo.push_back(dep);
      dlclose(h);
    }
  }
}

bool Enabled() { return WrapsDriver() && Settings::FromEnvironment().cuda_linked != "0"; }

}  // namespace

void PatchLinkedObjects() {
  try {
    if (!Enabled()) return;
    const link_map* self = Owner(reinterpret_cast<const void*>(&PatchLinkedObjects));
    if (self == nullptr) return;
    g_self.store(self, std::memory_order_release);
    // Everything loaded so far was relocated before any constructor ran.
    void* main = dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
    link_map* lm = nullptr;
    if (main == nullptr || dlinfo(main, RTLD_DI_LINKMAP, &lm) != 0) lm = nullptr;
    unsigned long long unloads = Unloads();
    for (; lm != nullptr; lm = lm->l_next) PatchOne(lm, nullptr, unloads);
    if (main != nullptr) dlclose(main);
    dlerror();
  } catch (...) {
    WarnOnce("cuda-imports", "could not look at the program's imports of the CUDA driver; calls through them "
                             "are not recorded");
  }
}

void PatchObjectOf(void* handle) noexcept {
  if (g_self.load(std::memory_order_acquire) == nullptr) return;
  try {
    link_map* lm = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr) {
      dlerror();
      return;
    }
    PatchFrom(lm, handle, Unloads());
  } catch (...) {
  }
}

}  // namespace replay::interpose::cuda
