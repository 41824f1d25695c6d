// topology.h: the virtual topology of a communicator, as a rank re-run alone
// answers questions about it.
//
// A rank re-run alone has no peers, so the communicators it creates are
// stand-ins that cannot carry a topology of the recorded size. The questions a
// program asks of a Cartesian or graph communicator (its dimensions, a rank's
// coordinates, the neighbours a shift gives) are pure functions of the
// arguments that created it, which the re-run sees again: they are answered
// here, with MPI's rules (row-major ranks, periodic wrap, MPI_PROC_NULL off
// the edge of a non-periodic dimension). A distributed graph made by
// MPI_Dist_graph_create is the exception: each rank may name edges of others,
// so its neighbours are known only to MPI; the recording stores what MPI
// answered (an info event `topology.dist_graph` after the creation, DistGraphText)
// and the re-run takes them from there.
//
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace replay {

// The info key of a distributed graph's recorded neighbours.
inline constexpr std::string_view kDistGraphInfoKey = "topology.dist_graph";

struct Topology {
  enum class Kind { kNone, kCart, kGraph, kDistGraph };
  Kind kind = Kind::kNone;
  std::vector<int> dims, periods;          // Cartesian
  std::vector<int> index, edges;           // graph: MPI_Graph_create's arguments
  std::vector<int> sources, destinations;  // distributed graph: this rank's neighbours
  bool weighted = false;                    // and, when weighted, their weights
  std::vector<int> source_weights, destination_weights;

  static Topology Cart(int ndims, const int* dims, const int* periods);
  // The Cartesian topology MPI_Cart_sub keeps: the dimensions `remain` marks.
  static Topology CartSub(const Topology& parent, const int* remain);
  static Topology Graph(int nnodes, const int* index, const int* edges);
  static Topology DistGraph(int indegree, const int* sources, int outdegree, const int* destinations);

  // A distributed graph as the recording stores it: "in=1,3;out=2" and, when
  // weighted, ";in_weights=5,7;out_weights=1". Parse gives nullopt for text
  // that is not that form.
  std::string DistGraphText() const;
  static std::optional<Topology> ParseDistGraph(std::string_view text);

  int size() const;  // ranks the topology has (Cartesian: the product of dims)
  // Cartesian: the coordinates of `rank`, and the rank at `coords` (wrapped in
  // periodic dimensions); -1 when out of range.
  std::vector<int> Coords(int rank) const;
  int RankAt(const int* coords) const;
  // Cartesian: the source and destination of a shift of `rank` by `disp`
  // along `direction`; `proc_null` off a non-periodic edge.
  void Shift(int rank, int direction, int disp, int proc_null, int* source, int* dest) const;
  // Graph: the neighbours of `rank`.
  std::vector<int> Neighbors(int rank) const;
};

}  // namespace replay
