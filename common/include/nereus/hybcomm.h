// HybComm (Poseidon: Zhang et al., "Poseidon: An Efficient Communication
// Architecture for Distributed Deep Learning on GPU Clusters", USENIX ATC
// 2017): per fully connected layer, whether its weight gradient travels as a
// full matrix through the parameter servers (PS) or as sufficient factors
// broadcast among the workers (SFB), whichever moves fewer bytes per clock.
// The rule itself is in common/update/hybcomm.h and docs/CLIENT.md.
//
// Part of Nereus's public API: includes only nereus/ headers and the standard
// library.
#ifndef NEREUS_HYBCOMM_H_
#define NEREUS_HYBCOMM_H_

#include <string>

#include "nereus/status.h"

namespace nereus {

// kAuto applies HybComm's cost rule per layer; kOn sends every eligible layer
// as factors; kOff never does.
enum class SfbMode { kAuto, kOff, kOn };
StatusOr<SfbMode> ParseSfbMode(const std::string& name);  // auto|off|on
const char* SfbModeName(SfbMode mode);

}  // namespace nereus

#endif  // NEREUS_HYBCOMM_H_
