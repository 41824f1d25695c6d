#include "analysis/comm_lineage.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "replay/event.h"

namespace replay::analysis {
namespace {

// The creating call as a verb, and the argument worth showing ("color", "type").
struct Verb {
  std::string name;
  const char* argument = nullptr;
};

Verb VerbOf(const std::string& api) {
  for (const CommVerb& e : CommVerbs()) {
    if (api == e.api) return {e.verb, e.argument};
  }
  if (api.rfind("ncclCommInit", 0) == 0) return {"nccl", nullptr};
  if (api.rfind("MPI_Comm_", 0) == 0) return {api.substr(9), nullptr};
  return {api.empty() ? "comm" : api, nullptr};
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::span<const CommVerb> CommVerbs() {
  static const CommVerb kVerbs[] = {
      {"MPI_Comm_dup", "dup", nullptr},
      {"MPI_Comm_idup", "dup", nullptr},
      {"MPI_Comm_dup_with_info", "dup", nullptr},
      {"MPI_Comm_split", "split", "color"},
      {"MPI_Comm_split_type", "split_type", "type"},
      {"MPI_Comm_create", "create", nullptr},
      {"MPI_Comm_create_group", "create_group", nullptr},
      {"MPI_Cart_create", "cart", nullptr},
      {"MPI_Cart_sub", "cart_sub", nullptr},
      {"MPI_Graph_create", "graph", nullptr},
      {"MPI_Dist_graph_create", "dist_graph", nullptr},
      {"MPI_Dist_graph_create_adjacent", "dist_graph", nullptr},
      {"MPI_Intercomm_create", "intercomm", nullptr},
      {"MPI_Intercomm_merge", "merge", nullptr},
      {"ncclCommSplit", "split", "color"},
  };
  return kVerbs;
}

void CommLineage::Add(const CommRecord& r, int32_t world_rank) {
  auto [it, inserted] = nodes_.try_emplace(r.id);
  CommNode& n = it->second;
  if (inserted) {
    n.id = r.id;
    n.parent = r.parent;
    n.api = r.api;
    n.parent_seq = r.parent_seq;
    n.color = r.color;
    n.flags = r.flags;
    n.size = r.size;
  }
  if (n.members.empty() && !r.members.empty()) n.members = r.members;
  if (r.members.empty() && r.size > 0 && r.rank >= 0 && r.rank < r.size) {
    if (n.reported.empty()) n.reported.assign(static_cast<size_t>(r.size), -1);
    if (static_cast<size_t>(r.rank) < n.reported.size()) n.reported[static_cast<size_t>(r.rank)] = world_rank;
  }
  n.seen_by.Add(world_rank);
}

std::string CommLineage::BaseName(const CommNode& n) const {
  if ((n.flags & comm_flags::kWorld) != 0) return "WORLD";
  if ((n.flags & comm_flags::kSelf) != 0) return "SELF";
  if ((n.flags & comm_flags::kNccl) != 0 && n.parent == 0) return "nccl";
  Verb verb = VerbOf(n.api);
  if (n.parent == 0) return verb.name;
  const CommNode* p = Find(n.parent);
  std::string s = verb.name + "(" + (p != nullptr && !p->name.empty() ? p->name : "?");
  if (verb.argument != nullptr) s += std::string(", ") + verb.argument + "=" + std::to_string(n.color);
  return s + ")";
}

void CommLineage::Finish() {
  for (auto& [id, n] : nodes_) {
    if (n.members.empty() && !n.reported.empty() &&
        std::find(n.reported.begin(), n.reported.end(), -1) == n.reported.end()) {
      n.members = n.reported;
    }
  }
  // Parents are named before their children, so that a child's name holds its
  // parent's final (disambiguated) name.
  std::map<int, std::vector<uint64_t>> by_depth;
  for (auto& [id, n] : nodes_) {
    int depth = 0;
    for (const CommNode* p = Find(n.parent); p != nullptr && depth < 64; p = Find(p->parent)) ++depth;
    by_depth[depth].push_back(id);
  }
  for (auto& [depth, ids] : by_depth) {
    std::map<std::string, std::vector<uint64_t>> by_name;
    for (uint64_t id : ids) by_name[BaseName(nodes_[id])].push_back(id);
    for (auto& [name, same] : by_name) {
      for (uint64_t id : same) {
        CommNode& n = nodes_[id];
        n.name = name;
        if (same.size() > 1 && (n.flags & comm_flags::kSelf) == 0) n.name += "@" + std::to_string(n.parent_seq);
      }
    }
  }
}

const CommNode* CommLineage::Find(uint64_t id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::string CommLineage::Name(uint64_t id) const {
  const CommNode* n = Find(id);
  return n != nullptr && !n->name.empty() ? n->name : "comm " + Hex(id);
}

const std::vector<int32_t>& CommLineage::Members(uint64_t id) const {
  static const std::vector<int32_t> kNone;
  const CommNode* n = Find(id);
  return n != nullptr ? n->members : kNone;
}

}  // namespace replay::analysis
