// runtime/tensor.cc — storage, tensor creation, views and accessors (htr.h).
#include <dlpack/dlpack.h>

#include "runtime/layout.h"
#include "runtime/log.h"
#include "runtime/objects.h"
#include "runtime/profiler.h"

namespace htr::rt {

Storage::~Storage() {
  if (dl != nullptr) {
    if (dl->deleter) dl->deleter(dl);
  } else if (block.buffer != nullptr) {
    device->pool->Free(block);
    prof::MemoryEvent(prof::Kind::kFree, device, block.size);
  }
}

StatusOr<std::shared_ptr<Storage>> AllocateStorage(htr_device_s* device, uint64_t bytes,
                                                   const htr_plugin_stream_t* stream) {
  auto st = std::make_shared<Storage>();
  st->device = device;
  st->bytes = bytes;
  HTR_ASSIGN_OR_RETURN(st->block, device->pool->Allocate(bytes, stream));
  prof::MemoryEvent(prof::Kind::kAlloc, device, st->block.size);
  if (device->host_accessible) {
    void* p = nullptr;
    Status s(device->api->buffer_host_ptr(device->handle, st->block.buffer, &p));
    if (!s.ok() || p == nullptr)
      return Error(HTR_STATUS_INTERNAL, "{} claims HTR_CAP_HOST_ACCESSIBLE but buffer_host_ptr failed: {}",
                   device->id, s.ToString());
    st->host = static_cast<uint8_t*>(p);
  }
  return st;
}

}  // namespace htr::rt

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

