// The device host's side of process isolation (see process_backend.h): serves one backend
// to the server over an inherited channel and shared region until the server closes the
// channel.
#pragma once

#include "server/device/backend.h"

namespace kerneleval::server {

// Sends the backend's identity, warms it up, then answers measurement calls. Returns the
// process exit code: 0 once the server closed the channel, 1 on a broken channel or failed
// warm-up. After a call that left the device faulted it ends the process at once with
// status 3 (the server starts a new host).
int ServeDeviceHost(Backend& backend, int channel_fd, int region_fd);

}  // namespace kerneleval::server
