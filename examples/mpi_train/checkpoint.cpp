#include "checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace mpi_train {
namespace {

constexpr char kMagic[8] = {'M', 'P', 'I', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

// The fixed-size part of the file; `num_params` floats follow it.
struct Header {
  char magic[8];
  uint32_t version;
  int32_t rank;
  int32_t world_size;
  uint32_t reserved;
  int64_t step;
  uint64_t sampler_state;
  uint64_t num_params;
};

std::string ErrnoMessage(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int rank, int64_t step) {
  return dir + "/rank-" + std::to_string(rank) + "-step-" + std::to_string(step) + ".ckpt";
}

bool SaveCheckpoint(const std::string& dir, int rank, int world_size, const Checkpoint& ckpt,
                    std::string* error) {
  // Every rank may create the directory at once; losing that race is fine.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec && !std::filesystem::is_directory(dir)) {
    *error = "cannot create " + dir + ": " + ec.message();
    return false;
  }

  Header header = {};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.rank = rank;
  header.world_size = world_size;
  header.step = ckpt.step;
  header.sampler_state = ckpt.sampler_state;
  header.num_params = ckpt.params.size();

  const std::string path = CheckpointPath(dir, rank, ckpt.step);
  const std::string tmp = path + ".tmp";
  FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) {
    *error = ErrnoMessage("cannot create", tmp);
    return false;
  }
  bool ok = std::fwrite(&header, sizeof(header), 1, file) == 1 &&
            std::fwrite(ckpt.params.data(), sizeof(float), ckpt.params.size(), file) ==
                ckpt.params.size() &&
            std::fflush(file) == 0 &&
            // Without fsync the rename could reach the disk before the data does.
            fsync(fileno(file)) == 0;
  if (!ok) *error = ErrnoMessage("cannot write", tmp);
  if (std::fclose(file) != 0 && ok) {
    *error = ErrnoMessage("cannot write", tmp);
    ok = false;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = ErrnoMessage("cannot rename into", path);
    ok = false;
  }
  if (!ok) std::remove(tmp.c_str());
  return ok;
}

bool LoadCheckpoint(const std::string& dir, int rank, int world_size, int64_t step,
                    size_t num_params, Checkpoint* ckpt, std::string* error) {
  const std::string path = CheckpointPath(dir, rank, step);
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = ErrnoMessage("cannot open", path);
    return false;
  }
  Header header;
  ckpt->params.resize(num_params);
  const bool read_header = std::fread(&header, sizeof(header), 1, file) == 1;
  const bool read_params =
      read_header &&
      std::fread(ckpt->params.data(), sizeof(float), num_params, file) == num_params &&
      std::fgetc(file) == EOF;
  std::fclose(file);

  if (!read_header || std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 ||
      header.version != kVersion) {
    *error = path + " is not a version " + std::to_string(kVersion) + " mpi_train checkpoint";
    return false;
  }
  if (header.rank != rank || header.step != step) {
    *error = path + " holds rank " + std::to_string(header.rank) + " step " +
             std::to_string(header.step) + ", not rank " + std::to_string(rank) + " step " +
             std::to_string(step);
    return false;
  }
  if (header.world_size != world_size || header.num_params != num_params) {
    *error = path + " was written by a run of " + std::to_string(header.world_size) +
             " ranks and " + std::to_string(header.num_params) + " parameters; this run has " +
             std::to_string(world_size) + " and " + std::to_string(num_params);
    return false;
  }
  if (!read_params) {
    *error = path + " is truncated or has trailing bytes";
    return false;
  }
  ckpt->step = header.step;
  ckpt->sampler_state = header.sampler_state;
  return true;
}

}  // namespace mpi_train
