/*
 * htr_sdk_decision.h — auto-tune decisions that every process of one machine
 * shares, so that two runs of the same program make the same choice.
 *
 * A timed choice between two numerically different implementations (the cpu
 * plugin's OpenBLAS-or-oneDNN matmul per shape) is a coin flip when the two
 * are equally fast; made afresh in every process it makes results differ
 * between runs (a training run resumed from a checkpoint would not reproduce
 * the uninterrupted one bit for bit). A decision is therefore stored in a
 * small file the first time it is measured and never replaced: the first
 * process to publish it wins, and every later process (and the losers of a
 * race) reads and uses the stored one.
 *
 * Contract:
 *   - decision_hash(key): 32 hex digits naming the file of `key`.
 *   - decision_read(path, line): the file's first line without its newline;
 *     false if the file is missing, unreadable or empty.
 *   - decision_settle(dir, path, line): creates `dir` (and its parents) when
 *     needed and publishes `line` at `path` unless a decision is already
 *     there (write a private temporary file, then link(2) it to `path`, which
 *     never replaces an existing file). Returns the decision now on disk:
 *     `line` if this call published it, the earlier one otherwise, and
 *     `line` when the disk cannot be written (the choice then holds for this
 *     process only). Never throws; thread-safe (no shared state).
 */
#ifndef HTR_SDK_DECISION_H_
#define HTR_SDK_DECISION_H_

#include <string>

namespace htr_sdk {

std::string decision_hash(const std::string& key);
bool decision_read(const std::string& path, std::string* line);
std::string decision_settle(const std::string& dir, const std::string& path,
                            const std::string& line);

}  // namespace htr_sdk

#endif  // HTR_SDK_DECISION_H_
