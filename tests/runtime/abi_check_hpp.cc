// tests/runtime/abi_check_hpp.cc — htr.hpp compiled with -fno-exceptions
// and -Werror, linked against the shared libhtr, driving the test plugin.
#include <htr/htr.hpp>

#include <cstdio>
#include <string>
#include <vector>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "this check must be compiled with -fno-exceptions"
#endif

static int g_failures = 0;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::printf("%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                   \
    }                                                                 \
  } while (0)

int main() {
  {
    htr_pool_stats_t stats = HTR_STRUCT_INIT(htr_pool_stats_t);
    EXPECT(stats.struct_size == sizeof(htr_pool_stats_t) && stats.bytes_in_use == 0);
  }
  htr::Runtime::Options o;
  o.no_default_search = true;
  o.plugin_files = {std::string(TEST_PLUGIN_DIR) + "/libhtr_rtest.so",
                    std::string(TEST_PLUGIN_DIR) + "/libhtr_rtest2.so"};
  auto rt = htr::Runtime::Create(o);
  EXPECT(rt.ok());
  if (!rt.ok()) {
    std::printf("%s\n", rt.status().ToString().c_str());
    return 1;
  }
  EXPECT(rt->plugins().size() == 2);
  EXPECT(rt->rejected().empty());
  EXPECT(rt->device_count() == 4);
  auto dev = rt->default_device();
  EXPECT(dev.ok() && std::string(dev->id()) == "rtest:1");
  auto other = rt->find_device("rtest2:0");
  EXPECT(other.ok());

  auto t = htr::Tensor::Create(*dev, HTR_DTYPE_F32, {2, 3});
  EXPECT(t.ok());
  std::vector<float> in = {1, 2, 3, 4, 5, 6};
  EXPECT(t->copy_from(in).ok());
  htr::Tensor shared = *t;  // retain
  auto tr = shared.view({3, 2}, {1, 3});
  EXPECT(tr.ok());
  auto u = htr::Tensor::Create(*other, HTR_DTYPE_F32, {3, 2});
  EXPECT(u->copy_from(*tr).ok());
  auto out = u->to_vector<float>();
  EXPECT(out.ok() && *out == (std::vector<float>{1, 4, 2, 5, 3, 6}));

  auto s = dev->create_stream();
  auto e = htr::Event::Create(*dev);
  EXPECT(s.ok() && e.ok());
  EXPECT(t->fill_bytes(0, &*s).ok());
  EXPECT(e->record(*s).ok());
  EXPECT(e->synchronize().ok());
  EXPECT(*e->query());

  auto bad = htr::Tensor::Create(*dev, HTR_DTYPE_F32, {-1});
  EXPECT(!bad.ok() && bad.status().code() == HTR_STATUS_INVALID_ARGUMENT);
  htr::Status moved = bad.take_status();
  EXPECT(moved.code() == HTR_STATUS_INVALID_ARGUMENT);
  auto stats = dev->pool_stats();
  EXPECT(stats.ok() && stats->bytes_in_use > 0);
  htr::SetLogLevel(htr::LogLevel());

  if (g_failures) std::printf("abi_check_hpp: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
