// runtime/elf_check.h — a plugin file's ELF structure checked before dlopen.
//
// dlopen maps a shared object's PT_LOAD segments straight from the file; a
// segment that runs past the end of a truncated file maps pages with no
// backing, and the dynamic loader's first touch of them is SIGBUS in the
// host. CheckPluginElf reads only the ELF and program headers (pread, no
// mmap) and rejects, with a reason, anything dlopen could not map safely: not
// a regular file, not ELF, another class/byte order/machine than the host's,
// not a shared object, program or section header tables or any segment's
// file extent past the end of the file. It cannot catch a file that changes
// between the check and dlopen. Never throws.
#ifndef HTR_RUNTIME_ELF_CHECK_H_
#define HTR_RUNTIME_ELF_CHECK_H_

#include <string>

namespace htr::rt {

// "" when `path` looks loadable, else the reason it is not.
std::string CheckPluginElf(const std::string& path) noexcept;

}  // namespace htr::rt

#endif  // HTR_RUNTIME_ELF_CHECK_H_
