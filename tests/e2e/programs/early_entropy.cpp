// A library that draws entropy while the dynamic loader initialises it, before
// main and before the preload's own constructors, as TLS libraries do when
// they load (tests/e2e/rerun_e2e_test.cpp).
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>

extern "C" {
uint64_t early_entropy_bytes = 0;
}

namespace {
__attribute__((constructor)) void DrawAtLoad() {
  unsigned char one = 0;
  if (getrandom(&one, 1, GRND_NONBLOCK) != 1) return;
  uint64_t more = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &more, sizeof(more)) != static_cast<ssize_t>(sizeof(more))) more = 0;
    close(fd);
  }
  early_entropy_bytes = more ^ one;
}
}  // namespace
