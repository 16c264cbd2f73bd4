// runtime/comm.h — the object behind htr_comm_t (htr_comm.h) for comm.cc and
// world.cc. A communicator is either the plugin's (`handle`: the plugin's
// collective entries do the work) or the runtime's (`mpi` set, or a world of
// one): the runtime synchronizes the stream, stages the tensors through host
// memory and runs the collective over MPI (mpi.h). Ownership: `mpi` is freed
// by htr_comm_destroy (before the world finalizes MPI).
#ifndef HTR_RUNTIME_COMM_H_
#define HTR_RUNTIME_COMM_H_

#include <cstdint>
#include <vector>

#include "htr/htr_comm.h"
#include "runtime/objects.h"

struct htr_comm_s {
  htr_device_s* device = nullptr;
  htr_plugin_comm_t* handle = nullptr;  // the plugin's communicator, or NULL: the runtime's
  uint32_t nranks = 0;
  uint32_t rank = 0;
  void* mpi = nullptr;              // runtime communicator over MPI (an MPI_Comm); NULL with one rank
  std::vector<char> stage_src, stage_dst;  // host staging of the runtime's path (grown on demand)
};

#endif  // HTR_RUNTIME_COMM_H_
