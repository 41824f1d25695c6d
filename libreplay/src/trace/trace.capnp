# The replay trace schema. Prose specification: docs/trace-format.md.
#
# Rules for changing this file (see "Evolving the format" in docs/trace-format.md):
# - never renumber, retype or remove a field; add fields with the next ordinal;
# - a new field's default must mean "not recorded" so that old traces read correctly;
# - a change that an older reader would silently misread bumps kMinReaderEpoch in
#   format.h; a change to block framing bumps kFormatEpoch.
# Invariants are written beside each field. "ns" is nanoseconds; "rank" without
# qualification is a rank within the event's communicator.

@0x820cbe0798ec388f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("replay::schema");

# ---------------------------------------------------------------------------
# Job and rank headers

enum Level {
  meta @0;   # calls and arguments only
  hash @1;   # + content fingerprints of send and receive buffers
  data @2;   # + received bytes in the payload stream
}

struct KeyValue {
  key @0 :Text;    # non-empty
  value @1 :Text;
}

struct Module {
  path @0 :Text;     # as the dynamic loader reports it
  base @1 :UInt64;   # load address in the recorded process
  size @2 :UInt64;   # bytes of address space from base
}

# `manifest` at the top of a trace directory. One per recording.
struct JobManifest {
  traceUuid @0 :Data;          # 16 bytes; equal to every rank header's traceUuid
  formatEpoch @1 :UInt32;      # epoch of the writer that created the manifest
  minReaderEpoch @2 :UInt32;   # a reader whose epoch is lower must refuse the trace
  createdRealtimeNs @3 :Int64; # CLOCK_REALTIME when the recording started
  command @4 :List(Text);      # what was recorded (argv of `replay record`'s COMMAND, or the first rank's command line)
  level @5 :Level;
  worldSize @6 :Int32;         # ranks expected, or -1 when the launcher did not say
  recorder @7 :Text;           # "replay <version>"
  host @8 :Text;               # host that created the manifest
}

# `header` in each rank directory. Written when the rank starts recording and
# rewritten atomically (write to a temporary name, rename) when it closes.
struct RankHeader {
  traceUuid @0 :Data;          # 16 bytes; equal across the ranks of one recording
  formatEpoch @1 :UInt32;
  minReaderEpoch @2 :UInt32;
  rank @3 :Int32;              # world rank from the launcher's variables; -1 if unknown when opened (see Info "mpi.world_rank")
  worldSize @4 :Int32;         # -1 if unknown
  host @5 :Text;
  pid @6 :Int32;
  startRealtimeNs @7 :Int64;   # CLOCK_REALTIME when the rank opened its trace
  startMonotonicNs @8 :Int64;  # CLOCK_MONOTONIC at the same instant; event times count from here
  level @9 :Level;
  versions @10 :List(KeyValue);     # "replay", "mpi", "nccl", "cuda.driver", "libc", ...
  environment @11 :List(KeyValue);  # launcher, rank and communication settings (REPLAY_ENV_PREFIXES)
  commandLine @12 :List(Text);
  cores @13 :UInt32;                # online CPUs
  apiNames @14 :List(Text);         # Event.op.api and friends index this list; fixed for the life of the rank
  modules @15 :List(Module);        # loaded objects, to resolve Event.callSite offline
  state @16 :RankState;
  closeReason @17 :CloseReason;     # meaningful when state == complete
  closeRealtimeNs @18 :Int64;       # 0 while open
  eventCount @19 :UInt64;           # events written, set at close
  droppedEvents @20 :UInt64;        # events lost to a full ring (each loss is also a Drop event)
  recordingError @21 :Text;         # why recording stopped early, if it did; empty otherwise
  executable @22 :Text;             # the program the kernel ran, symlinks resolved (/proc/self/exe); empty if not recorded
  buildId @23 :Text;                # its GNU build id, lowercase hex; empty if it has none
  unrecordedCalls @24 :UInt64;      # calls the program made unrecorded: after recording stopped on an error, or with no ring slot or disk room
}

enum RankState {
  open @0;      # the rank is recording, or died before closing (the reader tells which)
  complete @1;  # closed; every event is in the events stream
}

