// fork_generation.h — which process of a fork() tree this is, for objects that must not be
// used in a child of the process that made them (their threads exist only in that process).
//
// ForkGeneration() is 0 in the process as started and one more in each child made by fork():
// a pthread_atfork child handler, registered by the first call. An object records it when it
// is made (making one registers the handler in time) and compares it before use: a different
// value means the object was inherited across fork, and its threads, locks and connections
// belong to the parent. Thread-safe and lock-free (one atomic load).
#pragma once

#include <cstdint>

namespace penstock {

uint64_t ForkGeneration();

}  // namespace penstock
