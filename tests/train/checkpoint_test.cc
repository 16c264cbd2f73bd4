// checkpoint_test.cc — htr_checkpoint.h: round trips, the strict reader's
// rejections (each message must name the file and the tensor), float
// conversion, tensors on a device, and the writer's atomicity under failure.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "htr/htr_checkpoint.h"

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/htr-ckpt-XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path + "'";
    (void)!std::system(cmd.c_str());
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> List() const {
    std::vector<std::string> names;
    DIR* d = opendir(path.c_str());
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
    closedir(d);
    return names;
  }
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text (length prefix computed) and data bytes.
std::string File(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

// Status → (code, message), freeing it.
struct Result {
  htr_status_code_t code;
  std::string message;
};
Result Take(htr_status_t s) {
  Result r{htr_status_code(s), htr_status_message(s)};
  htr_status_free(s);
  return r;
}

Result OpenFails(const std::string& path) {
  htr_checkpoint_t* c = nullptr;
  htr_status_t s = htr_checkpoint_open(path.c_str(), &c);
  REQUIRE(s != nullptr);
  REQUIRE(c == nullptr);
  return Take(s);
}

htr_checkpoint_entry_t Entry(const char* name, htr_dtype_t dtype, const std::vector<int64_t>& shape,
                             const void* data) {
  htr_checkpoint_entry_t e{};
  e.struct_size = sizeof(e);
  e.name = name;
  e.dtype = dtype;
  e.rank = static_cast<uint32_t>(shape.size());
  e.shape = shape.data();
  e.data = data;
  return e;
}

}  // namespace

