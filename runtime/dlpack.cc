// runtime/dlpack.cc — DLPack (v0.6, DLManagedTensor) export and import for
// host-accessible devices (htr.h).
//
// Export: the DLManagedTensor owns one tensor reference plus its own
// shape/strides arrays; its deleter releases both. Import: the new tensor's
// storage holds the DLManagedTensor and calls its deleter when the last
// tensor sharing it is released. bool travels as kDLUInt 8 bits (DLPack 0.6
// has no bool code), so it comes back as u8.
#include <dlpack/dlpack.h>

#include <new>

#include "runtime/layout.h"
#include "runtime/objects.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

struct ExportContext {
  DLManagedTensor managed;
  htr_tensor_t* tensor;  // one reference
  int64_t shape[HTR_MAX_RANK];
  int64_t strides[HTR_MAX_RANK];
};

void ExportDeleter(DLManagedTensor* self) {
  if (self == nullptr) return;
  auto* ctx = static_cast<ExportContext*>(self->manager_ctx);
  htr_tensor_release(ctx->tensor);
  delete ctx;
}

bool ToDlDtype(htr_dtype_t d, DLDataType* out) {
  out->lanes = 1;
  switch (d) {
    case HTR_DTYPE_F32: *out = {kDLFloat, 32, 1}; return true;
    case HTR_DTYPE_F16: *out = {kDLFloat, 16, 1}; return true;
    case HTR_DTYPE_BF16: *out = {kDLBfloat, 16, 1}; return true;
    case HTR_DTYPE_F64: *out = {kDLFloat, 64, 1}; return true;
    case HTR_DTYPE_I32: *out = {kDLInt, 32, 1}; return true;
    case HTR_DTYPE_I64: *out = {kDLInt, 64, 1}; return true;
    case HTR_DTYPE_U8: *out = {kDLUInt, 8, 1}; return true;
    case HTR_DTYPE_BOOL: *out = {kDLUInt, 8, 1}; return true;
    default: return false;
  }
}

htr_dtype_t FromDlDtype(DLDataType t) {
  if (t.lanes != 1) return HTR_DTYPE_INVALID;
  if (t.code == kDLFloat && t.bits == 32) return HTR_DTYPE_F32;
  if (t.code == kDLFloat && t.bits == 16) return HTR_DTYPE_F16;
  if (t.code == kDLFloat && t.bits == 64) return HTR_DTYPE_F64;
  if (t.code == kDLBfloat && t.bits == 16) return HTR_DTYPE_BF16;
  if (t.code == kDLInt && t.bits == 32) return HTR_DTYPE_I32;
  if (t.code == kDLInt && t.bits == 64) return HTR_DTYPE_I64;
  if (t.code == kDLUInt && t.bits == 8) return HTR_DTYPE_U8;
  return HTR_DTYPE_INVALID;
}

Status ToDlpack(htr_tensor_t* tensor, DLManagedTensor** out_managed) {
  if (out_managed == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_managed is NULL");
  *out_managed = nullptr;
  if (tensor == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "tensor is NULL");
  if (tensor->storage->host == nullptr)
    return Error(HTR_STATUS_UNIMPLEMENTED, "DLPack export needs a host-accessible device; {} is not",
                 tensor->device->id);
  DLDataType dt{};
  if (!ToDlDtype(tensor->dtype, &dt))
    return Error(HTR_STATUS_UNIMPLEMENTED, "dtype {} has no DLPack code",
                 htr::rt::DtypeName(tensor->dtype));
  auto* ctx = new ExportContext{};
  for (uint32_t i = 0; i < tensor->rank; ++i) {
    ctx->shape[i] = tensor->shape[i];
    ctx->strides[i] = tensor->strides[i];
  }
  htr_tensor_retain(tensor);
  ctx->tensor = tensor;
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = tensor->storage->host + htr::rt::TensorByteOffset(tensor);
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(tensor->rank);
  dl.dtype = dt;
  dl.shape = ctx->shape;
  dl.strides = ctx->strides;
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = &ExportDeleter;
  *out_managed = &ctx->managed;
  return Status();
}

Status FromDlpack(htr_device_t* device, DLManagedTensor* managed, htr_tensor_t** out_tensor) {
  if (out_tensor == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_tensor is NULL");
  *out_tensor = nullptr;
  if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  if (managed == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "managed is NULL");
  if (!device->host_accessible)
    return Error(HTR_STATUS_UNIMPLEMENTED, "DLPack import needs a host-accessible device; {} is not",
                 device->id);
  const DLTensor& dl = managed->dl_tensor;
  if (dl.device.device_type != kDLCPU)
    return Error(HTR_STATUS_UNIMPLEMENTED, "DLPack device type {} is not kDLCPU",
                 static_cast<int>(dl.device.device_type));
  if (dl.ndim < 0 || dl.ndim > HTR_MAX_RANK)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "DLPack ndim {} is outside [0, {}]", dl.ndim,
                 HTR_MAX_RANK);
  const htr_dtype_t dtype = FromDlDtype(dl.dtype);
  if (dtype == HTR_DTYPE_INVALID)
    return Error(HTR_STATUS_UNIMPLEMENTED, "DLPack dtype (code {}, bits {}, lanes {}) unsupported",
                 static_cast<int>(dl.dtype.code), static_cast<int>(dl.dtype.bits),
                 static_cast<int>(dl.dtype.lanes));
  const uint32_t rank = static_cast<uint32_t>(dl.ndim);
  if (rank > 0 && dl.shape == nullptr)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "DLPack shape is NULL");
  auto t = std::make_unique<htr_tensor_s>();
  t->device = device;
  t->dtype = dtype;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t->shape[i] = dl.shape[i];
  if (dl.strides != nullptr)
    for (uint32_t i = 0; i < rank; ++i) t->strides[i] = dl.strides[i];
  else
    htr::rt::ContiguousStrides(rank, t->shape, t->strides);
  HTR_RETURN_IF_ERROR(htr::rt::CheckLayout(rank, t->shape, t->strides, "DLPack tensor"));
  const uint64_t extent = htr::rt::Extent(rank, t->shape, t->strides);
  if (dl.data == nullptr && extent > 0) return Error(HTR_STATUS_INVALID_ARGUMENT, "DLPack data is NULL");
  auto storage = std::make_shared<htr::rt::Storage>();
  storage->device = device;
  storage->bytes = extent * htr::rt::DtypeSize(dtype);
  storage->host = static_cast<uint8_t*>(dl.data) + dl.byte_offset;
  t->storage = std::move(storage);
  // From here on nothing can fail: take ownership.
  t->storage->dl = managed;
  *out_tensor = t.release();
  return Status();
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_tensor_to_dlpack(htr_tensor_t* tensor, DLManagedTensor** out_managed) {
  return Guard([&] { return ToDlpack(tensor, out_managed); });
}

HTR_API htr_status_t htr_tensor_from_dlpack(htr_device_t* device, DLManagedTensor* managed,
                                            htr_tensor_t** out_tensor) {
  return Guard([&] { return FromDlpack(device, managed, out_tensor); });
}

}  // extern "C"
