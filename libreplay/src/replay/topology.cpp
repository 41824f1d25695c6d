#include "replay/topology.h"

#include <charconv>

namespace replay {

namespace {

void AppendList(std::string* out, std::string_view name, const std::vector<int>& values) {
  if (!out->empty()) out->push_back(';');
  out->append(name);
  out->push_back('=');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(std::to_string(values[i]));
  }
}

bool ParseList(std::string_view text, std::vector<int>* values) {
  values->clear();
  if (text.empty()) return true;
  for (;;) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) return false;
    values->push_back(v);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace

std::string Topology::DistGraphText() const {
  std::string out;
  AppendList(&out, "in", sources);
  AppendList(&out, "out", destinations);
  if (weighted) {
    AppendList(&out, "in_weights", source_weights);
    AppendList(&out, "out_weights", destination_weights);
  }
  return out;
}

std::optional<Topology> Topology::ParseDistGraph(std::string_view text) {
  Topology t;
  t.kind = Kind::kDistGraph;
  bool in = false, out = false;
  while (!text.empty()) {
    size_t semi = text.find(';');
    std::string_view field = text.substr(0, semi);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = field.substr(0, eq);
    std::vector<int>* into = name == "in"            ? (in = true, &t.sources)
                             : name == "out"         ? (out = true, &t.destinations)
                             : name == "in_weights"  ? (t.weighted = true, &t.source_weights)
                             : name == "out_weights" ? (t.weighted = true, &t.destination_weights)
                                                     : nullptr;
    if (into == nullptr || !ParseList(field.substr(eq + 1), into)) return std::nullopt;
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  if (!in || !out) return std::nullopt;
  if (t.weighted && (t.source_weights.size() != t.sources.size() ||
                     t.destination_weights.size() != t.destinations.size())) {
    return std::nullopt;
  }
  return t;
}

Topology Topology::Cart(int ndims, const int* dims, const int* periods) {
  Topology t;
  t.kind = Kind::kCart;
  for (int i = 0; i < ndims; ++i) {
    t.dims.push_back(dims != nullptr ? dims[i] : 1);
    t.periods.push_back(periods != nullptr && periods[i] != 0 ? 1 : 0);
  }
  return t;
}

Topology Topology::CartSub(const Topology& parent, const int* remain) {
  Topology t;
  t.kind = Kind::kCart;
  for (size_t i = 0; i < parent.dims.size(); ++i) {
    if (remain != nullptr && remain[i] != 0) {
      t.dims.push_back(parent.dims[i]);
      t.periods.push_back(parent.periods[i]);
    }
  }
  return t;
}

Topology Topology::Graph(int nnodes, const int* index, const int* edges) {
  Topology t;
  t.kind = Kind::kGraph;
  if (index == nullptr || nnodes <= 0) return t;
  t.index.assign(index, index + nnodes);
  int nedges = t.index.back();
  if (edges != nullptr && nedges > 0) t.edges.assign(edges, edges + nedges);
  return t;
}

Topology Topology::DistGraph(int indegree, const int* sources, int outdegree, const int* destinations) {
  Topology t;
  t.kind = Kind::kDistGraph;
  if (sources != nullptr && indegree > 0) t.sources.assign(sources, sources + indegree);
  if (destinations != nullptr && outdegree > 0) t.destinations.assign(destinations, destinations + outdegree);
  return t;
}

int Topology::size() const {
  if (kind == Kind::kGraph) return static_cast<int>(index.size());
  int n = 1;
  for (int d : dims) n *= d;
  return n;
}

std::vector<int> Topology::Coords(int rank) const {
  std::vector<int> c(dims.size(), 0);
  if (rank < 0 || rank >= size()) return {};
  // Row-major: the last dimension varies fastest.
  for (size_t i = dims.size(); i-- > 0;) {
    c[i] = rank % dims[i];
    rank /= dims[i];
  }
  return c;
}

int Topology::RankAt(const int* coords) const {
  int rank = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    int c = coords[i];
    if (periods[i] != 0) {
      c %= dims[i];
      if (c < 0) c += dims[i];
    } else if (c < 0 || c >= dims[i]) {
      return -1;
    }
    rank = rank * dims[i] + c;
  }
  return rank;
}

void Topology::Shift(int rank, int direction, int disp, int proc_null, int* source, int* dest) const {
  std::vector<int> c = Coords(rank);
  if (c.empty() || direction < 0 || static_cast<size_t>(direction) >= dims.size()) {
    *source = *dest = proc_null;
    return;
  }
  const int here = c[static_cast<size_t>(direction)];
  c[static_cast<size_t>(direction)] = here + disp;
  int d = RankAt(c.data());
  c[static_cast<size_t>(direction)] = here - disp;
  int s = RankAt(c.data());
  *dest = d < 0 ? proc_null : d;
  *source = s < 0 ? proc_null : s;
}

std::vector<int> Topology::Neighbors(int rank) const {
  if (kind != Kind::kGraph || rank < 0 || static_cast<size_t>(rank) >= index.size()) return {};
  int from = rank == 0 ? 0 : index[static_cast<size_t>(rank) - 1];
  int to = index[static_cast<size_t>(rank)];
  if (from < 0 || to > static_cast<int>(edges.size()) || from > to) return {};
  return std::vector<int>(edges.begin() + from, edges.begin() + to);
}

}  // namespace replay