TEST_CASE("round trip of every dtype with metadata", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir / "all.safetensors";
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000};       // 1, -2
  std::vector<uint16_t> bf16 = {0x3f80, 0x4040, 0};   // 1, 3, 0
  std::vector<int32_t> i32 = {-1, 2, 2147483647};
  std::vector<int64_t> i64 = {-9000000000LL};
  std::vector<uint8_t> u8 = {0, 255, 7, 9};
  std::vector<uint8_t> b = {1, 0};
  std::vector<double> f64 = {3.141592653589793};
  std::vector<int64_t> s23 = {2, 3}, s2 = {2}, s3 = {3}, s1 = {1}, s22 = {2, 2}, s0 = {0};
  std::vector<htr_checkpoint_entry_t> entries = {
      Entry("f32", HTR_DTYPE_F32, s23, f32.data()), Entry("f16", HTR_DTYPE_F16, s2, f16.data()),
      Entry("bf16", HTR_DTYPE_BF16, s3, bf16.data()), Entry("i32", HTR_DTYPE_I32, s3, i32.data()),
      Entry("i64", HTR_DTYPE_I64, s1, i64.data()),    Entry("u8", HTR_DTYPE_U8, s22, u8.data()),
      Entry("bool", HTR_DTYPE_BOOL, s2, b.data()),    Entry("f64", HTR_DTYPE_F64, {}, f64.data()),
      Entry("empty", HTR_DTYPE_F32, s0, f32.data()),
  };
  entries[7].rank = 0;  // a scalar
  entries[7].shape = nullptr;
  htr_checkpoint_metadata_t meta[] = {{"step", "42"}, {"note", "h\xc3\xa9llo"}};
  REQUIRE(htr_checkpoint_write(path.c_str(), entries.data(), entries.size(), meta, 2) == nullptr);

  // The header is padded to 8 bytes and the data region follows it.
  const std::string raw = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(raw[static_cast<size_t>(i)]);
  CHECK(n % 8 == 0);

  htr_checkpoint_t* c = nullptr;
  REQUIRE(htr_checkpoint_open(path.c_str(), &c) == nullptr);
  CHECK(std::string(htr_checkpoint_path(c)) == path);
  CHECK(htr_checkpoint_tensor_count(c) == entries.size());
  // File order = entry order (ascending offsets).
  for (size_t i = 0; i < entries.size(); ++i) {
    htr_checkpoint_tensor_info_t info{};
    info.struct_size = sizeof(info);
    REQUIRE(htr_checkpoint_tensor_info(c, i, &info) == nullptr);
    CHECK(std::string(info.name) == entries[i].name);
    CHECK(info.dtype == entries[i].dtype);
    CHECK(info.rank == entries[i].rank);
  }
  htr_checkpoint_tensor_info_t info{};
  info.struct_size = sizeof(info);
  REQUIRE(htr_checkpoint_find(c, "f32", &info) == nullptr);
  CHECK(info.rank == 2);
  CHECK(info.shape[0] == 2);
  CHECK(info.shape[1] == 3);
  CHECK(info.nbytes == 24);
  CHECK(htr_checkpoint_has(c, "u8") == 1);
  CHECK(htr_checkpoint_has(c, "nope") == 0);

  std::vector<float> f32b(6);
  REQUIRE(htr_checkpoint_read_host(c, "f32", HTR_DTYPE_F32, f32b.data(), 24) == nullptr);
  CHECK(f32b == f32);
  std::vector<int64_t> i64b(1);
  REQUIRE(htr_checkpoint_read_host(c, "i64", HTR_DTYPE_I64, i64b.data(), 8) == nullptr);
  CHECK(i64b == i64);
  std::vector<uint8_t> u8b(4);
  REQUIRE(htr_checkpoint_read_host(c, "u8", HTR_DTYPE_U8, u8b.data(), 4) == nullptr);
  CHECK(u8b == u8);
  double d = 0;
  REQUIRE(htr_checkpoint_read_host(c, "f64", HTR_DTYPE_F64, &d, 8) == nullptr);
  CHECK(d == f64[0]);
  REQUIRE(htr_checkpoint_read_host(c, "empty", HTR_DTYPE_F32, nullptr, 0) == nullptr);

  // Float conversions on read.
  std::vector<float> conv(2);
  REQUIRE(htr_checkpoint_read_host(c, "f16", HTR_DTYPE_F32, conv.data(), 8) == nullptr);
  CHECK(conv == std::vector<float>{1.0f, -2.0f});
  std::vector<float> conv3(3);
  REQUIRE(htr_checkpoint_read_host(c, "bf16", HTR_DTYPE_F32, conv3.data(), 12) == nullptr);
  CHECK(conv3 == std::vector<float>{1.0f, 3.0f, 0.0f});
  std::vector<uint16_t> half(6);
  REQUIRE(htr_checkpoint_read_host(c, "f32", HTR_DTYPE_F16, half.data(), 12) == nullptr);
  CHECK(half[0] == 0x3e00);  // 1.5
  CHECK(half[1] == 0xc080);  // -2.25
  CHECK(half[4] == 0);       // 1e-30 underflows to +0

  // Wrong reads.
  Result r = Take(htr_checkpoint_read_host(c, "i32", HTR_DTYPE_F32, f32b.data(), 12));
  CHECK(r.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(r.message, Catch::Contains(path) && Catch::Contains("'i32'"));
  r = Take(htr_checkpoint_read_host(c, "f32", HTR_DTYPE_F32, f32b.data(), 20));
  CHECK(r.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(r.message, Catch::Contains("'f32'"));
  r = Take(htr_checkpoint_read_host(c, "missing.tensor", HTR_DTYPE_F32, f32b.data(), 4));
  CHECK(r.code == HTR_STATUS_NOT_FOUND);
  CHECK_THAT(r.message, Catch::Contains(path) && Catch::Contains("'missing.tensor'"));
  r = Take(htr_checkpoint_find(c, "missing.tensor", &info));
  CHECK(r.code == HTR_STATUS_NOT_FOUND);

  // Metadata (ascending key order).
  REQUIRE(htr_checkpoint_metadata_count(c) == 2);
  const char* k = nullptr;
  const char* v = nullptr;
  REQUIRE(htr_checkpoint_metadata_at(c, 0, &k, &v) == nullptr);
  CHECK(std::string(k) == "note");
  CHECK(std::string(v) == "h\xc3\xa9llo");
  REQUIRE(htr_checkpoint_metadata_get(c, "step", &v) == nullptr);
  CHECK(std::string(v) == "42");
  r = Take(htr_checkpoint_metadata_get(c, "absent", &v));
  CHECK(r.code == HTR_STATUS_NOT_FOUND);
  CHECK_THAT(r.message, Catch::Contains("'absent'"));
  htr_checkpoint_close(c);
}

TEST_CASE("the reader rejects damaged files, naming file and tensor", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  const std::string data16(16, '\x01');
  auto expect = [&](const std::string& bytes, htr_status_code_t code,
                    std::vector<std::string> needles) {
    WriteRaw(path, bytes);
    Result r = OpenFails(path);
    CHECK(r.code == code);
    CHECK_THAT(r.message, Catch::Contains(path));
    for (const std::string& n : needles) CHECK_THAT(r.message, Catch::Contains(n));
  };
  const std::string ok_header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})";
  // Sanity: the well-formed version opens.
  WriteRaw(path, File(ok_header, data16));
  htr_checkpoint_t* c = nullptr;
  REQUIRE(htr_checkpoint_open(path.c_str(), &c) == nullptr);
  htr_checkpoint_close(c);

  SECTION("truncated data") {
    std::string full = File(ok_header, data16);
    expect(full.substr(0, full.size() - 3), HTR_STATUS_DATA_LOSS, {"'b'", "truncated"});
  }
  SECTION("truncated header") {
    std::string full = File(ok_header, data16);
    expect(full.substr(0, 40), HTR_STATUS_DATA_LOSS, {"truncated"});
  }
  SECTION("shorter than the length prefix") { expect("abc", HTR_STATUS_DATA_LOSS, {"too short"}); }
  SECTION("empty file") { expect("", HTR_STATUS_DATA_LOSS, {"too short"}); }
  SECTION("header length above 100 MB is refused before parsing") {
    std::string bytes(8, '\0');
    uint64_t n = 100000001ull;
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
    expect(bytes + "{}", HTR_STATUS_DATA_LOSS, {"exceeds the limit"});
  }
  SECTION("corrupted header: not JSON") {
    std::string h = ok_header;
    h[5] = '#';
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"JSON"});
  }
  SECTION("corrupted header: ill-formed UTF-8") {
    std::string h = R"({"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    expect(File(h, std::string(8, '\0')), HTR_STATUS_DATA_LOSS, {"UTF-8"});
  }
  SECTION("header is not an object") {
    expect(File("[1, 2, 3]", ""), HTR_STATUS_DATA_LOSS, {"'{'"});
  }
  SECTION("overlapping offsets") {
    std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    expect(File(h, std::string(12, '\0')), HTR_STATUS_DATA_LOSS, {"'b'", "overlap", "'a'"});
  }
  SECTION("hole in the data region") {
    std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'b'", "unreferenced"});
  }
  SECTION("trailing bytes") {
    expect(File(ok_header, data16 + "xx"), HTR_STATUS_DATA_LOSS, {"trailing", "'b'"});
  }
  SECTION("dtype size does not match the byte length") {
    std::string h =
        R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]},"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'", "16 bytes", "12"});
  }
  SECTION("offsets past the end") {
    std::string h = R"({"a":{"dtype":"U8","shape":[100],"data_offsets":[0,100]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'"});
  }
  SECTION("begin after end") {
    std::string h = R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'"});
  }
  SECTION("duplicate tensor names") {
    std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"duplicate", "'a'"});
  }
  SECTION("unknown dtype") {
    std::string h = R"({"a":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_UNIMPLEMENTED, {"'a'", "F8_E4M3"});
  }
  SECTION("negative or fractional shape") {
    std::string h = R"({"a":{"dtype":"U8","shape":[-16],"data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'", "shape"});
    h = R"({"a":{"dtype":"U8","shape":[16.0],"data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'", "shape"});
  }
  SECTION("missing field") {
    std::string h = R"({"a":{"dtype":"U8","data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'a'"});
  }
  SECTION("metadata values must be strings") {
    std::string h =
        R"({"__metadata__":{"step":3},"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_DATA_LOSS, {"'step'"});
  }
  SECTION("rank above HTR_MAX_RANK") {
    std::string h = R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,16],"data_offsets":[0,16]}})";
    expect(File(h, data16), HTR_STATUS_UNIMPLEMENTED, {"'a'", "rank"});
  }
  SECTION("not a file") {
    Result r = OpenFails(dir.path);
    CHECK(r.code == HTR_STATUS_INVALID_ARGUMENT);
    r = OpenFails(dir / "does-not-exist.safetensors");
    CHECK(r.code == HTR_STATUS_NOT_FOUND);
    CHECK_THAT(r.message, Catch::Contains("does-not-exist.safetensors"));
  }
}

