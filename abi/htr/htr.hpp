/*
 * htr.hpp — header-only RAII C++17 over the embedding API (htr.h).
 *
 * Works with exceptions OFF (-fno-exceptions): nothing here throws. Fallible
 * calls return a move-only htr::Status (which owns an htr_status_t) or an
 * htr::StatusOr<T> (a status, or a value). Both are [[nodiscard]].
 *
 * Namespaces: this header defines namespace `htr` (Status, StatusOr, Runtime,
 * Device, Stream, Event, Tensor, ...). libhtr's own internals live in
 * `htr::rt` and never define names in `htr` itself, except that the core
 * uses this very Status/StatusOr as its status type (one status type for
 * the C ABI, the core and embedders).
 *
 * Ownership:
 *   Runtime  move-only, owns an htr_runtime_t (destroyed in the destructor);
 *            it must outlive every object made from it.
 *   Device   non-owning handle (devices live as long as the runtime).
 *   Stream   move-only; owns the stream unless it is a device's default
 *            stream (borrowed).
 *   Event    move-only, owns the event.
 *   Tensor   reference counted: copying retains, destruction releases.
 */
#ifndef HTR_HPP_
#define HTR_HPP_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "htr.h"

namespace htr {

/* ------------------------------------------------------------------ Status */

/* Owns one htr_status_t (NULL = OK). Move-only. */
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  /* Adopts `status` (takes ownership). */
  explicit Status(htr_status_t status) noexcept : s_(status) {}
  /* A new status; code OK gives an OK status. */
  Status(htr_status_code_t code, const char* message) noexcept
      : s_(htr_status_new(code, message)) {}
  Status(htr_status_code_t code, const std::string& message) noexcept
      : Status(code, message.c_str()) {}
  Status(Status&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Status& operator=(Status&& o) noexcept {
    if (this != &o) {
      htr_status_free(s_);
      s_ = o.s_;
      o.s_ = nullptr;
    }
    return *this;
  }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  ~Status() { htr_status_free(s_); }

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return s_ == nullptr; }
  htr_status_code_t code() const noexcept { return htr_status_code(s_); }
  /* Lives as long as this Status; "" when OK. */
  const char* message() const noexcept { return htr_status_message(s_); }
  const char* code_name() const noexcept { return htr_status_code_name(code()); }
  /* Borrowed view of the C status (still owned by this object). */
  htr_status_t get() const noexcept { return s_; }
  /* Gives up ownership: the caller frees the result with htr_status_free. */
  htr_status_t release() noexcept {
    htr_status_t s = s_;
    s_ = nullptr;
    return s;
  }
  /* "OUT_OF_MEMORY: message", or "OK". */
  std::string ToString() const {
    if (ok()) return "OK";
    return std::string(code_name()) + ": " + message();
  }

 private:
  htr_status_t s_ = nullptr;
};

