// runtime/copy.cc — host<->device, device<->device and cross-plugin tensor
// copies, and byte fills (htr.h). Strategy: see copy.h.
#include "runtime/copy.h"

#include <cstring>
#include <vector>

#include "runtime/layout.h"
#include "runtime/profiler.h"

namespace htr::rt {
namespace {

Status Sync(const StreamChoice& s) {
  return Status(s.stream->device->api->stream_synchronize(s.stream->handle));
}

struct Span {
  uint64_t offset;  // bytes from storage byte 0
  uint64_t bytes;
};

// Bytes of the storage `t` touches, from element [0,..] to its last element.
Span TensorSpan(const htr_tensor_s* t) {
  const size_t esize = DtypeSize(t->dtype);
  return Span{TensorByteOffset(t), Extent(t->rank, t->shape, t->strides) * esize};
}

bool HasBuffer(const htr_tensor_s* t) { return t->storage->block.buffer != nullptr; }

}  // namespace

StatusOr<StreamChoice> ChooseStream(htr_device_s* device, htr_stream_s* stream, const char* what) {
  if (stream == nullptr) return StreamChoice{&device->default_stream, true};
  if (stream->device != device)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: stream belongs to {}, tensor is on {}", what,
                 stream->device->id, device->id);
  return StreamChoice{stream, false};
}

Status ReadToHost(const htr_tensor_s* t, void* dst, StreamChoice s) {
  const uint64_t n = static_cast<uint64_t>(Numel(t->rank, t->shape)) * DtypeSize(t->dtype);
  if (n == 0) return Status();
  const htr_device_s* dev = t->device;
  prof::Dispatch prof(prof::Kind::kCopy, dev, s.stream, "copy d2h");
  prof.SetBytes(n, n);
  const bool contiguous = IsContiguous(t->rank, t->shape, t->strides);
  int64_t dense[HTR_MAX_RANK];
  ContiguousStrides(t->rank, t->shape, dense);
  if (contiguous && HasBuffer(t)) {
    HTR_RETURN_IF_ERROR(Status(RetryTransient(dev, "copy_device_to_host", [&] {
      return dev->api->copy_device_to_host(s.stream->handle, t->storage->block.buffer, TensorByteOffset(t),
                                           dst, n);
    })));
    prof.Launched();
    return s.sync ? Sync(s) : Status();
  }
  if (t->storage->host != nullptr) {
    HTR_RETURN_IF_ERROR(Sync(s));  // earlier work on the stream may write it
    StridedCopy(static_cast<uint8_t*>(dst), dense, t->storage->host + TensorByteOffset(t),
                t->strides, t->rank, t->shape, DtypeSize(t->dtype));
    return Status();
  }
  Span span = TensorSpan(t);
  std::vector<uint8_t> staging(span.bytes);
  HTR_RETURN_IF_ERROR(Status(RetryTransient(dev, "copy_device_to_host", [&] {
    return dev->api->copy_device_to_host(s.stream->handle, t->storage->block.buffer, span.offset,
                                         staging.data(), span.bytes);
  })));
  HTR_RETURN_IF_ERROR(Sync(s));
  StridedCopy(static_cast<uint8_t*>(dst), dense, staging.data(), t->strides, t->rank, t->shape,
              DtypeSize(t->dtype));
  return Status();
}

