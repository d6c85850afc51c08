// Moved to common/suites.h, shared by the server and the client.
#pragma once

#include "common/suites.h"
