/*
 * cpu_topology.h — the machine as hwloc sees it: packages, NUMA nodes,
 * cores, PUs, L1d/L2/L3 cache sizes, memory, model names, and one cpuset per
 * core (for pinning). Loaded once at plugin init and immutable afterwards,
 * so every member may be read from any thread. hwloc calls that take the
 * topology (binding, allocation) are thread-safe for a loaded topology.
 *
 * Cache sizes are those of one instance (the cache one core sees); counts of
 * instances appear in description().
 */
#ifndef HTR_CPU_TOPOLOGY_H_
#define HTR_CPU_TOPOLOGY_H_

#include <hwloc.h>

#include <cstdint>
#include <string>
#include <vector>

namespace htr_cpu {

class Topology {
 public:
  Topology() = default;
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  /* Loads the topology; false (and *why) when hwloc fails. */
  bool load(std::string* why);

  hwloc_topology_t handle() const { return topo_; }
  uint32_t packages() const { return packages_; }
  uint32_t numa_nodes() const { return numa_nodes_; }
  uint32_t cores() const { return cores_; }
  uint32_t pus() const { return pus_; }
  uint64_t l1d_bytes() const { return l1d_; }
  uint64_t l2_bytes() const { return l2_; }
  uint64_t l3_bytes() const { return l3_; }
  uint64_t total_memory() const { return total_memory_; }
  const std::string& model() const { return model_; }
  const std::string& vendor() const { return vendor_; }
  /* cpuset of core i (i < cores()); owned by the topology. */
  hwloc_const_cpuset_t core_cpuset(uint32_t i) const { return core_sets_[i]; }
  /* "AMD EPYC: 1 package, 1 NUMA node, 2 cores, 2 PUs; L1d 32 KiB x2, ..." */
  std::string description() const;
  /* Bytes of memory available now (MemAvailable, else sysinfo free). */
  static uint64_t available_memory();

 private:
  hwloc_topology_t topo_ = nullptr;
  uint32_t packages_ = 0, numa_nodes_ = 0, cores_ = 0, pus_ = 0;
  uint32_t l1d_count_ = 0, l2_count_ = 0, l3_count_ = 0;
  uint64_t l1d_ = 0, l2_ = 0, l3_ = 0, total_memory_ = 0;
  std::string model_, vendor_;
  std::vector<hwloc_bitmap_t> core_sets_;
};

}  // namespace htr_cpu

#endif  // HTR_CPU_TOPOLOGY_H_
