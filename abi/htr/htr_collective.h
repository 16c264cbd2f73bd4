/*
 * htr_collective.h — the small C types shared by the plugin ABI's collective
 * entries (htr_plugin.h, v1.2) and the embedding API's communicators
 * (htr_comm.h). C99, no project includes besides htr_types.h. Values never
 * change; new ones are appended (minor bump, line in abi/CHANGELOG.md).
 */
#ifndef HTR_COLLECTIVE_H_
#define HTR_COLLECTIVE_H_

#include "htr_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque rendezvous token: one rank creates it (comm_get_unique_id),
 * every rank of the communicator receives the same bytes (by any means:
 * shared memory, a file, a socket) and passes them to comm_create. */
#define HTR_COMM_UNIQUE_ID_BYTES 128
typedef struct htr_comm_unique_id_t {
  uint8_t bytes[HTR_COMM_UNIQUE_ID_BYTES];
} htr_comm_unique_id_t;

typedef enum htr_reduce_op_t {
  HTR_REDUCE_SUM = 0,
  HTR_REDUCE_PROD = 1,
  HTR_REDUCE_MAX = 2,
  HTR_REDUCE_MIN = 3,
  HTR_REDUCE_AVG = 4
} htr_reduce_op_t;

typedef enum htr_collective_kind_t {
  HTR_COLLECTIVE_ALL_REDUCE = 0,     /* dst[i] = op over ranks of src[i]; count elements */
  HTR_COLLECTIVE_ALL_GATHER = 1,     /* dst = concat over ranks of src; count per rank */
  HTR_COLLECTIVE_REDUCE_SCATTER = 2, /* dst = rank's slice of op(src); count per rank */
  HTR_COLLECTIVE_BROADCAST = 3,      /* dst = root's src; count elements */
  HTR_COLLECTIVE_SEND = 4,           /* src to rank `peer`; count elements */
  HTR_COLLECTIVE_RECV = 5            /* dst from rank `peer`; count elements */
} htr_collective_kind_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_COLLECTIVE_H_ */
