// pickle.h: the plain-data subset of Python's pickle format, read and written
// without Python, for PyTorch Flight Recorder dumps.
//
// ReadPickle understands what a pickle of dicts, lists, tuples, sets, strings,
// bytes, ints, floats, booleans and None consists of, in protocols 0 to 5 as
// Python and PyTorch's C++ pickler write them (memo, frames, marks included).
// It never runs anything: opcodes that name or call Python objects (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, persistent ids, out-of-
// band buffers) are refused with the opcode's name and offset. Every length is
// checked against the input, nesting depth and the size of the result are
// bounded, so a hostile file yields a Status.
//
// The result is JSON: dicts become objects (non-string keys are written in
// decimal, or as JSON text), tuples and sets become arrays, bytes become
// strings of their bytes.
//
// WritePickle writes protocol 2, which every Python 3 reads.
//
// Stateless functions; thread-safe.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "replay/status.h"
#include "util/json.h"

namespace replay::interop {

// Whether `bytes` starts like a pickle of protocol 2 or later (PROTO opcode).
bool LooksLikePickle(std::string_view bytes);

// Decodes the pickle `bytes`; `what` names the input in messages.
Result<nlohmann::json> ReadPickle(std::string_view bytes, const std::string& what);

// Encodes `value` as a protocol 2 pickle. Arrays stored under a key in
// `tuple_keys` are written as tuples (Flight Recorder's process_group).
std::string WritePickle(const nlohmann::json& value, const std::set<std::string>& tuple_keys = {});

}  // namespace replay::interop
