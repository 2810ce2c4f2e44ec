#pragma once

// Picks a TCP port on 127.0.0.1 that is free right now, for servers that need their port
// on the command line. Another process may take it before the server binds it; servers
// started by tests/support retry with a new port when that happens.

#include "absl/status/statusor.h"

namespace goodput::testing {

// A port that nothing listens on at the moment of the call, chosen at random below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): tests that open thousands of client
// connections (the abuse and burst tests) use up ephemeral ports, and a server handed one of
// those would find it taken by a client's connection. Falls back to an ephemeral port when
// none below is free. INTERNAL if no socket could be bound.
absl::StatusOr<int> FreePort();

// True if something accepts TCP connections on 127.0.0.1:`port`.
bool PortAcceptsConnections(int port);

}  // namespace goodput::testing
