#include "util/file_system.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace replay {
namespace {

// Writes all of `data` at `offset`; returns the offset past it in `*end` as far
// as it got.
Status WriteAllAt(int fd, std::string_view data, uint64_t offset, const std::string& path,
                  uint64_t* end = nullptr) {
  const char* p = data.data();
  size_t left = data.size();
  Status st;
  while (left > 0) {
    ssize_t n = pwrite(fd, p, left, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      st = Status::FromErrno("cannot write " + path, errno);
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  if (end != nullptr) *end = offset;
  return st;
}

// Writes at explicit offsets (no O_APPEND, under which Linux ignores pwrite's
// offset) and keeps the length itself.
class PosixFile : public WritableFile {
 public:
  PosixFile(int fd, std::string path, uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~PosixFile() override {
    if (fd_ >= 0) close(fd_);
  }
  Status Append(std::string_view data) override { return WriteAt(size_, data); }
  Status WriteAt(uint64_t offset, std::string_view data) override {
    if (offset > size_) return Status::InvalidArgument("write past the end of " + path_);
    uint64_t end = offset;
    Status st = WriteAllAt(fd_, data, offset, path_, &end);
    size_ = std::max(size_, end);
    return st;
  }
  bool TryLock() override {
    int rc;
    while ((rc = flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    return rc == 0 || errno != EWOULDBLOCK;
  }
  void Unlock() override { flock(fd_, LOCK_UN); }
  Status Sync() override {
    if (fdatasync(fd_) != 0) return Status::FromErrno("cannot sync " + path_, errno);
    return Status::Ok();
  }
  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && close(fd) != 0) return Status::FromErrno("cannot close " + path_, errno);
    return Status::Ok();
  }

 private:
  int fd_;
  std::string path_;
  uint64_t size_;
};

class PosixFileSystem : public FileSystem {
 public:
  Status CreateDirs(const std::string& path, mode_t mode) override {
    if (path.empty()) return Status::InvalidArgument("empty directory name");
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      partial = path.substr(0, pos);
      if (partial.empty()) continue;
      if (mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
        return Status::FromErrno("cannot create directory " + partial, errno);
      }
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Status::FromErrno("cannot create directory " + path, errno);
    if (!S_ISDIR(st.st_mode)) return Status::IoError(path + " exists and is not a directory");
    return Status::Ok();
  }
  Status CreateDirExclusive(const std::string& path, mode_t mode) override {
    if (mkdir(path.c_str(), mode) != 0) return Status::FromErrno("cannot create directory " + path, errno);
    return Status::Ok();
  }
  Result<std::unique_ptr<WritableFile>> OpenAppend(const std::string& path, bool truncate) override {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0);
    int fd = open(path.c_str(), flags, 0600);
    if (fd < 0) return Status::FromErrno("cannot open " + path + " for writing", errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
      Status s = Status::FromErrno("cannot stat " + path, errno);
      close(fd);
      return s;
    }
    return std::unique_ptr<WritableFile>(new PosixFile(fd, path, static_cast<uint64_t>(st.st_size)));
  }
  Status WriteAtomic(const std::string& path, std::string_view data) override {
    std::string spare = SparePath(path);
    if (int fd = open(spare.c_str(), O_WRONLY | O_CLOEXEC); fd >= 0) {
      // Written in place of the reservation: no new space is needed.
      struct stat st;
      Status s = fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= data.size()
                     ? WriteAllAt(fd, data, 0, spare)
                     : Status::IoError(spare + " is too small");
      if (s.ok() && ftruncate(fd, static_cast<off_t>(data.size())) != 0) s = Status::FromErrno("cannot truncate " + spare, errno);
      if (s.ok() && fdatasync(fd) != 0) s = Status::FromErrno("cannot sync " + spare, errno);
      close(fd);
      if (s.ok() && rename(spare.c_str(), path.c_str()) == 0) return Status::Ok();
      unlink(spare.c_str());  // its space may be what the plain way needs
    }
    // Unique per writer: several ranks may write the same manifest at once.
    std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(gettid());
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno("cannot create " + tmp, errno);
    Status st = WriteAllAt(fd, data, 0, tmp);
    if (st.ok() && fdatasync(fd) != 0) st = Status::FromErrno("cannot sync " + tmp, errno);
    close(fd);
    if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
      st = Status::FromErrno("cannot rename " + tmp + " to " + path, errno);
    }
    if (!st.ok()) unlink(tmp.c_str());
    return st;
  }
  Status ReserveFor(const std::string& path, uint64_t bytes) override {
    std::string spare = SparePath(path);
    int fd = open(spare.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno("cannot create " + spare, errno);
    int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    close(fd);
    if (err != 0) {
      unlink(spare.c_str());
      return Status::FromErrno("cannot reserve space in " + spare, err);
    }
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno("cannot remove " + path, errno);
    }
    return Status::Ok();
  }
};

class FaultFile : public WritableFile {
 public:
  FaultFile(std::unique_ptr<WritableFile> base, FaultFileSystem* fs, std::string path, uint64_t size)
      : base_(std::move(base)), fs_(fs), path_(std::move(path)), size_(size) {}
  Status Append(std::string_view data) override {
    if (!fs_->Spend(static_cast<int64_t>(data.size()))) {
      return Status::FromErrno("cannot write " + path_, ENOSPC);
    }
    size_ += data.size();
    return base_->Append(data);
  }
  Status WriteAt(uint64_t offset, std::string_view data) override {
    uint64_t end = offset + data.size();
    if (end > size_) {
      if (!fs_->Spend(static_cast<int64_t>(end - size_))) {
        return Status::FromErrno("cannot write " + path_, ENOSPC);
      }
      size_ = end;
    }
    return base_->WriteAt(offset, data);
  }
  bool TryLock() override { return base_->TryLock(); }
  void Unlock() override { base_->Unlock(); }
  Status Sync() override { return base_->Sync(); }
  Status Close() override { return base_->Close(); }

 private:
  std::unique_ptr<WritableFile> base_;
  FaultFileSystem* fs_;
  std::string path_;
  uint64_t size_;
};

}  // namespace

FileSystem* FileSystem::Default() {
  static PosixFileSystem* fs = new PosixFileSystem();
  return fs;
}

int64_t FileSystem::FreeBytes(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

bool FaultFileSystem::Spend(int64_t n) {
  int64_t b = budget_.load();
  while (b >= 0) {
    if (b < n) {
      budget_.store(0);
      return false;
    }
    if (budget_.compare_exchange_weak(b, b - n)) return true;
  }
  return true;
}

Status FaultFileSystem::CreateDirs(const std::string& path, mode_t mode) {
  if (fail_dirs_.load()) return Status::FromErrno("cannot create directory " + path, EACCES);
  return base_->CreateDirs(path, mode);
}

Status FaultFileSystem::CreateDirExclusive(const std::string& path, mode_t mode) {
  if (fail_dirs_.load()) return Status::FromErrno("cannot create directory " + path, EACCES);
  return base_->CreateDirExclusive(path, mode);
}

Result<std::unique_ptr<WritableFile>> FaultFileSystem::OpenAppend(const std::string& path,
                                                                  bool truncate) {
  REPLAY_ASSIGN_OR_RETURN(auto f, base_->OpenAppend(path, truncate));
  struct stat st;
  uint64_t size = stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return std::unique_ptr<WritableFile>(new FaultFile(std::move(f), this, path, size));
}

Status FaultFileSystem::ReserveFor(const std::string& path, uint64_t bytes) {
  if (!Spend(static_cast<int64_t>(bytes))) return Status::FromErrno("cannot reserve space for " + path, ENOSPC);
  REPLAY_RETURN_IF_ERROR(base_->ReserveFor(path, bytes));
  std::lock_guard<std::mutex> lock(reserved_mu_);
  reserved_[path] = bytes;
  return Status::Ok();
}

Status FaultFileSystem::WriteAtomic(const std::string& path, std::string_view data) {
  {
    std::lock_guard<std::mutex> lock(reserved_mu_);
    auto it = reserved_.find(path);
    if (it != reserved_.end()) {
      bool fits = it->second >= data.size();
      reserved_.erase(it);
      if (fits) return base_->WriteAtomic(path, data);
    }
  }
  if (!Spend(static_cast<int64_t>(data.size()))) {
    return Status::FromErrno("cannot write " + path, ENOSPC);
  }
  return base_->WriteAtomic(path, data);
}

}  // namespace replay
