/*
 * htr_kernel_ir.h — constants of the serialized kernel IR and the small C
 * types shared by the plugin ABI (htr_plugin.h, v1.1) and the embedding API
 * (htr_kernel.h). C99, no project includes besides htr_types.h.
 *
 * The byte format itself is specified in abi/KERNEL_IR.md; this header gives
 * its numbers (magic, version, section tags, opcodes, enums) so that every
 * reader and writer agrees on them. Values never change; new opcodes and
 * sections are appended (minor version bump of the IR format, line in
 * abi/CHANGELOG.md).
 */
#ifndef HTR_KERNEL_IR_H_
#define HTR_KERNEL_IR_H_

#include "htr_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ format ---- */

#define HTR_KIR_MAGIC 0x4b525448u /* bytes "HTRK" read as little-endian u32 */
#define HTR_KIR_VERSION_MAJOR 1u  /* readers reject another major */
#define HTR_KIR_VERSION_MINOR 1u  /* readers accept any minor of their major;
                                   1.1: ATOMIC_ADD */

/* Section tags (little-endian u32 of four ASCII bytes). */
#define HTR_KIR_SECTION_NAME 0x454d414eu /* "NAME": kernel name */
#define HTR_KIR_SECTION_ARGS 0x53475241u /* "ARGS": kernel arguments */
#define HTR_KIR_SECTION_BODY 0x59444f42u /* "BODY": the op list */

/* Limits every reader enforces (a writer never exceeds them). */
#define HTR_KIR_MAX_RANK 4           /* tile rank */
#define HTR_KIR_MAX_DIM 65536        /* largest tile dimension */
#define HTR_KIR_MAX_TILE_ELEMS 1048576 /* product of a tile's dims */
#define HTR_KIR_MAX_ARGS 64
#define HTR_KIR_MAX_OPS 1048576
#define HTR_KIR_MAX_OPERANDS 255
#define HTR_KIR_MAX_ATTRS 8
#define HTR_KIR_MAX_LOOP_DEPTH 16
#define HTR_KIR_MAX_NAME 256         /* bytes of a kernel or argument name */
#define HTR_KIR_GRID_AXES 3

/* Argument kinds (ARGS section). */
#define HTR_KIR_ARG_SCALAR 0u  /* a value of dtype */
#define HTR_KIR_ARG_POINTER 1u /* a pointer to elements of dtype */

/* Argument flags. */
#define HTR_KIR_ARG_READONLY 1u /* pointer: never stored through */

/* Opcodes (u16). Operand and attribute rules: abi/KERNEL_IR.md. */
typedef enum htr_kir_opcode_t {
  HTR_KIR_OP_PROGRAM_ID = 1,   /* attrs [axis] -> i32 scalar */
  HTR_KIR_OP_NUM_PROGRAMS = 2, /* attrs [axis] -> i32 scalar */
  HTR_KIR_OP_CONST = 3,        /* attrs [bits] -> scalar */
  HTR_KIR_OP_ARANGE = 4,       /* attrs [start, end] -> i32 [end-start] */
  HTR_KIR_OP_SPLAT = 5,        /* (scalar) -> tile */
  HTR_KIR_OP_BROADCAST = 6,    /* (tile) -> tile, size-1 dims expand */
  HTR_KIR_OP_EXPAND_DIMS = 7,  /* (tile) attrs [axis] -> rank+1 */
  HTR_KIR_OP_PTR_ADD = 8,      /* (ptr, offset i32|i64) -> ptr */
  HTR_KIR_OP_LOAD = 9,         /* (ptr [, mask [, other]]) -> value */
  HTR_KIR_OP_STORE = 10,       /* (ptr, value [, mask]) -> nothing */
  HTR_KIR_OP_ADD = 11,
  HTR_KIR_OP_SUB = 12,
  HTR_KIR_OP_MUL = 13,
  HTR_KIR_OP_DIV = 14,         /* integer: truncates; /0 gives 0 */
  HTR_KIR_OP_REM = 15,         /* integer only; %0 gives 0 */
  HTR_KIR_OP_MAX = 16,
  HTR_KIR_OP_MIN = 17,
  HTR_KIR_OP_AND = 18,         /* bool or integer */
  HTR_KIR_OP_OR = 19,          /* bool or integer */
  HTR_KIR_OP_NEG = 20,
  HTR_KIR_OP_ABS = 21,
  HTR_KIR_OP_EXP = 22,         /* float only, from here to ERF */
  HTR_KIR_OP_LOG = 23,
  HTR_KIR_OP_SQRT = 24,
  HTR_KIR_OP_RSQRT = 25,
  HTR_KIR_OP_TANH = 26,
  HTR_KIR_OP_ERF = 27,
  HTR_KIR_OP_NOT = 28,         /* bool only */
  HTR_KIR_OP_CMP = 29,         /* (a, b) attrs [pred] -> bool */
  HTR_KIR_OP_SELECT = 30,      /* (cond bool, a, b) */
  HTR_KIR_OP_CAST = 31,        /* (x) -> result dtype */
  HTR_KIR_OP_REDUCE = 32,      /* (tile) attrs [kind, axis] */
  HTR_KIR_OP_DOT = 33,         /* (a [M,K], b [K,N], acc [M,N]) -> [M,N] */
  HTR_KIR_OP_FOR = 34,         /* (lo, hi, step, init...) attrs [body_len] */
  HTR_KIR_OP_YIELD = 35,       /* (values...) ends a FOR body */
  HTR_KIR_OP_ATOMIC_ADD = 36,  /* (ptr, value [, mask]) -> nothing; f32/i32;
                                  IR 1.1 */
  HTR_KIR_OP_COUNT_ = 37       /* not an opcode; one past the last */
} htr_kir_opcode_t;

/* CMP predicates. */
typedef enum htr_kir_cmp_t {
  HTR_KIR_CMP_EQ = 0,
  HTR_KIR_CMP_NE = 1,
  HTR_KIR_CMP_LT = 2,
  HTR_KIR_CMP_LE = 3,
  HTR_KIR_CMP_GT = 4,
  HTR_KIR_CMP_GE = 5
} htr_kir_cmp_t;

/* REDUCE kinds. */
typedef enum htr_kir_reduce_t {
  HTR_KIR_REDUCE_SUM = 0,
  HTR_KIR_REDUCE_MAX = 1,
  HTR_KIR_REDUCE_MIN = 2
} htr_kir_reduce_t;

/* ------------------------------------------- compile and launch types ---- */

/* A run-time value for one scalar kernel argument (specialization at compile
 * time, or an argument at launch). The reader uses `i` for integer and bool
 * arguments and `f` for float arguments. */
typedef struct htr_kernel_scalar_t {
  uint32_t arg_index;
  uint32_t reserved; /* 0 */
  int64_t i;
  double f;
} htr_kernel_scalar_t;

/* What a compile did. Caller sets struct_size; the callee fills what fits. */
typedef struct htr_kernel_compile_info_t {
  size_t struct_size;
  int32_t cache_hit;     /* 1: loaded from the on-disk cache, nothing built */
  int32_t reserved;
  uint64_t compile_ns;   /* wall time of the compile call */
  char backend[32];      /* e.g. "jit-c++", "interpreter"; NUL-terminated */
  char cache_key[40];    /* hex key of the on-disk cache entry, "" if none */
} htr_kernel_compile_info_t;
#define HTR_KERNEL_COMPILE_INFO_SIZE_V1_0                                        \
  (offsetof(htr_kernel_compile_info_t, cache_key) +                              \
   sizeof(((htr_kernel_compile_info_t*)0)->cache_key))

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_KERNEL_IR_H_ */
