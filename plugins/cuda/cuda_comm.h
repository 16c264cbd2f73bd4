/*
 * cuda_comm.h — collective entries of the cuda plugin (ABI v1.2) over NCCL
 * (cuda_nccl.h).
 *
 *   comm_get_unique_id  ncclGetUniqueId (128 bytes, the ABI's id size)
 *   comm_create         ncclCommInitRank in the device's primary context
 *                       (blocks until all ranks join, as NCCL does)
 *   comm_create_local   ncclCommInitAll over the devices' CUDA ordinals
 *   comm_group_*        ncclGroupStart / ncclGroupEnd (per calling thread)
 *   collective          ncclAllReduce / AllGather / ReduceScatter /
 *                       Broadcast / Send / Recv on the stream
 *   comm_destroy        ncclCommDestroy, or ncclCommAbort when the
 *                       communicator has an asynchronous error
 * Arguments (dtype, counts, ranges, ranks, buffers of the communicator's
 * device) are checked before NCCL is called. After a failing NCCL call the
 * communicator's asynchronous error is read; a communicator in error
 * answers every later collective with that error without calling NCCL.
 * Bool/u8 travel as bytes (ncclUint8; reductions on them are
 * INVALID_ARGUMENT). Errors: cuda_nccl.h nccl_code().
 */
#ifndef HTR_CUDA_COMM_H_
#define HTR_CUDA_COMM_H_

#include "cuda_device.h"

#include <string>

namespace htr_cuda {

/* NCCL loaded (once per context); otherwise *why. */
bool collectives_available(htr_plugin_ctx_t* ctx, std::string* why);

/* Sets the seven v1.2 collective entries of the table. */
void fill_comm_entries(htr_plugin_api_t* t);

}  // namespace htr_cuda

#endif  // HTR_CUDA_COMM_H_
