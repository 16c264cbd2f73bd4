// user_file.h — reading a file a user named (--data, --tokenizer, a config.json): the one place
// htr-train opens such a file for reading.
//
// The file is opened without blocking (O_NONBLOCK: a FIFO or a tty is never a wait for a
// writer), must be a regular file, and its size is compared with `limit_bytes` before anything
// is allocated, so a special file or one larger than memory is a one-line error naming the path
// rather than a hang or std::bad_alloc. Checkpoints go through htr_checkpoint_open, which keeps
// the same rules in the runtime.
#ifndef HTR_TRAIN_USER_FILE_H_
#define HTR_TRAIN_USER_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace htr_train {

// The whole file into *out. Returns "" or the error ("<path>: ..."). A file of more than
// `limit_bytes` is "out of memory", naming its size and the limit.
std::string ReadUserFile(const std::string& path, uint64_t limit_bytes, std::string* out);
std::string ReadUserFile(const std::string& path, uint64_t limit_bytes, std::vector<uint8_t>* out);

}  // namespace htr_train

#endif  // HTR_TRAIN_USER_FILE_H_