Status WriteFromHost(const htr_tensor_s* t, const void* src, StreamChoice s) {
  const uint64_t n = static_cast<uint64_t>(Numel(t->rank, t->shape)) * DtypeSize(t->dtype);
  if (n == 0) return Status();
  const htr_device_s* dev = t->device;
  prof::Dispatch prof(prof::Kind::kCopy, dev, s.stream, "copy h2d");
  prof.SetBytes(n, n);
  const bool contiguous = IsContiguous(t->rank, t->shape, t->strides);
  int64_t dense[HTR_MAX_RANK];
  ContiguousStrides(t->rank, t->shape, dense);
  if (contiguous && HasBuffer(t)) {
    HTR_RETURN_IF_ERROR(Status(RetryTransient(dev, "copy_host_to_device", [&] {
      return dev->api->copy_host_to_device(s.stream->handle, src, t->storage->block.buffer,
                                           TensorByteOffset(t), n);
    })));
    prof.Launched();
    return s.sync ? Sync(s) : Status();
  }
  if (t->storage->host != nullptr) {
    HTR_RETURN_IF_ERROR(Sync(s));  // earlier work on the stream may read or write it
    StridedCopy(t->storage->host + TensorByteOffset(t), t->strides,
                static_cast<const uint8_t*>(src), dense, t->rank, t->shape, DtypeSize(t->dtype));
    return Status();
  }
  Span span = TensorSpan(t);
  std::vector<uint8_t> staging(span.bytes);
  htr_plugin_buffer_t* buf = t->storage->block.buffer;
  HTR_RETURN_IF_ERROR(Status(RetryTransient(dev, "copy_device_to_host", [&] {
    return dev->api->copy_device_to_host(s.stream->handle, buf, span.offset, staging.data(), span.bytes);
  })));
  HTR_RETURN_IF_ERROR(Sync(s));
  StridedCopy(staging.data(), t->strides, static_cast<const uint8_t*>(src), dense, t->rank,
              t->shape, DtypeSize(t->dtype));
  HTR_RETURN_IF_ERROR(Status(RetryTransient(dev, "copy_host_to_device", [&] {
    return dev->api->copy_host_to_device(s.stream->handle, staging.data(), buf, span.offset, span.bytes);
  })));
  return Sync(s);  // staging dies here
}

}  // namespace htr::rt

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;
using htr::rt::RetryTransient;  // retry.h
using htr::rt::StreamChoice;

namespace {

bool SameShape(const htr_tensor_s* a, const htr_tensor_s* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank; ++i)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

bool Overlap(const htr_tensor_s* a, const htr_tensor_s* b) {
  if (a->storage != b->storage) return false;
  uint64_t ea = htr::rt::Extent(a->rank, a->shape, a->strides) * htr::rt::DtypeSize(a->dtype);
  uint64_t eb = htr::rt::Extent(b->rank, b->shape, b->strides) * htr::rt::DtypeSize(b->dtype);
  uint64_t sa = htr::rt::TensorByteOffset(a), sb = htr::rt::TensorByteOffset(b);
  return sa < sb + eb && sb < sa + ea;
}

Status CopyTensor(htr_tensor_t* dst, htr_tensor_t* src, htr_stream_t* stream) {
  if (dst == nullptr || src == nullptr)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "dst or src is NULL");
  if (dst->dtype != src->dtype)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "dtype mismatch: dst {} src {}",
                 htr::rt::DtypeName(dst->dtype), htr::rt::DtypeName(src->dtype));
  if (!SameShape(dst, src)) return Error(HTR_STATUS_INVALID_ARGUMENT, "shape mismatch");
  HTR_ASSIGN_OR_RETURN(StreamChoice ds, htr::rt::ChooseStream(dst->device, stream, "htr_tensor_copy"));
  const uint64_t n = htr_tensor_nbytes(dst);
  if (n == 0) return Status();
  htr::prof::Dispatch prof(htr::prof::Kind::kCopy, dst->device, ds.stream, "copy d2d");
  prof.SetBytes(n, n);
  const bool same_plugin = dst->device->plugin == src->device->plugin;
  const bool dense = htr::rt::IsContiguous(dst->rank, dst->shape, dst->strides) &&
                     htr::rt::IsContiguous(src->rank, src->shape, src->strides);
  if (same_plugin && dense && dst->storage->block.buffer && src->storage->block.buffer &&
      !Overlap(dst, src)) {
    HTR_RETURN_IF_ERROR(Status(RetryTransient(dst->device, "copy_device_to_device", [&] {
      return dst->device->api->copy_device_to_device(
          ds.stream->handle, src->storage->block.buffer, htr::rt::TensorByteOffset(src),
          dst->storage->block.buffer, htr::rt::TensorByteOffset(dst), n);
    })));
    prof.Launched();
    if (ds.sync) return Status(dst->device->api->stream_synchronize(ds.stream->handle));
    return Status();
  }
  // Through host memory (other plugin, strided layouts, overlap, imports).
  // The source is read on the caller's stream when it is on dst's device,
  // otherwise on its own default stream; both steps complete before return.
  std::vector<uint8_t> staging(n);
  StreamChoice ss = src->device == dst->device
                        ? StreamChoice{ds.stream, true}
                        : StreamChoice{&src->device->default_stream, true};
  HTR_RETURN_IF_ERROR(htr::rt::ReadToHost(src, staging.data(), ss));
  return htr::rt::WriteFromHost(dst, staging.data(), StreamChoice{ds.stream, true});
}

