// tokenizer.cc — byte-level BPE (tokenizer.h). The pre-tokenizer is GPT-2's
// regex written out by hand over code points; the merge loop applies the
// lowest-ranked adjacent pair first (leftmost among equals), as `tokenizers`
// does.
#include "tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <exception>

#include <nlohmann/json.hpp>

#include "unicode_tables.h"
#include "user_file.h"

namespace htr_train {
namespace {

// GPT-2's tokenizer.json is 1.4 MB; a file past this is no tokenizer (and is not read into memory).
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;

using nlohmann::json;

bool InRanges(const CodePointRange* r, size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (cp < r[mid].lo) {
      hi = mid;
    } else if (cp > r[mid].hi) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// Decodes one UTF-8 sequence at s[i]; returns its length (0 = invalid:
// truncated, overlong, a surrogate or above U+10FFFF).
size_t DecodeUtf8(const std::string& s, size_t i, uint32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char c = p[i];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if ((c & 0xe0) == 0xc0) {
    len = 2, v = c & 0x1fu, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, v = c & 0x0fu, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, v = c & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xc0) != 0x80) return 0;
    v = (v << 6) | (p[i + k] & 0x3fu);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

bool IsNullOr(const json& j, const char* key, bool want) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_boolean() && it->get<bool>() == want);
}

}  // namespace

bool IsUnicodeLetter(uint32_t cp) { return InRanges(kLetterRanges, kLetterRangesCount, cp); }
bool IsUnicodeNumber(uint32_t cp) { return InRanges(kNumberRanges, kNumberRangesCount, cp); }
bool IsUnicodeSpace(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xd) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

std::vector<std::pair<size_t, size_t>> SplitGpt2(const std::vector<uint32_t>& cps) {
  std::vector<std::pair<size_t, size_t>> out;
  const size_t n = cps.size();
  auto other = [](uint32_t c) { return !IsUnicodeSpace(c) && !IsUnicodeLetter(c) && !IsUnicodeNumber(c); };
  size_t i = 0;
  while (i < n) {
    const uint32_t c = cps[i];
    size_t end = 0;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == '\'' && i + 1 < n) {
      const uint32_t a = cps[i + 1], b = i + 2 < n ? cps[i + 2] : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+  (in this order)
    bool (*classes[3])(uint32_t) = {IsUnicodeLetter, IsUnicodeNumber, nullptr};
    for (int k = 0; end == 0 && k < 3; ++k) {
      auto in = [&](uint32_t x) { return classes[k] ? classes[k](x) : other(x); };
      size_t j = i;
      if (cps[j] == ' ' && j + 1 < n && in(cps[j + 1])) ++j;
      if (!in(cps[j])) continue;
      while (j < n && in(cps[j])) ++j;
      end = j;
    }
    if (end == 0) {
      // \s+(?!\S) | \s+ : a whitespace run; when a non-space follows a run of
      // two or more, the last space is left to prefix the next piece.
      size_t j = i;
      while (j < n && IsUnicodeSpace(cps[j])) ++j;
      if (j == i) {
        end = i + 1;  // unreachable: every code point is in one of the classes
      } else if (j < n && j - i >= 2) {
        end = j - 1;
      } else {
        end = j;
      }
    }
    out.emplace_back(i, end);
    i = end;
  }
  return out;
}