TEST_CASE("a file truncated after open reads as DATA_LOSS", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir / "t.safetensors";
  std::vector<float> v(1024, 1.0f);
  std::vector<int64_t> shape = {1024};
  htr_checkpoint_entry_t e = Entry("w", HTR_DTYPE_F32, shape, v.data());
  REQUIRE(htr_checkpoint_write(path.c_str(), &e, 1, nullptr, 0) == nullptr);
  htr_checkpoint_t* c = nullptr;
  REQUIRE(htr_checkpoint_open(path.c_str(), &c) == nullptr);
  REQUIRE(truncate(path.c_str(), 200) == 0);
  Result r = Take(htr_checkpoint_read_host(c, "w", HTR_DTYPE_F32, v.data(), 4096));
  CHECK(r.code == HTR_STATUS_DATA_LOSS);
  CHECK_THAT(r.message, Catch::Contains(path) && Catch::Contains("'w'"));
  htr_checkpoint_close(c);
}

TEST_CASE("the writer validates entries before creating anything", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir / "x.safetensors";
  float f = 1;
  std::vector<int64_t> s1 = {1};
  std::vector<htr_checkpoint_entry_t> dup = {Entry("a", HTR_DTYPE_F32, s1, &f),
                                             Entry("a", HTR_DTYPE_F32, s1, &f)};
  Result r = Take(htr_checkpoint_write(path.c_str(), dup.data(), 2, nullptr, 0));
  CHECK(r.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(r.message, Catch::Contains("'a'") && Catch::Contains("duplicate"));
  htr_checkpoint_entry_t reserved = Entry("__metadata__", HTR_DTYPE_F32, s1, &f);
  CHECK(Take(htr_checkpoint_write(path.c_str(), &reserved, 1, nullptr, 0)).code ==
        HTR_STATUS_INVALID_ARGUMENT);
  htr_checkpoint_entry_t nodata = Entry("n", HTR_DTYPE_F32, s1, nullptr);
  CHECK(Take(htr_checkpoint_write(path.c_str(), &nodata, 1, nullptr, 0)).code ==
        HTR_STATUS_INVALID_ARGUMENT);
  htr_checkpoint_entry_t baddtype = Entry("d", HTR_DTYPE_INVALID, s1, &f);
  CHECK(Take(htr_checkpoint_write(path.c_str(), &baddtype, 1, nullptr, 0)).code ==
        HTR_STATUS_INVALID_ARGUMENT);
  htr_checkpoint_metadata_t meta[] = {{"k", "\xff"}};
  htr_checkpoint_entry_t good = Entry("g", HTR_DTYPE_F32, s1, &f);
  CHECK(Take(htr_checkpoint_write(path.c_str(), &good, 1, meta, 1)).code ==
        HTR_STATUS_INVALID_ARGUMENT);
  CHECK(dir.List().empty());
}

TEST_CASE("the writer is atomic: failures leave the old file and no temporary", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  std::vector<float> old_values(16, 1.0f);
  std::vector<int64_t> s16 = {16};
  htr_checkpoint_entry_t old_entry = Entry("w", HTR_DTYPE_F32, s16, old_values.data());
  REQUIRE(htr_checkpoint_write(path.c_str(), &old_entry, 1, nullptr, 0) == nullptr);
  const std::string before = ReadAll(path);

  SECTION("overwrite replaces the file") {
    std::vector<float> v(16, 2.0f);
    htr_checkpoint_entry_t e = Entry("w", HTR_DTYPE_F32, s16, v.data());
    REQUIRE(htr_checkpoint_write(path.c_str(), &e, 1, nullptr, 0) == nullptr);
    htr_checkpoint_t* c = nullptr;
    REQUIRE(htr_checkpoint_open(path.c_str(), &c) == nullptr);
    std::vector<float> back(16);
    REQUIRE(htr_checkpoint_read_host(c, "w", HTR_DTYPE_F32, back.data(), 64) == nullptr);
    CHECK(back == v);
    htr_checkpoint_close(c);
    CHECK(dir.List() == std::vector<std::string>{"ckpt.safetensors"});
  }
  SECTION("a write that fails midway (file size limit)") {
    std::vector<float> big(1 << 16, 3.0f);
    std::vector<int64_t> sbig = {1 << 16};
    htr_checkpoint_entry_t e = Entry("w", HTR_DTYPE_F32, sbig, big.data());
    struct rlimit saved;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit low = saved;
    low.rlim_cur = 4096;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &low) == 0);
    htr_status_t s = htr_checkpoint_write(path.c_str(), &e, 1, nullptr, 0);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    std::signal(SIGXFSZ, old_handler);
    REQUIRE(s != nullptr);
    Result r = Take(s);
    CHECK(r.code == HTR_STATUS_RESOURCE_EXHAUSTED);
    CHECK(ReadAll(path) == before);
    CHECK(dir.List() == std::vector<std::string>{"ckpt.safetensors"});
  }
  SECTION("rename fails (destination is a directory)") {
    const std::string d = dir / "sub";
    REQUIRE(mkdir(d.c_str(), 0755) == 0);
    std::vector<float> v(16, 2.0f);
    htr_checkpoint_entry_t e = Entry("w", HTR_DTYPE_F32, s16, v.data());
    Result r = Take(htr_checkpoint_write(d.c_str(), &e, 1, nullptr, 0));
    CHECK(r.code != HTR_STATUS_OK);
    CHECK_THAT(r.message, Catch::Contains(d));
    auto names = dir.List();
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"ckpt.safetensors", "sub"});
  }
  SECTION("missing directory") {
    std::vector<float> v(16, 2.0f);
    htr_checkpoint_entry_t e = Entry("w", HTR_DTYPE_F32, s16, v.data());
    const std::string p = dir / "nope/ckpt.safetensors";
    Result r = Take(htr_checkpoint_write(p.c_str(), &e, 1, nullptr, 0));
    CHECK(r.code == HTR_STATUS_NOT_FOUND);
    CHECK_THAT(r.message, Catch::Contains(p));
  }
}