enum CloseReason {
  none @0;       # still open
  exit @1;       # process exit (atexit) after or without MPI_Finalize
  finalize @2;   # MPI_Finalize / last communicator destroyed
  signal @3;     # a fatal signal; see the Signal event
  abort @4;      # MPI_Abort, ncclCommAbort on the last communicator, or abort()
  exec @5;       # the process replaced itself with execve
  failed @6;     # recording itself failed (full disk, I/O error); see recordingError
}

# ---------------------------------------------------------------------------
# Events

enum OpKind {
  other @0;
  init @1;            # MPI_Init(_thread)
  finalize @2;
  abort @3;
  barrier @4;
  bcast @5;
  reduce @6;
  allreduce @7;
  gather @8;
  gatherv @9;
  allgather @10;
  allgatherv @11;
  scatter @12;
  scatterv @13;
  alltoall @14;
  alltoallv @15;
  alltoallw @16;
  reduceScatter @17;
  reduceScatterBlock @18;
  scan @19;
  exscan @20;
  neighborAllgather @21;
  neighborAllgatherv @22;
  neighborAlltoall @23;
  neighborAlltoallv @24;
  neighborAlltoallw @25;
  send @26;           # any send mode; `flags` says which
  recv @27;
  sendrecv @28;
  probe @29;          # probe / mprobe family
  mrecv @30;
  start @31;          # MPI_Start(all) of a persistent request
  cancel @32;
  commCreate @33;     # a communicator-creating call (dup, split, ncclCommInitRank, ...)
  commFree @34;
  rma @35;            # one-sided call, recorded as a call only
  wait @36;           # completion calls (wait/test family)
}

enum DataType {
  unknown @0;
  int8 @1;
  uint8 @2;
  int16 @3;
  uint16 @4;
  int32 @5;
  uint32 @6;
  int64 @7;
  uint64 @8;
  float16 @9;
  bfloat16 @10;
  float32 @11;
  float64 @12;
  float128 @13;       # long double
  complex64 @14;
  complex128 @15;
  byte @16;           # untyped bytes (MPI_BYTE, MPI_PACKED)
  bool @17;
  fp8e4m3 @18;
  fp8e5m2 @19;
  pair @20;           # MPI_FLOAT_INT and friends (MINLOC/MAXLOC)
  derived @21;        # a derived MPI datatype; see dtypeSig
}

enum RedOp {
  none @0;
  sum @1;
  prod @2;
  max @3;
  min @4;
  avg @5;
  land @6;
  lor @7;
  lxor @8;
  band @9;
  bor @10;
  bxor @11;
  minloc @12;
  maxloc @13;
  replace @14;
  custom @15;          # user-defined (MPI_Op_create, ncclRedOpCreatePreMulSum)
}

enum EntropySource {
  getrandom @0;
  getentropy @1;
  devUrandom @2;      # read(2) from /dev/urandom
  devRandom @3;       # read(2) from /dev/random
  randomDevice @4;    # std::random_device
  clockGettime @5;    # clock_gettime: flags = the clock id, bytes = the struct timespec
  gettimeofday @6;    # bytes = the struct timeval
  time @7;            # time(2): bytes = the time_t returned
  getrusage @8;       # flags = who, bytes = the struct rusage
  times @9;           # bytes = the struct tms; rc = the clock_t returned
  clock @10;          # clock(3): no bytes; rc = the clock_t returned
}

enum SeedSource {
  srand @0;
  srandom @1;
  randR @2;           # the seed value passed to the first rand_r call on a state
  initstate @3;
  curand @4;          # cuRAND generator seed
  curandOffset @5;
  other @6;
}

enum CudaOp {
  streamCreate @0;
  streamDestroy @1;
  eventCreate @2;
  eventDestroy @3;
  eventRecord @4;
  streamWaitEvent @5;
  eventSynchronize @6;
  eventQuery @7;
  streamSynchronize @8;
  streamQuery @9;
  ctxSynchronize @10;
  captureBegin @11;
  captureEnd @12;
  graphInstantiate @13;
  graphLaunch @14;
  memcpyAsync @15;
  memsetAsync @16;
  memcpy @17;         # a copy that waits (cuMemcpy*, without Async), on the default stream
  kernels @18;        # count only: kernels launched on `stream` since the previous record
  setDevice @19;      # the thread's current context changed (cuCtxSetCurrent)
}

