// SPDX-License-Identifier: MIT
#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace servelab {

namespace {

const char* kind_name(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

}  // namespace

int open_regular_file(const std::filesystem::path& path, std::size_t max_bytes, const std::string& what,
                      std::size_t& size_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  check(fd >= 0, path.string(), ": cannot open (", std::strerror(errno), "; expected ", what, ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int stat_errno = errno;
    ::close(fd);
    fail(path.string(), ": cannot stat (", std::strerror(stat_errno), ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path.string(), ": is ", kind_name(st.st_mode), " (expected ", what, ", a regular file)");
  }
  size_bytes = static_cast<std::size_t>(st.st_size);
  if (size_bytes > max_bytes) {
    ::close(fd);
    fail(path.string(), ": ", size_bytes, " bytes, more than the ", max_bytes, " allowed for ", what);
  }
  return fd;
}

std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes, const std::string& what) {
  std::size_t size = 0;
  const int fd = open_regular_file(path, max_bytes, what, size);
  std::string bytes(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, bytes.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  const int read_errno = errno;
  ::close(fd);
  check(got == size, path.string(), ": cannot read (",
        got < size && read_errno ? std::strerror(read_errno) : "short read", ")");
  return bytes;
}

}  // namespace servelab
