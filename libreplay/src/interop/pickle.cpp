#include "interop/pickle.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "replay/event_format.h"
#include "util/json.h"

namespace replay::interop {
namespace {

// Pickle opcodes (Python's Lib/pickletools.py documents each).
enum Op : uint8_t {
  kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2', kFloat = 'F', kInt = 'I',
  kBinInt = 'J', kBinInt1 = 'K', kLong = 'L', kBinInt2 = 'M', kNone = 'N', kPersId = 'P',
  kBinPersId = 'Q', kReduce = 'R', kString = 'S', kBinString = 'T', kShortBinString = 'U',
  kUnicode = 'V', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b', kGlobal = 'c', kDict = 'd',
  kEmptyDict = '}', kAppends = 'e', kGet = 'g', kBinGet = 'h', kInst = 'i', kLongBinGet = 'j',
  kList = 'l', kEmptyList = ']', kObj = 'o', kPut = 'p', kBinPut = 'q', kLongBinPut = 'r',
  kSetItem = 's', kTuple = 't', kEmptyTuple = ')', kSetItems = 'u', kBinFloat = 'G',
  kProto = 0x80, kNewObj = 0x81, kExt1 = 0x82, kExt2 = 0x83, kExt4 = 0x84, kTuple1 = 0x85,
  kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b,
  kBinBytes = 'B', kShortBinBytes = 'C', kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e, kEmptySet = 0x8f, kAddItems = 0x90, kFrozenSet = 0x91, kNewObjEx = 0x92,
  kStackGlobal = 0x93, kMemoize = 0x94, kFrame = 0x95, kByteArray8 = 0x96, kNextBuffer = 0x97,
  kReadonlyBuffer = 0x98,
};

const char* CodeOpName(uint8_t op) {
  switch (op) {
    case kGlobal: return "GLOBAL";
    case kStackGlobal: return "STACK_GLOBAL";
    case kReduce: return "REDUCE";
    case kBuild: return "BUILD";
    case kInst: return "INST";
    case kObj: return "OBJ";
    case kNewObj: return "NEWOBJ";
    case kNewObjEx: return "NEWOBJ_EX";
    case kExt1: return "EXT1";
    case kExt2: return "EXT2";
    case kExt4: return "EXT4";
    case kPersId: return "PERSID";
    case kBinPersId: return "BINPERSID";
    case kNextBuffer: return "NEXT_BUFFER";
    case kReadonlyBuffer: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

// A Python object of the plain-data subset. Shared, because the memo and
// several containers may hold the same object.
struct Obj;
using Ref = std::shared_ptr<Obj>;
struct Obj {
  enum Kind { kNoneK, kBoolK, kIntK, kBigIntK, kFloatK, kStrK, kBytesK, kListK, kTupleK, kDictK, kSetK } kind = kNoneK;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                             // str, bytes, big int (hex)
  std::vector<Ref> items;                    // list, tuple, set
  std::vector<std::pair<Ref, Ref>> entries;  // dict
};

bool ParseHex(std::string_view s, uint32_t* out) {
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  if (s.empty() || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

class Decoder {
 public:
  Decoder(std::string_view in, const std::string& what) : in_(in), what_(what) {}
  // A pickle can make a container hold itself (through the memo); emptying
  // every container breaks such cycles, which shared ownership cannot free.
  ~Decoder() {
    for (const Ref& c : containers_) {
      c->items.clear();
      c->entries.clear();
    }
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  Result<nlohmann::json> Run() {
    Ref result;
    while (true) {
      if (pos_ >= in_.size()) return Fail("it ends without a STOP opcode (cut short?)");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      Status st = Step(op, at, &result);
      if (!st.ok()) return st;
      if (result) break;
    }
    budget_ = std::max<uint64_t>(1u << 20, static_cast<uint64_t>(in_.size()) * 16);
    nlohmann::json out;
    Status st = ToJson(result, 0, &out);
    if (!st.ok()) return st;
    return out;
  }

 private:
  Ref Make(Obj::Kind k) {
    auto o = std::make_shared<Obj>();
    o->kind = k;
    if (k == Obj::kListK || k == Obj::kTupleK || k == Obj::kDictK || k == Obj::kSetK) containers_.push_back(o);
    return o;
  }

  Status Fail(const std::string& why) const {
    return Status::Corruption(what_ + " is not a readable pickle: " + why + " (at byte " + std::to_string(pos_) + ")");
  }

  Status Need(size_t n) const {
    if (in_.size() - pos_ < n) return Fail("it is cut short");
    return Status::Ok();
  }
  Result<uint64_t> Le(size_t n) {
    REPLAY_RETURN_IF_ERROR(Need(n));
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Result<std::string_view> Bytes(uint64_t n) {
    if (n > in_.size() - pos_) return Fail("a string claims " + std::to_string(n) + " bytes, more than are left");
    std::string_view v = in_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  Result<std::string_view> Line() {
    size_t nl = in_.find('\n', pos_);
    if (nl == std::string_view::npos) return Fail("a text argument has no end of line");
    std::string_view v = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return v;
  }

  void Push(Ref r) { stack_.push_back(std::move(r)); }
  Result<Ref> Pop() {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Fail("an opcode needs a value the stack does not have");
    Ref r = std::move(stack_.back());
    stack_.pop_back();
    return r;
  }
  Result<Ref> Top() {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Fail("an opcode needs a value the stack does not have");
    return stack_.back();
  }
  // The values above the last mark, which is removed.
  Result<std::vector<Ref>> PopMark() {
    if (marks_.empty()) return Fail("an opcode needs a MARK that is not there");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> v(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                       std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return v;
  }

  Status PushInt(int64_t v) {
    Ref r = Make(Obj::kIntK);
    r->i = v;
    Push(std::move(r));
    return Status::Ok();
  }
  Status PushText(Obj::Kind k, std::string s) {
    Ref r = Make(k);
    r->s = std::move(s);
    Push(std::move(r));
    return Status::Ok();
  }
  // Little-endian two's complement of `n` bytes (LONG1, LONG4).
  Status PushLong(std::string_view b) {
    if (b.empty()) return PushInt(0);
    if (b.size() <= 8) {
      uint64_t v = 0;
      for (size_t k = 0; k < b.size(); ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[k])) << (8 * k);
      if (b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80) != 0) v |= ~uint64_t{0} << (8 * b.size());
      return PushInt(static_cast<int64_t>(v));
    }
    static const char kHex[] = "0123456789abcdef";
    std::string hex = "0x";
    for (size_t k = b.size(); k-- > 0;) {
      hex.push_back(kHex[static_cast<uint8_t>(b[k]) >> 4]);
      hex.push_back(kHex[static_cast<uint8_t>(b[k]) & 15]);
    }
    return PushText(Obj::kBigIntK, hex);
  }
  Status PushDecimal(std::string_view text) {
    if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
    std::string t(text);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || end == nullptr || *end != '\0') return Fail("an integer is not a number");
    if (errno == ERANGE) return PushText(Obj::kBigIntK, t);
    return PushInt(v);
  }

  // Python's repr of a str/bytes in protocol 0 ('S'): quotes, simple escapes.
  Result<std::string> Unquote(std::string_view t) {
    if (t.size() < 2 || (t.front() != '\'' && t.front() != '"') || t.back() != t.front()) {
      return Fail("a STRING argument is not quoted");
    }
    t = t.substr(1, t.size() - 2);
    std::string out;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] != '\\' || k + 1 == t.size()) {
        out.push_back(t[k]);
        continue;
      }
      char c = t[++k];
      switch (c) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'x': {
          uint32_t v = 0;
          if (k + 2 >= t.size() || !ParseHex(t.substr(k + 1, 2), &v)) return Fail("a STRING escape is malformed");
          out.push_back(static_cast<char>(v));
          k += 2;
          break;
        }
        default: out.push_back(c); break;
      }
    }
    return out;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
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

  // 'V': raw-unicode-escape: latin-1 bytes with \uXXXX and \UXXXXXXXX.
  Result<std::string> RawUnicode(std::string_view t) {
    std::string out;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == '\\' && k + 1 < t.size() && (t[k + 1] == 'u' || t[k + 1] == 'U')) {
        size_t digits = t[k + 1] == 'u' ? 4 : 8;
        uint32_t cp = 0;
        if (k + 2 + digits > t.size() || !ParseHex(t.substr(k + 2, digits), &cp) || cp > 0x10ffff) {
          return Fail("a UNICODE escape is malformed");
        }
        AppendUtf8(cp, &out);
        k += 1 + digits;
      } else {
        AppendUtf8(static_cast<uint8_t>(t[k]), &out);
      }
    }
    return out;
  }

  Status Memo(uint64_t id) {
    REPLAY_ASSIGN_OR_RETURN(Ref top, Top());
    if (memo_.size() > in_.size()) return Fail("too many memo entries");
    memo_[id] = std::move(top);
    return Status::Ok();
  }
  Status Recall(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) return Fail("it refers to memo entry " + std::to_string(id) + ", which was never stored");
    Push(it->second);
    return Status::Ok();
  }