enum ErrorSource {
  mpi @0;
  nccl @1;
  cuda @2;
  recorder @3;
}

# Fingerprint of a buffer: xxHash3-64 over its bytes in memory order (derived MPI
# datatypes: over the packed bytes) plus NaN and infinity counts for floating
# types. Valid only when `hash` != 0 or the owning flags say so.

# One events block. Two layouts share this struct:
# - epochs 1 and 2: every event is an element of `events`;
# - epoch 3: `events` is empty; `kinds` says which kind each event is, and the
#   events of one kind are the elements of that kind's list (`ops`, `rets`, ...),
#   in index order. A record is sized to its kind (an Event carries the data
#   section of its largest union member), and what does not compress (time
#   deltas, fingerprints) sits in columns of its own, away from the fields that
#   repeat from one event to the next: about half the bytes reach the
#   compressor, and it finds longer matches in them.
# A reader tells the layouts apart by `events`: writers of epochs 1 and 2 always
# set it (to an empty list for a block of no events), epoch 3 writers never do.
# A block with `events` set and any field of epoch 3 is damage.
struct EventBlock {
  firstIndex @0 :UInt64;   # index of the block's first event, less that event's index gap
  baseTimeNs @1 :Int64;    # reference for the first event's time delta
  events @2 :List(Event);  # epochs 1-2: in index order; each element at least the 20 data words of the first Event schema (readers refuse smaller). Epoch 3: empty.
  # Time deltas as one column (epoch 2 and later writers): when present it
  # holds one value per event, which replaces that event's timeDeltaNs (then
  # 0). A column of small, similar numbers compresses far better than the same
  # numbers spread over the events. Epoch 3 writers use it only for a block
  # with a delta outside the range of Int32, and `timeDeltas32` otherwise.
  timeDeltas @3 :List(Int64);
  # When true (epoch 2 and later writers), the `seq` of op, ret and completion
  # events is stored as the difference (modulo 2^64) from the last non-zero
  # `seq` of an op, ret or completion on the same `comm` earlier in this block,
  # looked up in a 64-entry direct-mapped table (slot = (comm *
  # 0x9E3779B97F4A7C15) >> 58; a slot holding another comm counts as 0). A
  # block stays decodable alone.
  seqDelta @4 :Bool;

  # Epoch 3. Every list below but `kinds` may be empty where the block has no
  # use for it.
  # One element per event, in index order: the event's kind. The n-th event of
  # kind K (counting from 0 within the block) is element n of K's list, so each
  # list holds exactly as many elements as `kinds` names its kind (readers
  # refuse a block where they disagree). A kind this reader does not know
  # keeps its place in the index sequence and is read as an unknown event.
  # At most kMaxBlockEvents (format.h) events.
  kinds @5 :List(EventKind);
  # Empty when every event's index gap is 0 (the usual case); otherwise one
  # per event, with Event.indexGap's meaning: index = previous index in the
  # block + 1 + gap (the first event: firstIndex + gap).
  indexGaps @6 :List(Int64);
  # One per event when every time delta of the block fits in an Int32, and
  # `timeDeltas` is then empty; otherwise empty. time = previous event's time
  # in the block + delta (the first event: baseTimeNs + delta), modulo 2^64.
  timeDeltas32 @7 :List(Int32);
  # The fingerprint hashes that op, ret and completion events carry by their
  # flags, in index order: an op's sendHash when it has flag hasSendHash; a
  # ret's recvHash when hasRecvHash; a completion's recvHash when
  # hasRecvHash, then its sendHash when hasSendHash; in an epoch 4 block
  # (packed records), then also a ret's or completion's payloadHash when its
  # payloadSize is not 0. Nothing else: the random bytes of every hash sit
  # together, which the compressor passes over fastest (epoch 4 writers put
  # the column last and compress it apart). Readers refuse a column with
  # values to spare or too few.
  fingerprints @8 :List(UInt64);
  ops @9 :List(OpRecord);
  rets @10 :List(RetRecord);
  completions @11 :List(CompletionRecord);
  tests @12 :List(TestRecord);
  commCreates @13 :List(CommCreateRecord);
  commFrees @14 :List(CommFreeRecord);
  groups @15 :List(GroupRecord);
  entropies @16 :List(EntropyRecord);
  seeds @17 :List(SeedRecord);
  cudas @18 :List(CudaRecord);
  marks @19 :List(MarkRecord);
  errors @20 :List(ErrorRecord);
  signals @21 :List(SignalRecord);
  drops @22 :List(DropRecord);
  infos @23 :List(InfoRecord);

