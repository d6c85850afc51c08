// Moved to common/status_macros.h, shared by the server and the client.
#pragma once

#include "common/status_macros.h"
