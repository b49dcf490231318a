#include "cli/object_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "penstock/object_io.h"

namespace penstock::cli {

namespace {

constexpr uint64_t kMinChunk = 1 << 20;
constexpr size_t kBufferAlign = 4096;

}  // namespace

struct ObjectReader::Slot {
  std::byte* buf = nullptr;
  uint64_t chunk = 0;  // index of the chunk it reads
  OpId op = 0;
  bool done = false;
  Status status;
  uint64_t bytes = 0;
  ~Slot() { std::free(buf); }
};

ObjectReader::ObjectReader(uint64_t chunk_bytes, unsigned window)
    : chunk_(chunk_bytes), slots_(new Slot[std::max(1u, window)]), window_(std::max(1u, window)) {}

ObjectReader::~ObjectReader() = default;

Result<uint64_t> ObjectReader::Read(Object& obj, Destination& dest, const ProgressFn& progress) {
  const uint64_t size = obj.size();
  const uint64_t chunks = (size + chunk_ - 1) / chunk_;
  const unsigned used = static_cast<unsigned>(std::min<uint64_t>(window_, chunks));
  CompletionQueue cq;
  uint64_t next_issue = 0;
  auto issue = [&](unsigned i) {
    Slot& s = slots_[i];
    if (s.buf == nullptr) {
      const size_t bytes = (chunk_ + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
      s.buf = static_cast<std::byte*>(std::aligned_alloc(kBufferAlign, bytes));
    }
    s.chunk = next_issue++;
    s.done = false;
    const uint64_t off = s.chunk * chunk_;
    s.op = obj.ReadAsync(off, {{s.buf, std::min(chunk_, size - off)}}, cq, i);
  };
  for (unsigned i = 0; i < used; ++i) issue(i);

  Status failure;
  for (uint64_t next = 0; next < chunks && failure.ok(); ++next) {
    Slot& s = slots_[next % used];
    while (!s.done) {
      if (Interrupted()) {
        failure = Cancelled("interrupted");
        break;
      }
      for (IoCompletion& c : cq.Wait(1, std::chrono::milliseconds(200))) {
        Slot& d = slots_[c.user_data];
        d.done = true;
        d.status = std::move(c.status);
        d.bytes = c.bytes;
      }
    }
    if (!failure.ok()) break;
    const uint64_t want = std::min(chunk_, size - s.chunk * chunk_);
    if (!s.status.ok()) {
      failure = s.status;
    } else if (s.bytes != want) {
      failure = Aborted("object '" + obj.name() + "' shrank while it was read; get it again");
    } else {
      failure = dest.Write({s.buf, want});
    }
    if (failure.ok() && progress) progress(s.chunk * chunk_ + want, size);
    if (failure.ok() && next_issue < chunks) issue(static_cast<unsigned>(next % used));
  }
  if (!failure.ok()) {
    for (unsigned i = 0; i < used; ++i) {
      if (!slots_[i].done) obj.Cancel(slots_[i].op);
    }
  }
  // The buffers are ours again only once every read has completed.
  while (cq.in_flight() > 0) cq.Wait(cq.in_flight(), std::chrono::milliseconds(1000));
  cq.Poll();
  if (!failure.ok()) return failure;
  if (chunks == 0 && progress) progress(0, 0);
  return size;
}

Result<uint64_t> ReadChunkBytes(Client& client, const std::string& container) {
  PS_ASSIGN_OR_RETURN(ContainerInfo info, client.GetContainer(container));
  const uint64_t unit = std::max<uint64_t>(info.stripe_unit, 1);
  return std::max<uint64_t>(unit, (kMinChunk + unit - 1) / unit * unit);
}

Result<std::string> SpoolStdin(int* fd) {
  struct stat st;
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) && ::lseek(STDIN_FILENO, 0, SEEK_CUR) == 0) {
    *fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
    if (*fd < 0) return ErrnoStatus(errno, "cannot read standard input");
    return "/proc/self/fd/" + std::to_string(*fd);
  }
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp";
  *fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (*fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {  // a file system without O_TMPFILE
    std::string path = dir + "/penstock-stdin-XXXXXX";
    *fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (*fd >= 0) ::unlink(path.c_str());
  }
  if (*fd < 0) {
    return ErrnoStatus(errno, "cannot make a temporary file in '" + dir +
                                  "' to hold standard input; set TMPDIR to a writable directory");
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    PS_RETURN_IF_ERROR(WaitReady(STDIN_FILENO, POLLIN));
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n == 0 && Interrupted()) return Cancelled("interrupted");
    if (n == 0) break;
    if (n < 0 && errno == EINTR && !Interrupted()) continue;
    if (n < 0) return Interrupted() ? Cancelled("interrupted") : ErrnoStatus(errno, "reading standard input");
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(*fd, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR && !Interrupted()) continue;
      if (w < 0 && Interrupted()) return Cancelled("interrupted");
      if (w < 0) {
        return ErrnoStatus(errno, "spooling standard input into '" + dir +
                                      "' (it is stored once complete); set TMPDIR to a directory with room");
      }
      done += w;
    }
  }
  return "/proc/self/fd/" + std::to_string(*fd);
}

}  // namespace penstock::cli