  # Epoch 4. The op, ret, completion, test and CUDA records, packed: each
  # holds only what differs from the record before it at the same call site,
  # so that a training loop's repeated call takes a byte or two before
  # compression. A kind whose packed column is present keeps its record list
  # above empty.
  #
  # A packed column is a varint F (LEB128, at most 61): the number of fields
  # each record's mask covers. Then one record per event of the kind, in index
  # order:
  #   - mask, a varint. Bit 0: the call site differs from the previous record's
  #     of the kind in this block (the first compares with 0). Bit 1: the
  #     thread differs from the reference's. Bit 2: a list follows. Bit 3 + i:
  #     field i differs from the reference's. No other bit is set.
  #   - with bit 0, the call site as zigzag varint of its difference from the
  #     previous record's.
  #   - the reference: the last record of the kind in this block at the same
  #     call site, found in a 64-entry direct-mapped table (slot = (callSite *
  #     0x9E3779B97F4A7C15) >> 58; a slot holding another call site, or none,
  #     gives a record of zeros).
  #   - with bit 1, the thread as zigzag varint of its difference from the
  #     reference's; then, for each field bit, in field order, the field as
  #     zigzag varint of its difference from the reference's (fields widened
  #     to 64 bits, signed ones by sign, modulo 2^64).
  #   - with bit 2, the list (an op's `counts`, a test's `indices`): a varint
  #     length, then each value as zigzag varint.
  # The record then becomes its slot's reference. In ops, rets and
  # completions, `seq` is stored as with `seqDelta`, and a hash its flag
  # announces is in `fingerprints` (its field 0), before the comparison; so is
  # a packed ret's or completion's `payloadHash` when its `payloadSize` is not
  # 0, after the event's other hashes. No bytes follow the last record.
  #
  # Field order is the order of docs/trace-format.md's packed field tables
  # (the body's fields in libreplay/include/replay/event.h); new fields are
  # only ever added at the end, and a reader skips the fields beyond those it
  # knows, so a field added later needs no new epoch.
  packedOps @24 :Data;
  packedRets @25 :Data;
  packedCompletions @26 :Data;
  packedTests @27 :Data;
  packedCudas @28 :Data;
  # Epoch 4. The time deltas, replacing `timeDeltas32` and `timeDeltas`
  # (then both empty): per event, in index order, a zigzag varint of its
  # delta (as `timeDeltas32` defines it) less the delta of the last event in
  # this block of the same kind at the same call site, found in a 64-entry
  # direct-mapped table (slot = ((callSite + kind) * 0x9E3779B97F4A7C15) >>
  # 58, kind as EventKind; a slot holding another pair, or none, gives 0),
  # modulo 2^64. A kind added after epoch 4 (after `info`) is looked up with
  # call site 0, so that readers that do not know it keep the times. A loop's events come at steady intervals, so what remains is
  # their jitter, in a byte or two. No bytes follow the last event's.
  timeDeltasPacked @29 :Data;
  # When true, `timeDeltasPacked` holds each delta itself (zigzag varint),
  # without the prediction: short intervals that often repeat exactly
  # compress better so.
  timeDeltasUnpredicted @30 :Bool;
}

# The kinds of events, in the order of Event's union. A new kind is added at
# the end, here, to the union and as a list of EventBlock.
enum EventKind {
  op @0;
  ret @1;
  completion @2;
  test @3;
  commCreate @4;
  commFree @5;
  group @6;
  entropy @7;
  seed @8;
  cuda @9;
  mark @10;
  error @11;
  signal @12;
  drop @13;
  info @14;
}

