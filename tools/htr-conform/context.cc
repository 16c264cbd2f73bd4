// context.cc — case running and crash isolation.
//
// Isolation uses fork(): the child inherits the opened plugin state, runs one
// body, writes its outcome to a pipe and leaves with _exit (no atexit
// handlers, no stdio flush, no leak check). alarm() in the child bounds a
// hang. Only bodies that pass bad arguments run this way; they must not rely
// on plugin worker threads, which a forked child does not have.
#include "context.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "status_util.h"

namespace conform {

const char* ResultName(Result r) {
  switch (r) {
    case Result::kPass:
      return "PASS";
    case Result::kFail:
      return "FAIL";
    case Result::kSkip:
      return "SKIP";
  }
  return "?";
}

Context::Context(const Target& target, uint32_t device_index, bool isolate)
    : target_(target), device_index_(device_index), isolate_(isolate) {
  const htr_plugin_api_t* api = target_.api;
  if (api == nullptr || api->device_count == nullptr) {
    no_device_reason_ = "plugin has no device_count entry";
    return;
  }
  if (htr_status_t s = api->device_count(target_.ctx, &device_count_)) {
    no_device_reason_ = "device_count failed: " + TakeDescription(s);
    device_count_ = 0;
    return;
  }
  if (device_index_ >= device_count_) {
    const char* why = api->unavailable_reason ? api->unavailable_reason(target_.ctx) : nullptr;
    no_device_reason_ = device_count_ == 0
                            ? std::string("plugin reports no devices: ") +
                                  (why ? why : "(no unavailable_reason given)")
                            : "device index " + std::to_string(device_index_) +
                                  " >= device count " + std::to_string(device_count_);
    return;
  }
  props_.struct_size = sizeof(props_);
  if (api->device_get_properties == nullptr) {
    no_device_reason_ = "plugin has no device_get_properties entry";
    return;
  }
  if (htr_status_t s = api->device_get_properties(target_.ctx, device_index_, &props_)) {
    no_device_reason_ = "device_get_properties failed: " + TakeDescription(s);
    std::memset(&props_, 0, sizeof(props_));
    return;
  }
  props_.name[sizeof(props_.name) - 1] = '\0';
  has_device_ = true;
}

void Context::Record(const std::string& name, Outcome o) {
  if (o.result == Result::kSkip && o.detail.empty()) {
    // The kit's own rule: a skip without a reason is a bug in the suite.
    o = Outcome::Fail("case skipped without a reason (conformance kit bug)");
  }
  results_.push_back(CaseResult{suite_, name, o.result, std::move(o.detail)});
}

void Context::Run(const std::string& name, const std::function<Outcome()>& body) {
  Outcome o;
  try {
    o = body();
  } catch (const std::exception& e) {
    o = Outcome::Fail(std::string("exception: ") + e.what());
  } catch (...) {
    o = Outcome::Fail("unknown exception");
  }
  Record(name, std::move(o));
}

namespace {

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void Context::RunIsolated(const std::string& name, const std::function<Outcome()>& body,
                          unsigned timeout_s) {
  if (!isolate_) {
    Run(name, body);
    return;
  }
  int fds[2];
  if (::pipe(fds) != 0) {
    Record(name, Outcome::Fail(std::string("pipe failed: ") + std::strerror(errno)));
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    Record(name, Outcome::Fail(std::string("fork failed: ") + std::strerror(errno)));
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(timeout_s);
    Outcome o;
    try {
      o = body();
    } catch (...) {
      o = Outcome::Fail("exception");
    }
    const char code = static_cast<char>(o.result);
    WriteAll(fds[1], &code, 1);
    WriteAll(fds[1], o.detail.data(), o.detail.size());
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string data;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    Record(name, Outcome::Fail(sig == SIGALRM
                                   ? "hung: no return within " + std::to_string(timeout_s) + " s"
                                   : std::string("crashed: signal ") + std::to_string(sig) + " (" +
                                         strsignal(sig) + ")"));
    return;
  }
  if (data.empty()) {
    Record(name, Outcome::Fail("child exited with status " + std::to_string(WEXITSTATUS(wstatus)) +
                               " before reporting"));
    return;
  }
  Outcome o;
  o.result = static_cast<Result>(data[0]);
  o.detail = data.substr(1);
  Record(name, std::move(o));
}

}  // namespace conform
