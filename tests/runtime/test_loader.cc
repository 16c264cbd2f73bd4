// The plugin loader: rejection reasons, score resolution, search path,
// explicit loads, devices and HTR_VISIBLE_DEVICES, and the cwd rule.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "runtime/loader.h"
#include "test_util.h"

namespace {

std::map<std::string, std::string> RejectedByFile(const htr::Runtime& rt) {
  std::map<std::string, std::string> m;
  for (const htr::RejectedPlugin& r : rt.rejected()) {
    std::string file = r.path.substr(r.path.rfind('/') + 1);
    m[file] = r.reason;
  }
  return m;
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// Round trip through a tensor of `dev` (proves the plugin works).
void CheckWorks(htr::Device dev) {
  auto t = htr::Tensor::Create(dev, HTR_DTYPE_F32, {4});
  REQUIRE(t.ok());
  std::vector<float> in = {1, 2, 3, 4};
  REQUIRE(t->copy_from(in).ok());
  auto out = t->to_vector<float>();
  REQUIRE(out.ok());
  CHECK(*out == in);
}

}  // namespace

TEST_CASE("broken plugins are rejected with their reasons; the good one works", "[loader]") {
  htr::Runtime::Options o;
  o.no_default_search = true;
  o.plugin_path = tu::BrokenDir();
  o.plugin_files = {tu::RtestPath()};
  auto rt = htr::Runtime::Create(o);
  REQUIRE(rt.ok());
  auto plugins = rt->plugins();
  REQUIRE(plugins.size() == 1);
  CHECK(plugins[0].name == "rtest");

  auto rej = RejectedByFile(*rt);
  CHECK(rej.size() == 8);
  CHECK_THAT(rej["libhtr_notelf.so"], Catch::Contains("not loadable:"));
  CHECK_THAT(rej["libhtr_notelf.so"], Catch::Contains("libhtr_notelf.so"));  // dlerror text
  CHECK_THAT(rej["libhtr_noentry.so"], Catch::Contains("no htr_plugin_get_api symbol"));
  CHECK_THAT(rej["libhtr_nullapi.so"], Catch::Contains("htr_plugin_get_api(1) returned NULL"));
  CHECK_THAT(rej["libhtr_badmajor.so"], Catch::Contains("ABI major 2"));
  CHECK_THAT(rej["libhtr_short.so"], Catch::Contains("too small for the ABI v1.0 fields"));
  CHECK_THAT(rej["libhtr_initfail.so"],
             Catch::Contains("init failed: UNAVAILABLE: simulated init failure"));
  CHECK_THAT(rej["libhtr_nullentry.so"],
             Catch::Contains("required entries are NULL: buffer_alloc, event_query"));
  CHECK_THAT(rej["libhtr_misname.so"],
             Catch::Contains("plugin name 'someone_else' does not match the file name"));

  REQUIRE(rt->device_count() == 2);
  CheckWorks(tu::Dev(*rt, "rtest:0"));
  CheckWorks(tu::Dev(*rt, "rtest:1"));
}

TEST_CASE("explicit loads: rejection status, duplicates, bad names", "[loader]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Status s = rt.load_plugin((tu::BrokenDir() + "/libhtr_badmajor.so").c_str());
  CHECK(s.code() == HTR_STATUS_INCOMPATIBLE);
  CHECK_THAT(s.message(), Catch::Contains("ABI major 2"));
  s = rt.load_plugin((tu::BrokenDir() + "/libhtr_notelf.so").c_str());
  CHECK(s.code() == HTR_STATUS_UNAVAILABLE);
  s = rt.load_plugin(tu::RtestPath().c_str());
  CHECK(s.code() == HTR_STATUS_ALREADY_EXISTS);
  s = rt.load_plugin((tu::AltDir() + "/libhtr_rtest.so").c_str());
  CHECK(s.code() == HTR_STATUS_ALREADY_EXISTS);
  s = rt.load_plugin("/nonexistent/libhtr_nothing.so");
  CHECK_THAT(s.message(), Catch::Contains("not loadable"));
  s = rt.load_plugin("/tmp/not_a_plugin_name.so");
  CHECK(s.code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(s.message(), Catch::Contains("libhtr_<name>.so"));
  CHECK(rt.load_plugin(nullptr).code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(rt.rejected().size() == 6);

  s = rt.load_plugin(tu::Rtest2Path().c_str());
  REQUIRE(s.ok());
  CHECK(rt.plugins().size() == 2);
  CHECK(rt.device_count() == 4);
  CheckWorks(tu::Dev(rt, "rtest2:1"));
}

TEST_CASE("several builds of one plugin: the highest score wins", "[loader]") {
  htr::Runtime::Options o;
  o.no_default_search = true;
  o.plugin_path = tu::PluginDir() + ":" + tu::AltDir();
  auto rt = htr::Runtime::Create(o);
  REQUIRE(rt.ok());
  auto plugins = rt->plugins();
  REQUIRE(plugins.size() == 2);  // rtest (alt build) and rtest2
  const htr::PluginInfo* rtest = nullptr;
  for (const auto& p : plugins)
    if (p.name == "rtest") rtest = &p;
  REQUIRE(rtest != nullptr);
  CHECK(rtest->score == 20);
  CHECK_THAT(rtest->path, Catch::Contains("/alt/"));
  auto rej = rt->rejected();
  REQUIRE(rej.size() == 1);
  CHECK_THAT(rej[0].path, Catch::EndsWith("plugins/libhtr_rtest.so"));
  CHECK_THAT(rej[0].reason, Catch::StartsWith("superseded by "));
  CHECK_THAT(rej[0].reason, Catch::Contains("alt/libhtr_rtest.so (score 20 > 10)"));
  auto sp = rt->search_path();
  REQUIRE(sp.size() == 2);
}

TEST_CASE("plugin info, devices, lookup and the default device", "[loader]") {
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  REQUIRE(rt);
  auto plugins = rt.plugins();
  REQUIRE(plugins.size() == 2);
  CHECK(plugins[0].name == "rtest");
  CHECK(plugins[0].version == "test-1");
  CHECK(plugins[0].abi_major == HTR_PLUGIN_ABI_MAJOR);
  CHECK(plugins[0].score == 10);
  CHECK(plugins[0].device_count == 2);
  CHECK(plugins[0].unavailable_reason.empty());
  CHECK(plugins[0].path == tu::RtestPath());
  CHECK(rt.search_path().empty());

  REQUIRE(rt.device_count() == 4);
  auto d0 = rt.device(0);
  REQUIRE(d0.ok());
  CHECK(std::string(d0->id()) == "rtest:0");
  CHECK(std::string(d0->plugin_name()) == "rtest");
  CHECK(rt.device(4).status().code() == HTR_STATUS_OUT_OF_RANGE);
  auto byname = rt.find_device("rtest2");
  REQUIRE(byname.ok());
  CHECK(std::string(byname->id()) == "rtest2:0");
  auto missing = rt.find_device("gpu:3");
  CHECK(missing.status().code() == HTR_STATUS_NOT_FOUND);
  CHECK_THAT(missing.status().message(), Catch::Contains("gpu:3"));
  CHECK_THAT(missing.status().message(), Catch::Contains("rtest:0, rtest:1, rtest2:0, rtest2:1"));

  auto def = rt.default_device();
  REQUIRE(def.ok());
  CHECK(std::string(def->id()) == "rtest:1");  // the accelerator

  auto props = d0->properties();
  REQUIRE(props.ok());
  CHECK(props->kind == HTR_DEVICE_KIND_CPU);
  CHECK((props->capabilities & HTR_CAP_HOST_ACCESSIBLE) != 0);
  CHECK(std::string(props->name) == "rtest test device 0");
  // A caller with an older, smaller struct gets only what fits.
  htr_device_properties_t small{};
  small.struct_size = offsetof(htr_device_properties_t, kind);
  small.kind = HTR_DEVICE_KIND_OTHER;
  REQUIRE(htr::Status(htr_device_properties(d0->get(), &small)).ok());
  CHECK(small.kind == HTR_DEVICE_KIND_OTHER);
  CHECK(small.struct_size == offsetof(htr_device_properties_t, kind));
  CHECK(std::string(small.vendor) == "htr tests");

  auto mem = d0->memory_info();
  REQUIRE(mem.ok());
  CHECK(mem->second > 0);
}

TEST_CASE("HTR_VISIBLE_DEVICES filters devices", "[loader]") {
  setenv("HTR_VISIBLE_DEVICES", "rtest:1, rtest2", 1);
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  unsetenv("HTR_VISIBLE_DEVICES");
  REQUIRE(rt);
  std::vector<std::string> ids;
  for (htr::Device d : rt.devices()) ids.emplace_back(d.id());
  CHECK(ids == std::vector<std::string>{"rtest:1", "rtest2:0", "rtest2:1"});
  CHECK(rt.plugins()[0].device_count == 2);  // the plugin still has two
  CHECK(rt.find_device("rtest:0").status().code() == HTR_STATUS_NOT_FOUND);
  auto byname = rt.find_device("rtest");
  REQUIRE(byname.ok());
  CHECK(std::string(byname->id()) == "rtest:1");
}

TEST_CASE("shutdown runs at runtime destruction", "[loader]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  tu::Control ctl(tu::RtestPath());  // keeps the library mapped after destroy
  REQUIRE(ctl.ok());
  CHECK(ctl.LiveContexts() == 1);
  {
    auto t = htr::Tensor::Create(tu::Dev(rt, "rtest:1"), HTR_DTYPE_F32, {1024});
    REQUIRE(t.ok());
  }
  CHECK(ctl.LiveBuffers() == 1);  // cached by the pool
  rt = htr::Runtime();
  CHECK(ctl.LiveContexts() == 0);
  CHECK(ctl.LiveBuffers() == 0);
}

TEST_CASE("invalid runtime options", "[loader]") {
  CHECK(htr::Status(htr_runtime_create(nullptr, nullptr)).code() == HTR_STATUS_INVALID_ARGUMENT);
  htr_runtime_options_t o{};
  o.struct_size = sizeof(o);
  o.no_default_search = 1;
  o.num_plugin_files = 2;
  htr_runtime_t* rt = nullptr;
  htr::Status s(htr_runtime_create(&o, &rt));
  CHECK(s.code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(s.message(), Catch::Contains("plugin_files"));
  CHECK(rt == nullptr);
  // A struct from an older caller (only struct_size + plugin_path) is fine.
  htr_runtime_options_t old{};
  old.struct_size = offsetof(htr_runtime_options_t, no_default_search);
  old.plugin_path = TEST_PLUGIN_DIR;
  REQUIRE(htr::Status(htr_runtime_create(&old, &rt)).ok());
  CHECK(htr_runtime_search_path_count(rt) >= 1);
  CHECK(std::string(htr_runtime_search_path(rt, 0)) == TEST_PLUGIN_DIR);
  CHECK(htr_runtime_search_path(rt, 1000) == nullptr);
  htr_plugin_info_t info{};
  info.struct_size = sizeof(info);
  CHECK(htr::Status(htr_runtime_plugin_info(rt, 1000, &info)).code() == HTR_STATUS_OUT_OF_RANGE);
  CHECK(htr::Status(htr_runtime_plugin_info(rt, 0, nullptr)).code() == HTR_STATUS_INVALID_ARGUMENT);
  htr_runtime_destroy(rt);
  htr_runtime_destroy(nullptr);
}

TEST_CASE("internal loader API: Open, Probe, names, search path", "[loader]") {
  CHECK(htr::rt::PluginNameFromPath("/x/libhtr_cpu.so").value_or("") == "cpu");
  CHECK(htr::rt::PluginNameFromPath("libhtr_a_b2.so").value_or("") == "a_b2");
  CHECK_FALSE(htr::rt::PluginNameFromPath("libhtr_.so").has_value());
  CHECK_FALSE(htr::rt::PluginNameFromPath("libhtr_cpu.so.1").has_value());
  CHECK_FALSE(htr::rt::PluginNameFromPath("libfoo.so").has_value());
  CHECK_FALSE(htr::rt::PluginNameFromPath("libhtr_a-b.so").has_value());

  auto lib = htr::rt::PluginLibrary::Open(tu::RtestPath());
  REQUIRE(lib.ok());
  const htr_plugin_api_t* api = (*lib)->api();
  CHECK(std::string(api->name) == "rtest");
  CHECK((*lib)->ctx() != nullptr);
  CHECK((*lib)->host()->struct_size >= HTR_HOST_API_SIZE_V1_0);
  uint32_t n = 0;
  REQUIRE(htr::Status(api->device_count((*lib)->ctx(), &n)).ok());
  CHECK(n == 2);
  CHECK(htr::rt::MissingPluginEntries(api).empty());

  auto probed = htr::rt::PluginLibrary::Probe(tu::BrokenDir() + "/libhtr_initfail.so");
  REQUIRE(probed.ok());
  CHECK_FALSE((*probed)->initialized());
  htr::Status s = (*probed)->Init();
  CHECK(s.code() == HTR_STATUS_UNAVAILABLE);
  CHECK_THAT(s.message(), Catch::StartsWith("init failed: UNAVAILABLE"));

  htr::rt::SearchOptions so;
  so.env_plugin_path = std::string("relative/dir::") + tu::AltDir() + ":" + tu::PluginDir();
  so.install_dir = "/nonexistent/install";
  so.build_dir = std::string(TEST_PLUGIN_DIR) + "/..";  // tests/runtime: has subdirs
  auto dirs = htr::rt::SearchPath(so);
  REQUIRE(dirs.size() >= 3);
  CHECK(dirs[0] == tu::AltDir());
  CHECK(dirs[1] == tu::PluginDir());
  // build_dir itself, then its subdirectories (alt/ and plugins/ already listed).
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
  for (const std::string& d : dirs) CHECK(d.find("relative") == std::string::npos);
  bool has_broken = false;
  for (const std::string& d : dirs) has_broken |= d == tu::BrokenDir();
  CHECK(has_broken);
  auto files = htr::rt::ListPluginFiles(tu::PluginDir());
  CHECK(files.size() == 2);
}

TEST_CASE("a libhtr_*.so in the current directory is never loaded", "[cwd]") {
  char tmpl[] = "/tmp/htr_cwd_test_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string trap = dir + "/libhtr_cwdtrap.so";
  {
    std::ifstream in(tu::BrokenDir() + "/cwdtrap.bin", std::ios::binary);
    REQUIRE(in.good());
    std::ofstream out(trap, std::ios::binary);
    out << in.rdbuf();
  }
  char old_cwd[4096];
  REQUIRE(getcwd(old_cwd, sizeof(old_cwd)) != nullptr);
  REQUIRE(chdir(dir.c_str()) == 0);
  const std::string marker = dir + "/htr_cwdtrap.marker";

  // Default search with an HTR_PLUGIN_PATH that names the cwd relatively.
  setenv("HTR_PLUGIN_PATH", ".::./:", 1);
  {
    auto rt = htr::Runtime::Create();
    REQUIRE(rt.ok());
    for (const std::string& d : rt->search_path()) CHECK(d != dir);
    for (const auto& p : rt->plugins()) CHECK(p.name != "cwdtrap");
    for (const auto& r : rt->rejected()) CHECK(r.path.find("cwdtrap") == std::string::npos);
  }
  // Empty entries in the caller's plugin_path are not the cwd either.
  {
    htr::Runtime::Options o;
    o.plugin_path = ":";
    auto rt = htr::Runtime::Create(o);
    REQUIRE(rt.ok());
    for (const std::string& d : rt->search_path()) CHECK(d != dir);
  }
  unsetenv("HTR_PLUGIN_PATH");
  CHECK_FALSE(Exists(marker));

  // Positive control: naming the file explicitly does load it (and the
  // trap fires), so the check above can fail.
  {
    htr::Runtime rt = tu::MakeRuntime({});
    REQUIRE(rt);
    CHECK(rt.load_plugin("libhtr_cwdtrap.so").ok());
    CHECK(rt.plugins().size() == 1);
  }
  CHECK(Exists(marker));

  REQUIRE(chdir(old_cwd) == 0);
  std::remove(marker.c_str());
  std::remove(trap.c_str());
  rmdir(dir.c_str());
}
