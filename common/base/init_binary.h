// InitBinary: the first lines of every binary's main. Linked into binaries
// only (nereus_init_binary), as gflags may be used nowhere else.
#ifndef NEREUS_COMMON_BASE_INIT_BINARY_H_
#define NEREUS_COMMON_BASE_INIT_BINARY_H_

namespace nereus {

// Sets the binary's --help text, parses its flags (removing them from argv,
// so *argc and *argv hold the positional arguments after argv[0]) and sends
// glog's output to stderr.
void InitBinary(const char* usage, int* argc, char*** argv);

}  // namespace nereus

#endif  // NEREUS_COMMON_BASE_INIT_BINARY_H_
