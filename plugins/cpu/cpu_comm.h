/*
 * cpu_comm.h — collectives of the CPU plugin (plugin ABI 1.2 entries) over
 * Open MPI, which the plugin loads with dlopen (libmpi.so.40) the first time
 * a communicator of more than one rank is made; it links no MPI.
 *
 * Contract:
 *   - The plugin never initializes MPI: a communicator of nranks > 1 needs a
 *     process started by mpirun whose MPI is initialized already (the
 *     runtime's world, htr_world.h, does that); otherwise comm_create is
 *     FAILED_PRECONDITION saying so. A communicator of one rank needs no MPI
 *     (its collectives are copies).
 *   - comm_get_unique_id makes 128 bytes: a magic and 64 random bits.
 *     comm_create splits MPI_COMM_WORLD by those bits with key `rank`; it is
 *     collective over the whole MPI world, so every MPI process calls it and
 *     nranks must equal the world size.
 *   - collective enqueues the MPI call on the stream's worker thread, on the
 *     buffers' host memory (no staging); errors surface at the stream's next
 *     synchronize. Reductions take f32, f64, i32, i64 (AVG = SUM / nranks);
 *     gathers, broadcasts, send and recv take any dtype.
 *   - comm_create_local takes one device (the plugin has one) and makes a
 *     one-rank communicator; group_begin/end have nothing to group.
 * Ownership: a communicator is the caller's until comm_destroy (which frees
 * the MPI communicator; call it before MPI is finalized).
 */
#ifndef HTR_CPU_COMM_H_
#define HTR_CPU_COMM_H_

#include <htr/htr_plugin.h>

namespace htr_cpu {

htr_status_t comm_get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id);
htr_status_t comm_create(htr_plugin_device_t* device, const htr_comm_unique_id_t* id, uint32_t nranks,
                         uint32_t rank, htr_plugin_comm_t** out_comm);
htr_status_t comm_create_local(htr_plugin_device_t* const* devices, uint32_t count,
                               htr_plugin_comm_t** out_comms);
void comm_destroy(htr_plugin_comm_t* comm);
htr_status_t comm_group_begin(htr_plugin_ctx_t* ctx);
htr_status_t comm_group_end(htr_plugin_ctx_t* ctx);
htr_status_t collective(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm,
                        const htr_collective_args_t* args);

}  // namespace htr_cpu

#endif  // HTR_CPU_COMM_H_
