/* tests/runtime/abi_check.c — the public headers as strict C99
 * (-std=c99 -Wall -Wextra -Werror -pedantic), linked against libhtr. */
#include <htr/htr.h>
#include <htr/htr_plugin.h>

#include <stdio.h>
#include <string.h>

/* C99 compile-time check (no _Static_assert). */
#define ABI_CHECK(name, cond) typedef char abi_check_##name[(cond) ? 1 : -1]

ABI_CHECK(frozen_header_size, offsetof(htr_plugin_api_t, struct_size) == 0);
ABI_CHECK(frozen_header_name, offsetof(htr_plugin_api_t, name) ==
                                  sizeof(size_t) + 2 * sizeof(uint32_t));
ABI_CHECK(plugin_api_v1_size, HTR_PLUGIN_API_SIZE_V1_0 <= sizeof(htr_plugin_api_t));
ABI_CHECK(host_api_v1_size, HTR_HOST_API_SIZE_V1_0 <= sizeof(htr_host_api_t));
ABI_CHECK(props_v1_size, HTR_DEVICE_PROPERTIES_SIZE_V1_0 <= sizeof(htr_device_properties_t));

int main(void) {
  /* HTR_STRUCT_INIT must stay clean under -Wall -Wextra -Werror -pedantic. */
  htr_runtime_options_t opt = HTR_STRUCT_INIT(htr_runtime_options_t);
  htr_pool_stats_t stats = HTR_STRUCT_INIT(htr_pool_stats_t);
  htr_status_t s = htr_status_new(HTR_STATUS_TRANSIENT, "retry");
  int failures = 0;
  if (opt.struct_size != sizeof(opt) || stats.struct_size != sizeof(stats)) ++failures;
  if (htr_status_code(s) != HTR_STATUS_TRANSIENT) ++failures;
  if (strcmp(htr_status_message(s), "retry") != 0) ++failures;
  if (strcmp(htr_status_code_name(HTR_STATUS_TRANSIENT), "TRANSIENT") != 0) ++failures;
  htr_status_free(s);
  if (htr_dtype_size(HTR_DTYPE_BF16) != 2) ++failures;
  if (!HTR_STRUCT_HAS_FIELD(&opt, htr_runtime_options_t, num_plugin_files)) ++failures;
  if (failures) printf("abi_check_c: %d failures\n", failures);
  return failures ? 1 : 0;
}
