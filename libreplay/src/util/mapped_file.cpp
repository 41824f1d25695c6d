#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace replay {

Result<MappedFile> MappedFile::Open(const std::string& path, bool copy, bool lock_shared) {
  // Non-blocking, so that opening a pipe nobody writes to does not wait forever.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return Status::FromErrno("cannot open " + path, errno);
  }
  // Released when fd is closed. A file system without flock reads unlocked.
  if (lock_shared && copy) {
    while (flock(fd, LOCK_SH) != 0 && errno == EINTR) {
    }
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno("cannot stat " + path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument(path + " is " + FileTypeName(st.st_mode) + ", not a regular file");
  }
  MappedFile f;
  if (!copy && st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      close(fd);
      f.data_ = static_cast<const uint8_t*>(p);
      f.size_ = static_cast<size_t>(st.st_size);
      f.mapped_ = true;
      return f;
    }
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return Status::FromErrno("cannot read " + path, err);
    }
    if (n == 0) break;
    f.copy_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  f.data_ = reinterpret_cast<const uint8_t*>(f.copy_.data());
  f.size_ = f.copy_.size();
  return f;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this == &other) return *this;
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
  mapped_ = other.mapped_;
  copy_ = std::move(other.copy_);
  size_ = other.size_;
  data_ = mapped_ ? other.data_ : reinterpret_cast<const uint8_t*>(copy_.data());
  other.data_ = nullptr;
  other.size_ = 0;
  other.mapped_ = false;
  return *this;
}

MappedFile::~MappedFile() {
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string FileTypeName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a pipe";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
  }
  return "not a file";
}

}  // namespace replay
