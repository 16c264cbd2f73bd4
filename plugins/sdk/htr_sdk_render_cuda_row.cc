// Row lowering of the CUDA dialect (htr_sdk_render_cuda.h, render_cuda_rows):
// programs whose tiles are all 1-D run as one thread block per program; a
// tile of n elements is spread over the block's T threads in chunks of V
// consecutive elements (V up to 8, while 2*T*V fits the longest tile):
// thread t holds elements q*T*V + t*V + [0, V), q = 0, 1, ..., in a
// per-thread array (registers after full unrolling). A load or store of a
// chunk takes 4/8/16-byte accesses when its V pointers are consecutive
// (compared at run time, so any pointer tile is exact), the first is aligned
// and no element is masked off; else it goes element by element. Elementwise ops, loads and stores (masked per
// element, as in the per-thread lowering) run over a thread's own elements;
// `reduce` combines a thread's elements in order, then the warp's lanes by
// xor shuffles, then the warps' partials in warp order through shared
// memory, so every thread holds the (scalar) result. Scalars are computed
// redundantly by every thread (control flow stays uniform, so barriers are
// legal anywhere); scalar stores are done by thread 0. A barrier follows a
// store when a later load or store (any, inside a loop) through the same
// pointer argument (or an untraced pointer) could touch what another thread
// stored. atomic_add is atomicAdd per element of the thread's own elements
// (never the chunk path), a scalar one by thread 0.
//
// Same semantics as htr_sdk_ir_render.h (rounding of f16/bf16 after every op,
// wrapping integers, NaN-propagating max/min, masked loads touch no memory);
// reductions group differently (thread-strided partials), a reassociation of
// float sums only.
//
// Instruction economy (these kernels are bound by instruction issue before
// bandwidth on an H200: a count found ~130 SASS instructions per element in
// the gpt2 GELU-backward row): a loaded f16/bf16 is representable, so it is
// not rounded again; every f16/bf16 value held is rounded (scalar arguments
// at entry), so a bf16 store keeps the upper half of the f32 bits instead of
// rounding a second time; program ids come from blockIdx.x directly when the
// grid is 1-D (32-bit division otherwise, not 64-bit); the prelude rounds to
// bf16 with one cvt instruction on sm_80+ (htr_sdk_render_cuda.cc). Straight-
// line programs take a thread per chunk of 8 elements (rows_supported).
//
// Chunk linearity (analyze_chunks): index tiles built from the lane (arange), scalars,
// +, -, * by constants or uniforms, and / and % by constant multiples of V are proved to step by
// a known slope over each chunk (given dividends >= 0 at the chunk's start, tested once per
// chunk); such tiles are spelled inline where used instead of held per element, and a load or
// store through a slope-1 pointer tile tests its chunk at its first and last element (alignment,
// those dividends, the last pointer, the mask at both ends where it is monotone over the chunk)
// instead of comparing all V pointers. H200, rows-gpu bf16 [16384, 2304] bias add 2,164 -> 3,490
// GB/s, bias+GELU 1,940 -> 2,566; gpt2 bf16 step 506,408 -> 528,860 tokens/s. Fast math
// (CudaTarget::fast_math): f32 exp and division as __expf / __fdividef.
#include "htr_sdk_render_cuda.h"
#include "htr_sdk_c_spell.h"

#include <cinttypes>
#include <cstdio>

namespace htr_sdk::ir {

namespace {

std::string v(uint32_t id) { return "v" + std::to_string(id); }

class RowRenderer {
 public:
  RowRenderer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec, uint32_t threads,
              bool fast_math)
      : k_(k), a_(a), spec_(spec), d_(cuda_dialect()), T_(threads), fast_(fast_math) {
    // Chunk length V_: up to 8 consecutive elements per thread and chunk, as
    // many as the longest tile fills over the block (1 keeps the plain
    // thread-strided layout).
    int64_t m = 1;
    for (const Type& t : a.value_types)
      if (t.is_tile() && t.numel() > m) m = t.numel();
    while (V_ < 8 && static_cast<int64_t>(T_) * V_ * 2 <= m) V_ *= 2;
  }

