// dlopen wrapper. RTLD_LOCAL keeps a vendor library's symbols out of the
// global namespace so two plugins can load different builds of one library.
#include "htr_sdk_dynlib.h"

#include <dlfcn.h>

#include <cstring>
#include <utility>

namespace htr_sdk {

DynLib::~DynLib() { close(); }

DynLib::DynLib(DynLib&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)) {}

DynLib& DynLib::operator=(DynLib&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

bool DynLib::open(std::initializer_list<const char*> names, std::string* why) {
  close();
  std::string errors;
  for (const char* name : names) {
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      handle_ = h;
      name_ = name;
      return true;
    }
    const char* err = dlerror();
    if (!errors.empty()) {
      errors += "; ";
    }
    errors += err != nullptr ? err : name;
  }
  if (why != nullptr) {
    *why = errors.empty() ? std::string("no library names given") : errors;
  }
  return false;
}

bool DynLib::resolve(const Symbol* symbols, size_t count, void* table, std::string* why) const {
  if (handle_ == nullptr) {
    if (why != nullptr) {
      *why = "library not open";
    }
    return false;
  }
  auto* base = static_cast<unsigned char*>(table);
  for (size_t i = 0; i < count; ++i) {
    dlerror();
    void* addr = dlsym(handle_, symbols[i].name);
    if (addr == nullptr && symbols[i].required) {
      if (why != nullptr) {
        *why = name_ + ": missing symbol " + symbols[i].name;
      }
      return false;
    }
    std::memcpy(base + symbols[i].offset, &addr, sizeof addr);
  }
  return true;
}

void* DynLib::symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

void DynLib::close() {
  if (handle_ != nullptr) {
    dlclose(handle_);
    handle_ = nullptr;
  }
  name_.clear();
}

}  // namespace htr_sdk