/* A Status or a value of T. Move-only when T is. Precondition of value(),
 * operator* and operator->: ok(). */
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  /* Must be an error; an OK status here becomes INTERNAL. */
  StatusOr(Status status) noexcept : status_(std::move(status)) {  // NOLINT(implicit)
    if (status_.ok()) status_ = Status(HTR_STATUS_INTERNAL, "StatusOr built from an OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(implicit)
  StatusOr(StatusOr&&) = default;
  StatusOr& operator=(StatusOr&&) = default;

  bool ok() const noexcept { return status_.ok(); }
  const Status& status() const noexcept { return status_; }
  /* Moves the status out (OK when a value is held). */
  Status take_status() noexcept { return std::move(status_); }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

/* ------------------------------------------------------------------ dtypes */

inline size_t DtypeSize(htr_dtype_t d) noexcept { return htr_dtype_size(d); }
inline const char* DtypeName(htr_dtype_t d) noexcept { return htr_dtype_name(d); }

template <typename T>
struct DtypeOf;
template <> struct DtypeOf<float> { static constexpr htr_dtype_t value = HTR_DTYPE_F32; };
template <> struct DtypeOf<double> { static constexpr htr_dtype_t value = HTR_DTYPE_F64; };
template <> struct DtypeOf<int32_t> { static constexpr htr_dtype_t value = HTR_DTYPE_I32; };
template <> struct DtypeOf<int64_t> { static constexpr htr_dtype_t value = HTR_DTYPE_I64; };
template <> struct DtypeOf<uint8_t> { static constexpr htr_dtype_t value = HTR_DTYPE_U8; };

/* ------------------------------------------------------------------ logging */

/* 0 error, 1 warn, 2 info, 3 debug, 4 trace (htr_log_level_t in htr_plugin.h). */
inline int LogLevel() noexcept { return htr_log_level(); }
inline void SetLogLevel(int level) noexcept { htr_log_set_level(level); }

class Stream;

/* ------------------------------------------------------------------ Device */

/* Non-owning device handle; valid while its runtime lives. */
class Device {
 public:
  Device() noexcept = default;
  explicit Device(htr_device_t* d) noexcept : d_(d) {}
  htr_device_t* get() const noexcept { return d_; }
  explicit operator bool() const noexcept { return d_ != nullptr; }
  bool operator==(const Device& o) const noexcept { return d_ == o.d_; }
  bool operator!=(const Device& o) const noexcept { return d_ != o.d_; }

  const char* id() const noexcept { return htr_device_id(d_); }
  const char* plugin_name() const noexcept { return htr_device_plugin_name(d_); }
  StatusOr<htr_device_properties_t> properties() const noexcept {
    htr_device_properties_t p{};
    p.struct_size = sizeof(p);
    Status s(htr_device_properties(d_, &p));
    if (!s.ok()) return s;
    return p;
  }
  /* {free, total} bytes. */
  StatusOr<std::pair<uint64_t, uint64_t>> memory_info() const noexcept {
    uint64_t f = 0, t = 0;
    Status s(htr_device_memory_info(d_, &f, &t));
    if (!s.ok()) return s;
    return std::make_pair(f, t);
  }
  StatusOr<htr_pool_stats_t> pool_stats() const noexcept {
    htr_pool_stats_t st{};
    st.struct_size = sizeof(st);
    Status s(htr_device_pool_stats(d_, &st));
    if (!s.ok()) return s;
    return st;
  }
  Status pool_trim() const noexcept { return Status(htr_device_pool_trim(d_)); }
  Status pool_reset_peak() const noexcept { return Status(htr_device_pool_reset_peak(d_)); }
  /* The default stream (borrowed). Defined below Stream. */
  inline StatusOr<Stream> default_stream() const noexcept;
  inline StatusOr<Stream> create_stream() const noexcept;

 private:
  htr_device_t* d_ = nullptr;
};

/* ------------------------------------------------------------------ Stream */

class Stream {
 public:
  Stream() noexcept = default;
  /* owned: destroy in the destructor (false for default streams). */
  Stream(htr_stream_t* s, bool owned) noexcept : s_(s), owned_(owned) {}
  Stream(Stream&& o) noexcept : s_(o.s_), owned_(o.owned_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = o.s_;
      owned_ = o.owned_;
      o.s_ = nullptr;
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { reset(); }

  htr_stream_t* get() const noexcept { return s_; }
  explicit operator bool() const noexcept { return s_ != nullptr; }
  Device device() const noexcept { return Device(htr_stream_device(s_)); }
  Status synchronize() const noexcept { return Status(htr_stream_synchronize(s_)); }
  Status wait(const class Event& e) const noexcept;

 private:
  void reset() noexcept {
    if (s_ && owned_) htr_stream_destroy(s_);
    s_ = nullptr;
  }
  htr_stream_t* s_ = nullptr;
  bool owned_ = false;
};

inline StatusOr<Stream> Device::default_stream() const noexcept {
  htr_stream_t* s = nullptr;
  Status st(htr_device_default_stream(d_, &s));
  if (!st.ok()) return st;
  return Stream(s, false);
}

inline StatusOr<Stream> Device::create_stream() const noexcept {
  htr_stream_t* s = nullptr;
  Status st(htr_stream_create(d_, &s));
  if (!st.ok()) return st;
  return Stream(s, true);
}

/* ------------------------------------------------------------------- Event */

class Event {
 public:
  Event() noexcept = default;
  explicit Event(htr_event_t* e) noexcept : e_(e) {}  // adopts
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      if (e_) htr_event_destroy(e_);
      e_ = o.e_;
      o.e_ = nullptr;
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e_) htr_event_destroy(e_);
  }

  static StatusOr<Event> Create(Device d) noexcept {
    htr_event_t* e = nullptr;
    Status s(htr_event_create(d.get(), &e));
    if (!s.ok()) return s;
    return Event(e);
  }
  htr_event_t* get() const noexcept { return e_; }
  Status record(const Stream& s) const noexcept { return Status(htr_event_record(e_, s.get())); }
  Status synchronize() const noexcept { return Status(htr_event_synchronize(e_)); }
  StatusOr<bool> query() const noexcept {
    int done = 0;
    Status s(htr_event_query(e_, &done));
    if (!s.ok()) return s;
    return done != 0;
  }
  /* Nanoseconds from `start` to this event. */
  StatusOr<uint64_t> elapsed_since(const Event& start) const noexcept {
    uint64_t ns = 0;
    Status s(htr_event_elapsed_ns(start.e_, e_, &ns));
    if (!s.ok()) return s;
    return ns;
  }

 private:
  htr_event_t* e_ = nullptr;
};

inline Status Stream::wait(const Event& e) const noexcept {
  return Status(htr_stream_wait_event(s_, e.get()));
}

/* ------------------------------------------------------------------ Tensor */

/* Reference-counted tensor handle. Copy = retain; destruction = release. */
class Tensor {
 public:
  Tensor() noexcept = default;
  /* Adopts one reference. */
  explicit Tensor(htr_tensor_t* t) noexcept : t_(t) {}
  Tensor(const Tensor& o) noexcept : t_(o.t_) {
    if (t_) htr_tensor_retain(t_);
  }
  Tensor(Tensor&& o) noexcept : t_(o.t_) { o.t_ = nullptr; }
  Tensor& operator=(const Tensor& o) noexcept {
    if (o.t_) htr_tensor_retain(o.t_);
    htr_tensor_release(t_);
    t_ = o.t_;
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      htr_tensor_release(t_);
      t_ = o.t_;
      o.t_ = nullptr;
    }
    return *this;
  }
  ~Tensor() { htr_tensor_release(t_); }

  static StatusOr<Tensor> Create(Device d, htr_dtype_t dtype,
                                 std::initializer_list<int64_t> shape) noexcept {
    return Create(d, dtype, shape.begin(), static_cast<uint32_t>(shape.size()));
  }
  static StatusOr<Tensor> Create(Device d, htr_dtype_t dtype, const int64_t* shape,
                                 uint32_t rank) noexcept {
    htr_tensor_t* t = nullptr;
    Status s(htr_tensor_create(d.get(), dtype, rank, shape, &t));
    if (!s.ok()) return s;
    return Tensor(t);
  }
  static StatusOr<Tensor> CreateStrided(Device d, htr_dtype_t dtype,
                                        std::initializer_list<int64_t> shape,
                                        std::initializer_list<int64_t> strides) noexcept {
    if (shape.size() != strides.size())
      return Status(HTR_STATUS_INVALID_ARGUMENT, "shape and strides differ in rank");
    htr_tensor_t* t = nullptr;
    Status s(htr_tensor_create_strided(d.get(), dtype, static_cast<uint32_t>(shape.size()),
                                       shape.begin(), strides.begin(), &t));
    if (!s.ok()) return s;
    return Tensor(t);
  }
  /* Takes ownership of `managed` on success (see htr_tensor_from_dlpack). */
  static StatusOr<Tensor> FromDlpack(Device d, struct DLManagedTensor* managed) noexcept {
    htr_tensor_t* t = nullptr;
    Status s(htr_tensor_from_dlpack(d.get(), managed, &t));
    if (!s.ok()) return s;
    return Tensor(t);
  }

  StatusOr<Tensor> view(std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> strides,
                        int64_t offset_elements = 0) const noexcept {
    if (shape.size() != strides.size())
      return Status(HTR_STATUS_INVALID_ARGUMENT, "shape and strides differ in rank");
    return view(shape.begin(), strides.begin(), static_cast<uint32_t>(shape.size()),
                offset_elements);
  }
  StatusOr<Tensor> view(const int64_t* shape, const int64_t* strides, uint32_t rank,
                        int64_t offset_elements) const noexcept {
    htr_tensor_t* v = nullptr;
    Status s(htr_tensor_view(t_, rank, shape, strides, offset_elements, &v));
    if (!s.ok()) return s;
    return Tensor(v);
  }

  htr_tensor_t* get() const noexcept { return t_; }
  /* Gives up this handle's reference. */
  htr_tensor_t* release() noexcept {
    htr_tensor_t* t = t_;
    t_ = nullptr;
    return t;
  }
  explicit operator bool() const noexcept { return t_ != nullptr; }

  Device device() const noexcept { return Device(htr_tensor_device(t_)); }
  htr_dtype_t dtype() const noexcept { return htr_tensor_dtype(t_); }
  uint32_t rank() const noexcept { return htr_tensor_rank(t_); }
  int64_t dim(uint32_t i) const noexcept { return htr_tensor_shape(t_)[i]; }
  int64_t stride(uint32_t i) const noexcept { return htr_tensor_strides(t_)[i]; }
  std::vector<int64_t> shape() const {
    const int64_t* s = htr_tensor_shape(t_);
    return std::vector<int64_t>(s, s + rank());
  }
  std::vector<int64_t> strides() const {
    const int64_t* s = htr_tensor_strides(t_);
    return std::vector<int64_t>(s, s + rank());
  }
  int64_t offset() const noexcept { return htr_tensor_offset(t_); }
  int64_t numel() const noexcept { return htr_tensor_numel(t_); }
  uint64_t nbytes() const noexcept { return htr_tensor_nbytes(t_); }
  bool is_contiguous() const noexcept { return htr_tensor_is_contiguous(t_) != 0; }
  StatusOr<void*> host_ptr() const noexcept {
    void* p = nullptr;
    Status s(htr_tensor_host_ptr(t_, &p));
    if (!s.ok()) return s;
    return p;
  }

  /* `stream` null: synchronous on the default stream. */
  Status copy_from_host(const void* src, uint64_t size, const Stream* stream = nullptr) const noexcept {
    return Status(htr_tensor_copy_from_host(t_, src, size, stream ? stream->get() : nullptr));
  }
  Status copy_to_host(void* dst, uint64_t size, const Stream* stream = nullptr) const noexcept {
    return Status(htr_tensor_copy_to_host(t_, dst, size, stream ? stream->get() : nullptr));
  }
  template <typename T>
  Status copy_from(const std::vector<T>& v) const noexcept {
    return copy_from_host(v.data(), v.size() * sizeof(T));
  }
  /* Dense row-major copy of the elements (T must match the dtype size). */
  template <typename T>
  StatusOr<std::vector<T>> to_vector() const {
    if (sizeof(T) != DtypeSize(dtype()))
      return Status(HTR_STATUS_INVALID_ARGUMENT, "element type size differs from the dtype size");
    std::vector<T> v(static_cast<size_t>(numel()));
    Status s = copy_to_host(v.data(), v.size() * sizeof(T));
    if (!s.ok()) return s;
    return v;
  }
  /* this <- src (same dtype and shape; any devices). */
  Status copy_from(const Tensor& src, const Stream* stream = nullptr) const noexcept {
    return Status(htr_tensor_copy(t_, src.t_, stream ? stream->get() : nullptr));
  }
  Status fill_bytes(uint8_t value, const Stream* stream = nullptr) const noexcept {
    return Status(htr_tensor_fill_bytes(t_, value, stream ? stream->get() : nullptr));
  }
  /* The consumer owns the result and calls its deleter. */
  StatusOr<struct DLManagedTensor*> to_dlpack() const noexcept {
    struct DLManagedTensor* m = nullptr;
    Status s(htr_tensor_to_dlpack(t_, &m));
    if (!s.ok()) return s;
    return m;
  }

 private:
  htr_tensor_t* t_ = nullptr;
};

