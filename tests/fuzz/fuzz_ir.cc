// One fuzz iteration over kernel IR bytes (see fuzz_ir.h).
#include "fuzz_ir.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_render.h"

namespace htr_fuzz {

namespace ir = htr_sdk::ir;

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_ir: %s: %s\n", what, detail.c_str());
  std::abort();
}

void ExpectCleanError(const ir::Status& s, const char* stage) {
  if (s.code != HTR_STATUS_INVALID_ARGUMENT && s.code != HTR_STATUS_INCOMPATIBLE)
    Fail(stage, "unexpected status code " + std::to_string(s.code) + ": " + s.message);
  if (s.message.empty()) Fail(stage, "error without a message");
}

bool SameKernel(const ir::Kernel& a, const ir::Kernel& b) {
  if (a.name != b.name || a.args.size() != b.args.size() || a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].name != b.args[i].name || a.args[i].dtype != b.args[i].dtype ||
        a.args[i].pointer != b.args[i].pointer || a.args[i].flags != b.args[i].flags)
      return false;
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (a.ops[i].opcode != b.ops[i].opcode || a.ops[i].operands != b.ops[i].operands ||
        a.ops[i].results != b.ops[i].results || a.ops[i].attrs != b.ops[i].attrs)
      return false;
  return true;
}

}  // namespace

int FuzzIrOne(const uint8_t* data, size_t size) {
  ir::Kernel k;
  ir::Status s = ir::read(data, size, &k);
  if (!s.ok()) {
    ExpectCleanError(s, "read");
    return 0;
  }
  ir::Analysis a;
  s = ir::verify(k, &a);
  if (!s.ok()) {
    ExpectCleanError(s, "verify");
    return 1;
  }
  if (ir::print(k, a).empty()) Fail("print", "empty text for a verified kernel");
  const std::vector<uint8_t> bytes = ir::write(k);
  ir::Kernel k2;
  s = ir::read(bytes.data(), bytes.size(), &k2);
  if (!s.ok()) Fail("round trip", "written bytes do not read: " + s.message);
  if (!SameKernel(k, k2)) Fail("round trip", "kernel changed through write/read");
  ir::Rendered r;
  s = ir::render(k, a, {}, ir::cxx_dialect(), &r);
  if (!s.ok()) Fail("render", s.message);
  if (r.source.find(r.entry) == std::string::npos) Fail("render", "entry point missing");
  return 2;
}

}  // namespace htr_fuzz
