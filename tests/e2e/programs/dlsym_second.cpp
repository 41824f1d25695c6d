// libdlsym_second.so: the next definition of replay_test_who() after
// libdlsym_first.so's (see there).
extern "C" __attribute__((visibility("default"))) int replay_test_who() { return 2; }

extern "C" __attribute__((visibility("default"))) int replay_test_second_id() { return 2; }