/* ---------------------------------------------------------------- op calls */

/* Runs a library op (abi/OPS.md). `stream` null: synchronous. */
inline Status OpRun(const char* op, std::initializer_list<Tensor> inputs,
                    std::initializer_list<Tensor> outputs,
                    std::initializer_list<htr_attr_t> attrs = {},
                    const Stream* stream = nullptr) {
  std::vector<htr_tensor_t*> in, out;
  in.reserve(inputs.size());
  out.reserve(outputs.size());
  for (const Tensor& t : inputs) in.push_back(t.get());
  for (const Tensor& t : outputs) out.push_back(t.get());
  return Status(htr_op_run(stream ? stream->get() : nullptr, op, in.data(),
                           static_cast<uint32_t>(in.size()), out.data(),
                           static_cast<uint32_t>(out.size()), attrs.begin(),
                           static_cast<uint32_t>(attrs.size())));
}

inline htr_attr_t IntAttr(const char* name, int64_t v) noexcept {
  htr_attr_t a{};
  a.name = name;
  a.kind = HTR_ATTR_INT;
  a.i = v;
  return a;
}
inline htr_attr_t FloatAttr(const char* name, double v) noexcept {
  htr_attr_t a{};
  a.name = name;
  a.kind = HTR_ATTR_FLOAT;
  a.f = v;
  return a;
}
inline htr_attr_t StringAttr(const char* name, const char* v) noexcept {
  htr_attr_t a{};
  a.name = name;
  a.kind = HTR_ATTR_STRING;
  a.s = v;
  return a;
}

