// runtime/config.h — the runtime's only reader of the environment.
//
// Every HTR_* variable (and any key a plugin asks for through
// htr_host_api_t.config_get) is read here with secure_getenv, so a setuid
// process never takes plugin paths from an untrusted environment. No other
// file in libhtr calls getenv.
//
//   HTR_PLUGIN_PATH      ':'-separated plugin directories, searched first
//   HTR_VISIBLE_DEVICES  ','-separated device ids ("cpu:0") or plugin names
//   HTR_LAYERS           ','-separated layer names (interposers, runtime/layers/layers.h)
//   HTR_FAULT            the fault layer's rules (runtime/layers/layer_fault.h)
//   HTR_CACHE_DIR        kernel cache directory
//   HTR_LOG              error|warn|info|debug|trace (default warn)
//   HTR_FUSION           0/off/false: executables skip the fusion pass (scheduler)
//   HTR_FUSE_ATTENTION   0/off/false: the fusion pass leaves attention unfused
//                        (scheduler/attention_fusion.h)
//   HTR_EXEC             auto|host|device|staged: executables' execution mode
//                        (scheduler/device_exec.h)
//   HTR_KERNELS          auto|generated: generated: no library ops (device_exec.h)
//
// Switches of the scheduler's passes, read through EnvSwitchOn / ReadEnvSwitch (0/off/false,
// 1/on/true) or ReadEnv where a plan is built (never per step); for A/B runs and diagnostics,
// each documented where it is read:
//   HTR_FUSE_EPILOGUES, HTR_FUSE_ADAMW, HTR_FOLD_CASTS, HTR_FOLD_LN_CASTS, HTR_BIAS_EPILOGUE,
//   HTR_LOWP_BIAS, HTR_BAKE_LAYOUT, HTR_GRAPHS, HTR_ASSIGN_IN_PLACE, HTR_TILE_ROWS,
//   HTR_MATMUL_F32_OUT, HTR_GELU_EPILOGUE (also "force"), HTR_CAST_MULTI, HTR_COLSUM_MATMUL (also "force"), HTR_SHARE_WEIGHT_CASTS, HTR_COMPILE_THREADS, HTR_COLSUM_V, HTR_EMBED_CHUNK, HTR_DEVICE_LOWER_SKIP,
//   HTR_LN_BWD_ROWS (scheduler/layernorm_grad_group.h), HTR_ATTENTION_TILES (per-kernel attention
//   tiles, scheduler/attention_fusion.h), HTR_COLSUM_BLOCK, HTR_COLSUM_PROGRAMS,
//   HTR_COLSUM_UNROLL (sweep knobs, scheduler/colsum.cc)
#ifndef HTR_RUNTIME_CONFIG_H_
#define HTR_RUNTIME_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "htr/htr_plugin.h"

namespace htr::rt {

struct Config {
  std::optional<std::string> plugin_path;
  std::optional<std::string> visible_devices;
  std::optional<std::string> layers;
  std::optional<std::string> fault;  // HTR_FAULT
  std::optional<std::string> cache_dir;
  std::optional<std::string> log;
};

// Reads the environment now (each runtime takes a fresh snapshot at create).
Config ReadConfig();

// OMPI_COMM_WORLD_SIZE, which Open MPI's mpirun sets in every process it starts (htr_world_open
// reads it: set means "launched by mpirun"); nullopt when unset.
std::optional<std::string> ReadMpiLaunchSize();

// One environment value (secure_getenv); nullopt when unset.
std::optional<std::string> ReadEnv(const char* key);

// A switch read from the environment: true for 1/on/true, false for 0/off/false, nullopt when
// unset or anything else (the caller's default then decides).
std::optional<bool> ReadEnvSwitch(const char* key);

// A switch that is on unless the environment sets it to 0/off/false.
bool EnvSwitchOn(const char* key);

// For htr_host_api_t.config_get: the value of `key`, or NULL when unset or
// key is NULL/empty. The first read of a key is cached; the returned string
// lives until the process exits. Thread-safe, never throws.
const char* ConfigGetCached(const char* key) noexcept;

// Parses "error|warn|info|debug|trace" (case-insensitive) or a digit 0-4.
std::optional<htr_log_level_t> ParseLogLevel(const std::string& text);

// Checks every HTR_* variable this build knows (the table in config.cc) strictly: a switch must be
// 0/off/false/1/on/true (plus the extra words a few accept, e.g. "force"), a choice one of its
// listed values, a count an integer in its range, HTR_LOG a level, HTR_CACHE_DIR a directory that
// exists or can be created and is writable. Empty values count as unset. Returns "" when all are
// valid, else, per bad variable (joined by "; "), its name, its value and the valid values.
// htr_runtime_create fails with INVALID_ARGUMENT on a non-empty result.
std::string CheckEnvironment();

// Splits on `sep`, trims spaces, drops empty items.
std::vector<std::string> SplitList(const std::string& text, char sep);

}  // namespace htr::rt

#endif  // HTR_RUNTIME_CONFIG_H_
