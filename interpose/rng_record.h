// rng_record.h: recording the program's sources of randomness.
//
// Entropy (getrandom, getentropy, reads of /dev/urandom and /dev/random,
// std::random_device) is recorded with the bytes the program received; seeds
// (srand, srandom, srand48, initstate, rand_r's state) with their value. Only
// calls made by the program itself are recorded, not those made inside MPI or
// by the recorder. Entropy read before the first communication call is kept
// in a small buffer and recorded if the process goes on to be recorded.
//
// Clock readings (clock_gettime, gettimeofday, time; MPI_Wtime reads the
// first) and CPU-time readings (getrusage, times, clock) are recorded with
// what the call wrote, from the first recorded
// communication call on and on the program's threads only (guard.h), so that
// a re-run sees the recorded times: programs reduce their timings across
// ranks, seed generators from the clock and decide by elapsed time.
//
// Every function here preserves errno and returns what the real call returned.
#pragma once

#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

namespace replay::interpose::rng {

using GetrandomFn = ssize_t (*)(void*, size_t, unsigned int);
using GetentropyFn = int (*)(void*, size_t);
using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadChkFn = ssize_t (*)(int, void*, size_t, size_t);
using FreadFn = size_t (*)(void*, size_t, size_t, FILE*);
using FopenFn = FILE* (*)(const char*, const char*);
using FcloseFn = int (*)(FILE*);
using CloseFn = int (*)(int);
using Open2Fn = int (*)(const char*, int);
using SrandFn = void (*)(unsigned int);
using Srand48Fn = void (*)(long);
using InitstateFn = char* (*)(unsigned int, char*, size_t);
using RandRFn = int (*)(unsigned int*);
using RandomDeviceFn = unsigned int (*)(void*);

ssize_t On_getrandom(GetrandomFn real, void* buf, size_t len, unsigned int flags, uint64_t site);
int On_getentropy(GetentropyFn real, void* buf, size_t len, uint64_t site);
ssize_t On_read(ReadFn real, int fd, void* buf, size_t count, uint64_t site);
ssize_t On___read_chk(ReadChkFn real, int fd, void* buf, size_t n, size_t buflen, uint64_t site);
size_t On_fread(FreadFn real, void* ptr, size_t size, size_t n, FILE* stream, uint64_t site);
FILE* On_fopen(FopenFn real, const char* path, const char* mode, uint64_t site);
FILE* On_fopen64(FopenFn real, const char* path, const char* mode, uint64_t site);
int On_fclose(FcloseFn real, FILE* stream, uint64_t site);
int On_close(CloseFn real, int fd, uint64_t site);
int On___open_2(Open2Fn real, const char* path, int flags, uint64_t site);
int On___open64_2(Open2Fn real, const char* path, int flags, uint64_t site);
void On_srand(SrandFn real, unsigned int seed, uint64_t site);
void On_srandom(SrandFn real, unsigned int seed, uint64_t site);
void On_srand48(Srand48Fn real, long seed, uint64_t site);
char* On_initstate(InitstateFn real, unsigned int seed, char* state, size_t n, uint64_t site);
int On_rand_r(RandRFn real, unsigned int* seedp, uint64_t site);
unsigned int On__ZNSt13random_device9_M_getvalEv(RandomDeviceFn real, void* self, uint64_t site);

using ClockGettimeFn = int (*)(clockid_t, struct timespec*);
using GettimeofdayFn = int (*)(struct timeval*, void*);
using TimeFn = time_t (*)(time_t*);
int On_clock_gettime(ClockGettimeFn real, clockid_t clock, struct timespec* tp, uint64_t site);
int On_gettimeofday(GettimeofdayFn real, struct timeval* tv, void* tz, uint64_t site);
time_t On_time(TimeFn real, time_t* out, uint64_t site);
using GetrusageFn = int (*)(int, struct rusage*);
using TimesFn = clock_t (*)(struct tms*);
using ClockFn = clock_t (*)();
int On_getrusage(GetrusageFn real, int who, struct rusage* usage, uint64_t site);
clock_t On_times(TimesFn real, struct tms* buf, uint64_t site);
clock_t On_clock(ClockFn real, uint64_t site);

// The open family: notes descriptors opened on a random device.
int Opened(int fd, const char* path);

}  // namespace replay::interpose::rng
