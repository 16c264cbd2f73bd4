// tokenizer.h — GPT-2's byte-level BPE read from a Hugging Face
// tokenizer.json (the `tokenizers` library's format).
//
// Supported: model BPE (vocab, merges as "a b" strings or [a, b] pairs,
// ignore_merges), no normalizer, the ByteLevel pre-tokenizer (add_prefix_space,
// use_regex with GPT-2's split pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// ), the ByteLevel decoder, and added tokens (matched leftmost-longest in the
// raw text before pre-tokenization). Anything else in the file (another
// model, a normalizer, an added token with lstrip/rstrip/single_word) is an
// error naming the field, not a silent approximation.
//
// Encode needs valid UTF-8 (the `tokenizers` library takes Python str); an
// invalid sequence is an error naming its byte offset.
#ifndef HTR_TRAIN_TOKENIZER_H_
#define HTR_TRAIN_TOKENIZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace htr_train {

class Tokenizer {
 public:
  // Reads `path`. Returns "" or a one-line error naming the file and field.
  std::string Load(const std::string& path);

  // Token ids of `text` (UTF-8). Returns "" or an error.
  std::string Encode(const std::string& text, std::vector<int32_t>* ids) const;
  // The bytes of `ids` (added tokens as their content). Returns "" or an
  // error naming an id outside the vocabulary.
  std::string Decode(const std::vector<int32_t>& ids, std::string* text) const;

  // Largest id + 1 over the vocabulary and the added tokens.
  int64_t vocab_size() const { return vocab_size_; }
  // FNV-1a 64 of the file's bytes (names the token cache of a corpus).
  uint64_t file_hash() const { return file_hash_; }

 private:
  void EncodeWord(const std::string& mapped, std::vector<int32_t>* ids) const;
  std::string EncodeSegment(const std::string& text, size_t offset, std::vector<int32_t>* ids) const;

  struct PairHash {
    size_t operator()(const std::pair<int32_t, int32_t>& p) const {
      return std::hash<uint64_t>()((static_cast<uint64_t>(static_cast<uint32_t>(p.first)) << 32) |
                                   static_cast<uint32_t>(p.second));
    }
  };
  std::unordered_map<std::string, int32_t> vocab_;            // byte-level string -> id
  std::vector<std::string> id_to_token_;                      // id -> byte-level string ("" = none)
  std::unordered_map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>, PairHash>
      merges_;                                                // (a, b) -> (rank, merged id)
  std::vector<std::pair<std::string, int32_t>> added_;        // content, id
  std::map<int32_t, std::string> added_by_id_;
  std::string byte_to_unicode_[256];                          // UTF-8 of each byte's char
  std::unordered_map<uint32_t, uint8_t> unicode_to_byte_;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  bool ignore_merges_ = false;
  int64_t vocab_size_ = 0;
  uint64_t file_hash_ = 0;
};

// GPT-2's pre-tokenizer split of `cps` (code points) into [begin, end)
// pieces; exposed for tests.
std::vector<std::pair<size_t, size_t>> SplitGpt2(const std::vector<uint32_t>& cps);

}  // namespace htr_train

#endif  // HTR_TRAIN_TOKENIZER_H_
