// local_direct.h — direct copies between a client and a server on its host: the server writes a
// reply payload straight into the memory the client lent for it (process_vm_writev) and copies
// a large request payload straight out of the client's memory (process_vm_readv), the way an
// RDMA NIC writes into and reads from registered buffers, instead of moving the bytes through
// the transport. The client then copies nothing; the server copies each byte once (where
// loopback TCP costs a copy on each side, plus UCX's own copy of rendezvous fragments).
//
// Who may write where: the request names the client's pid, its memory and a ticket (a random
// word the client keeps in its memory while the memory is lent, wire::Placement). The server
// writes only into the process that holds the client end of the connection the request came in
// on (OwnsConnection), whose real and effective uid are the server's own (so a client can
// never make a server with more privileges write into a process it could not already write to
// itself), and only after reading the ticket back from that process at the address the request
// gave: a different process, another pid namespace's process with that pid, or a call the
// client has given up on (it clears the ticket first) all read back something else, and the
// payload goes over the transport as usual. What remains is the window between the server's
// ticket check and the end of its write: a client that gives up on a call (timeout) inside
// those microseconds could have the bytes land after it took the memory back. UCX's own cma
// rendezvous has the same window; an RDMA client closes the connection to end it.
//
// Pure functions over system calls; thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "penstock/status.h"
#include "transport/socket_address.h"
#include "transport/wire.h"

namespace penstock {

// Whether `address` is on this host: a loopback address, or one of this host's interfaces'.
bool IsLocalAddress(const SocketAddress& address);

// Lets servers of this user write replies into this process where the kernel's Yama policy
// would refuse it (kernel.yama.ptrace_scope = 1: only ancestors may, unless the process names
// a tracer: PR_SET_PTRACER_ANY). A no-op without Yama or when the policy is stricter (2, 3:
// placement then fails at the server and replies travel over the transport). Idempotent.
void AllowLocalDirect();

// Whether the process `pid` runs with this process's effective uid as its real and effective
// uid (read from /proc/PID/status); false when it cannot be read.
bool SameUser(uint32_t pid);

// Whether process `pid` holds the client end of the TCP connection that came from `client` (the
// address a listener saw connect) to port `server_port` of this host: found in
// /proc/net/tcp{,6} (IPv4-mapped IPv6 addresses match their IPv4 form), then among the
// process's open files. A server gives direct copies only to the process that owns the
// connection a request came in on, not to whatever pid the request names: otherwise a client
// could name another process of the server's user and, knowing a word of its memory, have the
// server write into it or copy out of it. False when anything cannot be read.
bool OwnsConnection(uint32_t pid, const SocketAddress& client, uint16_t server_port);

// Writes `data` into the start of the memory `p` offers, in the process it names, after
// checking its ticket. Errors: kFailedPrecondition when the ticket does not read back (another
// process, the call was given up), kInvalidArgument when `data` is larger than the memory,
// kPermissionDenied / kUnavailable from the system calls (EPERM: ptrace policy; ESRCH: no such
// process), kDataLoss when the write stopped short (the memory's contents are then undefined).
Status PlaceReply(const wire::Placement& p, std::span<const std::byte> data);

// Copies a request's payload out of the client's memory `p` names into `into` (exactly its
// size), checking the ticket before and after the copy: what it returns OK for is what the
// client sent, never memory it had already taken back. Errors as PlaceReply's.
Status PullPayload(const wire::Placement& p, std::span<std::byte> into);

}  // namespace penstock