  Status SetItems(const Ref& dict, std::vector<Ref>& kv) {
    if (dict->kind != Obj::kDictK) return Fail("SETITEM(S) on something that is not a dict");
    if (kv.size() % 2 != 0) return Fail("a dict has a key without a value");
    for (size_t k = 0; k < kv.size(); k += 2) dict->entries.emplace_back(kv[k], kv[k + 1]);
    return Status::Ok();
  }

  Status Step(uint8_t op, size_t at, Ref* result) {
    if (const char* name = CodeOpName(op)) {
      return Status::InvalidArgument(what_ + " holds a pickle opcode that would run Python code (" + name +
                                     " at byte " + std::to_string(at) +
                                     "); replay reads only plain data (dicts, lists, strings, numbers)");
    }
    switch (op) {
      case kProto: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t v, Le(1));
        if (v > 5) return Fail("pickle protocol " + std::to_string(v) + " is newer than 5");
        return Status::Ok();
      }
      case kFrame: return Le(8).status();
      case kStop: {
        REPLAY_ASSIGN_OR_RETURN(*result, Pop());
        return Status::Ok();
      }
      case kMark:
        if (marks_.size() > 10000) return Fail("marks nest too deeply");
        marks_.push_back(stack_.size());
        return Status::Ok();
      case kPop:
        if (!marks_.empty() && stack_.size() == marks_.back()) {
          marks_.pop_back();
          return Status::Ok();
        }
        return Pop().status();
      case kPopMark: return PopMark().status();
      case kDup: {
        REPLAY_ASSIGN_OR_RETURN(Ref top, Top());
        Push(std::move(top));
        return Status::Ok();
      }
      case kNone: Push(Make(Obj::kNoneK)); return Status::Ok();
      case kNewTrue:
      case kNewFalse: {
        Ref r = Make(Obj::kBoolK);
        r->b = op == kNewTrue;
        Push(std::move(r));
        return Status::Ok();
      }
      case kInt: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        if (t == "00" || t == "01") {
          Ref r = Make(Obj::kBoolK);
          r->b = t == "01";
          Push(std::move(r));
          return Status::Ok();
        }
        return PushDecimal(t);
      }
      case kLong: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        return PushDecimal(t);
      }
      case kBinInt: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t v, Le(4));
        return PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
      }
      case kBinInt1: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t v, Le(1));
        return PushInt(static_cast<int64_t>(v));
      }
      case kBinInt2: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t v, Le(2));
        return PushInt(static_cast<int64_t>(v));
      }
      case kLong1:
      case kLong4: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t n, Le(op == kLong1 ? 1 : 4));
        REPLAY_ASSIGN_OR_RETURN(std::string_view b, Bytes(n));
        return PushLong(b);
      }
      case kFloat: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        Ref r = Make(Obj::kFloatK);
        r->f = std::strtod(std::string(t).c_str(), nullptr);
        Push(std::move(r));
        return Status::Ok();
      }
      case kBinFloat: {
        REPLAY_RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (size_t k = 0; k < 8; ++k) bits = bits << 8 | static_cast<uint8_t>(in_[pos_ + k]);
        pos_ += 8;
        Ref r = Make(Obj::kFloatK);
        std::memcpy(&r->f, &bits, sizeof(bits));
        Push(std::move(r));
        return Status::Ok();
      }
      case kString: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        REPLAY_ASSIGN_OR_RETURN(std::string s, Unquote(t));
        return PushText(Obj::kStrK, std::move(s));
      }
      case kUnicode: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        REPLAY_ASSIGN_OR_RETURN(std::string s, RawUnicode(t));
        return PushText(Obj::kStrK, std::move(s));
      }
      case kBinString:
      case kShortBinString:
      case kBinUnicode:
      case kShortBinUnicode:
      case kBinUnicode8:
      case kBinBytes:
      case kShortBinBytes:
      case kBinBytes8:
      case kByteArray8: {
        size_t width = op == kShortBinString || op == kShortBinUnicode || op == kShortBinBytes ? 1
                       : op == kBinUnicode8 || op == kBinBytes8 || op == kByteArray8   ? 8
                                                                                         : 4;
        REPLAY_ASSIGN_OR_RETURN(uint64_t n, Le(width));
        if (op == kBinString && (n & 0x80000000u) != 0) return Fail("a BINSTRING has a negative length");
        REPLAY_ASSIGN_OR_RETURN(std::string_view b, Bytes(n));
        bool text = op == kBinUnicode || op == kShortBinUnicode || op == kBinUnicode8 || op == kBinString ||
                    op == kShortBinString;
        return PushText(text ? Obj::kStrK : Obj::kBytesK, std::string(b));
      }
      case kEmptyList: Push(Make(Obj::kListK)); return Status::Ok();
      case kEmptyTuple: Push(Make(Obj::kTupleK)); return Status::Ok();
      case kEmptyDict: Push(Make(Obj::kDictK)); return Status::Ok();
      case kEmptySet: Push(Make(Obj::kSetK)); return Status::Ok();
      case kAppend: {
        REPLAY_ASSIGN_OR_RETURN(Ref v, Pop());
        REPLAY_ASSIGN_OR_RETURN(Ref list, Top());
        if (list->kind != Obj::kListK) return Fail("APPEND to something that is not a list");
        list->items.push_back(std::move(v));
        return Status::Ok();
      }
      case kAppends:
      case kAddItems: {
        REPLAY_ASSIGN_OR_RETURN(std::vector<Ref> v, PopMark());
        REPLAY_ASSIGN_OR_RETURN(Ref target, Top());
        if (target->kind != (op == kAppends ? Obj::kListK : Obj::kSetK)) {
          return Fail(op == kAppends ? "APPENDS to something that is not a list" : "ADDITEMS to something that is not a set");
        }
        for (Ref& r : v) target->items.push_back(std::move(r));
        return Status::Ok();
      }
      case kList:
      case kTuple:
      case kFrozenSet: {
        REPLAY_ASSIGN_OR_RETURN(std::vector<Ref> v, PopMark());
        Ref r = Make(op == kList ? Obj::kListK : op == kTuple ? Obj::kTupleK : Obj::kSetK);
        r->items = std::move(v);
        Push(std::move(r));
        return Status::Ok();
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        size_t n = op - kTuple1 + 1u;
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() < floor + n) return Fail("a TUPLE opcode needs more values than the stack has");
        Ref r = Make(Obj::kTupleK);
        r->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        Push(std::move(r));
        return Status::Ok();
      }
      case kDict: {
        REPLAY_ASSIGN_OR_RETURN(std::vector<Ref> kv, PopMark());
        Ref d = Make(Obj::kDictK);
        REPLAY_RETURN_IF_ERROR(SetItems(d, kv));
        Push(std::move(d));
        return Status::Ok();
      }
      case kSetItem: {
        REPLAY_ASSIGN_OR_RETURN(Ref v, Pop());
        REPLAY_ASSIGN_OR_RETURN(Ref k, Pop());
        REPLAY_ASSIGN_OR_RETURN(Ref d, Top());
        std::vector<Ref> kv = {std::move(k), std::move(v)};
        return SetItems(d, kv);
      }
      case kSetItems: {
        REPLAY_ASSIGN_OR_RETURN(std::vector<Ref> kv, PopMark());
        REPLAY_ASSIGN_OR_RETURN(Ref d, Top());
        return SetItems(d, kv);
      }
      case kPut: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        return Memo(std::strtoull(std::string(t).c_str(), nullptr, 10));
      }
      case kBinPut: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t id, Le(1));
        return Memo(id);
      }
      case kLongBinPut: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t id, Le(4));
        return Memo(id);
      }
      case kMemoize: return Memo(memo_.size());
      case kGet: {
        REPLAY_ASSIGN_OR_RETURN(std::string_view t, Line());
        return Recall(std::strtoull(std::string(t).c_str(), nullptr, 10));
      }
      case kBinGet: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t id, Le(1));
        return Recall(id);
      }
      case kLongBinGet: {
        REPLAY_ASSIGN_OR_RETURN(uint64_t id, Le(4));
        return Recall(id);
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        pos_ = at;
        return Fail(std::string("unknown opcode ") + hex);
      }
    }
  }

  Status ToJson(const Ref& o, int depth, nlohmann::json* out) {
    if (depth > 200) return Fail("values nest more than 200 deep (or refer to themselves)");
    if (budget_-- == 0) return Fail("it expands to too many values");
    switch (o->kind) {
      case Obj::kNoneK: *out = nullptr; return Status::Ok();
      case Obj::kBoolK: *out = o->b; return Status::Ok();
      case Obj::kIntK: *out = o->i; return Status::Ok();
      case Obj::kBigIntK:
      case Obj::kStrK:
      case Obj::kBytesK: *out = o->s; return Status::Ok();
      case Obj::kFloatK:
        *out = std::isfinite(o->f) ? nlohmann::json(o->f) : nlohmann::json(nullptr);
        return Status::Ok();
      case Obj::kListK:
      case Obj::kTupleK:
      case Obj::kSetK: {
        *out = nlohmann::json::array();
        for (const Ref& r : o->items) {
          nlohmann::json v;
          REPLAY_RETURN_IF_ERROR(ToJson(r, depth + 1, &v));
          out->push_back(std::move(v));
        }
        return Status::Ok();
      }
      case Obj::kDictK: {
        *out = nlohmann::json::object();
        for (const auto& [k, v] : o->entries) {
          std::string key;
          if (k->kind == Obj::kStrK || k->kind == Obj::kBytesK || k->kind == Obj::kBigIntK) {
            key = k->s;
          } else if (k->kind == Obj::kIntK) {
            key = std::to_string(k->i);
          } else {
            nlohmann::json kj;
            REPLAY_RETURN_IF_ERROR(ToJson(k, depth + 1, &kj));
            key = JsonText(kj);
          }
          nlohmann::json value;
          REPLAY_RETURN_IF_ERROR(ToJson(v, depth + 1, &value));
          (*out)[key] = std::move(value);
        }
        return Status::Ok();
      }
    }
    return Fail("an object of unknown kind");
  }

  std::string_view in_;
  const std::string& what_;
  size_t pos_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::vector<Ref> containers_;  // every list, tuple, dict and set made
  uint64_t budget_ = 0;
};

