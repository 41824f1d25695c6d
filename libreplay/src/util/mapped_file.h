// mapped_file.h: a whole file, read-only, for the readers.
//
// Maps regular files, or reads them into memory when asked for a stable copy
// (a file another process is appending to). Anything else (a device such as
// /dev/zero, a pipe, a socket, a directory) is refused with a Status: reading
// it could block or never end. Not thread-safe to move; const use is.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "replay/status.h"

namespace replay {

class MappedFile {
 public:
  // Maps `path` (a copy when `copy` is set: a file another process is writing).
  // With `lock_shared`, the copy is taken under a shared flock: a trace writer
  // holds the lock exclusively while it rewrites an events file in place.
  static Result<MappedFile> Open(const std::string& path, bool copy = false, bool lock_shared = false);
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string copy_;
};

bool FileExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Whether `path` is (or links to) a regular file.
bool IsRegularFile(const std::string& path);
// What `mode` is, for messages: "a directory", "a character device", "a pipe" ...
std::string FileTypeName(unsigned mode);

}  // namespace replay
