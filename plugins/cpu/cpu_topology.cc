// hwloc topology summary. In VMs hwloc may see PUs but no cores (or no
// NUMA node objects); those counts then fall back to PUs and 1 so the device
// always has a usable shape.
#include "cpu_topology.h"

#include <algorithm>

#include <sys/sysinfo.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace htr_cpu {

Topology::~Topology() {
  for (hwloc_bitmap_t s : core_sets_) {
    hwloc_bitmap_free(s);
  }
  if (topo_ != nullptr) {
    hwloc_topology_destroy(topo_);
  }
}

namespace {

uint32_t count_type(hwloc_topology_t t, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  return n > 0 ? static_cast<uint32_t>(n) : 0;
}

// Size of one data/unified cache at `depth` (1, 2, 3) and instance count.
void cache_info(hwloc_topology_t t, hwloc_obj_type_t type, uint64_t* size, uint32_t* count) {
  *size = 0;
  *count = 0;
  const int n = hwloc_get_nbobjs_by_type(t, type);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
    if (o == nullptr || o->attr == nullptr ||
        o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) {
      continue;
    }
    *size = o->attr->cache.size;
    ++*count;
  }
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " GiB", b >> 30);
  } else if (b >= (1ull << 20) && b % (1ull << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " MiB", b >> 20);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " KiB", b >> 10);
  }
  return buf;
}

}  // namespace

bool Topology::load(std::string* why) {
  if (hwloc_topology_init(&topo_) != 0) {
    topo_ = nullptr;
    *why = "hwloc_topology_init failed";
    return false;
  }
  if (hwloc_topology_load(topo_) != 0) {
    hwloc_topology_destroy(topo_);
    topo_ = nullptr;
    *why = "hwloc_topology_load failed";
    return false;
  }
  packages_ = count_type(topo_, HWLOC_OBJ_PACKAGE);
  numa_nodes_ = count_type(topo_, HWLOC_OBJ_NUMANODE);
  cores_ = count_type(topo_, HWLOC_OBJ_CORE);
  pus_ = count_type(topo_, HWLOC_OBJ_PU);
  if (pus_ == 0) {
    pus_ = 1;
  }
  if (packages_ == 0) {
    packages_ = 1;
  }
  if (numa_nodes_ == 0) {
    numa_nodes_ = 1;
  }
  const hwloc_obj_type_t pin_type = cores_ > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  if (cores_ == 0) {
    cores_ = pus_;
  }
  for (uint32_t i = 0; i < cores_; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo_, pin_type, i);
    hwloc_bitmap_t set = o != nullptr && o->cpuset != nullptr ? hwloc_bitmap_dup(o->cpuset)
                                                              : hwloc_bitmap_alloc_full();
    core_sets_.push_back(set);
  }
  cache_info(topo_, HWLOC_OBJ_L1CACHE, &l1d_, &l1d_count_);
  cache_info(topo_, HWLOC_OBJ_L2CACHE, &l2_, &l2_count_);
  cache_info(topo_, HWLOC_OBJ_L3CACHE, &l3_, &l3_count_);
  hwloc_obj_t root = hwloc_get_root_obj(topo_);
  // hwloc sums the NUMA nodes it can see; in some VMs and containers that is
  // less than the memory the kernel gives the process (seen: 8.1 GiB of 23
  // GiB). The larger of hwloc's and sysinfo's totals is the device memory.
  total_memory_ = root != nullptr ? root->total_memory : 0;
  struct sysinfo si {};
  if (sysinfo(&si) == 0) {
    total_memory_ =
        std::max<uint64_t>(total_memory_, static_cast<uint64_t>(si.totalram) * si.mem_unit);
  }
  hwloc_obj_t pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, 0);
  for (hwloc_obj_t o : {pkg, root}) {
    if (o == nullptr) {
      continue;
    }
    const char* m = hwloc_obj_get_info_by_name(o, "CPUModel");
    const char* v = hwloc_obj_get_info_by_name(o, "CPUVendor");
    if (model_.empty() && m != nullptr) {
      model_ = m;
    }
    if (vendor_.empty() && v != nullptr) {
      vendor_ = v;
    }
  }
  if (model_.empty()) {
    model_ = "unknown CPU";
  }
  if (vendor_.empty()) {
    vendor_ = "unknown";
  }
  return true;
}

std::string Topology::description() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: %u package%s, %u NUMA node%s, %u cores, %u PUs; L1d %s x%u, L2 %s x%u, "
                "L3 %s x%u; %s RAM",
                model_.c_str(), packages_, packages_ == 1 ? "" : "s", numa_nodes_,
                numa_nodes_ == 1 ? "" : "s", cores_, pus_, human_bytes(l1d_).c_str(),
                l1d_count_, human_bytes(l2_).c_str(), l2_count_, human_bytes(l3_).c_str(),
                l3_count_, human_bytes(total_memory_).c_str());
  return buf;
}

uint64_t Topology::available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      return value * 1024;
    }
  }
  struct sysinfo si {};
  return sysinfo(&si) == 0 ? static_cast<uint64_t>(si.freeram) * si.mem_unit : 0;
}

}  // namespace htr_cpu
