// ckpt_copy — test helper for the safetensors interoperability test: reads
// every tensor and metadata entry of IN with htr_checkpoint.h and writes them
// to OUT with htr_checkpoint_write. Prints one line per tensor
// (name dtype shape). Exit 1 with the error message on failure.
#include <cstdio>
#include <string>
#include <vector>

#include "htr/htr_checkpoint.h"

static int Fail(htr_status_t s) {
  std::fprintf(stderr, "ckpt_copy: %s\n", htr_status_message(s));
  htr_status_free(s);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ckpt_copy IN OUT\n");
    return 2;
  }
  htr_checkpoint_t* c = nullptr;
  htr_status_t s = htr_checkpoint_open(argv[1], &c);
  if (s) return Fail(s);
  const size_t n = htr_checkpoint_tensor_count(c);
  std::vector<std::vector<unsigned char>> data(n);
  std::vector<htr_checkpoint_tensor_info_t> infos(n);
  std::vector<htr_checkpoint_entry_t> entries(n);
  for (size_t i = 0; i < n; ++i) {
    infos[i] = htr_checkpoint_tensor_info_t{};
    infos[i].struct_size = sizeof(infos[i]);
    if ((s = htr_checkpoint_tensor_info(c, i, &infos[i]))) return Fail(s);
    data[i].resize(infos[i].nbytes);
    if ((s = htr_checkpoint_read_host(c, infos[i].name, infos[i].dtype, data[i].data(),
                                      infos[i].nbytes)))
      return Fail(s);
    entries[i] = htr_checkpoint_entry_t{};
    entries[i].struct_size = sizeof(entries[i]);
    entries[i].name = infos[i].name;
    entries[i].dtype = infos[i].dtype;
    entries[i].rank = infos[i].rank;
    entries[i].shape = infos[i].shape;
    entries[i].data = data[i].data();
    std::printf("%s %s [", infos[i].name, htr_dtype_name(infos[i].dtype));
    for (uint32_t d = 0; d < infos[i].rank; ++d)
      std::printf("%s%lld", d ? ", " : "", static_cast<long long>(infos[i].shape[d]));
    std::printf("]\n");
  }
  std::vector<htr_checkpoint_metadata_t> meta(htr_checkpoint_metadata_count(c));
  for (size_t i = 0; i < meta.size(); ++i)
    if ((s = htr_checkpoint_metadata_at(c, i, &meta[i].key, &meta[i].value))) return Fail(s);
  s = htr_checkpoint_write(argv[2], entries.data(), n, meta.data(), meta.size());
  htr_checkpoint_close(c);
  if (s) return Fail(s);
  return 0;
}