class Encoder {
 public:
  explicit Encoder(const std::set<std::string>& tuple_keys) : tuple_keys_(tuple_keys) {}

  std::string Run(const nlohmann::json& v) {
    out_.push_back(static_cast<char>(kProto));
    out_.push_back(2);
    Value(v, false);
    out_.push_back(static_cast<char>(kStop));
    return std::move(out_);
  }

 private:
  void U32(uint32_t v) {
    for (int k = 0; k < 4; ++k) out_.push_back(static_cast<char>(v >> (8 * k)));
  }
  void Str(const std::string& s) {
    out_.push_back(static_cast<char>(kBinUnicode));
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Int(int64_t v) {
    if (v >= 0 && v < 256) {
      out_.push_back(static_cast<char>(kBinInt1));
      out_.push_back(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      out_.push_back(static_cast<char>(kBinInt2));
      out_.push_back(static_cast<char>(v));
      out_.push_back(static_cast<char>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_.push_back(static_cast<char>(kBinInt));
      U32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      out_.push_back(static_cast<char>(kLong1));
      out_.push_back(8);
      for (int k = 0; k < 8; ++k) out_.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * k)));
    }
  }
  void Value(const nlohmann::json& v, bool as_tuple) {
    switch (v.type()) {
      case nlohmann::json::value_t::null: out_.push_back(static_cast<char>(kNone)); break;
      case nlohmann::json::value_t::boolean:
        out_.push_back(static_cast<char>(v.get<bool>() ? kNewTrue : kNewFalse));
        break;
      case nlohmann::json::value_t::number_integer: Int(v.get<int64_t>()); break;
      case nlohmann::json::value_t::number_unsigned: {
        uint64_t u = v.get<uint64_t>();
        if (u <= static_cast<uint64_t>(INT64_MAX)) {
          Int(static_cast<int64_t>(u));
        } else {
          out_.push_back(static_cast<char>(kLong1));
          out_.push_back(9);
          for (int k = 0; k < 8; ++k) out_.push_back(static_cast<char>(u >> (8 * k)));
          out_.push_back(0);
        }
        break;
      }
      case nlohmann::json::value_t::number_float: {
        double d = v.get<double>();
        uint64_t bits;
        std::memcpy(&bits, &d, sizeof(bits));
        out_.push_back(static_cast<char>(kBinFloat));
        for (int k = 7; k >= 0; --k) out_.push_back(static_cast<char>(bits >> (8 * k)));
        break;
      }
      case nlohmann::json::value_t::string: Str(v.get_ref<const std::string&>()); break;
      case nlohmann::json::value_t::array:
        if (as_tuple) {
          out_.push_back(static_cast<char>(kMark));
          for (const auto& item : v) Value(item, false);
          out_.push_back(static_cast<char>(kTuple));
          break;
        }
        out_.push_back(static_cast<char>(kEmptyList));
        if (!v.empty()) {
          out_.push_back(static_cast<char>(kMark));
          for (const auto& item : v) Value(item, false);
          out_.push_back(static_cast<char>(kAppends));
        }
        break;
      case nlohmann::json::value_t::object:
        out_.push_back(static_cast<char>(kEmptyDict));
        if (!v.empty()) {
          out_.push_back(static_cast<char>(kMark));
          for (auto it = v.begin(); it != v.end(); ++it) {
            Str(it.key());
            Value(it.value(), tuple_keys_.count(it.key()) != 0);
          }
          out_.push_back(static_cast<char>(kSetItems));
        }
        break;
      default: out_.push_back(static_cast<char>(kNone)); break;
    }
  }

  const std::set<std::string>& tuple_keys_;
  std::string out_;
};

}  // namespace

bool LooksLikePickle(std::string_view bytes) {
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == kProto && static_cast<uint8_t>(bytes[1]) >= 2 &&
         static_cast<uint8_t>(bytes[1]) <= 5;
}

Result<nlohmann::json> ReadPickle(std::string_view bytes, const std::string& what) {
  Decoder d(bytes, what);
  return d.Run();
}

std::string WritePickle(const nlohmann::json& value, const std::set<std::string>& tuple_keys) {
  Encoder e(tuple_keys);
  return e.Run(value);
}

}  // namespace replay::interop
