// token_file.h — token corpora: llm.c's token files (a header of 256 int32:
// magic 20240520, version 1 = uint16 tokens or 2 = uint32 tokens, token
// count; then the tokens, little-endian) and text encoded once with a
// tokenizer into such a file, cached by the hash of the tokenizer and the text.
#ifndef HTR_TRAIN_TOKEN_FILE_H_
#define HTR_TRAIN_TOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data.h"
#include "tokenizer.h"

namespace htr_train {

constexpr int32_t kTokenFileMagic = 20240520;

// Whether `path` is a regular file starting with the llm.c magic.
bool IsTokenFile(const std::string& path);

// Reads a llm.c token file. Returns "" or a one-line error naming the file
// (bad magic or version, a count that disagrees with the file size).
std::string ReadTokenFile(const std::string& path, std::vector<int32_t>* tokens);

// Writes `tokens` atomically (temporary file, then rename) as version 1 when
// every token fits in uint16, else version 2.
std::string WriteTokenFile(const std::string& path, const std::vector<int32_t>& tokens);

// Loads the token corpus: `data` is a llm.c token file, or text (a file, or
// the fortunes corpus when empty) that `tokenizer` encodes; the encoded
// tokens are cached as <cache_dir>/tokens-<hash>.bin and reused when present.
// Every token must be below `vocab`. Splits off the last `val_fraction`
// tokens as validation; `min_len` as LoadCorpus. `note` gets one line for the log.
std::string LoadTokenCorpus(const std::string& data, const Tokenizer* tokenizer,
                            const std::string& cache_dir, int64_t vocab, double val_fraction,
                            int64_t min_len, Corpus* out, std::string* note);

}  // namespace htr_train

#endif  // HTR_TRAIN_TOKEN_FILE_H_