struct Event {
  # Index: per-rank, dense from 0 in append order across all threads.
  # index = previous event's index in this block + 1 + indexGap
  # (the first event of a block: firstIndex + indexGap). Usually 0.
  indexGap @0 :Int64;
  # time (ns since RankHeader.startMonotonicNs) = previous event's time in the
  # block + timeDeltaNs (the first event: baseTimeNs + timeDeltaNs). Threads
  # interleave, so deltas may be negative; the sums wrap modulo 2^64, as the
  # indices' do.
  timeDeltaNs @1 :Int64;
  thread @2 :UInt32;        # per-rank thread number; 0 is the first thread that recorded
  callSite @3 :UInt64;      # return address into the caller of the intercepted function; 0 if unknown

  union {
    # A communication call was entered. Appended before the real call, so a rank
    # that blocks inside it still shows it.
    op :group {
      api @4 :UInt16;          # index into RankHeader.apiNames
      kind @5 :OpKind;
      flags @6 :UInt16;        # OpFlags in format.h
      comm @7 :UInt64;         # job-wide communicator identity (CommCreate.comm); 0 for calls without one
      seq @8 :UInt64;          # per-communicator collective sequence number, from 1; 0 for point-to-point
      peerSeq @9 :UInt64;      # point-to-point: sequence number per (comm, peer, direction), from 1
      count @10 :Int64;        # elements (v-collectives: this rank's total, per-rank values in `counts`)
      dtype @11 :DataType;
      dtypeSize @12 :UInt32;   # bytes per element (derived types: packed size)
      dtypeSig @13 :UInt64;    # derived types: hash of the type signature (constructors, counts, basic types; not byte displacements); 0 for predefined
      redop @14 :RedOp;
      root @15 :Int32;         # rooted collectives; -1 otherwise
      peer @16 :Int32;         # point-to-point peer; -1 any source, -2 MPI_PROC_NULL, -3 none
      tag @17 :Int32;          # -1 any tag; 0 where not applicable
      sendBuf @18 :UInt64;     # address in the recorded process
      recvBuf @19 :UInt64;
      stream @20 :UInt64;      # CUDA stream handle for NCCL ops; 0 otherwise
      request @21 :UInt64;     # non-blocking ops: per-rank request id (from 1), completed by a Completion
      group @22 :UInt32;       # NCCL group id the call belongs to; 0 outside a group
      bytes @23 :UInt64;       # bytes this rank sends (or contributes)
      sendHash @24 :UInt64;    # fingerprint of the send buffer before the call (flag hasSendHash)
      sendNan @25 :UInt32;
      sendInf @26 :UInt32;
      # v-collectives: the counts arguments as passed, empty otherwise:
      # recvcounts (gatherv at its root, allgatherv, reduce_scatter), sendcounts
      # (scatterv at its root), sendcounts then recvcounts (alltoallv, alltoallw).
      counts @27 :List(Int64);
      # The receiving side where it differs from the sending one.
      recvPeer @118 :Int32 = -3;   # sendrecv: the source asked for (-1 any); -3 none
      recvTag @119 :Int32;         # sendrecv: the tag asked for
      recvCount @120 :Int64;       # elements received per peer (gather/allgather/scatter/alltoall), or sendrecv's
      recvDtype @121 :DataType;    # when not the send type
      recvDtypeSize @122 :UInt32;
    }

    # The call returned. Same thread as its `op`, next event of that thread for
    # the same call.
    ret :group {
      api @28 :UInt16;
      rc @29 :Int32;           # the real function's return code, as the application saw it
      comm @30 :UInt64;
      seq @31 :UInt64;
      peerSeq @32 :UInt64;
      request @33 :UInt64;     # non-blocking: the request id issued (0 if none)
      recvHash @34 :UInt64;    # fingerprint of received data after a blocking call (flag hasRecvHash)
      recvNan @35 :UInt32;
      recvInf @36 :UInt32;
      source @37 :Int32;       # receives and probes: matched source rank; -3 otherwise
      tag @38 :Int32;          # receives and probes: matched tag
      recvCount @39 :Int64;    # receives: elements received (MPI_Get_count); -1 otherwise
      payloadHash @40 :UInt64; # level data: payload stream key of the received bytes; 0 none
      payloadSize @41 :UInt64;
      flags @42 :UInt16;       # OpFlags
    }

