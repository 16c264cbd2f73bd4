/*
 * htr_sdk_ir_glsl_groups.h — what the GLSL lowering (htr_sdk_ir_glsl.h)
 * reads off the kernel IR to load tiles in groups of 16 bytes
 * (GlslOptions::vector_loads / vector_loads_f32): whether a tile is linear
 * along its last dimension (and with which step), whether a run of a mask
 * is all set with one or two checks, and the statements that load one
 * group — one 16-byte load when allowed, else element by element.
 *
 * Values are rendered through the callbacks the renderer passes (a
 * scalar's name, element e of any value, fresh variable names), so the
 * expressions are the renderer's own. Borrowed: the kernel, the analysis
 * and `def` (op defining each value, UINT32_MAX for arguments and block
 * arguments) must outlive the object. Not thread-safe (fresh names).
 */
#ifndef HTR_SDK_IR_GLSL_GROUPS_H_
#define HTR_SDK_IR_GLSL_GROUPS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "htr_sdk_ir.h"

namespace htr_sdk::ir {

class GlslGroups {
 public:
  using NameFn = std::function<std::string(uint32_t)>;                   // a scalar value's name
  using AtFn = std::function<std::string(uint32_t, const std::string&)>;  // element e of a value
  using FreshFn = std::function<std::string(const char*)>;                // a new variable name

  GlslGroups(const Kernel& k, const Analysis& a, const std::vector<uint32_t>& def, NameFn name, AtFn at,
             FreshFn fresh)
      : k_(k), a_(a), def_(def), name_(std::move(name)), at_(std::move(at)), fresh_(std::move(fresh)) {}

  // The name of a value constant over its tile (a scalar, or a splat /
  // broadcast / expand_dims of one), or "".
  std::string uniform_of(uint32_t id) const;
  // Step along the last dimension of an integer/pointer tile as an int64
  // GLSL expression ("0": constant along it; "1l": +1), "" when unknown.
  std::string last_step(uint32_t id) const;
  // Index into x (the operand of BROADCAST result r) of r's element e.
  std::string bcast_index(uint32_t r, uint32_t x, const std::string& e) const;
  // True exactly when bool tile id's elements e0 .. e0+per-1 (one run
  // along the last dimension) are all set.
  std::string group_all(uint32_t id, const std::string& e0, int per) const;
  // Statements filling uvec4 `w` with elements e0 .. e0+per-1 of load op
  // `lop` (per = 8 halves or 4 words). Uses the buffer reference types
  // BV4 (16 bytes), BU16 and BF32, which the shader must declare.
  std::string group_load(const Op& lop, const std::string& e0, const std::string& ok, int per,
                         const std::string& w) const;

 private:
  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  static std::vector<int64_t> strides(const Type& t);

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<uint32_t>& def_;
  NameFn name_;
  AtFn at_;
  FreshFn fresh_;
};

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_GROUPS_H_