TEST_CASE("tensors on a device: write, load, read with shape checks", "[checkpoint][device]") {
  htr_runtime_t* rt = nullptr;
  REQUIRE(htr_runtime_create(nullptr, &rt) == nullptr);
  htr_device_t* dev = nullptr;
  htr_status_t s = htr_runtime_find_device(rt, "cpu", &dev);
  if (s != nullptr) {
    htr_status_free(s);
    htr_runtime_destroy(rt);
    WARN("no cpu device: skipping device tensor checks");
    return;
  }
  TempDir dir;
  const std::string path = dir / "dev.safetensors";
  const int64_t shape[2] = {3, 4};
  htr_tensor_t* t = nullptr;
  REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, 2, shape, &t) == nullptr);
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  REQUIRE(htr_tensor_copy_from_host(t, v.data(), 48, nullptr) == nullptr);
  htr_checkpoint_entry_t e{};
  e.struct_size = sizeof(e);
  e.name = "t";
  e.tensor = t;
  REQUIRE(htr_checkpoint_write(path.c_str(), &e, 1, nullptr, 0) == nullptr);

  htr_checkpoint_t* c = nullptr;
  REQUIRE(htr_checkpoint_open(path.c_str(), &c) == nullptr);
  htr_tensor_t* loaded = nullptr;
  REQUIRE(htr_checkpoint_load_tensor(c, "t", dev, &loaded) == nullptr);
  CHECK(htr_tensor_rank(loaded) == 2);
  std::vector<float> back(12);
  REQUIRE(htr_tensor_copy_to_host(loaded, back.data(), 48, nullptr) == nullptr);
  CHECK(back == v);

  const int64_t wrong[2] = {4, 3};
  htr_tensor_t* w = nullptr;
  REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, 2, wrong, &w) == nullptr);
  Result r = Take(htr_checkpoint_read_tensor(c, "t", w));
  CHECK(r.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(r.message, Catch::Contains(path) && Catch::Contains("'t'") &&
                            Catch::Contains("[3, 4]") && Catch::Contains("[4, 3]"));
  htr_tensor_t* missing = nullptr;
  r = Take(htr_checkpoint_load_tensor(c, "absent", dev, &missing));
  CHECK(r.code == HTR_STATUS_NOT_FOUND);
  CHECK(missing == nullptr);

  htr_tensor_release(w);
  htr_tensor_release(loaded);
  htr_tensor_release(t);
  htr_checkpoint_close(c);
  htr_runtime_destroy(rt);
}