    # A non-blocking operation (request) or a GPU operation completed.
    completion :group {
      request @43 :UInt64;     # the op's request id; GPU ops: their request id too
      api @44 :UInt16;         # the call that observed completion (MPI_Wait, a CUDA event poll, ...)
      comm @45 :UInt64;
      seq @46 :UInt64;
      peerSeq @47 :UInt64;
      rc @48 :Int32;
      recvHash @49 :UInt64;
      recvNan @50 :UInt32;
      recvInf @51 :UInt32;
      source @52 :Int32;
      tag @53 :Int32;
      recvCount @54 :Int64;
      payloadHash @55 :UInt64;
      payloadSize @56 :UInt64;
      flags @57 :UInt16;
      cancelled @58 :Bool;
      # Device (GPU) operations: the send buffer's fingerprint, computed on the
      # operation's stream before it ran, arrives with its completion (flag hasSendHash).
      sendHash @123 :UInt64;
      sendNan @124 :UInt32;
      sendInf @125 :UInt32;
    }

    # The nondeterministic outcome of a test, probe or wait-any/some call.
    test :group {
      api @59 :UInt16;
      flag @60 :Bool;          # Test*/Iprobe: whether it succeeded
      index @61 :Int32;        # Waitany/Testany: the completed index; -1 (MPI_UNDEFINED) none
      indices @62 :List(Int32);# Waitsome/Testsome: completed indices in returned order
      source @63 :Int32;       # probes: matched source
      tag @64 :Int32;
      count @65 :Int64;        # probes: elements of the matched message
      comm @66 :UInt64;
      rc @67 :Int32;
    }

    commCreate :group {
      comm @68 :UInt64;        # job-wide identity: hash of (parent, parentSeq, color) or of the NCCL unique id; equal on every member
      parent @69 :UInt64;      # identity of the communicator it was derived from; 0 for roots (WORLD, SELF, NCCL by unique id)
      api @70 :UInt16;         # creating call
      parentSeq @71 :UInt64;   # the creating call's sequence number on `parent`
      color @72 :Int64;        # split colour / type; 0 otherwise
      key @73 :Int64;          # split key; 0 otherwise
      size @74 :Int32;         # members
      rank @75 :Int32;         # this process's rank in it
      members @76 :List(Int32);# world ranks in communicator-rank order; empty if unknown
      handle @77 :UInt64;      # process-local handle value, to map calls to identity
      flags @78 :UInt16;       # CommFlags in format.h
      uniqueId @79 :UInt64;    # NCCL: hash of the unique id; 0 otherwise
      device @80 :Int32;       # NCCL: CUDA device of the communicator; -1 otherwise
    }

    commFree :group {
      comm @81 :UInt64;
      api @82 :UInt16;         # free, destroy, finalize, abort, revoke, shrink source
      rc @83 :Int32;
    }

    group :group {
      isEnd @84 :Bool;         # false: group start; true: group end
      id @85 :UInt32;          # group id, from 1; the outermost end is the enqueue point
      depth @86 :UInt32;       # nesting depth after a start / before an end (1 = outermost)
      api @87 :UInt16;
      rc @88 :Int32;
    }

    entropy :group {
      source @89 :EntropySource;
      requested @90 :UInt64;   # bytes asked for
      flags @91 :UInt32;       # getrandom flags; clock_gettime: the clock id
      bytes @92 :Data;         # bytes returned to the application (length = what the call returned)
      rc @93 :Int64;           # the call's return value
    }

    seed :group {
      source @94 :SeedSource;
      value @95 :UInt64;
      state @96 :UInt64;       # address of the generator state (rand_r, initstate); 0 otherwise
    }

