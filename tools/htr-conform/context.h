// context.h — what a conformance suite sees: the plugin under test (its raw
// table, its ctx, the host api the loader gave it), the device chosen on the
// command line, and the result list.
//
// A suite calls ctx.Run(case_name, body) per case; the body returns an
// Outcome (PASS, FAIL with detail, or SKIP with a non-empty reason). Bodies
// hold their plugin handles in RAII wrappers (handles.h), so an early return
// on failure leaks nothing. Cases that may crash the process (robustness
// against bad arguments) use RunIsolated: the case runs in a child process
// (fork, then exec of htr-conform itself, which loads the plugin afresh:
// GPU drivers cannot be used in a merely forked child), and a signal or a
// hang becomes a FAIL instead of the end of the run.
//
// Child mode (SetChild): the process is such a child. Every case but the
// named one is passed over without running its body or recording it; the
// named one runs in-process, its outcome goes to the pipe and the process
// leaves with _exit(0).
#ifndef HTR_TOOLS_HTR_CONFORM_CONTEXT_H_
#define HTR_TOOLS_HTR_CONFORM_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "htr/htr_plugin.h"

namespace conform {

enum class Result { kPass, kFail, kSkip };
const char* ResultName(Result r);  // "PASS", "FAIL", "SKIP"

struct Outcome {
  Result result = Result::kPass;
  std::string detail;  // FAIL: what went wrong; SKIP: the reason; PASS: optional note
  static Outcome Pass(std::string note = {}) { return {Result::kPass, std::move(note)}; }
  static Outcome Fail(std::string what) { return {Result::kFail, std::move(what)}; }
  static Outcome Skip(std::string reason) { return {Result::kSkip, std::move(reason)}; }
};

struct CaseResult {
  std::string suite;
  std::string name;
  Result result;
  std::string detail;
};

// The plugin under test, as the loader left it: initialized, not shut down.
// All pointers are borrowed from the loader and live until it unloads.
struct Target {
  const htr_plugin_api_t* api = nullptr;         // the table tested (a layer's under --layers)
  const htr_plugin_api_t* plugin_api = nullptr;  // the plugin's own table
  htr_plugin_ctx_t* ctx = nullptr;
  const htr_host_api_t* host = nullptr;
  std::string path;       // the shared object's path
  std::string requested;  // what the user named (plugin name or path)
  bool by_path = false;   // requested was a path
};

class Context {
 public:
  // `target` must outlive the Context. `isolate`: fork for RunIsolated cases.
  Context(const Target& target, uint32_t device_index, bool isolate);

  const htr_plugin_api_t* api() const { return target_.api; }
  htr_plugin_ctx_t* plugin_ctx() const { return target_.ctx; }
  const Target& target() const { return target_; }

  // The device under test. has_device() is false when the plugin reports
  // fewer devices than device_index()+1; no_device_reason() then says why
  // (the plugin's unavailable_reason when it has one). Suites needing a
  // device SKIP with that reason.
  uint32_t device_index() const { return device_index_; }
  uint32_t device_count() const { return device_count_; }
  bool has_device() const { return has_device_; }
  const std::string& no_device_reason() const { return no_device_reason_; }
  // Properties of the device under test (zeroed when !has_device()).
  const htr_device_properties_t& props() const { return props_; }

  void BeginSuite(const std::string& suite) { suite_ = suite; }
  const std::string& suite() const { return suite_; }

  // Runs one case in-process. Exceptions from the body become FAIL.
  void Run(const std::string& name, const std::function<Outcome()>& body);
  // Runs one case in a forked child when isolation is on (in-process
  // otherwise). A child killed by a signal, or still running after
  // `timeout_s`, is a FAIL naming the signal.
  void RunIsolated(const std::string& name, const std::function<Outcome()>& body,
                   unsigned timeout_s = 30);
  // Records an outcome directly (e.g. a SKIP for a whole group of cases).
  void Record(const std::string& name, Outcome outcome);

  // Isolation by re-exec: `argv` is how to start this program on the same
  // plugin and device (without --suite); RunIsolated appends --suite,
  // --child-case and --child-fd. Without it RunIsolated runs in-process.
  void SetExecArgs(std::vector<std::string> argv) { exec_argv_ = std::move(argv); }
  // This process is the child for case `name` of the current suite; the
  // outcome is written to `fd`.
  void SetChild(std::string name, int fd) {
    child_case_ = std::move(name);
    child_fd_ = fd;
  }
  bool is_child() const { return child_fd_ >= 0; }
  // Child mode, after all suites ran without reaching the case.
  [[noreturn]] void ReportChildCaseNotReached();

  const std::vector<CaseResult>& results() const { return results_; }

 private:
  const Target& target_;
  uint32_t device_index_;
  bool isolate_;
  uint32_t device_count_ = 0;
  bool has_device_ = false;
  std::string no_device_reason_;
  htr_device_properties_t props_{};
  std::string suite_;
  std::vector<CaseResult> results_;
  std::vector<std::string> exec_argv_;
  std::string child_case_;
  int child_fd_ = -1;

  [[noreturn]] void ReportToParent(const Outcome& o);
  static Outcome RunBody(const std::function<Outcome()>& body);
};

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_CONTEXT_H_
