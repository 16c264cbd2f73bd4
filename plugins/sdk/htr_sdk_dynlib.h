/*
 * htr_sdk_dynlib.h — load a vendor library with dlopen and resolve a table of
 * symbols, so a plugin links no vendor library at build time and still loads
 * (reporting zero devices with a reason) on a machine without the driver.
 *
 * Usage:
 *   struct CudaApi { CUresult (*cuInit)(unsigned); ... };
 *   CudaApi api{};
 *   const htr_sdk::Symbol syms[] = {
 *     HTR_SDK_SYMBOL(CudaApi, cuInit, true), ...};
 *   htr_sdk::DynLib lib;
 *   std::string why;
 *   if (!lib.open({"libcuda.so.1", "libcuda.so"}, &why) ||
 *       !lib.resolve(syms, count, &api, &why)) { report `why` }
 *
 * Contract:
 *   - open() tries each name in order with RTLD_NOW | RTLD_LOCAL and keeps the
 *     first that loads. On failure it returns false and sets *why to the
 *     dlerror() text of every attempt. Names are borrowed for the call.
 *   - resolve() writes each symbol's address into the table at its byte
 *     offset. A missing required symbol fails (false, *why names it); a
 *     missing optional one leaves its slot NULL.
 *   - The library is closed by close() or the destructor; resolved pointers
 *     die with it. DynLib is movable, not copyable. Not thread-safe: open,
 *     resolve and close from one thread (normally plugin init/shutdown).
 */
#ifndef HTR_SDK_DYNLIB_H_
#define HTR_SDK_DYNLIB_H_

#include <cstddef>
#include <initializer_list>
#include <string>

namespace htr_sdk {

struct Symbol {
  const char* name;  // static string
  size_t offset;     // byte offset of the function-pointer slot in the table
  bool required;
};

#define HTR_SDK_SYMBOL(Table, field, required) \
  ::htr_sdk::Symbol { #field, offsetof(Table, field), (required) }

class DynLib {
 public:
  DynLib() = default;
  ~DynLib();
  DynLib(DynLib&& other) noexcept;
  DynLib& operator=(DynLib&& other) noexcept;
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;

  bool open(std::initializer_list<const char*> names, std::string* why);
  bool resolve(const Symbol* symbols, size_t count, void* table, std::string* why) const;
  void* symbol(const char* name) const;  // NULL when absent or not open
  bool is_open() const { return handle_ != nullptr; }
  const std::string& loaded_name() const { return name_; }
  void close();

 private:
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace htr_sdk

#endif  // HTR_SDK_DYNLIB_H_
