/* old_libhtr.c — a stand-in for an older libhtr: it exports the status and
 * dtype functions and nothing else. tests/python/test_symbols.py loads it
 * through htr.Library to show that a library missing a symbol still loads,
 * that the functions it has work, and that calling a missing one raises
 * htr.MissingSymbolError naming the symbol and the file (no crash, no
 * failure at import). */
#include <stddef.h>

#include "htr/htr.h"

htr_status_code_t htr_status_code(htr_status_t status) {
  return status == NULL ? HTR_STATUS_OK : HTR_STATUS_UNKNOWN;
}

const char* htr_status_code_name(htr_status_code_t code) {
  return code == HTR_STATUS_OK ? "OK" : "UNKNOWN";
}

size_t htr_dtype_size(htr_dtype_t dtype) { return dtype == HTR_DTYPE_F32 ? 4 : 0; }
