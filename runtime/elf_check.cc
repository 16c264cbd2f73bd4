// runtime/elf_check.cc — see elf_check.h.
#include "runtime/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace htr::rt {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr uint16_t kHostMachine = EM_RISCV;
#elif defined(__powerpc64__)
constexpr uint16_t kHostMachine = EM_PPC64;
#else
#error "elf_check.cc: add this architecture's EM_* value"
#endif
static_assert(sizeof(void*) == 8, "elf_check.cc handles 64-bit hosts (Elf64)");

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif

const char* MachineName(uint16_t m) {
  switch (m) {
    case EM_386: return "x86 (32-bit)";
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_ARM: return "ARM (32-bit)";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "PowerPC64";
    case EM_S390: return "s390";
    default: return "unknown";
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool ReadAt(int fd, uint64_t offset, void* dst, size_t size) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    const ssize_t got = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<size_t>(got);
  }
  return true;
}

// a + b <= limit without overflow.
bool Within(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

std::string Check(const std::string& path) {
  // O_NONBLOCK: a FIFO named like a plugin must not block the open.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return std::string("fstat: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (size < EI_NIDENT || !ReadAt(fd.get(), 0, eh.e_ident, EI_NIDENT))
    return "not an ELF file (" + std::to_string(size) + " bytes)";
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file (no ELF magic)";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64)
    return eh.e_ident[EI_CLASS] == ELFCLASS32 ? "wrong ELF class: 32-bit, the host is 64-bit"
                                              : "invalid ELF class";
  if (eh.e_ident[EI_DATA] != kHostData) return "wrong byte order for this host";
  if (size < sizeof(eh) || !ReadAt(fd.get(), 0, &eh, sizeof(eh)))
    return "truncated ELF header (" + std::to_string(size) + " bytes)";
  if (eh.e_machine != kHostMachine)
    return std::string("wrong architecture: ") + MachineName(eh.e_machine) + " (e_machine " +
           std::to_string(eh.e_machine) + "), the host is " + MachineName(kHostMachine);
  if (eh.e_type != ET_DYN) return "not a shared object (ELF type " + std::to_string(eh.e_type) + ")";
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr))
    return "no usable program headers (count " + std::to_string(eh.e_phnum) + ", entry size " +
           std::to_string(eh.e_phentsize) + ")";
  const uint64_t ph_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (!Within(eh.e_phoff, ph_bytes, size))
    return "truncated: program headers at " + std::to_string(eh.e_phoff) + " + " +
           std::to_string(ph_bytes) + " bytes run past the end of the file (" +
           std::to_string(size) + " bytes)";
  if (eh.e_shnum != 0) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr))
      return "invalid section header entry size " + std::to_string(eh.e_shentsize);
    const uint64_t sh_bytes = uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr);
    if (!Within(eh.e_shoff, sh_bytes, size))
      return "truncated: section headers at " + std::to_string(eh.e_shoff) + " + " +
             std::to_string(sh_bytes) + " bytes run past the end of the file (" +
             std::to_string(size) + " bytes)";
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(fd.get(), eh.e_phoff, ph.data(), ph_bytes)) return "cannot read the program headers";
  int loads = 0;
  for (size_t i = 0; i < ph.size(); ++i) {
    const Elf64_Phdr& p = ph[i];
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC && p.p_type != PT_INTERP &&
        p.p_type != PT_NOTE && p.p_type != PT_GNU_EH_FRAME)
      continue;
    if (!Within(p.p_offset, p.p_filesz, size))
      return "truncated: segment " + std::to_string(i) + " (file bytes " +
             std::to_string(p.p_offset) + " + " + std::to_string(p.p_filesz) +
             ") runs past the end of the file (" + std::to_string(size) + " bytes)";
    if (p.p_type == PT_LOAD) {
      ++loads;
      if (p.p_filesz > p.p_memsz)
        return "invalid segment " + std::to_string(i) + ": file size " +
               std::to_string(p.p_filesz) + " > memory size " + std::to_string(p.p_memsz);
    }
  }
  if (loads == 0) return "no loadable segments";
  return "";
}

}  // namespace

std::string CheckPluginElf(const std::string& path) noexcept {
  try {
    return Check(path);
  } catch (...) {
    return "out of memory while checking the ELF headers";
  }
}

}  // namespace htr::rt
