// file_system.h: the seam between trace writing and the operating system.
//
// The writer creates directories and appends to files only through FileSystem,
// so tests can substitute one that fails (FaultFileSystem: a full disk after N
// bytes, an unwritable directory) and check that recording turns itself off
// without disturbing the application. Readers map files directly.
//
// Thread safety: FileSystem methods may be called from any thread; a
// WritableFile is used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "replay/status.h"

namespace replay {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` or fails; a failure leaves the file's length unknown.
  virtual Status Append(std::string_view data) = 0;
  // Writes all of `data` at `offset`, which is at most the file's length:
  // overwrites what is there and extends the file past its end if `data` does,
  // but never shortens it (a reader may have the file mapped).
  virtual Status WriteAt(uint64_t offset, std::string_view data) = 0;
  // Takes an exclusive advisory lock on the file without waiting (flock), which
  // readers take shared while they copy it. False only if someone else holds it;
  // a file system without such locks counts as locked.
  virtual bool TryLock() = 0;
  virtual void Unlock() = 0;
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // The real file system. Never destroyed.
  static FileSystem* Default();

  // Creates `path` and missing parents with `mode`; ok if it is already a directory.
  virtual Status CreateDirs(const std::string& path, mode_t mode) = 0;
  // Creates a new directory; kIoError with EEXIST semantics ("exists") if it does.
  virtual Status CreateDirExclusive(const std::string& path, mode_t mode) = 0;
  // Opens `path` for appending (and WriteAt), creating it with mode 0600
  // (truncating if asked).
  virtual Result<std::unique_ptr<WritableFile>> OpenAppend(const std::string& path,
                                                           bool truncate) = 0;
  // Replaces `path` with `data` atomically: a reader sees the old or the new
  // content, never a mix (write to a temporary name, fsync, rename).
  // A reservation made by ReserveFor is used (and ends) when `data` fits in it.
  virtual Status WriteAtomic(const std::string& path, std::string_view data) = 0;
  // Keeps `bytes` of disk (in SparePath(path)) for a later WriteAtomic of
  // `path`, so that it still succeeds when the disk has filled meanwhile.
  virtual Status ReserveFor(const std::string& path, uint64_t bytes) = 0;
  static std::string SparePath(const std::string& path) { return path + ".spare"; }
  virtual Status Remove(const std::string& path) = 0;
  // Bytes free for unprivileged writers on the file system holding `path`; -1 unknown.
  virtual int64_t FreeBytes(const std::string& path);
};

// A FileSystem that forwards to another but fails on demand, for tests.
class FaultFileSystem : public FileSystem {
 public:
  explicit FaultFileSystem(FileSystem* base) : base_(base) {}

  // Writes that add bytes (appends, atomic writes, WriteAt past a file's end)
  // fail with ENOSPC once `bytes` more have been added.
  void FailWritesAfter(int64_t bytes) { budget_.store(bytes); }
  // Directory creation fails with EACCES.
  void FailDirCreation(bool fail) { fail_dirs_.store(fail); }

  Status CreateDirs(const std::string& path, mode_t mode) override;
  Status CreateDirExclusive(const std::string& path, mode_t mode) override;
  Result<std::unique_ptr<WritableFile>> OpenAppend(const std::string& path, bool truncate) override;
  Status WriteAtomic(const std::string& path, std::string_view data) override;
  Status ReserveFor(const std::string& path, uint64_t bytes) override;
  Status Remove(const std::string& path) override { return base_->Remove(path); }

  // Takes `n` bytes from the budget; false if that exhausts it.
  bool Spend(int64_t n);

 private:
  FileSystem* base_;
  std::atomic<int64_t> budget_{-1};  // -1: unlimited
  std::atomic<bool> fail_dirs_{false};
  std::mutex reserved_mu_;
  std::map<std::string, uint64_t> reserved_;  // path -> bytes ReserveFor kept for it
};

}  // namespace replay
