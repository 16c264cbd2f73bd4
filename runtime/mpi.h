// runtime/mpi.h — Open MPI (Debian's libmpi.so.40) loaded with dlopen through
// a symbol table, so libhtr links no MPI and a process not started by mpirun
// never touches it.
//
// Contract:
//   - Mpi::Get() returns the process-wide table, or nullptr with *why set
//     when libmpi cannot be loaded or lacks a symbol. Loaded once (thread
//     safe); the library stays loaded until exit (MPI cannot be re-opened).
//     It is opened RTLD_GLOBAL: Open MPI's own components (dlopen'd by
//     MPI_Init) and plugins that load libmpi themselves share this copy.
//   - Handles are Open MPI's: pointers to its predefined objects
//     (MPI_COMM_WORLD is the address of `ompi_mpi_comm_world`, MPI_FLOAT of
//     `ompi_mpi_float`, ...). The table resolves those addresses too.
//   - Counts are `int` as in the MPI C API; callers split larger transfers.
#ifndef HTR_RUNTIME_MPI_H_
#define HTR_RUNTIME_MPI_H_

#include <cstdint>
#include <string>

#include "htr/htr_collective.h"
#include "htr/htr_types.h"

namespace htr::rt::mpi {

using Comm = void*;
using Datatype = void*;
using Op = void*;
using Request = void*;
using Status = void;  // passed only as MPI_STATUS_IGNORE (NULL)

constexpr int kThreadMultiple = 3;  // MPI_THREAD_MULTIPLE (Open MPI's value)
constexpr int kSuccess = 0;         // MPI_SUCCESS
inline void* InPlace() { return reinterpret_cast<void*>(1); }  // MPI_IN_PLACE

struct Api {
  int (*MPI_Initialized)(int*);
  int (*MPI_Finalized)(int*);
  int (*MPI_Init_thread)(int*, char***, int, int*);
  int (*MPI_Finalize)();
  int (*MPI_Abort)(Comm, int);
  int (*MPI_Comm_rank)(Comm, int*);
  int (*MPI_Comm_size)(Comm, int*);
  int (*MPI_Comm_split)(Comm, int, int, Comm*);
  int (*MPI_Comm_free)(Comm*);
  int (*MPI_Bcast)(void*, int, Datatype, int, Comm);
  int (*MPI_Allreduce)(const void*, void*, int, Datatype, Op, Comm);
  int (*MPI_Reduce_scatter_block)(const void*, void*, int, Datatype, Op, Comm);
  int (*MPI_Allgather)(const void*, int, Datatype, void*, int, Datatype, Comm);
  int (*MPI_Send)(const void*, int, Datatype, int, int, Comm);
  int (*MPI_Recv)(void*, int, Datatype, int, int, Comm, Status*);
  int (*MPI_Isend)(const void*, int, Datatype, int, int, Comm, Request*);
  int (*MPI_Irecv)(void*, int, Datatype, int, int, Comm, Request*);
  int (*MPI_Test)(Request*, int*, Status*);
  int (*MPI_Cancel)(Request*);
  int (*MPI_Request_free)(Request*);
  int (*MPI_Error_string)(int, char*, int*);
  // Predefined objects (addresses of Open MPI's globals).
  void* ompi_mpi_comm_world;
  void* ompi_mpi_byte;
  void* ompi_mpi_float;
  void* ompi_mpi_double;
  void* ompi_mpi_int;
  void* ompi_mpi_long_long_int;
  void* ompi_mpi_op_sum;
  void* ompi_mpi_op_prod;
  void* ompi_mpi_op_max;
  void* ompi_mpi_op_min;

  Comm world() const { return ompi_mpi_comm_world; }
  // "MPI_Xxx failed: <MPI's text>" for a non-success code.
  std::string ErrorText(const char* call, int code) const;
  // MPI datatype and op for a reduction of `dtype` by `op` (AVG maps to SUM:
  // the caller divides). False when MPI has no such reduction.
  bool ReduceTypes(htr_dtype_t dtype, htr_reduce_op_t op, Datatype* out_type, Op* out_op) const;
};

// The process-wide table (see the contract above).
const Api* Get(std::string* why);

}  // namespace htr::rt::mpi

#endif  // HTR_RUNTIME_MPI_H_