    # A CUDA driver call of the application, written when it returned (kernel
    # launches: counted, see `count`). Handles are the process's own values.
    cuda :group {
      op @97 :CudaOp;
      # The stream the call ordered work on or acted on (streamWaitEvent: the
      # stream that waits); 0 is the legacy default stream, however named, and
      # 2 the calling thread's per-thread default stream. 0 for calls without one.
      stream @98 :UInt64;
      event @99 :UInt64;       # the event created, recorded, waited for, synchronized, queried or destroyed
      graph @100 :UInt64;      # captureEnd: the graph made; graphInstantiate, graphLaunch: the executable graph
      # streamCreate, eventCreate, eventRecord, streamWaitEvent: the call's flags;
      # captureBegin: the capture mode (0 global, 1 thread-local, 2 relaxed);
      # graphInstantiate: the graph instantiated; memcpy, memcpyAsync: the direction
      # (cuda_copy in event.h); memsetAsync: bytes per element; setDevice and
      # ctxSynchronize: the context, when the call names one.
      other @101 :UInt64;
      rc @102 :Int32;          # the driver's result, as the application saw it
      # kernels: the launches on `stream` since that stream's previous recorded
      # call (1 per event with REPLAY_CUDA_KERNELS=1, or for a launch that failed);
      # memcpy, memcpyAsync, memsetAsync: bytes; eventQuery, streamQuery: the
      # "not ready" answers to queries of the same handle that were not written
      # since the previous one written; streamCreate: the priority, as a signed value.
      count @103 :UInt64;
      device @104 :Int32;      # the calling thread's current device (kernels: the stream's); -1 unknown
    }

    mark :group {
      name @105 :Text;         # at most 63 bytes
      value @106 :Int64;
    }

    error :group {
      source @107 :ErrorSource;
      code @108 :Int32;
      comm @109 :UInt64;
      message @110 :Text;
    }

    signal :group {
      signo @111 :Int32;
      code @112 :Int32;        # si_code
      address @113 :UInt64;    # si_addr for faults
      fatal @114 :Bool;        # the signal's disposition was to terminate
    }

    # Events lost on this thread because its ring was full. Never silent.
    drop :group {
      count @115 :UInt64;
    }

    # A fact learned during the run, e.g. "mpi.world_rank" once MPI_Init returns.
    info :group {
      key @116 :Text;
      value @117 :Text;
    }
  }
}

# ---------------------------------------------------------------------------
# Event records of format epoch 3, one struct per kind (EventBlock's lists).
#
# A record holds the fields of the Event union member of the same name, with
# the same types, defaults and invariants (written there), and Event's
# `thread` and `callSite`; index and time are in EventBlock's columns. A
# fingerprint hash that its flag says is there (op sendHash with hasSendHash,
# ...) is in EventBlock.fingerprints, and its field in the record is 0; the
# field holds only a hash recorded without its flag (writers record none).
# Rules for changing a record are those of any struct: a field added to a
# union member is added to its record too, with the next ordinal here.

struct OpRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  api @2 :UInt16;
  kind @3 :OpKind;
  flags @4 :UInt16;        # OpFlags
  comm @5 :UInt64;
  seq @6 :UInt64;          # relative to the communicator's previous one when EventBlock.seqDelta
  peerSeq @7 :UInt64;
  count @8 :Int64;
  dtype @9 :DataType;
  dtypeSize @10 :UInt32;
  dtypeSig @11 :UInt64;
  redop @12 :RedOp;
  root @13 :Int32;         # -1 when not rooted
  peer @14 :Int32;         # -1 any source, -2 MPI_PROC_NULL, -3 none
  tag @15 :Int32;
  sendBuf @16 :UInt64;
  recvBuf @17 :UInt64;
  stream @18 :UInt64;
  request @19 :UInt64;
  group @20 :UInt32;
  bytes @21 :UInt64;
  sendHash @22 :UInt64;    # 0 with flag hasSendHash: EventBlock.fingerprints holds it
  sendNan @23 :UInt32;
  sendInf @24 :UInt32;
  counts @25 :List(Int64); # v-collectives' counts as passed; empty otherwise
  recvPeer @26 :Int32 = -3;
  recvTag @27 :Int32;
  recvCount @28 :Int64;
  recvDtype @29 :DataType;
  recvDtypeSize @30 :UInt32;
}

