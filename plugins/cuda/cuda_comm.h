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
 * Watchdog (cuda_watchdog.h): every collective is followed by an event; one
 * that has not completed after HTR_CUDA_NCCL_TIMEOUT_MS (default 10 min, 0 =
 * off), or whose communicator reports an asynchronous error, aborts the
 * communicator and every communicator made with it by comm_create_local
 * (ncclCommAbort: the stuck kernels return), so stream_synchronize returns
 * DEADLINE_EXCEEDED (or the NCCL error's status) naming the collective and
 * rank, and later calls on the communicator answer the same without NCCL.
 * comm_create still blocks until every rank joins (NCCL's own bootstrap
 * timeout bounds it).
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

/* The collective watchdog (cuda_watchdog.h) forgets `stream` (it is being
 * destroyed, after draining). */
void cancel_collective_watch(htr_plugin_ctx_t* ctx, const htr_plugin_stream_t* stream);
/* The error of a collective on `stream` that the watchdog aborted since the
 * last call (DEADLINE_EXCEEDED for a timeout), or NULL; clears it. */
htr_status_t take_collective_error(htr_plugin_stream_t* stream);

/* Sets the seven v1.2 collective entries of the table. */
void fill_comm_entries(htr_plugin_api_t* t);

}  // namespace htr_cuda

#endif  // HTR_CUDA_COMM_H_