  Status run(Rendered* out) {
    prepare();
    std::vector<std::string> params;
    std::string pre;
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      const std::string n = v(static_cast<uint32_t>(i));
      const bool sp = i < spec_.size() && spec_[i].set;
      if (arg.pointer) {
        if (sp) return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s) is a pointer; only scalars specialize", i, arg.name.c_str());
        params.push_back("void* " + n + "_p");
        pre += "    " + d_.storage_type(arg.dtype) + "* const " + n + " = (" + d_.storage_type(arg.dtype) + "*)" + n + "_p;\n";
        continue;
      }
      params.push_back((arg.dtype == HTR_DTYPE_BOOL ? std::string("uint8_t") : d_.compute_type(arg.dtype)) + " " + n + "_p");
      std::string value;
      if (sp) {
        value = sp_.literal(arg.dtype, arg.dtype == HTR_DTYPE_F32 ? const_bits_f(spec_[i].f) : spec_[i].i);
        pre += "    (void)" + n + "_p;\n";
      } else {
        // f16/bf16 scalars rounded once here: every f16/bf16 value the kernel holds is
        // representable in its dtype (what store() relies on).
        value = arg.dtype == HTR_DTYPE_BOOL ? "(" + n + "_p != 0)" : sp_.rnd(arg.dtype, n + "_p");
      }
      pre += "    const " + d_.compute_type(arg.dtype) + " " + n + " = " + value + ";\n";
    }
    out->entry = "htr_k_" + k_.name;
    const std::string Ts = std::to_string(T_);
    // Launch bounds only past 256 threads, where they are needed to keep the
    // registers per thread within what a 1024-thread block may use (up to 256
    // threads may take 255 registers anyway).
    const std::string bounds = T_ > 256 ? "__launch_bounds__(" + Ts + ") " : "";
    s_ = d_.prelude + "\n" + "extern \"C\" __global__ void " + bounds + out->entry +
         "(int32_t htr_g0, int32_t htr_g1, int32_t htr_g2";
    for (const auto& p : params) s_ += ", " + p;
    s_ += ") {\n  {\n"
          "    const uint32_t lin = blockIdx.x;\n"
          "    if ((int64_t)lin >= (int64_t)htr_g0 * htr_g1 * htr_g2) return;\n"
          "    int32_t pid0 = (int32_t)lin, pid1 = 0, pid2 = 0;\n"
          "    if (lin >= (uint32_t)htr_g0) {\n"
          "      pid0 = (int32_t)(lin % (uint32_t)htr_g0);\n"
          "      pid1 = (int32_t)((lin / (uint32_t)htr_g0) % (uint32_t)htr_g1);\n"
          "      pid2 = (int32_t)(lin / ((uint32_t)htr_g0 * (uint32_t)htr_g1));\n"
          "    }\n"
          "    (void)pid0; (void)pid1; (void)pid2;\n"
          "    const int32_t htr_tid = (int32_t)threadIdx.x;\n"
          "    const int32_t htr_lane = htr_tid & 31, htr_warp = htr_tid >> 5;\n"
          "    (void)htr_lane; (void)htr_warp;\n" +
          pre;
    depth_ = 2;
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      while (!ends_.empty() && ends_.back().first == i) close_loop();
      emit_op(static_cast<uint32_t>(i));
    }
    while (!ends_.empty()) close_loop();
    s_ += "  }\n}\n";
    out->source = std::move(s_);
    return Status();
  }

 private:
  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  std::string ct(uint32_t id) const {
    const Type& t = type(id);
    return t.ptr ? d_.storage_type(t.dtype) + "*" : d_.compute_type(t.dtype);
  }
  // Elements per thread of a tile of `id`: whole chunks of V_ consecutive elements.
  int64_t per_thread(uint32_t id) const { return (type(id).numel() + TV() - 1) / TV() * V_; }
  int64_t TV() const { return static_cast<int64_t>(T_) * V_; }
  // Global element index of this thread's slot `j` (a C expression over j).
  std::string elem(const std::string& j) const {
    if (V_ == 1) return "htr_tid + " + j + " * " + std::to_string(T_);
    return "(" + j + " / " + std::to_string(V_) + ") * " + std::to_string(TV()) + " + htr_tid * " + std::to_string(V_) +
           " + (" + j + " % " + std::to_string(V_) + ")";
  }
  void line(const std::string& l) { s_ += std::string(2 * depth_, ' ') + l + "\n"; }

  uint32_t root(uint32_t id) const {
    while (alias_[id] >= 0) id = static_cast<uint32_t>(alias_[id]);
    return id;
  }
  // The thread's element `j` (global index `e`) of a value; the value itself for scalars.
  std::string at(uint32_t id) const {
    id = root(id);
    if (splat_of_[id] >= 0) return at(static_cast<uint32_t>(splat_of_[id]));
    if (!type(id).is_tile()) return v(id);
    if (arange_[id] >= 0) return "(int32_t)(" + std::to_string(arange_[id]) + " + e)";
    if (!expr_[id].empty()) return "(" + expr_[id] + ")";
    return v(id) + "[j]";
  }

  void prepare() {
    const size_t nv = a_.value_types.size();
    splat_of_.assign(nv, -1);
    alias_.assign(nv, -1);
    arange_.assign(nv, -1);
    std::vector<int64_t> def(nv, -1);
    for (size_t i = 0; i < k_.ops.size(); ++i)
      for (uint32_t j = 0; j < defined_count(k_.ops[i]); ++j) def[a_.first_value[i] + j] = static_cast<int64_t>(i);
    // The pointer argument a pointer value is based on (-1: not traced, e.g.
    // a loaded pointer).
    auto base = [&](uint32_t id) -> int64_t {
      while (id >= k_.args.size()) {
        if (def[id] < 0) return -1;
        const Op& o = k_.ops[static_cast<size_t>(def[id])];
        if (o.opcode != HTR_KIR_OP_PTR_ADD && o.opcode != HTR_KIR_OP_SPLAT && o.opcode != HTR_KIR_OP_BROADCAST)
          return -1;
        id = o.operands[0];
      }
      return id;
    };
    // A store needs a barrier after it when another thread's later access
    // (any access, when the store is inside a loop) may touch what it wrote:
    // a load or store through the same argument, or an untraced pointer.
    // Readonly arguments are never stored through.
    // An atomic add counts as a store here (conservative: a later plain store through the same
    // argument must not overtake another thread's add).
    auto writes = [&](size_t i) {
      return k_.ops[i].opcode == HTR_KIR_OP_STORE || k_.ops[i].opcode == HTR_KIR_OP_ATOMIC_ADD;
    };
    std::vector<int64_t> mem_base(k_.ops.size(), -2);  // -2: not a memory op
    for (size_t i = 0; i < k_.ops.size(); ++i)
      if (k_.ops[i].opcode == HTR_KIR_OP_LOAD || writes(i))
        mem_base[i] = base(k_.ops[i].operands[0]);
    std::vector<bool> in_loop(k_.ops.size(), false);
    for (size_t i = 0; i < k_.ops.size(); ++i)
      if (k_.ops[i].opcode == HTR_KIR_OP_FOR)
        for (size_t j = i + 1; j < a_.body_end[i] && j < k_.ops.size(); ++j) in_loop[j] = true;
    sync_after_.assign(k_.ops.size(), false);
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      if (!writes(i)) continue;
      for (size_t j = in_loop[i] ? 0 : i + 1; j < k_.ops.size() && !sync_after_[i]; ++j)
        if (j != i && mem_base[j] != -2 && (mem_base[j] < 0 || mem_base[i] < 0 || mem_base[j] == mem_base[i]))
          sync_after_[i] = true;
    }
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      const uint32_t r = a_.first_value[i];
      if (op.opcode == HTR_KIR_OP_SPLAT) splat_of_[r] = op.operands[0];
      if (op.opcode == HTR_KIR_OP_BROADCAST) alias_[r] = op.operands[0];
      if (op.opcode == HTR_KIR_OP_ARANGE) arange_[r] = op.attrs[0];
    }
    expr_.assign(nv, std::string());
    analyze_chunks();
  }

  // ---- chunk linearity: which index tiles are known functions of the lane over a chunk ----
  // For a tile value, Lin says what holds over every chunk of V_ consecutive elements e0 + k
  // (e0 a multiple of V_, k < V_): known: x(e0 + k) = x(e0) + k * slope (i32/i64 wrapping
  // arithmetic, exactly, once the `checks` values are >= 0 at e0); aligned: x(e0) is a multiple
  // of V_ (so a slope-1 x cannot wrap within a chunk); mono (bools): the chunk is all true iff it
  // is true at k = 0 and k = V_ - 1. Scalars are uniform (slope 0). What it is for: a load or
  // store through a slope-1 pointer tile tests its chunk at the two ends instead of element by
  // element (open_chunk), and such tiles are spelled inline where used instead of being held
  // per element (expr_), so the vector path computes no per-element index.
  struct Lin {
    bool known = false;
    int64_t slope = 0;
    bool aligned = false;
    bool mono = false;
    bool is_const = false;
    int64_t c = 0;
    std::vector<uint32_t> checks;  // dividends that must be >= 0 at the chunk's first element
  };
  static Lin uniform(bool is_const, int64_t c, int V) {
    Lin l;
    l.known = true;
    l.mono = true;
    l.is_const = is_const;
    l.c = c;
    l.aligned = is_const && c % V == 0;
    return l;
  }
  static void add_checks(Lin* l, const Lin& a) {
    for (uint32_t c : a.checks) l->checks.push_back(c);
  }
  void analyze_chunks() {
    const size_t nv = a_.value_types.size();
    lin_.assign(nv, Lin());
    for (size_t i = 0; i < k_.args.size() && i < nv; ++i) {
      const bool sp = i < spec_.size() && spec_[i].set && !k_.args[i].pointer && is_int(k_.args[i].dtype);
      lin_[i] = uniform(sp, sp ? spec_[i].i : 0, V_);
    }
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      const uint32_t r = a_.first_value[i];
      const uint32_t nres = defined_count(op);
      for (uint32_t j = 0; j < nres; ++j) {
        if (!type(r + j).is_tile()) lin_[r + j] = uniform(false, 0, V_);
      }
      if (nres == 0) continue;
      if (op.opcode == HTR_KIR_OP_CONST && is_int(op.results[0].dtype)) lin_[r] = uniform(true, op.attrs[0], V_);
      if (!type(r).is_tile() || op.opcode == HTR_KIR_OP_FOR) continue;
      lin_[r] = lin_tile(op, r);
    }
  }
  Lin lin_tile(const Op& op, uint32_t r) const {
    const Lin none;
    auto L = [&](size_t j) -> const Lin& { return lin_[op.operands[j]]; };
    const htr_dtype_t dt = type(r).dtype;
    const bool index = is_int(dt) || dt == HTR_DTYPE_BOOL || type(r).ptr;
    if (!index) return none;
    Lin l;
    switch (op.opcode) {
      case HTR_KIR_OP_ARANGE:
        l.known = true;
        l.slope = 1;
        l.aligned = op.attrs[0] % V_ == 0;
        return l;
      case HTR_KIR_OP_SPLAT: case HTR_KIR_OP_BROADCAST:
        return L(0);
      case HTR_KIR_OP_PTR_ADD:
        if (!L(0).known || !L(1).known) return none;
        l.known = true;
        l.slope = L(0).slope + L(1).slope;
        add_checks(&l, L(0));
        add_checks(&l, L(1));
        return l;
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: {
        if (!is_int(dt) || !L(0).known || !L(1).known) return none;
        const bool add = op.opcode == HTR_KIR_OP_ADD;
        l.known = true;
        l.slope = add ? L(0).slope + L(1).slope : L(0).slope - L(1).slope;
        l.aligned = L(0).aligned && L(1).aligned;
        add_checks(&l, L(0));
        add_checks(&l, L(1));
        return l;
      }
      case HTR_KIR_OP_MUL: {
        if (!is_int(dt) || !L(0).known || !L(1).known) return none;
        const Lin &a = L(0), &b = L(1);
        l.known = true;
        if (b.is_const) {
          l.slope = a.slope * b.c;
          l.aligned = a.aligned || b.c % V_ == 0;
        } else if (a.is_const) {
          l.slope = b.slope * a.c;
          l.aligned = b.aligned || a.c % V_ == 0;
        } else if (a.slope == 0 && b.slope == 0) {
          l.aligned = a.aligned || b.aligned;
        } else {
          return none;
        }
        add_checks(&l, a);
        add_checks(&l, b);
        return l;
      }
      case HTR_KIR_OP_DIV: case HTR_KIR_OP_REM: {
        // Truncating division by a constant c > 0, c a multiple of V: over a chunk of an aligned
        // slope-1 x that is >= 0 at its start, x / c is constant and x % c steps by 1 (x(e0) and c
        // multiples of V, so x(e0) % c + k < c).
        if (!is_int(dt) || !L(0).known || !L(1).is_const || L(1).c <= 0) return none;
        const Lin& a = L(0);
        const bool rem = op.opcode == HTR_KIR_OP_REM;
        l.known = true;
        add_checks(&l, a);
        if (a.slope == 0) return l;
        if (a.slope != 1 || !a.aligned || L(1).c % V_ != 0) return none;
        l.checks.push_back(op.operands[0]);
        l.slope = rem ? 1 : 0;
        l.aligned = rem;
        return l;
      }
      case HTR_KIR_OP_CAST: {
        const Lin& a = L(0);
        const htr_dtype_t from = type(op.operands[0]).dtype;
        if (!a.known || !is_int(dt) || !is_int(from)) return none;
        // Narrowing wraps (exact modulo 2^32); widening sign-extends, exact where x cannot wrap
        // within the chunk (uniform, or aligned slope 1).
        const bool widen = dt == HTR_DTYPE_I64 && from == HTR_DTYPE_I32;
        if (widen && !(a.slope == 0 || (a.slope == 1 && a.aligned))) return none;
        return a;
      }
      case HTR_KIR_OP_CMP: {
        const Lin &a = L(0), &b = L(1);
        if (!a.known || !b.known) return none;
        if (a.slope == 0 && b.slope == 0) {
          l = uniform(false, 0, V_);
        } else {
          // A strict or non-strict order between an aligned slope-1 tile and a uniform one holds on
          // a prefix or a suffix of the chunk: all of it iff both ends.
          const bool order = op.attrs[0] >= HTR_KIR_CMP_LT;
          const bool lin_a = a.slope == 1 && a.aligned && b.slope == 0;
          const bool lin_b = b.slope == 1 && b.aligned && a.slope == 0;
          if (!order || !(lin_a || lin_b)) return none;
          l.mono = true;  // not `known`: the values change within the chunk
        }
        add_checks(&l, a);
        add_checks(&l, b);
        return l;
      }
      case HTR_KIR_OP_AND: {
        const Lin &a = L(0), &b = L(1);
        if (dt != HTR_DTYPE_BOOL || !a.mono || !b.mono) return none;
        l.known = a.known && b.known && a.slope == 0 && b.slope == 0;
        l.mono = true;
        add_checks(&l, a);
        add_checks(&l, b);
        return l;
      }
      case HTR_KIR_OP_OR: case HTR_KIR_OP_NOT: {
        for (size_t j = 0; j < op.operands.size(); ++j)
          if (!L(j).known || L(j).slope != 0) return none;
        l = uniform(false, 0, V_);
        for (size_t j = 0; j < op.operands.size(); ++j) add_checks(&l, L(j));
        return l;
      }
      default:
        return none;
    }
  }

  // for each of this thread's elements: stmt (guarded when n is not a multiple of T)
  void each(uint32_t id, const std::string& stmt) {
    const int64_t n = type(id).numel();
    const std::string g = n % TV() != 0 ? "if (e < " + std::to_string(n) + ") " : "";
    line("#pragma unroll");
    line("for (int32_t j = 0; j < " + std::to_string(per_thread(id)) + "; ++j) { const int32_t e = " + elem("j") +
         "; (void)e; " + g + stmt + " }");
  }
  void declare(uint32_t id) {
    line(ct(id) + " " + v(id) + "[" + std::to_string(per_thread(id)) + "];");
  }
  // `exact`: expr is already representable in r's dtype (a load), so no rounding.
  void elementwise(uint32_t r, const std::string& expr, bool exact = false) {
    const Type& t = type(r);
    const std::string x = t.ptr || exact ? expr : sp_.rnd(t.dtype, expr);
    if (!t.is_tile()) {
      line((t.ptr ? ct(r) + " const " + v(r) + " = " + x : "const " + ct(r) + " " + v(r) + " = " + x) + ";");
      return;
    }
    // Index tiles that are known functions of the lane are spelled where they are used (short
    // expressions only: they are repeated at every use).
    const Lin& l = lin_[r];
    if ((l.known || l.mono) && (is_int(t.dtype) || t.dtype == HTR_DTYPE_BOOL || t.ptr) && x.size() <= 320) {
      expr_[r] = x;
      return;
    }
    declare(r);
    each(r, v(r) + "[j] = " + x + ";");
  }
  // A store of x (a value of dtype d, so already rounded to d): bf16 keeps the upper half of the
  // f32 bits, which is exactly htr_bf16_of(x) for such an x, NaN payloads included.
  std::string store_stmt(htr_dtype_t d, const std::string& p, const std::string& x) const {
    if (d == HTR_DTYPE_BF16) return "*" + p + " = (uint16_t)(htr_f32_bits(" + x + ") >> 16);";
    return sp_.store_stmt(d, p, x);
  }
  void barrier_after_store(uint32_t i) {
    if (sync_after_[i]) line("__syncthreads();");
  }


  void emit_op(uint32_t i) {
    static const char* const cmp[] = {"==", "!=", "<", "<=", ">", ">="};
    const Op& op = k_.ops[i];
    const uint32_t r = a_.first_value[i];
    auto in = [&](size_t j) { return op.operands[j]; };
    switch (op.opcode) {
      case HTR_KIR_OP_PROGRAM_ID:
        line("const int32_t " + v(r) + " = pid" + std::to_string(op.attrs[0]) + ";");
        break;
      case HTR_KIR_OP_NUM_PROGRAMS:
        line("const int32_t " + v(r) + " = htr_g" + std::to_string(op.attrs[0]) + ";");
        break;
      case HTR_KIR_OP_CONST:
        line("const " + ct(r) + " " + v(r) + " = " + sp_.literal(op.results[0].dtype, op.attrs[0]) + ";");
        break;
      case HTR_KIR_OP_ARANGE: case HTR_KIR_OP_SPLAT: case HTR_KIR_OP_BROADCAST:
        break;  // read through at()
      case HTR_KIR_OP_PTR_ADD:
        elementwise(r, "(" + at(in(0)) + " + " + at(in(1)) + ")");
        break;
      case HTR_KIR_OP_LOAD: {
        const htr_dtype_t d = type(in(0)).dtype;
        if (vector_ok(in(0))) {
          emit_vector_load(op, r);
          break;
        }
        std::string x = sp_.load_expr(d, at(in(0)));
        if (op.operands.size() > 1)
          x = "(" + at(in(1)) + " ? " + x + " : " + (op.operands.size() == 3 ? at(in(2)) : "(" + d_.compute_type(d) + ")0") + ")";
        // A loaded f16/bf16 (or `other`, a value of that dtype) is representable: no rounding.
        elementwise(r, x, true);
        break;
      }
      case HTR_KIR_OP_STORE: {
        const Type& t = type(in(0));
        std::string st = store_stmt(t.dtype, at(in(0)), at(in(1)));
        if (op.operands.size() == 3) st = "if (" + at(in(2)) + ") " + st;
        if (t.is_tile() && vector_ok(in(0))) emit_vector_store(op, st);
        else if (t.is_tile()) each(in(0), st);
        else line("if (htr_tid == 0) { " + st + " }");
        barrier_after_store(i);
        break;
      }
      case HTR_KIR_OP_ATOMIC_ADD: {
        // Element by element on the thread's own elements (never the vector chunk path: elements
        // may add into one address, and every add takes effect); a scalar by thread 0.
        const Type& t = type(in(0));
        std::string st = d_.atomic_add(t.dtype, at(in(0)), at(in(1)));
        if (op.operands.size() == 3) st = "if (" + at(in(2)) + ") " + st;
        if (t.is_tile()) each(in(0), st);
        else line("if (htr_tid == 0) { " + st + " }");
        barrier_after_store(i);
        break;
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR: {
        const bool fast = fast_ && op.opcode == HTR_KIR_OP_DIV && type(in(0)).dtype == HTR_DTYPE_F32;
        elementwise(r, fast ? "__fdividef(" + at(in(0)) + ", " + at(in(1)) + ")"
                            : sp_.binary_expr(op.opcode, type(in(0)).dtype, at(in(0)), at(in(1))));
        break;
      }
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT: {
        const bool fast = fast_ && op.opcode == HTR_KIR_OP_EXP && type(in(0)).dtype == HTR_DTYPE_F32;
        elementwise(r, fast ? "__expf(" + at(in(0)) + ")" : sp_.unary_expr(op.opcode, type(in(0)).dtype, at(in(0))));
        break;
      }
      case HTR_KIR_OP_CMP:
        elementwise(r, "(" + at(in(0)) + " " + cmp[op.attrs[0]] + " " + at(in(1)) + ")");
        break;
      case HTR_KIR_OP_SELECT:
        elementwise(r, "(" + at(in(0)) + " ? " + at(in(1)) + " : " + at(in(2)) + ")");
        break;
      case HTR_KIR_OP_CAST:
        elementwise(r, sp_.cast_expr(type(in(0)).dtype, type(r).dtype, at(in(0))));
        break;
      case HTR_KIR_OP_REDUCE: emit_reduce(op, r); break;
      case HTR_KIR_OP_FOR: emit_for(i, op, r); break;
      case HTR_KIR_OP_YIELD: emit_yield(op); break;
      default: break;  // excluded by rows_supported()
    }
  }

  static int elem_bytes(htr_dtype_t d) {
    switch (d) {
      case HTR_DTYPE_BOOL: return 1;
      case HTR_DTYPE_BF16: case HTR_DTYPE_F16: return 2;
      case HTR_DTYPE_I64: return 8;
      default: return 4;
    }
  }
  // A load or store through pointer tile `p` may take the vector path: the
  // chunks hold several elements, the pointer tile is held per element (not
  // a splat), and a chunk is at least 4 bytes.
  bool vector_ok(uint32_t p) const {
    const uint32_t r = root(p);
    return V_ > 1 && type(r).is_tile() && type(r).ptr && splat_of_[r] < 0 && arange_[r] < 0 &&
           V_ * elem_bytes(type(r).dtype) >= 4;
  }
  // Per chunk q of this thread: `htr_vec` is true when the chunk's V_
  // elements all exist, their pointers are consecutive from htr_p0 (checked
  // element by element, so the path is exact for any pointer tile), htr_p0 is
  // aligned to the vector word and every mask element is true. Opens the
  // chunk's scope (closed by the caller).
  std::string word_type(htr_dtype_t d, int* words, int* align) const {
    const int bytes = V_ * elem_bytes(d);
    *align = bytes >= 16 ? 16 : bytes;
    *words = bytes >= 16 ? bytes / 16 : 1;
    return bytes >= 16 ? "uint4" : bytes == 8 ? "uint2" : "uint32_t";
  }
  void open_chunk(uint32_t p, const Op& op, size_t mask_operand, int64_t n, int align) {
    const std::string Vs = std::to_string(V_);
    line("#pragma unroll");
    line("for (int32_t q = 0; q < " + std::to_string(per_thread(p) / V_) + "; ++q) {");
    ++depth_;
    line("const int32_t htr_e0 = q * " + std::to_string(TV()) + " + htr_tid * " + Vs + ";");
    const bool masked = op.operands.size() > mask_operand;
    line("bool htr_vec = " + std::string(n % TV() != 0 ? "htr_e0 + " + Vs + " <= " + std::to_string(n) : "true") + ";");
    line(ct(p) + " htr_p0;");
    const std::string mask = masked ? at(op.operands[mask_operand]) : std::string();
    const Lin& lp = lin_[root(p)];
    const Lin* lm = masked ? &lin_[root(op.operands[mask_operand])] : nullptr;
    // A slope-1 pointer tile is consecutive by construction (analyze_chunks) once its dividends
    // (and the mask's) are >= 0 at the first element; the last element's pointer rules out a wrap
    // of a narrower offset inside the chunk, and a monotone mask is tested at the two ends.
    const bool linear = lp.known && lp.slope == 1;
    std::string first = "((uint64_t)htr_p0 & " + std::to_string(align - 1) + "u) == 0";
    if (linear) {
      std::vector<uint32_t> checks = lp.checks;
      if (lm != nullptr) checks.insert(checks.end(), lm->checks.begin(), lm->checks.end());
      for (uint32_t c : checks) {
        const uint32_t rc = root(c);
        if (rc < arange_.size() && arange_[rc] >= 0) continue;  // start + e, e < the tile's length
        first += " && " + at(c) + " >= 0";
      }
    }
    if (masked) first += " && " + mask;
    line("{ const int32_t j = q * " + Vs + "; const int32_t e = htr_e0; (void)j; (void)e; htr_p0 = " + at(p) +
         "; if (htr_vec) htr_vec = " + first + "; }");
    if (linear) {
      const std::string last = std::to_string(V_ - 1);
      line("{ const int32_t j = q * " + Vs + " + " + last + "; const int32_t e = htr_e0 + " + last +
           "; (void)j; (void)e; if (htr_vec) htr_vec = " + at(p) + " == htr_p0 + " + last +
           (masked && lm->mono ? " && " + mask : std::string()) + "; }");
      if (!masked || lm->mono) return;
    }
    // Element by element: the pointers (unless linear) and the mask.
    std::string each_k = linear ? std::string() : at(p) + " == htr_p0 + k";
    if (masked) each_k += (each_k.empty() ? "" : " && ") + mask;
    line("#pragma unroll");
    line("for (int32_t k = 1; k < " + Vs + "; ++k) { const int32_t j = q * " + Vs +
         " + k; const int32_t e = htr_e0 + k; (void)j; (void)e; if (htr_vec) htr_vec = " + each_k + "; }");
  }
  void emit_vector_load(const Op& op, uint32_t r) {
    const uint32_t p = op.operands[0];
    const htr_dtype_t d = type(p).dtype;
    const int64_t n = type(p).numel();
    int words = 0, align = 0;
    const std::string w = word_type(d, &words, &align), st = d_.storage_type(d), Vs = std::to_string(V_);
    std::string x = sp_.load_expr(d, at(p));
    if (op.operands.size() > 1)
      x = "(" + at(op.operands[1]) + " ? " + x + " : " +
          (op.operands.size() == 3 ? at(op.operands[2]) : "(" + d_.compute_type(d) + ")0") + ")";
    declare(r);
    open_chunk(p, op, 1, n, align);
    line("if (htr_vec) {");
    line("  " + w + " htr_w[" + std::to_string(words) + "];");
    line("  #pragma unroll");
    line("  for (int32_t u = 0; u < " + std::to_string(words) + "; ++u) htr_w[u] = ((const " + w + "*)htr_p0)[u];");
    line("  const " + st + "* const htr_t = (const " + st + "*)htr_w;");
    line("  #pragma unroll");
    line("  for (int32_t k = 0; k < " + Vs + "; ++k) " + v(r) + "[q * " + Vs + " + k] = " +
         sp_.load_expr(d, "(htr_t + k)") + ";");
    line("} else {");
    line("  #pragma unroll");
    line("  for (int32_t k = 0; k < " + Vs + "; ++k) { const int32_t j = q * " + Vs +
         " + k; const int32_t e = htr_e0 + k; (void)e; " + (n % TV() != 0 ? "if (e < " + std::to_string(n) + ") " : "") +
         v(r) + "[j] = " + x + "; }");
    line("}");
    --depth_;
    line("}");
  }
  // `scalar` is the per-element store statement (masked where the op is).
  void emit_vector_store(const Op& op, const std::string& scalar) {
    const uint32_t p = op.operands[0];
    const htr_dtype_t d = type(p).dtype;
    const int64_t n = type(p).numel();
    int words = 0, align = 0;
    const std::string w = word_type(d, &words, &align), st = d_.storage_type(d), Vs = std::to_string(V_);
    open_chunk(p, op, 2, n, align);
    line("if (htr_vec) {");
    line("  " + w + " htr_w[" + std::to_string(words) + "];");
    line("  " + st + "* const htr_t = (" + st + "*)htr_w;");
    line("  #pragma unroll");
    line("  for (int32_t k = 0; k < " + Vs + "; ++k) { const int32_t j = q * " + Vs +
         " + k; const int32_t e = htr_e0 + k; (void)e; " + store_stmt(d, "(htr_t + k)", at(op.operands[1])) + " }");
    line("  #pragma unroll");
    line("  for (int32_t u = 0; u < " + std::to_string(words) + "; ++u) ((" + w + "*)htr_p0)[u] = htr_w[u];");
    line("} else {");
    line("  #pragma unroll");
    line("  for (int32_t k = 0; k < " + Vs + "; ++k) { const int32_t j = q * " + Vs +
         " + k; const int32_t e = htr_e0 + k; (void)e; " + (n % TV() != 0 ? "if (e < " + std::to_string(n) + ") " : "") +
         scalar + " }");
    line("}");
    --depth_;
    line("}");
  }

  // 1-D tile -> scalar: thread partial (element order), xor shuffles over
  // the warp, warp partials in warp order through shared memory.
  void emit_reduce(const Op& op, uint32_t r) {
    const uint32_t x = op.operands[0];
    const htr_dtype_t dt = type(x).dtype;
    const bool f = is_float(dt);
    const std::string ctype = d_.compute_type(dt);
    std::string init;
    uint16_t combine = HTR_KIR_OP_ADD;
    switch (op.attrs[0]) {
      case HTR_KIR_REDUCE_MAX:
        init = f ? "(-INFINITY)" : (dt == HTR_DTYPE_I32 ? "INT32_MIN" : "INT64_MIN");
        combine = HTR_KIR_OP_MAX;
        break;
      case HTR_KIR_REDUCE_MIN:
        init = f ? "INFINITY" : (dt == HTR_DTYPE_I32 ? "INT32_MAX" : "INT64_MAX");
        combine = HTR_KIR_OP_MIN;
        break;
      default:
        init = "(" + ctype + ")0";
    }
    const std::string p = v(r) + "_p", sh = v(r) + "_s";
    const uint32_t warps = T_ / 32;
    line(ctype + " " + v(r) + ";");
    line("{");
    ++depth_;
    line(ctype + " " + p + " = " + init + ";");
    each(x, p + " = " + sp_.binary_expr(combine, dt, p, at(x)) + ";");
    line("#pragma unroll");
    line("for (int32_t o = 16; o > 0; o >>= 1) " + p + " = " +
         sp_.binary_expr(combine, dt, p, "__shfl_xor_sync(0xffffffffu, " + p + ", o)") + ";");
    if (warps > 1) {
      line("__shared__ " + ctype + " " + sh + "[" + std::to_string(warps) + "];");
      line("if (htr_lane == 0) " + sh + "[htr_warp] = " + p + ";");
      line("__syncthreads();");
      line(p + " = " + sh + "[0];");
      line("#pragma unroll");
      line("for (int32_t w = 1; w < " + std::to_string(warps) + "; ++w) " + p + " = " +
           sp_.binary_expr(combine, dt, p, sh + "[w]") + ";");
      line("__syncthreads();");
    }
    line(v(r) + " = " + sp_.rnd(dt, p) + ";");
    --depth_;
    line("}");
  }

  void emit_for(uint32_t i, const Op& op, uint32_t r) {
    const uint32_t n = static_cast<uint32_t>(op.results.size());
    const uint32_t iv = r + n;
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t b = iv + 1 + j, init = op.operands[3 + j];
      if (type(b).is_tile()) {
        declare(b);
        each(b, v(b) + "[j] = " + at(init) + ";");
      } else {
        line(ct(b) + " " + v(b) + " = " + at(init) + ";");
      }
      alias_[r + j] = b;  // the result is the carried variable after the loop
    }
    const std::string it = d_.compute_type(type(iv).dtype);
    line("for (int64_t " + v(iv) + "_t = " + v(op.operands[0]) + "; " + v(op.operands[2]) + " > 0 && " + v(iv) +
         "_t < " + v(op.operands[1]) + "; " + v(iv) + "_t += " + v(op.operands[2]) + ") {");
    ++depth_;
    line("const " + it + " " + v(iv) + " = (" + it + ")" + v(iv) + "_t;");
    ends_.push_back({a_.body_end[i], i});
  }

  // Through temporaries: a yielded value may be another carried variable.
  void emit_yield(const Op& op) {
    const uint32_t fi = ends_.back().second;
    const Op& fo = k_.ops[fi];
    const uint32_t first = a_.first_value[fi] + static_cast<uint32_t>(fo.results.size()) + 1;
    const uint32_t n = static_cast<uint32_t>(op.operands.size());
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t b = first + j;
      if (root(op.operands[j]) == b) continue;
      if (type(b).is_tile()) {
        line(ct(b) + " " + v(b) + "_n[" + std::to_string(per_thread(b)) + "];");
        each(b, v(b) + "_n[j] = " + at(op.operands[j]) + ";");
      } else {
        line("const " + ct(b) + " " + v(b) + "_n = " + at(op.operands[j]) + ";");
      }
    }
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t b = first + j;
      if (root(op.operands[j]) == b) continue;
      if (type(b).is_tile()) each(b, v(b) + "[j] = " + v(b) + "_n[j];");
      else line(v(b) + " = " + v(b) + "_n;");
    }
  }

  void close_loop() {
    ends_.pop_back();
    --depth_;
    line("}");
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  const Dialect& d_;
  const CSpelling sp_{d_};
  const uint32_t T_;
  const bool fast_;  // CudaTarget::fast_math
  int V_ = 1;  // consecutive elements per chunk (see elem())
  std::string s_;
  int depth_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> ends_;  // (body end, for op index)
  std::vector<int64_t> splat_of_;  // tile -> the scalar it splats, or -1
  std::vector<int64_t> alias_;     // value -> value with the same elements (broadcast, for results)
  std::vector<int64_t> arange_;    // arange tile -> its start, or -1
  std::vector<bool> sync_after_;   // store op index -> a barrier follows it
  std::vector<Lin> lin_;           // value -> what holds over a chunk (analyze_chunks)
  std::vector<std::string> expr_;  // index tile -> its element expression (in e), else empty
};

}  // namespace

