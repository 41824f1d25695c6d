#include "record/program_identity.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <unistd.h>

#include <cstring>

namespace replay {
namespace {

// Separators of the environment encoding: ASCII record and unit separators.
constexpr char kRecordSep = '\x1e';
constexpr char kUnitSep = '\x1f';

std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

// The NT_GNU_BUILD_ID note of the main program (the first object the dynamic
// loader lists), read from its loaded PT_NOTE segments.
int FindBuildId(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::string*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align >= 8 ? 8 : 4;
    auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof(note));
      const unsigned char* name = p + sizeof(note);
      const unsigned char* desc = name + ((note.n_namesz + align - 1) & ~(align - 1));
      const unsigned char* next = desc + ((note.n_descsz + align - 1) & ~(align - 1));
      if (next > end || next <= p) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        *out = Hex(desc, note.n_descsz);
        return 1;
      }
      p = next;
    }
  }
  return 1;  // only the main program
}

// The process's arguments, from /proc (what the kernel holds, whatever
// libraries did to argv since), with plain reads: no stream objects.
std::vector<std::string> Arguments() {
  std::vector<std::string> out;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    out.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool SameArgs(const std::vector<std::string>& argv, const std::vector<std::string>& args) {
  return argv.size() == args.size() + 1 && std::equal(args.begin(), args.end(), argv.begin() + 1);
}

std::vector<std::string> Tail(const std::vector<std::string>& argv) {
  return argv.empty() ? argv : std::vector<std::string>(argv.begin() + 1, argv.end());
}

bool SameExecutable(const ProgramIdentity& process, const ProgramIdentity& recorded) {
  if (!process.build_id.empty() && process.build_id == recorded.build_id) return true;
  if (!recorded.executable.empty()) return Basename(process.executable) == Basename(recorded.executable);
  // A trace without the executable: the name it was started by.
  if (recorded.argv.empty()) return false;
  std::string name = Basename(recorded.argv[0]);
  return Basename(process.executable) == name || (!process.argv.empty() && Basename(process.argv[0]) == name);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::string ProgramIdentity::Describe() const {
  std::string s = executable.empty() ? "(executable not recorded)" : executable;
  if (!build_id.empty()) s += " (build id " + build_id.substr(0, 16) + ")";
  if (!argv.empty()) s += " run as `" + Join(argv) + "`";
  return s;
}

std::string ExecutablePath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string ExecutableBuildId() {
  std::string id;
  dl_iterate_phdr(FindBuildId, &id);
  return id;
}

ProgramIdentity ThisProcess() { return ProgramIdentity{ExecutablePath(), ExecutableBuildId(), Arguments()}; }

bool RunsRecordedProgram(const ProgramIdentity& process, const ProgramIdentity& recorded,
                         const std::vector<std::string>& given_args) {
  if (!SameExecutable(process, recorded)) return false;
  return SameArgs(process.argv, Tail(recorded.argv)) || SameArgs(process.argv, given_args);
}

std::string WhyNotRecordedProgram(const ProgramIdentity& process, const ProgramIdentity& recorded,
                                  const std::vector<std::string>& given_args) {
  if (!SameExecutable(process, recorded)) return "another executable";
  if (!SameArgs(process.argv, Tail(recorded.argv)) && !SameArgs(process.argv, given_args)) {
    return "other arguments";
  }
  return "";
}

std::string EncodeArgs(const std::vector<std::string>& args) {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) s.push_back(kUnitSep);
    s += args[i];
  }
  return s;
}

std::vector<std::string> DecodeArgs(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t end = text.find(kUnitSep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

std::string EncodeIdentities(const std::vector<ProgramIdentity>& identities) {
  std::string s;
  for (size_t i = 0; i < identities.size(); ++i) {
    const ProgramIdentity& id = identities[i];
    if (i > 0) s.push_back(kRecordSep);
    s += id.executable;
    s.push_back(kUnitSep);
    s += id.build_id;
    s.push_back(kUnitSep);
    s += EncodeArgs(id.argv);
  }
  return s;
}

std::vector<ProgramIdentity> DecodeIdentities(std::string_view text) {
  std::vector<ProgramIdentity> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(kRecordSep, start);
    std::string_view rec = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    std::vector<std::string> fields = DecodeArgs(rec);
    ProgramIdentity id;
    if (!fields.empty()) id.executable = fields[0];
    if (fields.size() > 1) id.build_id = fields[1];
    // An empty argument vector encodes as nothing after the second separator.
    if (fields.size() > 2 && !(fields.size() == 3 && fields[2].empty())) {
      id.argv.assign(fields.begin() + 2, fields.end());
    }
    out.push_back(std::move(id));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace replay
