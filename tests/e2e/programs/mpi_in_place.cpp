// mpi_in_place: every collective that may be called in place (MPI_IN_PLACE),
// first with separate buffers, then in place with the same data where the
// standard puts it, so that each pair sends and receives the same bytes. A
// recording must describe both calls of a pair alike (what they send, how
// much, the counts they list). Prints one checksum per rank.
//
// Usage: mpi_in_place   (any number of ranks >= 2)
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

uint64_t g_sum = 1469598103934665603ull;

template <typename T>
void Mix(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(T); ++i) {
    g_sum ^= p[i];
    g_sum *= 1099511628211ull;
  }
}

// `n` values that depend on the rank and a salt.
std::vector<double> Values(int rank, int n, int salt) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = rank * 100.0 + i + salt * 0.5;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const MPI_Comm w = MPI_COMM_WORLD;
  const int root = size - 1;
  const int k = 3;  // elements per rank's block
  const size_t n = static_cast<size_t>(size), kk = static_cast<size_t>(k), me = static_cast<size_t>(rank);
  std::vector<int> counts(n), displs(n);
  for (size_t r = 0; r < n; ++r) {
    counts[r] = static_cast<int>(r % 2 + 1);
    displs[r] = r == 0 ? 0 : displs[r - 1] + counts[r - 1];
  }
  const int total = displs[n - 1] + counts[n - 1];
  std::vector<MPI_Datatype> types(n, MPI_DOUBLE);

  {  // Reduce and Allreduce, Scan, Exscan: the input in the receive buffer.
    std::vector<double> in = Values(rank, k, 1), out(kk);
    MPI_Reduce(in.data(), out.data(), k, MPI_DOUBLE, MPI_SUM, root, w);
    std::vector<double> io = in;
    MPI_Reduce(rank == root ? MPI_IN_PLACE : io.data(), rank == root ? io.data() : out.data(), k, MPI_DOUBLE, MPI_SUM,
               root, w);
    Mix(io);
    MPI_Allreduce(in.data(), out.data(), k, MPI_DOUBLE, MPI_SUM, w);
    io = in;
    MPI_Allreduce(MPI_IN_PLACE, io.data(), k, MPI_DOUBLE, MPI_SUM, w);
    Mix(io);
    MPI_Scan(in.data(), out.data(), k, MPI_DOUBLE, MPI_SUM, w);
    io = in;
    MPI_Scan(MPI_IN_PLACE, io.data(), k, MPI_DOUBLE, MPI_SUM, w);
    Mix(io);
  }
  {  // Gather and Gatherv: the root's block already in place.
    std::vector<double> in = Values(rank, k, 2), out(kk * n);
    MPI_Gather(in.data(), k, MPI_DOUBLE, out.data(), k, MPI_DOUBLE, root, w);
    std::vector<double> io(kk * n);
    for (size_t i = 0; i < kk; ++i) io[me * kk + i] = in[i];
    MPI_Gather(rank == root ? MPI_IN_PLACE : in.data(), k, MPI_DOUBLE, io.data(), k, MPI_DOUBLE, root, w);
    Mix(io);
    std::vector<double> vin = Values(rank, counts[me], 3), vout(static_cast<size_t>(total));
    MPI_Gatherv(vin.data(), counts[me], MPI_DOUBLE, vout.data(), counts.data(), displs.data(), MPI_DOUBLE, root, w);
    std::vector<double> vio(static_cast<size_t>(total));
    for (int i = 0; i < counts[me]; ++i) vio[static_cast<size_t>(displs[me] + i)] = vin[static_cast<size_t>(i)];
    MPI_Gatherv(rank == root ? MPI_IN_PLACE : vin.data(), counts[me], MPI_DOUBLE, vio.data(), counts.data(),
                displs.data(), MPI_DOUBLE, root, w);
    Mix(vio);
  }
  {  // Allgather and Allgatherv: every rank's block already in place.
    std::vector<double> in = Values(rank, k, 4), out(kk * n), io(kk * n);
    MPI_Allgather(in.data(), k, MPI_DOUBLE, out.data(), k, MPI_DOUBLE, w);
    for (size_t i = 0; i < kk; ++i) io[me * kk + i] = in[i];
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, io.data(), k, MPI_DOUBLE, w);
    Mix(io);
    std::vector<double> vin = Values(rank, counts[me], 5), vout(static_cast<size_t>(total)),
                        vio(static_cast<size_t>(total));
    MPI_Allgatherv(vin.data(), counts[me], MPI_DOUBLE, vout.data(), counts.data(), displs.data(), MPI_DOUBLE, w);
    for (int i = 0; i < counts[me]; ++i) vio[static_cast<size_t>(displs[me] + i)] = vin[static_cast<size_t>(i)];
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, vio.data(), counts.data(), displs.data(), MPI_DOUBLE, w);
    Mix(vio);
  }
  {  // Scatter and Scatterv: the root keeps its own block.
    std::vector<double> in = Values(rank, k * size, 6), out(kk);
    MPI_Scatter(in.data(), k, MPI_DOUBLE, out.data(), k, MPI_DOUBLE, root, w);
    Mix(out);
    MPI_Scatter(in.data(), k, MPI_DOUBLE, rank == root ? MPI_IN_PLACE : out.data(), k, MPI_DOUBLE, root, w);
    Mix(out);
    std::vector<double> vin = Values(rank, total, 7), vout(static_cast<size_t>(counts[me]));
    MPI_Scatterv(vin.data(), counts.data(), displs.data(), MPI_DOUBLE, vout.data(), counts[me], MPI_DOUBLE, root, w);
    Mix(vout);
    MPI_Scatterv(vin.data(), counts.data(), displs.data(), MPI_DOUBLE, rank == root ? MPI_IN_PLACE : vout.data(),
                 counts[me], MPI_DOUBLE, root, w);
    Mix(vout);
  }
  {  // Alltoall, Alltoallv, Alltoallw: what is sent starts in the receive buffer.
    std::vector<double> in = Values(rank, k * size, 8), out(kk * n), io = in;
    MPI_Alltoall(in.data(), k, MPI_DOUBLE, out.data(), k, MPI_DOUBLE, w);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, io.data(), k, MPI_DOUBLE, w);
    Mix(io);
    // Counts symmetric in the pair of ranks, as in place requires: what this
    // rank sends to r is what r sends to it.
    std::vector<int> pair(n), pair_displs(n), pair_bytes(n);
    for (size_t r = 0; r < n; ++r) {
      pair[r] = static_cast<int>((me + r) % 2 + 1);
      pair_displs[r] = r == 0 ? 0 : pair_displs[r - 1] + pair[r - 1];
      pair_bytes[r] = pair_displs[r] * static_cast<int>(sizeof(double));
    }
    const int pair_total = pair_displs[n - 1] + pair[n - 1];
    std::vector<double> vin = Values(rank, pair_total, 9), vout(static_cast<size_t>(pair_total)), vio = vin;
    MPI_Alltoallv(vin.data(), pair.data(), pair_displs.data(), MPI_DOUBLE, vout.data(), pair.data(),
                  pair_displs.data(), MPI_DOUBLE, w);
    MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, vio.data(), pair.data(), pair_displs.data(),
                  MPI_DOUBLE, w);
    Mix(vio);
    vio = vin;
    MPI_Alltoallw(vin.data(), pair.data(), pair_bytes.data(), types.data(), vout.data(), pair.data(),
                  pair_bytes.data(), types.data(), w);
    MPI_Alltoallw(MPI_IN_PLACE, nullptr, nullptr, nullptr, vio.data(), pair.data(), pair_bytes.data(), types.data(),
                  w);
    Mix(vio);
  }
  {  // Reduce_scatter and Reduce_scatter_block: the whole input in the receive buffer.
    std::vector<double> in = Values(rank, total, 10), out(static_cast<size_t>(counts[me])), io = in;
    MPI_Reduce_scatter(in.data(), out.data(), counts.data(), MPI_DOUBLE, MPI_SUM, w);
    MPI_Reduce_scatter(MPI_IN_PLACE, io.data(), counts.data(), MPI_DOUBLE, MPI_SUM, w);
    Mix(io);
    std::vector<double> bin = Values(rank, k * size, 11), bout(kk), bio = bin;
    MPI_Reduce_scatter_block(bin.data(), bout.data(), k, MPI_DOUBLE, MPI_SUM, w);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, bio.data(), k, MPI_DOUBLE, MPI_SUM, w);
    Mix(bio);
  }
  std::printf("rank %d checksum %016llx\n", rank, static_cast<unsigned long long>(g_sum));
  MPI_Finalize();
  return 0;
}
