// context.cc — case running and crash isolation.
//
// Isolation: fork, then exec htr-conform itself in child mode (context.h)
// with the case's suite and name. The child loads the plugin afresh (a
// forked copy of a process that has started a GPU driver cannot use it),
// runs the suite passing over every other case, writes the outcome to a
// pipe and leaves with _exit. alarm(), set before the exec and kept across
// it, bounds a hang (plugin load included).
#include "context.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
  if (is_child()) {
    if (name == child_case_) ReportToParent(o);
    return;  // another case: the parent records it
  }
  if (o.result == Result::kSkip && o.detail.empty()) {
    // The kit's own rule: a skip without a reason is a bug in the suite.
    o = Outcome::Fail("case skipped without a reason (conformance kit bug)");
  }
  results_.push_back(CaseResult{suite_, name, o.result, std::move(o.detail)});
}

Outcome Context::RunBody(const std::function<Outcome()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Outcome::Fail(std::string("exception: ") + e.what());
  } catch (...) {
    return Outcome::Fail("unknown exception");
  }
}

void Context::Run(const std::string& name, const std::function<Outcome()>& body) {
  if (is_child() && name != child_case_) return;  // not ours: never run it here
  Record(name, RunBody(body));
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

void Context::ReportToParent(const Outcome& o) {
  Outcome out = o;
  if (out.result == Result::kSkip && out.detail.empty())
    out = Outcome::Fail("case skipped without a reason (conformance kit bug)");
  const char code = static_cast<char>(out.result);
  WriteAll(child_fd_, &code, 1);
  WriteAll(child_fd_, out.detail.data(), out.detail.size());
  ::close(child_fd_);
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);  // no atexit handlers, no plugin shutdown: the case may have broken it
}

void Context::ReportChildCaseNotReached() {
  ReportToParent(Outcome::Fail("the child run of suite '" + suite_ + "' never reached case '" +
                               child_case_ + "' (the case list differs between runs)"));
}

void Context::RunIsolated(const std::string& name, const std::function<Outcome()>& body,
                          unsigned timeout_s) {
  if (is_child()) {
    Run(name, body);  // the case this child exists for (or passed over)
    return;
  }
  if (!isolate_ || exec_argv_.empty()) {
    Run(name, body);
    return;
  }
  int fds[2];
  if (::pipe(fds) != 0) {
    Record(name, Outcome::Fail(std::string("pipe failed: ") + std::strerror(errno)));
    return;
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls until execv.
  std::vector<std::string> args = exec_argv_;
  for (const char* a : {"--suite", suite_.c_str(), "--child-case", name.c_str(), "--child-fd"})
    args.emplace_back(a);
  args.push_back(std::to_string(fds[1]));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
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
    ::execv("/proc/self/exe", argv.data());
    const char msg[] = "\x01exec of /proc/self/exe failed";
    WriteAll(fds[1], msg, sizeof msg - 1);
    ::_exit(127);
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
  if (data[0] < 0 || data[0] > static_cast<char>(Result::kSkip)) {
    Record(name, Outcome::Fail("child reported an unknown result code " +
                               std::to_string(static_cast<int>(data[0]))));
    return;
  }
  Outcome o;
  o.result = static_cast<Result>(data[0]);
  o.detail = data.substr(1);
  Record(name, std::move(o));
}

}  // namespace conform