std::string Tokenizer::Load(const std::string& path) {
  std::string text;
  std::string err = ReadUserFile(path, kMaxTokenizerFileBytes, &text);
  if (!err.empty()) return err;
  file_hash_ = Fnv1a(text);
  const std::string where = path + ": ";
  try {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return where + "not a JSON object";
    if (!j.contains("model") || !j["model"].is_object()) return where + "no 'model' object";
    const json& model = j["model"];
    if (model.value("type", std::string("BPE")) != "BPE")
      return where + "model.type '" + model.value("type", std::string()) + "' is not supported (BPE only)";
    if (j.contains("normalizer") && !j["normalizer"].is_null())
      return where + "a normalizer is not supported (GPT-2's byte-level BPE has none)";
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0)
      return where + "model.dropout is not supported";
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(k) && !model[k].is_null() && !model[k].get<std::string>().empty())
        return where + "model." + k + " is not supported";
    ignore_merges_ = model.value("ignore_merges", false);

    // Pre-tokenizer: ByteLevel, alone or as the only member of a Sequence.
    const json* pre = j.contains("pre_tokenizer") ? &j["pre_tokenizer"] : nullptr;
    if (pre && pre->is_object() && pre->value("type", std::string()) == "Sequence" &&
        pre->contains("pretokenizers") && (*pre)["pretokenizers"].size() == 1)
      pre = &(*pre)["pretokenizers"][0];
    if (!pre || !pre->is_object() || pre->value("type", std::string()) != "ByteLevel")
      return where + "pre_tokenizer must be ByteLevel (GPT-2's byte-level BPE)";
    add_prefix_space_ = pre->value("add_prefix_space", false);
    use_regex_ = pre->value("use_regex", true);

    // Byte <-> unicode (GPT-2's bytes_to_unicode).
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xa1; b <= 0xac; ++b) bs.push_back(b);
    for (int b = 0xae; b <= 0xff; ++b) bs.push_back(b);
    std::vector<uint32_t> cs(256);
    std::vector<bool> direct(256, false);
    for (int b : bs) direct[static_cast<size_t>(b)] = true, cs[static_cast<size_t>(b)] = static_cast<uint32_t>(b);
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b)
      if (!direct[static_cast<size_t>(b)]) cs[static_cast<size_t>(b)] = 256 + extra++;
    unicode_to_byte_.clear();
    for (int b = 0; b < 256; ++b) {
      byte_to_unicode_[b].clear();
      AppendUtf8(cs[static_cast<size_t>(b)], &byte_to_unicode_[b]);
      unicode_to_byte_[cs[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
    }

    if (!model.contains("vocab") || !model["vocab"].is_object()) return where + "no model.vocab object";
    vocab_.clear();
    int64_t max_id = -1;
    for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
      if (!it.value().is_number_integer()) return where + "model.vocab['" + it.key() + "'] is not an integer";
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id > INT32_MAX) return where + "model.vocab['" + it.key() + "'] = " + std::to_string(id) + " is out of range";
      vocab_[it.key()] = static_cast<int32_t>(id);
      max_id = std::max(max_id, id);
    }
    added_.clear();
    added_by_id_.clear();
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const json& t : j["added_tokens"]) {
        if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string())
          return where + "added_tokens: an entry without an integer 'id' and a string 'content'";
        const std::string content = t["content"].get<std::string>();
        for (const char* k : {"single_word", "lstrip", "rstrip"})
          if (!IsNullOr(t, k, false)) return where + "added token '" + content + "': '" + k + "' is not supported";
        const int64_t id = t["id"].get<int64_t>();
        if (id < 0 || id > INT32_MAX || content.empty())
          return where + "added token '" + content + "': bad id or empty content";
        added_.emplace_back(content, static_cast<int32_t>(id));
        added_by_id_[static_cast<int32_t>(id)] = content;
        max_id = std::max(max_id, id);
      }
    }
    if (max_id < 0) return where + "the vocabulary is empty";
    vocab_size_ = max_id + 1;
    id_to_token_.assign(static_cast<size_t>(vocab_size_), std::string());
    for (const auto& kv : vocab_) id_to_token_[static_cast<size_t>(kv.second)] = kv.first;

    merges_.clear();
    if (model.contains("merges")) {
      if (!model["merges"].is_array()) return where + "model.merges is not an array";
      int32_t rank = 0;
      for (const json& mj : model["merges"]) {
        std::string a, b;
        if (mj.is_string()) {
          const std::string s = mj.get<std::string>();
          const size_t sp = s.find(' ');
          if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
            return where + "model.merges[" + std::to_string(rank) + "] '" + s + "' is not 'a b'";
          a = s.substr(0, sp), b = s.substr(sp + 1);
        } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
          a = mj[0].get<std::string>(), b = mj[1].get<std::string>();
        } else {
          return where + "model.merges[" + std::to_string(rank) + "] is neither 'a b' nor [a, b]";
        }
        auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
        if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
          return where + "model.merges[" + std::to_string(rank) + "] ('" + a + "', '" + b +
                 "') names a token missing from model.vocab";
        merges_.emplace(std::make_pair(ia->second, ib->second), std::make_pair(rank, im->second));
        ++rank;
      }
    }
  } catch (const std::exception& e) {
    return where + "malformed tokenizer.json (" + e.what() + ")";
  }
  return "";
}

