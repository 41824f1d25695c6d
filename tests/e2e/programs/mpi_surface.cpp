// mpi_surface: calls (nearly) every MPI function the recorder intercepts, with
// results that depend on every byte received, and prints one checksum per rank.
// Run with and without the preload: the output must not change.
//
// Usage: mpi_surface   (any number of ranks >= 2)
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

uint64_t g_sum = 1469598103934665603ull;

void Mix(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    g_sum ^= p[i];
    g_sum *= 1099511628211ull;
  }
}

template <typename T>
void Mix(const std::vector<T>& v) {
  Mix(v.data(), v.size() * sizeof(T));
}

void MixInt(int v) { Mix(&v, sizeof(v)); }

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank - 1 + size) % size;

  // Communicators.
  MPI_Comm dup, split, node, created, grouped, idup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Group world_group, even_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> evens;
  for (int r = 0; r < size; r += 2) evens.push_back(r);
  MPI_Group_incl(world_group, static_cast<int>(evens.size()), evens.data(), &even_group);
  MPI_Comm_create(MPI_COMM_WORLD, even_group, &created);
  grouped = MPI_COMM_NULL;
  if (rank % 2 == 0) MPI_Comm_create_group(MPI_COMM_WORLD, even_group, 7, &grouped);
  MPI_Request idup_req;
  MPI_Comm_idup(dup, &idup, &idup_req);
  MPI_Wait(&idup_req, MPI_STATUS_IGNORE);
  int dims[1] = {size}, periods[1] = {1};
  MPI_Comm cart, cart_sub;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  int remain[1] = {1};
  MPI_Cart_sub(cart, remain, &cart_sub);
  MPI_Comm graph;
  int sources[1] = {left}, dests[1] = {right};
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, sources, MPI_UNWEIGHTED, 1, dests, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &graph);
  // A weighted graph whose edges each rank names for others (right -> left,
  // weight rank + 1): its neighbours only MPI knows.
  MPI_Comm named;
  int edge_from[1] = {right}, degree[1] = {1}, target[1] = {left}, weight[1] = {rank + 1};
  MPI_Dist_graph_create(MPI_COMM_WORLD, 1, edge_from, degree, target, weight, MPI_INFO_NULL, 0, &named);
  int indeg = 0, outdeg = 0, weighted = 0;
  MPI_Dist_graph_neighbors_count(named, &indeg, &outdeg, &weighted);
  MixInt(indeg * 100 + outdeg * 10 + weighted);
  std::vector<int> nsrc(static_cast<size_t>(indeg)), nsw(static_cast<size_t>(indeg));
  std::vector<int> ndst(static_cast<size_t>(outdeg)), ndw(static_cast<size_t>(outdeg));
  MPI_Dist_graph_neighbors(named, indeg, nsrc.data(), nsw.data(), outdeg, ndst.data(), ndw.data());
  Mix(nsrc);
  Mix(nsw);
  Mix(ndst);
  Mix(ndw);
  std::vector<int> from_named(static_cast<size_t>(indeg), -1);
  MPI_Neighbor_allgather(&rank, 1, MPI_INT, from_named.data(), 1, MPI_INT, named);
  Mix(from_named);
  MPI_Comm_free(&named);
  MPI_Comm inter, merged;
  // Keys are -rank, so each half's local rank 0 is its highest world rank.
  int top_odd = (size - 1) % 2 == 1 ? size - 1 : size - 2, top_even = (size - 1) % 2 == 0 ? size - 1 : size - 2;
  MPI_Intercomm_create(split, 0, MPI_COMM_WORLD, rank % 2 == 0 ? top_odd : top_even, 99, &inter);
  MPI_Intercomm_merge(inter, rank % 2, &merged);
  int merged_rank = -1;
  MPI_Comm_rank(merged, &merged_rank);
  MixInt(merged_rank);

  // Point-to-point, every mode.
  std::vector<double> out(64), in(64);
  for (int i = 0; i < 64; ++i) out[i] = rank * 100 + i * 0.5;
  MPI_Sendrecv(out.data(), 64, MPI_DOUBLE, right, 1, in.data(), 64, MPI_DOUBLE, left, 1, dup, MPI_STATUS_IGNORE);
  Mix(in);
  std::vector<int> buf_attach(1 << 16);
  MPI_Buffer_attach(buf_attach.data(), static_cast<int>(buf_attach.size() * sizeof(int)));
  MPI_Request rq[4];
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 2, dup, &rq[0]);
  MPI_Bsend(out.data(), 64, MPI_DOUBLE, right, 2, dup);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 3, dup, &rq[0]);
  MPI_Ssend(out.data(), 64, MPI_DOUBLE, right, 3, dup);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 4, dup, &rq[0]);
  MPI_Barrier(dup);  // the receive is posted everywhere before the ready send
  MPI_Rsend(out.data(), 64, MPI_DOUBLE, right, 4, dup);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &rq[0]);
  MPI_Send(out.data(), 64, MPI_DOUBLE, right, 5, dup);
  MPI_Status st;
  MPI_Wait(&rq[0], &st);
  MixInt(st.MPI_SOURCE);
  Mix(in);
  std::vector<double> in2(64), in3(64);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 6, dup, &rq[0]);
  MPI_Irecv(in2.data(), 64, MPI_DOUBLE, left, 7, dup, &rq[1]);
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 6, dup, &rq[2]);
  MPI_Issend(out.data(), 64, MPI_DOUBLE, right, 7, dup, &rq[3]);
  int index = -1;
  MPI_Waitany(4, rq, &index, MPI_STATUS_IGNORE);
  int outcount = 0, indices[4];
  MPI_Waitsome(4, rq, &outcount, indices, MPI_STATUSES_IGNORE);
  MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
  Mix(in);
  Mix(in2);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 8, dup, &rq[0]);
  MPI_Ibsend(out.data(), 64, MPI_DOUBLE, right, 8, dup, &rq[1]);
  int flag = 0;
  while (!flag) MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 9, dup, &rq[0]);
  MPI_Barrier(dup);
  MPI_Irsend(out.data(), 64, MPI_DOUBLE, right, 9, dup, &rq[1]);
  flag = 0;
  while (!flag) MPI_Test(&rq[1], &flag, MPI_STATUS_IGNORE);
  flag = 0;
  index = -1;
  while (!flag) MPI_Testany(1, &rq[0], &index, &flag, MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 10, dup, &rq[0]);
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 10, dup, &rq[1]);
  int done = 0;
  while (done < 2) {
    MPI_Testsome(2, rq, &outcount, indices, MPI_STATUSES_IGNORE);
    if (outcount != MPI_UNDEFINED) done += outcount;
  }
  Mix(in);

  // Persistent requests.
  MPI_Request pr[2];
  MPI_Recv_init(in.data(), 64, MPI_DOUBLE, left, 11, dup, &pr[0]);
  MPI_Send_init(out.data(), 64, MPI_DOUBLE, right, 11, dup, &pr[1]);
  for (int round = 0; round < 3; ++round) {
    out[0] = round;
    MPI_Startall(2, pr);
    MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
    Mix(in);
  }
  MPI_Start(&pr[0]);
  MPI_Request extra;
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 11, dup, &extra);
  MPI_Wait(&pr[0], MPI_STATUS_IGNORE);
  MPI_Wait(&extra, MPI_STATUS_IGNORE);
  MPI_Request_free(&pr[0]);
  MPI_Request_free(&pr[1]);
  MPI_Request bsinit, ssinit, rsinit;
  MPI_Bsend_init(out.data(), 1, MPI_DOUBLE, right, 12, dup, &bsinit);
  MPI_Ssend_init(out.data(), 1, MPI_DOUBLE, right, 12, dup, &ssinit);
  MPI_Rsend_init(out.data(), 1, MPI_DOUBLE, right, 12, dup, &rsinit);
  MPI_Request_free(&bsinit);
  MPI_Request_free(&ssinit);
  MPI_Request_free(&rsinit);

  // Probes and matched receives.
  MPI_Send(out.data(), 64, MPI_DOUBLE, right, 13, dup);
  MPI_Probe(MPI_ANY_SOURCE, 13, dup, &st);
  MPI_Recv(in.data(), 64, MPI_DOUBLE, st.MPI_SOURCE, 13, dup, MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 14, dup, &rq[0]);
  flag = 0;
  while (!flag) MPI_Iprobe(left, 14, dup, &flag, &st);
  MPI_Recv(in.data(), 64, MPI_DOUBLE, left, 14, dup, MPI_STATUS_IGNORE);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Message msg;
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 15, dup, &rq[0]);
  MPI_Mprobe(left, 15, dup, &msg, &st);
  MPI_Mrecv(in.data(), 64, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  Mix(in);
  MPI_Isend(out.data(), 64, MPI_DOUBLE, right, 16, dup, &rq[0]);
  flag = 0;
  while (!flag) MPI_Improbe(left, 16, dup, &flag, &msg, &st);
  MPI_Imrecv(in.data(), 64, MPI_DOUBLE, &msg, &rq[1]);
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  Mix(in);
  MPI_Irecv(in.data(), 64, MPI_DOUBLE, left, 999, dup, &rq[0]);
  MPI_Cancel(&rq[0]);
  MPI_Wait(&rq[0], &st);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MixInt(cancelled);
  MPI_Sendrecv_replace(out.data(), 64, MPI_DOUBLE, right, 17, left, 17, dup, MPI_STATUS_IGNORE);
  Mix(out);
  MPI_Buffer_detach(&buf_attach, &outcount);

  // Collectives, blocking and non-blocking.
  std::vector<float> a(16), b(16 * size), c(16 * size);
  for (int i = 0; i < 16; ++i) a[i] = rank + i * 0.25f;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Bcast(a.data(), 16, MPI_FLOAT, 0, MPI_COMM_WORLD);
  Mix(a);
  for (int i = 0; i < 16; ++i) a[i] = rank + i * 0.25f;
  MPI_Reduce(a.data(), b.data(), 16, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) Mix(b.data(), 16 * sizeof(float));
  MPI_Allreduce(a.data(), b.data(), 16, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  Mix(b.data(), 16 * sizeof(float));
  MPI_Allreduce(MPI_IN_PLACE, a.data(), 16, MPI_FLOAT, MPI_SUM, dup);
  Mix(a);
  MPI_Gather(a.data(), 16, MPI_FLOAT, b.data(), 16, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (rank == 0) Mix(b);
  std::vector<int> counts(size), displs(size);
  for (int r = 0; r < size; ++r) {
    counts[r] = 1 + r % 16;
    displs[r] = 16 * r;
  }
  MPI_Gatherv(a.data(), counts[rank], MPI_FLOAT, b.data(), counts.data(), displs.data(), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (rank == 0) Mix(b);
  MPI_Allgather(a.data(), 16, MPI_FLOAT, b.data(), 16, MPI_FLOAT, MPI_COMM_WORLD);
  Mix(b);
  MPI_Allgatherv(a.data(), counts[rank], MPI_FLOAT, c.data(), counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
  Mix(c);
  MPI_Scatter(b.data(), 16, MPI_FLOAT, a.data(), 16, MPI_FLOAT, 0, MPI_COMM_WORLD);
  Mix(a);
  MPI_Scatterv(b.data(), counts.data(), displs.data(), MPI_FLOAT, a.data(), counts[rank], MPI_FLOAT, 0, MPI_COMM_WORLD);
  Mix(a);
  MPI_Alltoall(b.data(), 16, MPI_FLOAT, c.data(), 16, MPI_FLOAT, MPI_COMM_WORLD);
  Mix(c);
  std::vector<int> ones(size, 16), offs(size);
  for (int r = 0; r < size; ++r) offs[r] = 16 * r;
  MPI_Alltoallv(b.data(), ones.data(), offs.data(), MPI_FLOAT, c.data(), ones.data(), offs.data(), MPI_FLOAT,
                MPI_COMM_WORLD);
  Mix(c);
  std::vector<int> boffs(size);
  std::vector<MPI_Datatype> types(size, MPI_FLOAT);
  for (int r = 0; r < size; ++r) boffs[r] = 16 * r * static_cast<int>(sizeof(float));
  MPI_Alltoallw(b.data(), ones.data(), boffs.data(), types.data(), c.data(), ones.data(), boffs.data(),
                types.data(), MPI_COMM_WORLD);
  Mix(c);
  MPI_Reduce_scatter(b.data(), a.data(), ones.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  Mix(a);
  MPI_Reduce_scatter_block(b.data(), a.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  Mix(a);
  MPI_Scan(a.data(), c.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  Mix(c.data(), 16 * sizeof(float));
  MPI_Exscan(a.data(), c.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (rank > 0) Mix(c.data(), 16 * sizeof(float));

  MPI_Request nb[14];
  std::vector<float> nb_a(16, 1.0f + rank), nb_b(16 * size), nb_c(16 * size), nb_d(16), nb_e(16 * size),
      nb_f(16), nb_g(16), nb_h(16), nb_i(16 * size), nb_j(16 * size), nb_k(16 * size), nb_l(16), nb_m(16), nb_n(16);
  MPI_Ibarrier(MPI_COMM_WORLD, &nb[0]);
  MPI_Ibcast(nb_d.data(), 16, MPI_FLOAT, 0, dup, &nb[1]);
  MPI_Ireduce(nb_a.data(), nb_f.data(), 16, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, &nb[2]);
  MPI_Iallreduce(nb_a.data(), nb_g.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &nb[3]);
  MPI_Igather(nb_a.data(), 16, MPI_FLOAT, nb_b.data(), 16, MPI_FLOAT, 0, MPI_COMM_WORLD, &nb[4]);
  MPI_Igatherv(nb_a.data(), counts[rank], MPI_FLOAT, nb_c.data(), counts.data(), displs.data(), MPI_FLOAT, 0,
               MPI_COMM_WORLD, &nb[5]);
  MPI_Iallgather(nb_a.data(), 16, MPI_FLOAT, nb_e.data(), 16, MPI_FLOAT, MPI_COMM_WORLD, &nb[6]);
  MPI_Iallgatherv(nb_a.data(), counts[rank], MPI_FLOAT, nb_i.data(), counts.data(), displs.data(), MPI_FLOAT,
                  MPI_COMM_WORLD, &nb[7]);
  MPI_Iscatter(b.data(), 16, MPI_FLOAT, nb_h.data(), 16, MPI_FLOAT, 0, MPI_COMM_WORLD, &nb[8]);
  MPI_Iscatterv(b.data(), counts.data(), displs.data(), MPI_FLOAT, nb_l.data(), counts[rank], MPI_FLOAT, 0,
                MPI_COMM_WORLD, &nb[9]);
  MPI_Ialltoall(b.data(), 16, MPI_FLOAT, nb_j.data(), 16, MPI_FLOAT, MPI_COMM_WORLD, &nb[10]);
  MPI_Ialltoallv(b.data(), ones.data(), offs.data(), MPI_FLOAT, nb_k.data(), ones.data(), offs.data(), MPI_FLOAT,
                 MPI_COMM_WORLD, &nb[11]);
  MPI_Iscan(nb_a.data(), nb_m.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &nb[12]);
  MPI_Ireduce_scatter_block(b.data(), nb_n.data(), 16, MPI_FLOAT, MPI_SUM, dup, &nb[13]);
  MPI_Waitall(14, nb, MPI_STATUSES_IGNORE);
  for (auto* v : {&nb_d, &nb_g, &nb_e, &nb_i, &nb_h, &nb_l, &nb_j, &nb_k, &nb_m, &nb_n}) Mix(*v);
  if (rank == 0) {
    Mix(nb_b);
    Mix(nb_c);
    Mix(nb_f);
  }
  MPI_Request more[4];
  std::vector<float> ia(16 * size), ib(16), ic(16);
  MPI_Ialltoallw(b.data(), ones.data(), boffs.data(), types.data(), ia.data(), ones.data(), boffs.data(),
                 types.data(), MPI_COMM_WORLD, &more[0]);
  MPI_Ireduce_scatter(b.data(), ib.data(), ones.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &more[1]);
  MPI_Iexscan(nb_a.data(), ic.data(), 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &more[2]);
  MPI_Ibarrier(split, &more[3]);
  MPI_Waitall(4, more, MPI_STATUSES_IGNORE);
  Mix(ia);
  Mix(ib);
  if (rank > 0) Mix(ic);

  // Neighbourhood collectives on the ring graph and the cartesian ring.
  std::vector<int> nsend(4, rank), nrecv(8, -1);
  MPI_Neighbor_allgather(nsend.data(), 1, MPI_INT, nrecv.data(), 1, MPI_INT, graph);
  MixInt(nrecv[0]);
  MPI_Neighbor_alltoall(nsend.data(), 1, MPI_INT, nrecv.data(), 1, MPI_INT, cart);
  MixInt(nrecv[0] + nrecv[1]);
  int one = 1, zero = 0;
  MPI_Neighbor_allgatherv(nsend.data(), 1, MPI_INT, nrecv.data(), &one, &zero, MPI_INT, graph);
  MPI_Neighbor_alltoallv(nsend.data(), &one, &zero, MPI_INT, nrecv.data(), &one, &zero, MPI_INT, graph);
  MPI_Aint azero = 0;
  MPI_Datatype tint = MPI_INT;
  MPI_Neighbor_alltoallw(nsend.data(), &one, &azero, &tint, nrecv.data(), &one, &azero, &tint, graph);
  MixInt(nrecv[0]);
  MPI_Request nr[5];
  MPI_Ineighbor_allgather(nsend.data(), 1, MPI_INT, nrecv.data(), 1, MPI_INT, graph, &nr[0]);
  MPI_Wait(&nr[0], MPI_STATUS_IGNORE);
  MPI_Ineighbor_alltoall(nsend.data(), 1, MPI_INT, nrecv.data(), 1, MPI_INT, graph, &nr[1]);
  MPI_Wait(&nr[1], MPI_STATUS_IGNORE);
  MPI_Ineighbor_allgatherv(nsend.data(), 1, MPI_INT, nrecv.data(), &one, &zero, MPI_INT, graph, &nr[2]);
  MPI_Wait(&nr[2], MPI_STATUS_IGNORE);
  MPI_Ineighbor_alltoallv(nsend.data(), &one, &zero, MPI_INT, nrecv.data(), &one, &zero, MPI_INT, graph, &nr[3]);
  MPI_Wait(&nr[3], MPI_STATUS_IGNORE);
  MPI_Ineighbor_alltoallw(nsend.data(), &one, &azero, &tint, nrecv.data(), &one, &azero, &tint, graph, &nr[4]);
  MPI_Wait(&nr[4], MPI_STATUS_IGNORE);
  MixInt(nrecv[0]);

  // A derived datatype: every other double of 32.
  MPI_Datatype strided;
  MPI_Type_vector(16, 1, 2, MPI_DOUBLE, &strided);
  MPI_Type_commit(&strided);
  std::vector<double> sv(32);
  for (int i = 0; i < 32; ++i) sv[i] = rank == 0 ? i : -1;
  MPI_Bcast(sv.data(), 1, strided, 0, MPI_COMM_WORLD);
  Mix(sv);
  MPI_Type_free(&strided);

  // One-sided.
  std::vector<int> window(size, 0);
  MPI_Win win;
  MPI_Win_create(window.data(), size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win);
  int value = rank + 1;
  MPI_Put(&value, 1, MPI_INT, right, rank, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  int got = 0;
  MPI_Get(&got, 1, MPI_INT, left, left, 1, MPI_INT, win);
  MPI_Accumulate(&value, 1, MPI_INT, right, rank, 1, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(0, win);
  Mix(window);
  MixInt(got);
  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
  int fetched = 0;
  MPI_Fetch_and_op(&value, &fetched, MPI_INT, right, 0, MPI_NO_OP, win);
  MPI_Win_unlock(right, win);
  MixInt(fetched);
  // Request-based: a read of the left neighbour's window, complete at its wait.
  MPI_Win_lock_all(0, win);
  MPI_Request rma[2];
  int read_back[2] = {-1, -1};
  MPI_Rget(read_back, 2, MPI_INT, left, 0, 2, MPI_INT, win, &rma[0]);
  MPI_Wait(&rma[0], MPI_STATUS_IGNORE);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);  // every read done before any rank writes
  MPI_Win_lock_all(0, win);
  MPI_Rput(&value, 1, MPI_INT, rank, 0, 1, MPI_INT, win, &rma[1]);
  MPI_Wait(&rma[1], MPI_STATUS_IGNORE);
  MPI_Win_unlock_all(win);
  MixInt(read_back[0] * 1000 + read_back[1]);
  MPI_Win_free(&win);

  for (MPI_Comm* cm : {&dup, &split, &node, &idup, &cart, &cart_sub, &graph, &inter, &merged}) MPI_Comm_free(cm);
  if (created != MPI_COMM_NULL) MPI_Comm_free(&created);
  if (grouped != MPI_COMM_NULL) MPI_Comm_free(&grouped);
  MPI_Group_free(&even_group);
  MPI_Group_free(&world_group);

  std::printf("rank %d checksum %016llx provided %d\n", rank, static_cast<unsigned long long>(g_sum), provided);
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