bool rows_supported(const Kernel& k, const Analysis& a, uint32_t* max_len, std::string* why, uint32_t chunks,
                    uint32_t loop_chunk) {
  uint32_t m = 1;
  for (const Type& t : a.value_types) {
    if (t.rank > 1) {
      *why = "a tile of rank " + std::to_string(t.rank) + " (" + t.str() + ")";
      return false;
    }
    if (t.rank == 1 && t.shape[0] > m) m = t.shape[0];
  }
  bool loops = false;
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const Op& op = k.ops[i];
    switch (op.opcode) {
      case HTR_KIR_OP_FOR: loops = true; break;
      case HTR_KIR_OP_DOT: case HTR_KIR_OP_EXPAND_DIMS:
        *why = std::string("op ") + opcode_name(op.opcode);
        return false;
      case HTR_KIR_OP_BROADCAST: {
        const Type& x = a.value_types[op.operands[0]];
        bool splat = false;  // a broadcast of a splat reads the scalar
        uint32_t id = op.operands[0];
        for (size_t j = 0; j < i && !splat; ++j)
          if (k.ops[j].opcode == HTR_KIR_OP_SPLAT && a.first_value[j] == id) splat = true;
        if (!splat && !x.same_shape(op.results[0])) {
          *why = "a broadcast of a size-1 tile";
          return false;
        }
        break;
      }
      case HTR_KIR_OP_REDUCE:
        if (a.value_types[op.operands[0]].rank != 1) {
          *why = "a reduce of a non-1-D tile";
          return false;
        }
        break;
      default: break;
    }
  }
  // Straight-line programs (elementwise groups, fused LayerNorm rows, copies) ask for a thread per
  // chunk of 8 elements: fewer threads, a 16-byte bf16 access each, fewer index instructions per
  // element (a 1024-lane LayerNorm row: 128 threads x 8 instead of 256 x 4, 1.28 -> 2.63 TB/s on
  // the H200). Programs with loops (column sums, layer_norm_grad,
  // embedding gradients) keep a thread per element: their grids are often a few hundred
  // programs, and with a quarter of the threads they ran slower in the gpt2 step (cast+sum 53 ->
  // 67 us a call, layer_norm_grad 148 -> 199 us, H200).
  const uint32_t per = 8 * (chunks == 2 || chunks == 4 ? chunks : 1);
  const uint32_t lc = loop_chunk == 2 || loop_chunk == 4 || loop_chunk == 8 ? loop_chunk : 1;
  *max_len = loops ? (m + lc - 1) / lc : (m + per - 1) / per;
  return true;
}

Status render_cuda_rows(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                        uint32_t threads, Rendered* out, bool fast_math) {
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    return error(HTR_STATUS_INVALID_ARGUMENT, "row lowering: %u threads (32..1024, a multiple of 32)", threads);
  RowRenderer r(k, a, spec, threads, fast_math);
  return r.run(out);
}

uint32_t row_threads_for(uint32_t max_len, uint32_t cap) {
  uint32_t t = 32;
  while (t < max_len && t < cap) t *= 2;
  return t > cap ? cap : t;
}

}  // namespace htr_sdk::ir