Status CreateTensor(htr_device_t* device, htr_dtype_t dtype, uint32_t rank, const int64_t* shape,
                    const int64_t* strides, htr_tensor_t** out_tensor,
                    const htr_plugin_stream_t* stream = nullptr) {
  if (out_tensor == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_tensor is NULL");
  *out_tensor = nullptr;
  if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  if (!htr::rt::DtypeValid(dtype))
    return Error(HTR_STATUS_INVALID_ARGUMENT, "dtype {} is not a valid htr_dtype_t",
                 static_cast<int>(dtype));
  HTR_RETURN_IF_ERROR(htr::rt::CheckLayout(rank, shape, strides, "tensor"));
  auto t = std::make_unique<htr_tensor_s>();
  t->device = device;
  t->dtype = dtype;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t->shape[i] = shape[i];
  if (strides != nullptr)
    for (uint32_t i = 0; i < rank; ++i) t->strides[i] = strides[i];
  else
    htr::rt::ContiguousStrides(rank, t->shape, t->strides);
  uint64_t extent = htr::rt::Extent(rank, t->shape, t->strides);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(extent, htr::rt::DtypeSize(dtype), &bytes))
    return Error(HTR_STATUS_INVALID_ARGUMENT, "tensor size overflows");
  HTR_ASSIGN_OR_RETURN(t->storage, htr::rt::AllocateStorage(device, bytes, stream));
  *out_tensor = t.release();
  return Status();
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_tensor_create(htr_device_t* device, htr_dtype_t dtype, uint32_t rank,
                                       const int64_t* shape, htr_tensor_t** out_tensor) {
  return Guard([&] { return CreateTensor(device, dtype, rank, shape, nullptr, out_tensor); });
}

HTR_API htr_status_t htr_tensor_create_on_stream(htr_stream_t* stream, htr_dtype_t dtype,
                                                 uint32_t rank, const int64_t* shape,
                                                 htr_tensor_t** out_tensor) {
  return Guard([&]() -> Status {
    if (stream == nullptr) {
      if (out_tensor != nullptr) *out_tensor = nullptr;
      return Error(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
    }
    return CreateTensor(stream->device, dtype, rank, shape, nullptr, out_tensor, stream->handle);
  });
}

HTR_API htr_status_t htr_tensor_create_strided(htr_device_t* device, htr_dtype_t dtype,
                                               uint32_t rank, const int64_t* shape,
                                               const int64_t* strides,
                                               htr_tensor_t** out_tensor) {
  return Guard([&]() -> Status {
    if (strides == nullptr && rank > 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "strides is NULL for rank {}", rank);
    return CreateTensor(device, dtype, rank, shape, strides, out_tensor);
  });
}

HTR_API htr_status_t htr_tensor_view(htr_tensor_t* base, uint32_t rank, const int64_t* shape,
                                     const int64_t* strides, int64_t offset_elements,
                                     htr_tensor_t** out_view) {
  return Guard([&]() -> Status {
    if (out_view == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_view is NULL");
    *out_view = nullptr;
    if (base == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "base is NULL");
    if (strides == nullptr && rank > 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "strides is NULL for rank {}", rank);
    HTR_RETURN_IF_ERROR(htr::rt::CheckLayout(rank, shape, strides, "view"));
    if (offset_elements < 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "view offset {} is negative", offset_elements);
    int64_t offset = 0;
    if (__builtin_add_overflow(base->offset, offset_elements, &offset))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "view offset overflows");
    const size_t esize = htr::rt::DtypeSize(base->dtype);
    const uint64_t extent = htr::rt::Extent(rank, shape, strides);
    uint64_t end = 0;
    if (extent > 0 &&
        (__builtin_add_overflow(static_cast<uint64_t>(offset), extent, &end) ||
         __builtin_mul_overflow(end, esize, &end) || end > base->storage->bytes))
      return Error(HTR_STATUS_INVALID_ARGUMENT,
                   "view (offset {} elements, extent {} elements of {} bytes) exceeds the "
                   "storage ({} bytes)",
                   offset, extent, esize, base->storage->bytes);
    auto v = std::make_unique<htr_tensor_s>();
    v->storage = base->storage;
    v->device = base->device;
    v->dtype = base->dtype;
    v->rank = rank;
    for (uint32_t i = 0; i < rank; ++i) {
      v->shape[i] = shape[i];
      v->strides[i] = strides[i];
    }
    v->offset = offset;
    *out_view = v.release();
    return Status();
  });
}

HTR_API void htr_tensor_retain(htr_tensor_t* tensor) {
  if (tensor) tensor->refs.fetch_add(1, std::memory_order_relaxed);
}

HTR_API void htr_tensor_release(htr_tensor_t* tensor) {
  if (tensor == nullptr) return;
  if (tensor->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    try {
      delete tensor;
    } catch (...) {
    }
  }
}

HTR_API htr_device_t* htr_tensor_device(const htr_tensor_t* tensor) {
  return tensor ? tensor->device : nullptr;
}

HTR_API htr_dtype_t htr_tensor_dtype(const htr_tensor_t* tensor) {
  return tensor ? tensor->dtype : HTR_DTYPE_INVALID;
}

HTR_API uint32_t htr_tensor_rank(const htr_tensor_t* tensor) { return tensor ? tensor->rank : 0; }

HTR_API const int64_t* htr_tensor_shape(const htr_tensor_t* tensor) {
  return tensor ? tensor->shape : nullptr;
}

HTR_API const int64_t* htr_tensor_strides(const htr_tensor_t* tensor) {
  return tensor ? tensor->strides : nullptr;
}

HTR_API int64_t htr_tensor_offset(const htr_tensor_t* tensor) { return tensor ? tensor->offset : 0; }

HTR_API int64_t htr_tensor_numel(const htr_tensor_t* tensor) {
  return tensor ? htr::rt::Numel(tensor->rank, tensor->shape) : 0;
}

HTR_API int htr_tensor_is_contiguous(const htr_tensor_t* tensor) {
  return tensor ? htr::rt::IsContiguous(tensor->rank, tensor->shape, tensor->strides) : 0;
}

HTR_API uint64_t htr_tensor_nbytes(const htr_tensor_t* tensor) {
  if (tensor == nullptr) return 0;
  return static_cast<uint64_t>(htr::rt::Numel(tensor->rank, tensor->shape)) *
         htr::rt::DtypeSize(tensor->dtype);
}

HTR_API htr_status_t htr_tensor_host_ptr(htr_tensor_t* tensor, void** out_ptr) {
  return Guard([&]() -> Status {
    if (tensor == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "tensor is NULL");
    if (out_ptr == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_ptr is NULL");
    *out_ptr = nullptr;
    if (tensor->storage->host == nullptr)
      return Error(HTR_STATUS_UNIMPLEMENTED, "{} is not host-accessible", tensor->device->id);
    *out_ptr = tensor->storage->host + htr::rt::TensorByteOffset(tensor);
    return Status();
  });
}

}  // extern "C"
