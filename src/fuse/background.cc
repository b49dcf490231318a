// background.cc — see background.h. The report is one message on a pipe: "OK", or a status
// code number, a space and the message.
#include "fuse/background.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace penstock::fuse {

namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return out;
    }
  }
}

Status Decode(const std::string& msg) {
  if (msg == "OK") return OkStatus();
  const size_t space = msg.find(' ');
  const int code = std::atoi(msg.substr(0, space).c_str());
  return Status(static_cast<StatusCode>(code), space == std::string::npos ? "" : msg.substr(space + 1));
}

// The parent's side: the report, or what became of a child that sent none.
Status AwaitChild(pid_t pid, int fd) {
  const std::string msg = ReadAll(fd);
  ::close(fd);
  if (!msg.empty()) return Decode(msg);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  const std::string how = WIFSIGNALED(wstatus) ? "was killed by signal " + std::to_string(WTERMSIG(wstatus))
                                               : "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  return Internal("the mount process " + how + " before the mount was ready (see its messages above)");
}

}  // namespace

Readiness::~Readiness() {
  if (fd_ >= 0) ::close(fd_);
}

void Readiness::Report(const Status& s) {
  if (fd_ < 0) return;
  const std::string msg = s.ok() ? "OK" : std::to_string(static_cast<int>(s.code())) + " " + s.message();
  size_t done = 0;
  while (done < msg.size()) {
    const ssize_t n = ::write(fd_, msg.data() + done, msg.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd_);
  fd_ = -1;
}

void Readiness::DetachOutput(const std::string& log_file) {
  const int in = ::open("/dev/null", O_RDONLY);
  int out = log_file.empty() ? -1 : ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (out < 0) out = ::open("/dev/null", O_WRONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  if (out >= 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
  }
  if (in > STDERR_FILENO) ::close(in);
  if (out > STDERR_FILENO) ::close(out);
}

Result<Readiness> Fork() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "cannot make a pipe to the mount process");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoStatus(err, "cannot start the mount process");
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::setsid();  // no terminal's hangup or Ctrl-C reaches the mount from the shell it came from
    return Readiness(fds[1]);
  }
  ::close(fds[1]);
  if (Status s = AwaitChild(pid, fds[0]); !s.ok()) return s;
  return Readiness(-1, pid);
}

}  // namespace penstock::fuse