void Tokenizer::EncodeWord(const std::string& mapped, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> syms;
  for (size_t i = 0; i < mapped.size();) {
    uint32_t cp = 0;
    size_t len = DecodeUtf8(mapped, i, &cp);
    if (len == 0) len = 1;  // cannot happen: `mapped` is our own UTF-8
    auto it = vocab_.find(mapped.substr(i, len));
    if (it != vocab_.end()) syms.push_back(it->second);  // a byte missing from the vocabulary is dropped, as in `tokenizers` without unk_token
    i += len;
  }
  while (syms.size() > 1) {
    int32_t best_rank = INT32_MAX, best_id = -1;
    size_t best = 0;
    for (size_t k = 0; k + 1 < syms.size(); ++k) {
      auto it = merges_.find(std::make_pair(syms[k], syms[k + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first, best_id = it->second.second, best = k;
      }
    }
    if (best_id < 0) break;
    syms[best] = best_id;
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  ids->insert(ids->end(), syms.begin(), syms.end());
}

std::string Tokenizer::EncodeSegment(const std::string& text, size_t offset, std::vector<int32_t>* ids) const {
  if (text.empty()) return "";
  std::vector<uint32_t> cps;
  if (add_prefix_space_ && text[0] != ' ') cps.push_back(' ');
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) return "invalid UTF-8 at byte " + std::to_string(offset + i);
    cps.push_back(cp);
    i += len;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  if (use_regex_) {
    pieces = SplitGpt2(cps);
  } else {
    pieces.emplace_back(0, cps.size());
  }
  std::string mapped;
  for (const auto& pc : pieces) {
    mapped.clear();
    for (size_t k = pc.first; k < pc.second; ++k) {
      std::string utf8;
      AppendUtf8(cps[k], &utf8);
      for (unsigned char ch : utf8) mapped += byte_to_unicode_[ch];
    }
    EncodeWord(mapped, ids);
  }
  return "";
}

std::string Tokenizer::Encode(const std::string& text, std::vector<int32_t>* ids) const {
  ids->clear();
  bool first[256] = {false};
  for (const auto& a : added_) first[static_cast<unsigned char>(a.first[0])] = true;
  size_t seg = 0;
  for (size_t i = 0; i < text.size();) {
    const int32_t* hit = nullptr;
    size_t hit_len = 0;
    if (first[static_cast<unsigned char>(text[i])]) {
      for (const auto& a : added_)  // leftmost-longest
        if (a.first.size() > hit_len && text.compare(i, a.first.size(), a.first) == 0)
          hit = &a.second, hit_len = a.first.size();
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    std::string err = EncodeSegment(text.substr(seg, i - seg), seg, ids);
    if (!err.empty()) return err;
    ids->push_back(*hit);
    i += hit_len;
    seg = i;
  }
  return EncodeSegment(text.substr(seg), seg, ids);
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, std::string* text) const {
  text->clear();
  for (int32_t id : ids) {
    auto added = added_by_id_.find(id);
    if (added != added_by_id_.end()) {
      *text += added->second;
      continue;
    }
    if (id < 0 || id >= vocab_size_ || id_to_token_[static_cast<size_t>(id)].empty())
      return "token id " + std::to_string(id) + " is not in the vocabulary";
    const std::string& tok = id_to_token_[static_cast<size_t>(id)];
    for (size_t i = 0; i < tok.size();) {
      uint32_t cp = 0;
      size_t len = DecodeUtf8(tok, i, &cp);
      auto it = len ? unicode_to_byte_.find(cp) : unicode_to_byte_.end();
      if (it == unicode_to_byte_.end())
        return "token " + std::to_string(id) + " has a character outside the byte-level alphabet";
      text->push_back(static_cast<char>(it->second));
      i += len;
    }
  }
  return "";
}

}  // namespace htr_train
