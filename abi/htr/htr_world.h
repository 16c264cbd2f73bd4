/*
 * htr_world.h — the processes a job was launched as (embedding API 1.0
 * addition): rank, size, a few host-side collectives for bootstrapping and
 * bookkeeping, and communicators over every rank for a device of each.
 * C99. Rules of htr.h apply: NULL status is success, the caller frees a
 * non-NULL one; nothing aborts on bad input.
 *
 * A process started by Open MPI's mpirun (it sets OMPI_COMM_WORLD_SIZE) is
 * one rank of a world of that size: htr_world_open loads Debian's Open MPI
 * (libmpi.so.40) with dlopen and initializes it (MPI_THREAD_MULTIPLE). Any
 * other process is rank 0 of a world of one and touches no MPI. Nothing in
 * libhtr links MPI.
 *
 *   htr_world_open        the process's world; one per process (a second
 *                         open while one is open is FAILED_PRECONDITION,
 *                         and so is an open after the last close: MPI cannot
 *                         be initialized twice)
 *   htr_world_close       finalizes MPI (NULL is fine); destroy the world's
 *                         communicators first
 *   htr_world_abort       ends every process of the world now with `code`
 *                         (MPI_Abort); a world of one exits the process.
 *                         For a rank that cannot go on: a plain exit could
 *                         leave the others waiting
 *   htr_world_broadcast   `size` bytes at `bytes` from `root` to every rank
 *   htr_world_all_reduce_f64  in place over `count` doubles
 *   htr_world_barrier     every rank arrives, or DEADLINE_EXCEEDED after
 *                         `timeout_ms` (0 = wait forever) with a message
 *                         naming the ranks that did not arrive (lost or
 *                         hung); after that the world is broken and every
 *                         later call fails
 *   htr_world_comm_create collective: every rank passes its device and gets
 *                         a communicator (htr_comm.h) of world-size ranks,
 *                         rank = world rank. When every rank's device is of
 *                         one plugin with collectives (HTR_CAP_COLLECTIVES),
 *                         rank 0 makes the id through that plugin, the world
 *                         broadcasts it and each rank joins the plugin's
 *                         communicator. Otherwise (ranks on different plugins,
 *                         or a plugin without collectives) the runtime runs
 *                         the collectives over MPI itself, staging device
 *                         tensors through host memory, so ranks on different
 *                         plugins train one model together.
 * Ownership: the world is the caller's until htr_world_close; buffers are
 * borrowed for each call; communicators are the caller's (htr_comm_destroy).
 * Thread safety: call the world from one thread at a time.
 */
#ifndef HTR_WORLD_H_
#define HTR_WORLD_H_

#include "htr.h"
#include "htr_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct htr_world_s htr_world_t;

HTR_API htr_status_t htr_world_open(htr_world_t** out_world);
HTR_API void htr_world_close(htr_world_t* world);
HTR_API void htr_world_abort(htr_world_t* world, int code);
HTR_API uint32_t htr_world_rank(const htr_world_t* world); /* 0 for NULL */
HTR_API uint32_t htr_world_size(const htr_world_t* world); /* 1 for NULL */
HTR_API htr_status_t htr_world_broadcast(htr_world_t* world, void* bytes, uint64_t size, uint32_t root);
HTR_API htr_status_t htr_world_all_reduce_f64(htr_world_t* world, double* values, uint64_t count,
                                              htr_reduce_op_t op);
HTR_API htr_status_t htr_world_barrier(htr_world_t* world, uint32_t timeout_ms);
HTR_API htr_status_t htr_world_comm_create(htr_world_t* world, htr_device_t* device, htr_comm_t** out_comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_WORLD_H_ */