/* ----------------------------------------------------------------- Runtime */

struct PluginInfo {
  std::string name, version, path;
  uint32_t abi_major = 0, abi_minor = 0;
  int32_t score = 0;
  uint32_t device_count = 0;
  std::string unavailable_reason; /* empty when it has devices */
};

struct RejectedPlugin {
  std::string path, reason;
};

class Runtime {
 public:
  struct Options {
    std::string plugin_path;        /* ':'-separated dirs searched first */
    bool no_default_search = false; /* only plugin_path and plugin_files */
    std::vector<std::string> plugin_files;
  };

  Runtime() noexcept = default;
  explicit Runtime(htr_runtime_t* r) noexcept : r_(r) {}  // adopts
  Runtime(Runtime&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Runtime& operator=(Runtime&& o) noexcept {
    if (this != &o) {
      if (r_) htr_runtime_destroy(r_);
      r_ = o.r_;
      o.r_ = nullptr;
    }
    return *this;
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() {
    if (r_) htr_runtime_destroy(r_);
  }

  static StatusOr<Runtime> Create() noexcept { return CreateRaw(nullptr); }
  static StatusOr<Runtime> Create(const Options& o) {
    std::vector<const char*> files;
    files.reserve(o.plugin_files.size());
    for (const std::string& f : o.plugin_files) files.push_back(f.c_str());
    htr_runtime_options_t opt{};
    opt.struct_size = sizeof(opt);
    opt.plugin_path = o.plugin_path.empty() ? nullptr : o.plugin_path.c_str();
    opt.no_default_search = o.no_default_search ? 1 : 0;
    opt.plugin_files = files.data();
    opt.num_plugin_files = files.size();
    return CreateRaw(&opt);
  }
  static StatusOr<Runtime> CreateRaw(const htr_runtime_options_t* opt) noexcept {
    htr_runtime_t* r = nullptr;
    Status s(htr_runtime_create(opt, &r));
    if (!s.ok()) return s;
    return Runtime(r);
  }

  htr_runtime_t* get() const noexcept { return r_; }
  explicit operator bool() const noexcept { return r_ != nullptr; }

  Status load_plugin(const char* path) const noexcept {
    return Status(htr_runtime_load_plugin(r_, path));
  }
  std::vector<std::string> search_path() const {
    std::vector<std::string> v;
    for (size_t i = 0, n = htr_runtime_search_path_count(r_); i < n; ++i)
      v.emplace_back(htr_runtime_search_path(r_, i));
    return v;
  }
  std::vector<PluginInfo> plugins() const {
    std::vector<PluginInfo> v;
    for (size_t i = 0, n = htr_runtime_plugin_count(r_); i < n; ++i) {
      htr_plugin_info_t c{};
      c.struct_size = sizeof(c);
      Status s(htr_runtime_plugin_info(r_, i, &c));
      if (!s.ok()) continue;
      PluginInfo p;
      p.name = c.name ? c.name : "";
      p.version = c.version ? c.version : "";
      p.path = c.path ? c.path : "";
      p.abi_major = c.abi_major;
      p.abi_minor = c.abi_minor;
      p.score = c.score;
      p.device_count = c.device_count;
      p.unavailable_reason = c.unavailable_reason ? c.unavailable_reason : "";
      v.push_back(std::move(p));
    }
    return v;
  }
  std::vector<RejectedPlugin> rejected() const {
    std::vector<RejectedPlugin> v;
    for (size_t i = 0, n = htr_runtime_rejected_count(r_); i < n; ++i) {
      htr_rejected_plugin_t c{};
      c.struct_size = sizeof(c);
      Status s(htr_runtime_rejected_info(r_, i, &c));
      if (!s.ok()) continue;
      v.push_back(RejectedPlugin{c.path ? c.path : "", c.reason ? c.reason : ""});
    }
    return v;
  }
  size_t device_count() const noexcept { return htr_runtime_device_count(r_); }
  StatusOr<Device> device(size_t index) const noexcept {
    htr_device_t* d = nullptr;
    Status s(htr_runtime_device(r_, index, &d));
    if (!s.ok()) return s;
    return Device(d);
  }
  std::vector<Device> devices() const {
    std::vector<Device> v;
    for (size_t i = 0, n = device_count(); i < n; ++i) {
      htr_device_t* d = nullptr;
      Status s(htr_runtime_device(r_, i, &d));
      if (s.ok()) v.emplace_back(d);
    }
    return v;
  }
  StatusOr<Device> find_device(const char* id) const noexcept {
    htr_device_t* d = nullptr;
    Status s(htr_runtime_find_device(r_, id, &d));
    if (!s.ok()) return s;
    return Device(d);
  }
  StatusOr<Device> default_device() const noexcept {
    htr_device_t* d = nullptr;
    Status s(htr_runtime_default_device(r_, &d));
    if (!s.ok()) return s;
    return Device(d);
  }

 private:
  htr_runtime_t* r_ = nullptr;
};

}  // namespace htr

#endif /* HTR_HPP_ */