Status FillBytes(htr_tensor_t* t, uint8_t value, htr_stream_t* stream) {
  if (t == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "tensor is NULL");
  HTR_ASSIGN_OR_RETURN(StreamChoice s, htr::rt::ChooseStream(t->device, stream, "htr_tensor_fill_bytes"));
  const uint64_t n = htr_tensor_nbytes(t);
  if (n == 0) return Status();
  htr::prof::Dispatch prof(htr::prof::Kind::kFill, t->device, s.stream, "fill");
  prof.SetBytes(0, n);
  if (htr::rt::IsContiguous(t->rank, t->shape, t->strides) && t->storage->block.buffer) {
    HTR_RETURN_IF_ERROR(Status(RetryTransient(t->device, "fill", [&] {
      return t->device->api->fill(s.stream->handle, t->storage->block.buffer, htr::rt::TensorByteOffset(t), n,
                                  value);
    })));
    prof.Launched();
    if (s.sync) return Status(t->device->api->stream_synchronize(s.stream->handle));
    return Status();
  }
  std::vector<uint8_t> pattern(n, value);
  s.sync = true;
  return htr::rt::WriteFromHost(t, pattern.data(), s);
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_tensor_copy_from_host(htr_tensor_t* dst, const void* src, uint64_t size,
                                               htr_stream_t* stream) {
  return Guard([&]() -> Status {
    if (dst == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "dst is NULL");
    const uint64_t n = htr_tensor_nbytes(dst);
    if (size != n)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "size {} differs from the tensor's nbytes {}", size, n);
    if (src == nullptr && n > 0) return Error(HTR_STATUS_INVALID_ARGUMENT, "src is NULL");
    HTR_ASSIGN_OR_RETURN(StreamChoice s,
                         htr::rt::ChooseStream(dst->device, stream, "htr_tensor_copy_from_host"));
    return htr::rt::WriteFromHost(dst, src, s);
  });
}

HTR_API htr_status_t htr_tensor_copy_to_host(htr_tensor_t* src, void* dst, uint64_t size,
                                             htr_stream_t* stream) {
  return Guard([&]() -> Status {
    if (src == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "src is NULL");
    const uint64_t n = htr_tensor_nbytes(src);
    if (size != n)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "size {} differs from the tensor's nbytes {}", size, n);
    if (dst == nullptr && n > 0) return Error(HTR_STATUS_INVALID_ARGUMENT, "dst is NULL");
    HTR_ASSIGN_OR_RETURN(StreamChoice s,
                         htr::rt::ChooseStream(src->device, stream, "htr_tensor_copy_to_host"));
    return htr::rt::ReadToHost(src, dst, s);
  });
}

HTR_API htr_status_t htr_tensor_copy(htr_tensor_t* dst, htr_tensor_t* src, htr_stream_t* stream) {
  return Guard([&] { return CopyTensor(dst, src, stream); });
}

HTR_API htr_status_t htr_tensor_fill_bytes(htr_tensor_t* tensor, uint8_t value,
                                           htr_stream_t* stream) {
  return Guard([&] { return FillBytes(tensor, value, stream); });
}

}  // extern "C"