struct RetRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  api @2 :UInt16;
  rc @3 :Int32;
  comm @4 :UInt64;
  seq @5 :UInt64;          # relative to the communicator's previous one when EventBlock.seqDelta
  peerSeq @6 :UInt64;
  request @7 :UInt64;
  recvHash @8 :UInt64;     # 0 with flag hasRecvHash: EventBlock.fingerprints holds it
  recvNan @9 :UInt32;
  recvInf @10 :UInt32;
  source @11 :Int32;       # -3 unless a receive or probe
  tag @12 :Int32;
  recvCount @13 :Int64;    # -1 unless a receive
  payloadHash @14 :UInt64;
  payloadSize @15 :UInt64;
  flags @16 :UInt16;       # OpFlags
}

struct CompletionRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  request @2 :UInt64;
  api @3 :UInt16;
  comm @4 :UInt64;
  seq @5 :UInt64;          # relative to the communicator's previous one when EventBlock.seqDelta
  peerSeq @6 :UInt64;
  rc @7 :Int32;
  recvHash @8 :UInt64;     # 0 with flag hasRecvHash: EventBlock.fingerprints holds it
  recvNan @9 :UInt32;
  recvInf @10 :UInt32;
  source @11 :Int32;
  tag @12 :Int32;
  recvCount @13 :Int64;
  payloadHash @14 :UInt64;
  payloadSize @15 :UInt64;
  flags @16 :UInt16;       # OpFlags
  cancelled @17 :Bool;
  sendHash @18 :UInt64;    # 0 with flag hasSendHash: EventBlock.fingerprints holds it
  sendNan @19 :UInt32;
  sendInf @20 :UInt32;
}

struct TestRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  api @2 :UInt16;
  flag @3 :Bool;
  index @4 :Int32;         # -1 (MPI_UNDEFINED) none
  indices @5 :List(Int32);
  source @6 :Int32;
  tag @7 :Int32;
  count @8 :Int64;
  comm @9 :UInt64;
  rc @10 :Int32;
}

struct CommCreateRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  comm @2 :UInt64;
  parent @3 :UInt64;
  api @4 :UInt16;
  parentSeq @5 :UInt64;
  color @6 :Int64;
  key @7 :Int64;
  size @8 :Int32;
  rank @9 :Int32;
  members @10 :List(Int32);# world ranks in communicator-rank order; empty if unknown
  handle @11 :UInt64;
  flags @12 :UInt16;       # CommFlags
  uniqueId @13 :UInt64;
  device @14 :Int32;       # -1 unless NCCL
}

struct CommFreeRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  comm @2 :UInt64;
  api @3 :UInt16;
  rc @4 :Int32;
}

struct GroupRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  isEnd @2 :Bool;
  id @3 :UInt32;
  depth @4 :UInt32;
  api @5 :UInt16;
  rc @6 :Int32;
}

struct EntropyRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  source @2 :EntropySource;
  requested @3 :UInt64;
  flags @4 :UInt32;
  bytes @5 :Data;          # length = what the call returned
  rc @6 :Int64;
}

struct SeedRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  source @2 :SeedSource;
  value @3 :UInt64;
  state @4 :UInt64;
}

struct CudaRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  op @2 :CudaOp;
  stream @3 :UInt64;       # 0 legacy default stream, 2 per-thread default stream
  event @4 :UInt64;
  graph @5 :UInt64;
  other @6 :UInt64;
  rc @7 :Int32;
  count @8 :UInt64;
  device @9 :Int32;        # -1 unknown
}

struct MarkRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  name @2 :Text;           # at most 63 bytes
  value @3 :Int64;
}

struct ErrorRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  source @2 :ErrorSource;
  code @3 :Int32;
  comm @4 :UInt64;
  message @5 :Text;
}

struct SignalRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  signo @2 :Int32;
  code @3 :Int32;
  address @4 :UInt64;
  fatal @5 :Bool;
}

struct DropRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  count @2 :UInt64;
}

struct InfoRecord {
  thread @0 :UInt32;
  callSite @1 :UInt64;
  key @2 :Text;
  value @3 :Text;
}
