/*
 * htr_comm.h — communicators and collectives through the embedding API.
 * C99. Embedding API 1.0 addition; needs a plugin of ABI >= 1.2 whose device
 * has HTR_CAP_COLLECTIVES (others answer UNIMPLEMENTED naming why).
 *
 * Rules of htr.h apply: NULL status is success, the caller frees a non-NULL
 * one; nothing aborts on bad input. Tensors are dense (contiguous), on the
 * communicator's device, of one dtype; element counts follow from them:
 *
 *   htr_comm_all_reduce     dst = op over ranks of src; numel(src) == numel(dst)
 *   htr_comm_all_gather     dst = concat over ranks of src; numel(dst) == nranks * numel(src)
 *   htr_comm_reduce_scatter dst = this rank's slice of op(src); numel(src) == nranks * numel(dst)
 *   htr_comm_broadcast      dst = root's src (src is read on the root only; may be NULL elsewhere)
 *   htr_comm_send / _recv   point to point with rank `peer`
 *
 * src == dst is in place. `stream` NULL: the device's default stream, and
 * the call returns when the collective has completed (its errors returned).
 * Several communicators driven from one thread (comm_create_local) issue
 * their calls between htr_comm_group_begin and htr_comm_group_end.
 * Ownership: communicators are the caller's (htr_comm_destroy, before the
 * runtime); tensors and ids are borrowed for the call (tensors must stay
 * alive until the collective completes, as for htr_op_run).
 */
#ifndef HTR_COMM_H_
#define HTR_COMM_H_

#include "htr.h"
#include "htr_collective.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct htr_comm_s htr_comm_t;

/* A fresh rendezvous id from the device's plugin (share it with every rank). */
HTR_API htr_status_t htr_comm_unique_id(htr_device_t* device, htr_comm_unique_id_t* out_id);
/* Joins communicator `id` as rank `rank` of `nranks` (blocks until all join). */
HTR_API htr_status_t htr_comm_create(htr_device_t* device, const htr_comm_unique_id_t* id,
                                     uint32_t nranks, uint32_t rank, htr_comm_t** out_comm);
/* One communicator per device (same plugin), rank = index; `out_comms` has
 * `count` entries. */
HTR_API htr_status_t htr_comm_create_local(htr_device_t* const* devices, uint32_t count,
                                           htr_comm_t** out_comms);
HTR_API void htr_comm_destroy(htr_comm_t* comm); /* NULL is fine */
HTR_API uint32_t htr_comm_rank(const htr_comm_t* comm);
HTR_API uint32_t htr_comm_size(const htr_comm_t* comm);
HTR_API htr_device_t* htr_comm_device(const htr_comm_t* comm);

/* Group calls of several communicators of `device`'s plugin (one thread). */
HTR_API htr_status_t htr_comm_group_begin(htr_device_t* device);
HTR_API htr_status_t htr_comm_group_end(htr_device_t* device);

HTR_API htr_status_t htr_comm_all_reduce(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                         htr_tensor_t* dst, htr_reduce_op_t op);
HTR_API htr_status_t htr_comm_all_gather(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                         htr_tensor_t* dst);
HTR_API htr_status_t htr_comm_reduce_scatter(htr_stream_t* stream, htr_comm_t* comm,
                                             htr_tensor_t* src, htr_tensor_t* dst,
                                             htr_reduce_op_t op);
HTR_API htr_status_t htr_comm_broadcast(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                        htr_tensor_t* dst, uint32_t root);
HTR_API htr_status_t htr_comm_send(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                   uint32_t peer);
HTR_API htr_status_t htr_comm_recv(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* dst,
                                   uint32_t peer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_COMM_H_ */
