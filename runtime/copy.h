// runtime/copy.h — moving tensor data between host memory and devices.
//
// These helpers are the one place that decides how bytes move:
//   - contiguous tensor with a device buffer: one plugin copy on the stream;
//   - host-accessible storage (CPU-like plugins, DLPack imports): the stream
//     is synchronized, then the host pointer is read/written directly;
//   - strided tensor on a device without host access: the byte span the
//     tensor covers is staged through host memory (read, scatter, write
//     back). Caveat: bytes inside the span but outside the view are written
//     back unchanged, so concurrent writers to those bytes on another stream
//     race with this copy.
// Anything staged is synchronous (staging memory must outlive the copy).
#ifndef HTR_RUNTIME_COPY_H_
#define HTR_RUNTIME_COPY_H_

#include "runtime/objects.h"

namespace htr::rt {

// `stream` NULL -> the tensor device's default stream and synchronous.
// A stream of another device is INVALID_ARGUMENT.
struct StreamChoice {
  htr_stream_s* stream;
  bool sync;
};
StatusOr<StreamChoice> ChooseStream(htr_device_s* device, htr_stream_s* stream, const char* what);

// Dense row-major bytes of `t` (nbytes) into `dst`. Asynchronous only when
// !sync and the tensor is contiguous with a device buffer.
Status ReadToHost(const htr_tensor_s* t, void* dst, StreamChoice s);
// Dense row-major bytes `src` (nbytes) into `t`. Same rule.
Status WriteFromHost(const htr_tensor_s* t, const void* src, StreamChoice s);

}  // namespace htr::rt

#endif  // HTR_RUNTIME_COPY_H_
